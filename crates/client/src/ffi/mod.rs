//! The C ABI (`include/slotgate.h`): opaque handles over the blocking client,
//! for C and C++ programs that today use hiredis and hit field report 004.
//!
//! Every function catches Rust panics so none unwinds into C. Pointers given
//! back to C are `Box`es turned into raw pointers and are freed only by the
//! matching `sg_free_*`/`sg_pipeline_free` call.

mod reply;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_longlong, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

pub use reply::*;

use crate::blocking::Client;
use crate::cmd::Cmd;
use crate::error::Error;
use crate::pipeline::Pipeline;

/// Opaque client handle (`sg_client` in C).
pub struct SgClient(Client);
/// Opaque pipeline handle (`sg_pipeline` in C).
pub struct SgPipeline(Pipeline);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs `f`, turning a panic into `fallback` and a recorded error.
fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        set_last_error("internal panic in slotgate");
        fallback
    })
}

/// The message of the last failed `sg_connect*` or `sg_pipeline_append` on
/// this thread; valid until the next such call on this thread.
#[no_mangle]
pub extern "C" fn sg_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Connects to a cluster. `seeds` is `host:port[,host:port...]`. Returns NULL
/// on failure (see `sg_last_error`).
///
/// # Safety
/// `seeds` must be NULL or a valid NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn sg_connect(seeds: *const c_char) -> *mut SgClient {
    if seeds.is_null() {
        set_last_error("seeds is NULL");
        return ptr::null_mut();
    }
    // SAFETY: checked non-NULL; the caller guarantees NUL termination.
    let seeds = unsafe { CStr::from_ptr(seeds) }
        .to_string_lossy()
        .into_owned();
    guard(ptr::null_mut(), || {
        let list: Vec<String> = seeds
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        match Client::cluster(list) {
            Ok(c) => Box::into_raw(Box::new(SgClient(c))),
            Err(e) => {
                set_last_error(&e.to_string());
                ptr::null_mut()
            }
        }
    })
}

/// Closes the client and its connections. NULL is ignored.
///
/// # Safety
/// `client` must be NULL or come from `sg_connect`, and not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn sg_free_client(client: *mut SgClient) {
    if !client.is_null() {
        // SAFETY: it came from Box::into_raw in sg_connect and is freed once.
        drop(unsafe { Box::from_raw(client) });
    }
}

/// Builds a command from C arguments; `argvlen` NULL means NUL-terminated.
///
/// # Safety
/// `argv` must hold `argc` valid pointers, each to `argvlen[i]` bytes (or a
/// NUL-terminated string when `argvlen` is NULL).
unsafe fn cmd_from_c(
    argc: c_int,
    argv: *const *const c_char,
    argvlen: *const usize,
) -> Option<Cmd> {
    let argc = usize::try_from(argc).ok().filter(|&n| n > 0)?;
    if argv.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees `argv` holds `argc` pointers.
    let ptrs = unsafe { std::slice::from_raw_parts(argv, argc) };
    let mut cmd = Cmd::default();
    for (i, &p) in ptrs.iter().enumerate() {
        if p.is_null() {
            return None;
        }
        let bytes: &[u8] = if argvlen.is_null() {
            // SAFETY: without lengths, each argument is NUL-terminated.
            unsafe { CStr::from_ptr(p) }.to_bytes()
        } else {
            // SAFETY: `argvlen` holds `argc` lengths and argument i has
            // `argvlen[i]` readable bytes.
            unsafe { std::slice::from_raw_parts(p.cast::<u8>(), *argvlen.add(i)) }
        };
        cmd.push_arg(bytes);
    }
    Some(cmd)
}

/// Runs one command. Never NULL for a valid client: failures come back as
/// an `SG_REPLY_ERROR` reply. Free the result with `sg_free_reply`.
///
/// # Safety
/// `client` must come from `sg_connect`; `argv`/`argvlen` as for
/// `sg_pipeline_append`.
#[no_mangle]
pub unsafe extern "C" fn sg_command(
    client: *const SgClient,
    argc: c_int,
    argv: *const *const c_char,
    argvlen: *const usize,
) -> *mut SgReply {
    // SAFETY: the caller passes a live client from sg_connect (or NULL).
    let Some(client) = (unsafe { client.as_ref() }) else {
        return ptr::null_mut();
    };
    // SAFETY: forwarded caller guarantees on argv/argvlen.
    let cmd = unsafe { cmd_from_c(argc, argv, argvlen) };
    let reply = guard(None, || {
        Some(match cmd {
            Some(cmd) => SgReply::from_result(client.0.cmd(cmd)),
            None => SgReply::error(&Error::Invalid("bad argc/argv".into())),
        })
    });
    reply.map_or(ptr::null_mut(), |r| Box::into_raw(Box::new(r)))
}

/// A new, empty pipeline. Free it with `sg_pipeline_free`.
#[no_mangle]
pub extern "C" fn sg_pipeline_new() -> *mut SgPipeline {
    Box::into_raw(Box::new(SgPipeline(Pipeline::new())))
}

/// Appends a command. Returns 0, or -1 on bad arguments.
///
/// # Safety
/// `pipeline` must come from `sg_pipeline_new`; `argv` must hold `argc`
/// pointers, each to `argvlen[i]` bytes (NUL-terminated strings when
/// `argvlen` is NULL).
#[no_mangle]
pub unsafe extern "C" fn sg_pipeline_append(
    pipeline: *mut SgPipeline,
    argc: c_int,
    argv: *const *const c_char,
    argvlen: *const usize,
) -> c_int {
    // SAFETY: the caller passes a live pipeline (or NULL), used by one thread.
    let Some(p) = (unsafe { pipeline.as_mut() }) else {
        return -1;
    };
    // SAFETY: forwarded caller guarantees on argv/argvlen.
    match unsafe { cmd_from_c(argc, argv, argvlen) } {
        Some(cmd) => {
            p.0.add(cmd);
            0
        }
        None => {
            set_last_error("bad argc/argv");
            -1
        }
    }
}

/// Number of commands in the pipeline (0 for NULL).
///
/// # Safety
/// `pipeline` must be NULL or come from `sg_pipeline_new`.
#[no_mangle]
pub unsafe extern "C" fn sg_pipeline_len(pipeline: *const SgPipeline) -> usize {
    // SAFETY: the caller passes a live pipeline or NULL.
    unsafe { pipeline.as_ref() }.map_or(0, |p| p.0.len())
}

/// Executes the pipeline: an `SG_REPLY_ARRAY` with one element per command,
/// in order (an element is `SG_REPLY_ERROR` if that command failed). The
/// pipeline is unchanged and may be executed again.
///
/// # Safety
/// `client` from `sg_connect`, `pipeline` from `sg_pipeline_new`.
#[no_mangle]
pub unsafe extern "C" fn sg_pipeline_execute(
    client: *const SgClient,
    pipeline: *const SgPipeline,
) -> *mut SgReply {
    // SAFETY: the caller passes live handles (or NULL).
    let (Some(c), Some(p)) = (unsafe { client.as_ref() }, unsafe { pipeline.as_ref() }) else {
        return ptr::null_mut();
    };
    guard(ptr::null_mut(), || {
        Box::into_raw(Box::new(SgReply::from_results(c.0.execute(&p.0))))
    })
}

/// Frees a pipeline. NULL is ignored.
///
/// # Safety
/// `pipeline` must be NULL or come from `sg_pipeline_new`, freed once.
#[no_mangle]
pub unsafe extern "C" fn sg_pipeline_free(pipeline: *mut SgPipeline) {
    if !pipeline.is_null() {
        // SAFETY: it came from Box::into_raw in sg_pipeline_new.
        drop(unsafe { Box::from_raw(pipeline) });
    }
}

/// Frees a reply returned by `sg_command` or `sg_pipeline_execute` (not an
/// element of one). NULL is ignored.
///
/// # Safety
/// `reply` must be NULL or a top-level reply, freed once.
#[no_mangle]
pub unsafe extern "C" fn sg_free_reply(reply: *mut SgReply) {
    if !reply.is_null() {
        // SAFETY: top-level replies come from Box::into_raw above.
        drop(unsafe { Box::from_raw(reply) });
    }
}

/// The reply's `SG_REPLY_*` type (0 for NULL).
///
/// # Safety
/// `reply` must be NULL or a live reply or element.
#[no_mangle]
pub unsafe extern "C" fn sg_reply_type(reply: *const SgReply) -> c_int {
    // SAFETY: live reply or NULL per the contract.
    unsafe { reply.as_ref() }.map_or(0, SgReply::kind)
}

/// The integer of an `SG_REPLY_INTEGER` (1/0 for `SG_REPLY_BOOL`), else 0.
///
/// # Safety
/// As `sg_reply_type`.
#[no_mangle]
pub unsafe extern "C" fn sg_reply_integer(reply: *const SgReply) -> c_longlong {
    // SAFETY: live reply or NULL per the contract.
    unsafe { reply.as_ref() }.map_or(0, SgReply::integer)
}

/// The value of an `SG_REPLY_DOUBLE`, else 0.
///
/// # Safety
/// As `sg_reply_type`.
#[no_mangle]
pub unsafe extern "C" fn sg_reply_double(reply: *const SgReply) -> f64 {
    // SAFETY: live reply or NULL per the contract.
    unsafe { reply.as_ref() }.map_or(0.0, SgReply::double)
}

/// The NUL-terminated text of a string, status or error reply, its length
/// (without the NUL) stored in `*len` when `len` is not NULL; NULL for other
/// types. Valid while the reply lives.
///
/// # Safety
/// As `sg_reply_type`; `len` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sg_reply_str(reply: *const SgReply, len: *mut usize) -> *const c_char {
    // SAFETY: live reply or NULL per the contract.
    let Some((p, n)) = unsafe { reply.as_ref() }.and_then(SgReply::str) else {
        return ptr::null();
    };
    if !len.is_null() {
        // SAFETY: the caller passes a writable size_t or NULL.
        unsafe { *len = n };
    }
    p
}

/// Number of elements of an array/map reply (maps count keys and values).
///
/// # Safety
/// As `sg_reply_type`.
#[no_mangle]
pub unsafe extern "C" fn sg_reply_len(reply: *const SgReply) -> usize {
    // SAFETY: live reply or NULL per the contract.
    unsafe { reply.as_ref() }.map_or(0, |r| r.elements().len())
}

/// Element `i` of an aggregate reply (NULL when out of range); owned by its
/// parent, never freed on its own.
///
/// # Safety
/// As `sg_reply_type`.
#[no_mangle]
pub unsafe extern "C" fn sg_reply_element(reply: *const SgReply, i: usize) -> *const SgReply {
    // SAFETY: live reply or NULL per the contract.
    unsafe { reply.as_ref() }
        .and_then(|r| r.elements().get(i))
        .map_or(ptr::null(), |e| e as *const SgReply)
}
