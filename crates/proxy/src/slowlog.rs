//! SLOWLOG: the requests that took the proxy longer than `slowlog.log_slower_than_us`, from
//! the read that brought them in to the moment their reply was handed to the writer.
//!
//! ```text
//!   session ─read (stamp)─▶ dispatch (arm: stamp + request bytes, a refcount)
//!        ─▶ reply popped ─▶ coarse now − stamp ≥ threshold? ─▶ copy argv into the worker's ring
//!   SLOWLOG GET ─▶ every worker's ring, merged by id, newest first
//! ```
//!
//! Time is read (vDSO `clock_gettime`, about 20 ns) once per read from a client and once per
//! batch of replies, never per request of a pipelined batch; a request's argv is copied only
//! when it is actually logged. An earlier design kept a thread storing the time every
//! millisecond instead: its thousand wake-ups a second cost an idle proxy 3% of a core.
//!
//! Each worker appends to its own ring behind a mutex that only logging (rare) and SLOWLOG
//! itself take. Ids come from one atomic counter, so merging the rings by id gives Redis's
//! order. Each ring keeps `max_len` entries; readers show the newest `max_len` of them all.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use resp::{Parsed, Progress, Request, RequestParser};
use serde::Deserialize;

use crate::reply::error;
use crate::stats::Shared;

/// Redis's caps on what one entry keeps.
const MAX_ARGC: usize = 32;
const MAX_ARG_BYTES: usize = 128;

/// `[slowlog]`: Redis's `slowlog-log-slower-than` and `slowlog-max-len`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SlowlogConfig {
    /// Log requests that take at least this many microseconds in the proxy; 0 logs every
    /// request, a negative value turns the log off.
    pub log_slower_than_us: i64,
    /// Entries kept (the newest).
    pub max_len: usize,
}

impl Default for SlowlogConfig {
    fn default() -> Self {
        SlowlogConfig {
            log_slower_than_us: 10_000,
            max_len: 128,
        }
    }
}

/// The proxy-wide part of the log: threshold, ids and the time origin.
#[derive(Debug)]
pub struct Slowlog {
    /// None when the log is off.
    pub(crate) threshold_us: Option<u64>,
    max_len: usize,
    next_id: AtomicU64,
    origin: Instant,
}

impl Default for Slowlog {
    fn default() -> Self {
        Slowlog::new(&SlowlogConfig::default())
    }
}

/// One worker's entries, oldest first.
#[derive(Debug, Default)]
pub struct Ring(Mutex<VecDeque<SlowEntry>>);

/// One logged request, as SLOWLOG GET shows it.
#[derive(Debug, Clone)]
pub struct SlowEntry {
    id: u64,
    unix_time: i64,
    duration_us: u64,
    argv: Vec<Bytes>,
    peer: String,
    name: Bytes,
}

/// Who sent a logged request.
pub(crate) struct Client<'a> {
    pub peer: Option<SocketAddr>,
    pub name: Option<&'a Bytes>,
}

// === impl Slowlog ===

impl Slowlog {
    pub(crate) fn new(cfg: &SlowlogConfig) -> Slowlog {
        Slowlog {
            threshold_us: u64::try_from(cfg.log_slower_than_us).ok(),
            max_len: cfg.max_len,
            next_id: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }

    /// Microseconds since start. Callers read it per read or per batch of replies.
    pub(crate) fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }

    /// Entries logged since start (the next id).
    pub(crate) fn logged(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Copy `request`'s argv (capped as Redis caps it) into `ring`.
    pub(crate) fn log(&self, ring: &Ring, request: &Bytes, duration_us: u64, client: Client<'_>) {
        if self.max_len == 0 {
            // Redis still spends the id; there is nothing to keep, so nothing to copy.
            self.next_id.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(req) = reparse(request) else {
            return;
        };
        let unix_time = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let entry = SlowEntry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            unix_time,
            duration_us,
            argv: capped_argv(&req),
            peer: client.peer.map_or_else(String::new, |p| p.to_string()),
            name: client.name.cloned().unwrap_or_default(),
        };
        let mut ring = ring.0.lock().unwrap_or_else(|e| e.into_inner());
        ring.push_back(entry);
        while ring.len() > self.max_len {
            ring.pop_front();
        }
    }
}

/// The request's arguments again (its bytes were validated when it was first parsed).
fn reparse(request: &Bytes) -> Option<Request> {
    let limits = resp::Limits {
        max_bulk_len: usize::MAX,
        max_inline_len: usize::MAX,
        ..resp::Limits::default()
    };
    let mut buf = BytesMut::from(&request[..]);
    match RequestParser::new(limits).parse(&mut buf) {
        Ok(Progress::Done(Parsed::Request(req))) => Some(req),
        _ => None,
    }
}

/// At most 32 arguments (the last then says how many more there were), each at most 128
/// bytes (then how many more bytes), passwords redacted: Redis's `slowlogCreateEntry`.
fn capped_argv(req: &Request) -> Vec<Bytes> {
    let argc = req.argc();
    let kept = argc.min(MAX_ARGC);
    let mut argv = Vec::with_capacity(kept);
    for i in 0..kept {
        if kept != argc && i == kept - 1 {
            let more = argc - kept + 1;
            argv.push(Bytes::from(format!("... ({more} more arguments)")));
        } else if redacted(req, i) {
            argv.push(Bytes::from_static(b"(redacted)"));
        } else {
            argv.push(capped_arg(req.arg(i)));
        }
    }
    argv
}

fn capped_arg(arg: &[u8]) -> Bytes {
    if arg.len() <= MAX_ARG_BYTES {
        return Bytes::copy_from_slice(arg);
    }
    let mut out = BytesMut::from(&arg[..MAX_ARG_BYTES]);
    let more = arg.len() - MAX_ARG_BYTES;
    out.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
    out.freeze()
}

/// Credentials never reach the log: AUTH's arguments, HELLO's `AUTH user pass` (found by
/// walking HELLO's options as HELLO itself does).
fn redacted(req: &Request, i: usize) -> bool {
    let name = req.arg(0);
    if name.eq_ignore_ascii_case(b"auth") {
        return i >= 1;
    }
    if !name.eq_ignore_ascii_case(b"hello") {
        return false;
    }
    let mut opt = 2;
    while opt < req.argc() && opt < i {
        if req.arg(opt).eq_ignore_ascii_case(b"auth") {
            if i <= opt + 2 {
                return true;
            }
            opt += 3;
        } else {
            opt += 2;
        }
    }
    false
}

// === SLOWLOG GET | LEN | RESET | HELP ===

/// Answer `SLOWLOG <sub> …` (the router checked the subcommand and its arity).
pub(crate) fn command(req: &Request, shared: &Shared) -> Bytes {
    let sub = req.arg(1).to_ascii_lowercase();
    match sub.as_slice() {
        b"get" if req.argc() <= 3 => get(req, shared),
        b"len" => Bytes::from(format!(":{}\r\n", len(shared))),
        b"reset" => {
            for w in &shared.workers {
                w.slowlog
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
            }
            Bytes::from_static(b"+OK\r\n")
        }
        b"help" => help(req),
        _ => error(&format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
            String::from_utf8_lossy(&req.arg(1)[..req.arg(1).len().min(128)]),
            String::from_utf8_lossy(req.arg(0)).to_uppercase()
        )),
    }
}

fn len(shared: &Shared) -> usize {
    let total: usize = shared
        .workers
        .iter()
        .map(|w| w.slowlog.0.lock().unwrap_or_else(|e| e.into_inner()).len())
        .sum();
    total.min(shared.slowlog.max_len)
}

/// `SLOWLOG GET [count]`: newest first; count 10 by default, -1 for all.
fn get(req: &Request, shared: &Shared) -> Bytes {
    let count = match req.argc() {
        2 => 10,
        _ => match resp::string2ll(req.arg(2)) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => return error("count should be greater than or equal to -1"),
        },
    };
    let entries = newest(shared, count.min(shared.slowlog.max_len));
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, entries.len());
    for e in &entries {
        write_entry(&mut out, e);
    }
    out.freeze()
}

/// The newest `count` entries of every worker, newest first.
fn newest(shared: &Shared, count: usize) -> Vec<SlowEntry> {
    let mut all: Vec<SlowEntry> = Vec::new();
    for w in &shared.workers {
        let ring = w.slowlog.0.lock().unwrap_or_else(|e| e.into_inner());
        all.extend(ring.iter().rev().take(count).cloned());
    }
    all.sort_unstable_by_key(|e| std::cmp::Reverse(e.id));
    all.truncate(count);
    all
}

fn write_entry(out: &mut BytesMut, e: &SlowEntry) {
    resp::write_array_header(out, 6);
    resp::write_int(out, e.id as i64);
    resp::write_int(out, e.unix_time);
    resp::write_int(out, e.duration_us as i64);
    resp::write_array_header(out, e.argv.len());
    for arg in &e.argv {
        resp::write_bulk(out, arg);
    }
    resp::write_bulk(out, e.peer.as_bytes());
    resp::write_bulk(out, &e.name);
}

/// Redis 7.0's help text, line for line.
fn help(req: &Request) -> Bytes {
    const LINES: &[&str] = &[
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help.",
    ];
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, LINES.len() + 1);
    let cmd = String::from_utf8_lossy(req.arg(0)).to_uppercase();
    let header = format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    resp::write_simple(&mut out, header.as_bytes());
    for line in LINES {
        resp::write_simple(&mut out, line.as_bytes());
    }
    out.freeze()
}

#[cfg(test)]
mod tests;
