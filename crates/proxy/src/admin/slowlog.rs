//! SLOWLOG GET, LEN, RESET and HELP: the proxy's own slow log, read from every worker's
//! ring (`context/slowlog.rs` keeps them), with Redis 7's replies and errors.

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::context::slowlog::SlowEntry;
use crate::context::Shared;
use crate::reply::error;

/// Answer `SLOWLOG <sub> …` (the router checked the subcommand and its arity).
pub(crate) fn command(req: &Request, shared: &Shared) -> Bytes {
    if req.arg(0).eq_ignore_ascii_case(b"commandlog") {
        // `COMMANDLOG GET count slow`, `LEN slow`, `RESET slow` (routed here only so):
        // SLOWLOG's, its type left out.
        let args: Vec<&[u8]> = std::iter::once(&b"SLOWLOG"[..])
            .chain((1..req.argc() - 1).map(|i| req.arg(i)))
            .collect();
        return command(&Request::from_args(&args), shared);
    }
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
    total.min(shared.slowlog.max_len())
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
    let entries = newest(shared, count.min(shared.slowlog.max_len()));
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
#[path = "slowlog_tests.rs"]
mod tests;
