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
//! Valkey's COMMANDLOG has two more logs, kept the same way: `large-request` (a request of
//! at least `commandlog-request-larger-than` bytes, as it came in) and `large-reply` (a reply
//! of at least `commandlog-reply-larger-than` bytes, as handed to the client): the client's
//! own sizes, name and address, where the nodes' logs would show the proxy's connections.
//!
//! Each worker appends to its own ring behind a mutex that only logging (rare) and SLOWLOG
//! itself take. Ids come from one atomic counter, so merging the rings by id gives Redis's
//! order. Each ring keeps `max_len` entries; readers show the newest `max_len` of them all.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use tokio::time::Instant;

use bytes::{Bytes, BytesMut};
use resp::{Parsed, Progress, Request, RequestParser};

use crate::config::SlowlogConfig;

/// Redis's caps on what one entry keeps.
const MAX_ARGC: usize = 32;
const MAX_ARG_BYTES: usize = 128;
/// A client name is kept whole up to this, then cut like an argument. Redis keeps it whole,
/// but a name has no length limit: 128 entries sharing nothing with each other would each
/// pin a fresh copy of a megabyte name (review S9's class: memory a client controls).
const MAX_NAME_BYTES: usize = 1024;

/// The proxy-wide part of the logs: thresholds, ids and the time origin.
#[derive(Debug)]
pub struct Slowlog {
    /// Microseconds; negative when the log is off. A reload may change it and `max_len`.
    threshold_us: AtomicI64,
    max_len: AtomicUsize,
    next_id: AtomicU64,
    origin: Instant,
    /// Valkey's other two COMMANDLOG types, by request and reply size.
    large_request: SizeLog,
    large_reply: SizeLog,
    /// Bumped by every change of a threshold or length: a session reloads its copy of the
    /// thresholds only when this moved (one relaxed load per read and per batch of replies).
    generation: AtomicU64,
}

/// Valkey's COMMANDLOG types; `Slow` is SLOWLOG's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogKind {
    Slow,
    /// Requests of at least `commandlog-request-larger-than` bytes, as they came in.
    LargeRequest,
    /// Replies of at least `commandlog-reply-larger-than` bytes, as handed to the client.
    LargeReply,
}

impl LogKind {
    /// COMMANDLOG's name for it, any case.
    pub(crate) fn named(name: &[u8]) -> Option<LogKind> {
        [
            (&b"slow"[..], LogKind::Slow),
            (b"large-request", LogKind::LargeRequest),
            (b"large-reply", LogKind::LargeReply),
        ]
        .into_iter()
        .find(|(n, _)| name.eq_ignore_ascii_case(n))
        .map(|(_, kind)| kind)
    }
}

/// A size log's settings and ids: Valkey's defaults (1 MiB, 128 entries) until CONFIG SET
/// through the proxy changes them; the configuration file has no key for them.
#[derive(Debug)]
struct SizeLog {
    /// Bytes; negative when the log is off.
    threshold: AtomicI64,
    max_len: AtomicUsize,
    next_id: AtomicU64,
}

impl Default for SizeLog {
    fn default() -> Self {
        SizeLog {
            threshold: AtomicI64::new(1 << 20),
            max_len: AtomicUsize::new(128),
            next_id: AtomicU64::new(0),
        }
    }
}

impl Default for Slowlog {
    fn default() -> Self {
        Slowlog::new(&SlowlogConfig::default())
    }
}

/// One worker's entries, oldest first.
#[derive(Debug, Default)]
pub struct Ring(pub(crate) Mutex<VecDeque<SlowEntry>>);

/// One logged request, as SLOWLOG GET shows it.
#[derive(Debug, Clone)]
pub struct SlowEntry {
    pub(crate) id: u64,
    pub(crate) unix_time: i64,
    pub(crate) duration_us: u64,
    pub(crate) argv: Vec<Bytes>,
    pub(crate) peer: String,
    pub(crate) name: Bytes,
}

/// Who sent a logged request.
#[derive(Clone, Copy)]
pub(crate) struct Client<'a> {
    pub peer: Option<SocketAddr>,
    pub name: Option<&'a Bytes>,
}

// === impl Slowlog ===

impl Slowlog {
    pub(crate) fn new(cfg: &SlowlogConfig) -> Slowlog {
        Slowlog {
            threshold_us: AtomicI64::new(cfg.log_slower_than_us),
            max_len: AtomicUsize::new(cfg.max_len),
            next_id: AtomicU64::new(0),
            origin: Instant::now(),
            large_request: SizeLog::default(),
            large_reply: SizeLog::default(),
            generation: AtomicU64::new(0),
        }
    }

    /// Moves whenever a threshold or a length may have changed.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn size_log(&self, kind: LogKind) -> Option<&SizeLog> {
        match kind {
            LogKind::Slow => None,
            LogKind::LargeRequest => Some(&self.large_request),
            LogKind::LargeReply => Some(&self.large_reply),
        }
    }

    /// A size log's threshold in bytes; None when it is off (negative, or no entries kept:
    /// Valkey then logs nothing and spends no id).
    pub(crate) fn size_threshold(&self, kind: LogKind) -> Option<u64> {
        let log = self.size_log(kind)?;
        if log.max_len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        u64::try_from(log.threshold.load(Ordering::Relaxed)).ok()
    }

    /// Entries kept per worker in the log of `kind`.
    pub(crate) fn max_len_of(&self, kind: LogKind) -> usize {
        match self.size_log(kind) {
            Some(log) => log.max_len.load(Ordering::Relaxed),
            None => self.max_len(),
        }
    }

    /// The threshold in force; None when the log is off.
    pub(crate) fn threshold(&self) -> Option<u64> {
        u64::try_from(self.threshold_us.load(Ordering::Relaxed)).ok()
    }

    /// Entries kept per worker.
    pub(crate) fn max_len(&self) -> usize {
        self.max_len.load(Ordering::Relaxed)
    }

    /// A reload's new settings, for requests timed from now on.
    pub(crate) fn configure(&self, cfg: &SlowlogConfig) {
        self.threshold_us
            .store(cfg.log_slower_than_us, Ordering::Relaxed);
        self.max_len.store(cfg.max_len, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// CONFIG SET through the proxy: its `slowlog-log-slower-than` and `slowlog-max-len`
    /// set this log (the one SLOWLOG answers from), as they set one Redis's; the request
    /// still goes to the nodes. Applied only when every such value parses (the nodes refuse
    /// the same ones); a later reload sets the configured values again.
    pub(crate) fn config_set(&self, req: &Request) {
        if !(req.argc() >= 2 && req.arg(1).eq_ignore_ascii_case(b"set")) {
            return;
        }
        let (mut threshold, mut max_len) = (None, None);
        // Valkey's size logs: (threshold, max_len) of large-request, then of large-reply.
        let mut sizes: [(Option<i64>, Option<usize>); 2] = [(None, None); 2];
        let mut i = 2;
        while i + 1 < req.argc() {
            let value = std::str::from_utf8(req.arg(i + 1)).ok();
            let name = req.arg(i);
            // Valkey 8.1's names for the same two settings count too.
            let is =
                |a: &[u8], b: &[u8]| name.eq_ignore_ascii_case(a) || name.eq_ignore_ascii_case(b);
            if is(
                b"slowlog-log-slower-than",
                b"commandlog-execution-slower-than",
            ) {
                match value.and_then(|v| v.parse::<i64>().ok()) {
                    Some(v) => threshold = Some(v),
                    None => return,
                }
            } else if is(b"slowlog-max-len", b"commandlog-slow-execution-max-len") {
                match value.and_then(|v| v.parse::<usize>().ok()) {
                    Some(v) => max_len = Some(v),
                    None => return,
                }
            } else if let Some((i, is_len)) = size_setting(name) {
                let parsed = value.and_then(|v| v.parse::<i64>().ok());
                match (parsed, is_len) {
                    (Some(v @ 0..), true) => sizes[i].1 = Some(v as usize),
                    (Some(v @ -1..), false) => sizes[i].0 = Some(v),
                    _ => return,
                }
            }
            i += 2;
        }
        if let Some(t) = threshold {
            self.threshold_us.store(t, Ordering::Relaxed);
        }
        if let Some(m) = max_len {
            self.max_len.store(m, Ordering::Relaxed);
        }
        for (log, (threshold, max_len)) in [&self.large_request, &self.large_reply]
            .into_iter()
            .zip(sizes)
        {
            if let Some(t) = threshold {
                log.threshold.store(t, Ordering::Relaxed);
            }
            if let Some(m) = max_len {
                log.max_len.store(m, Ordering::Relaxed);
            }
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Microseconds since start. Callers read it per read or per batch of replies.
    /// The instant `now_us` counts from.
    pub(crate) fn origin(&self) -> Instant {
        self.origin
    }

    pub(crate) fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }

    /// Entries logged since start (the next id).
    pub(crate) fn logged(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Copy the argv of each request in `requests` (capped as Redis caps it) into `ring`,
    /// an entry of the log of `kind` with `value` (the duration, or a size in bytes): one
    /// request, or at EXEC the commands the transaction ran, each its own entry, as Redis
    /// logs them (`session/slowlog.rs`).
    pub(crate) fn log_as(
        &self,
        kind: LogKind,
        ring: &Ring,
        requests: &Bytes,
        value: u64,
        client: Client<'_>,
    ) {
        let next_id = self
            .size_log(kind)
            .map_or(&self.next_id, |log| &log.next_id);
        // A transaction's bytes may hold millions of commands (up to the query buffer's
        // limit) and only `max_len` entries are kept: at most that many are logged (its
        // first), and its bytes are copied for parsing only as far as they are read.
        let most = self.max_len_of(kind).max(1);
        let mut copied = requests.len().min(READ_WINDOW);
        let mut buf = BytesMut::from(&requests[..copied]);
        let mut parser = RequestParser::new(reparse_limits());
        let mut logged = 0;
        while logged < most {
            let req = match parser.parse(&mut buf) {
                Ok(Progress::Done(Parsed::Request(req))) => req,
                Ok(Progress::Done(Parsed::Noop)) => continue,
                Ok(Progress::Incomplete { .. }) if copied < requests.len() => {
                    let more = (copied.max(READ_WINDOW)).min(requests.len() - copied);
                    buf.extend_from_slice(&requests[copied..copied + more]);
                    copied += more;
                    continue;
                }
                _ => return,
            };
            logged += 1;
            let max_len = self.max_len_of(kind);
            if max_len == 0 {
                // Redis still spends the id; there is nothing to keep, so nothing to copy.
                next_id.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let unix_time = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            let entry = SlowEntry {
                id: next_id.fetch_add(1, Ordering::Relaxed),
                unix_time,
                duration_us: value,
                argv: capped_argv(&req),
                peer: client.peer.map_or_else(String::new, |p| p.to_string()),
                name: client
                    .name
                    .map_or_else(Bytes::new, |n| capped(n, MAX_NAME_BYTES)),
            };
            let mut ring = ring.0.lock().unwrap_or_else(|e| e.into_inner());
            ring.push_back(entry);
            while ring.len() > max_len {
                ring.pop_front();
            }
        }
    }
}

/// How much of a logged request's bytes is copied for parsing at first (then doubled as
/// needed): a transaction's may be far longer than what is logged of it.
const READ_WINDOW: usize = 16 * 1024;

/// Which size log a CONFIG SET name sets, and whether it is its length (else its threshold).
fn size_setting(name: &[u8]) -> Option<(usize, bool)> {
    [
        (&b"commandlog-request-larger-than"[..], (0, false)),
        (b"commandlog-large-request-max-len", (0, true)),
        (b"commandlog-reply-larger-than", (1, false)),
        (b"commandlog-large-reply-max-len", (1, true)),
    ]
    .into_iter()
    .find(|(n, _)| name.eq_ignore_ascii_case(n))
    .map(|(_, setting)| setting)
}

/// A logged request's bytes were validated when they were first parsed: no size limit.
fn reparse_limits() -> resp::Limits {
    resp::Limits {
        max_bulk_len: usize::MAX,
        max_inline_len: usize::MAX,
        ..resp::Limits::default()
    }
}

/// At most 32 arguments (the last then says how many more there were), each at most 128
/// bytes (then how many more bytes), passwords redacted: Redis's `slowlogCreateEntry`.
pub(crate) fn capped_argv(req: &Request) -> Vec<Bytes> {
    let argc = req.argc();
    let kept = argc.min(MAX_ARGC);
    let mut argv = Vec::with_capacity(kept);
    for i in 0..kept {
        if kept != argc && i == kept - 1 {
            let more = argc - kept + 1;
            argv.push(Bytes::from(format!("... ({more} more arguments)")));
        } else if crate::redact::argument(req, i) {
            argv.push(Bytes::from_static(crate::redact::REDACTED));
        } else {
            argv.push(capped(req.arg(i), MAX_ARG_BYTES));
        }
    }
    argv
}

/// The first `max` bytes and how many more there were, Redis's form for long arguments.
fn capped(arg: &[u8], max: usize) -> Bytes {
    if arg.len() <= max {
        return Bytes::copy_from_slice(arg);
    }
    let mut out = BytesMut::from(&arg[..max]);
    let more = arg.len() - max;
    out.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
    out.freeze()
}
