//! SLOWLOG GET, LEN, RESET and HELP: the proxy's own slow log, read from every worker's
//! ring (`context/slowlog.rs` keeps them), with Redis 7's replies and errors; and Valkey's
//! COMMANDLOG GET, LEN and RESET over the same log (type `slow`) and the proxy's two size
//! logs (`large-request`, `large-reply`).

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::context::slowlog::{LogKind, SlowEntry};
use crate::context::Shared;
use crate::reply::error;

/// Answer `SLOWLOG <sub> …` or `COMMANDLOG <sub> … <type>` (the router checked the
/// subcommand, its arity and, for COMMANDLOG, the type).
pub(crate) fn command(req: &Request, shared: &Shared) -> Bytes {
    let (kind, argc) = match req.arg(0).eq_ignore_ascii_case(b"commandlog") {
        // `COMMANDLOG GET count type`, `LEN type`, `RESET type`: SLOWLOG's, the type last.
        true => match LogKind::named(req.arg(req.argc() - 1)) {
            Some(kind) => (kind, req.argc() - 1),
            None => {
                return error(
                    "type should be one of the following: slow, large-request, large-reply",
                )
            }
        },
        false => (LogKind::Slow, req.argc()),
    };
    let sub = req.arg(1).to_ascii_lowercase();
    match sub.as_slice() {
        b"get" if argc <= 3 => get(req, argc, shared, kind),
        b"len" => Bytes::from(format!(":{}\r\n", len(shared, kind))),
        b"reset" => {
            for w in &shared.workers {
                w.log_ring(kind)
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

fn len(shared: &Shared, kind: LogKind) -> usize {
    let total: usize = shared
        .workers
        .iter()
        .map(|w| {
            w.log_ring(kind)
                .0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len()
        })
        .sum();
    total.min(shared.slowlog.max_len_of(kind))
}

/// `SLOWLOG GET [count]`: newest first; count 10 by default, -1 for all (`argc`: without
/// COMMANDLOG's type).
fn get(req: &Request, argc: usize, shared: &Shared, kind: LogKind) -> Bytes {
    let count = match argc {
        2 => 10,
        _ => match resp::string2ll(req.arg(2)) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => return error("count should be greater than or equal to -1"),
        },
    };
    let entries = newest(shared, kind, count.min(shared.slowlog.max_len_of(kind)));
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, entries.len());
    for e in &entries {
        write_entry(&mut out, e);
    }
    out.freeze()
}

/// The newest `count` entries of every worker, newest first.
fn newest(shared: &Shared, kind: LogKind, count: usize) -> Vec<SlowEntry> {
    let mut all: Vec<SlowEntry> = Vec::new();
    for w in &shared.workers {
        let ring = w.log_ring(kind).0.lock().unwrap_or_else(|e| e.into_inner());
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
#[path = "slowlog_tests.rs"]
mod tests;
