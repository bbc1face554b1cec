//! HOTKEYS (Redis 8.6) answered by the proxy from its merged hot-key board
//! (`context/hotkeys.rs`), whatever its masters' version: the keys a client asks about
//! are the proxy's, seen across every master, where a node would know only its own.
//!
//! START, STOP, GET, RESET and HELP keep Redis 8.6's replies and errors; what differs
//! (docs/commands.md): the board is always on while `[hotkeys]` is (START frames a run, it
//! does not begin the counting), it samples one request in 16 whatever `SAMPLE` says, and
//! its "CPU time" is the time from the proxy's dispatch to the reply, the nearest a proxy
//! can see. GET lists the keys of the board's last one or two windows, frozen at STOP.

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::context::hotkeys::run::{parse_start, slot_ranges, Run, Stopped};
use crate::context::hotkeys::{merged, Hot};
use crate::context::Shared;
use crate::reply::error;

/// What a sampled request stands for.
const EVERY: u64 = crate::context::cmdstats::SAMPLE_EVERY as u64;

/// Answer `HOTKEYS …`; `resp3` shapes GET's maps and the null replies.
pub(crate) fn command(req: &Request, shared: &Shared, resp3: bool) -> Bytes {
    if req.argc() < 2 {
        return error("wrong number of arguments for 'hotkeys' command");
    }
    let sub = req.arg(1).to_ascii_lowercase();
    let mut run = shared.hotkeys_run.lock().unwrap_or_else(|p| p.into_inner());
    let now = crate::admin::status::now_ms();
    if let Some(r) = run.as_mut() {
        if r.expired(now) && r.stopped.is_none() {
            let at = r.started_unix_ms + r.start.duration_ms;
            r.stopped = Some(stopped(shared, at));
        }
    }
    let fixed = req.argc() == 2;
    match sub.as_slice() {
        b"help" if fixed => help(),
        b"start" => start(req, shared, &mut run, now),
        b"stop" if fixed => match run.as_mut().filter(|r| r.active(now)) {
            Some(r) => {
                r.stopped = Some(stopped(shared, now));
                Bytes::from_static(b"+OK\r\n")
            }
            None => null(resp3),
        },
        b"get" if fixed => match run.as_ref() {
            Some(r) => get(shared, r, now, resp3),
            None => null(resp3),
        },
        b"reset" if fixed => match run.as_ref().is_some_and(|r| r.active(now)) {
            true => error("hotkey tracking session in progress, stop tracking first"),
            false => {
                *run = None;
                Bytes::from_static(b"+OK\r\n")
            }
        },
        b"help" | b"stop" | b"get" | b"reset" => error(&format!(
            "wrong number of arguments for 'hotkeys|{}' command",
            String::from_utf8_lossy(&sub)
        )),
        _ => error(&format!(
            "unknown subcommand '{}'. Try HOTKEYS HELP.",
            String::from_utf8_lossy(&req.arg(1)[..req.arg(1).len().min(128)])
        )),
    }
}

fn start(req: &Request, shared: &Shared, run: &mut Option<Run>, now: u64) -> Bytes {
    if run.as_ref().is_some_and(|r| r.active(now)) {
        return error("hotkey tracking session already in progress");
    }
    let args: Vec<&[u8]> = (2..req.argc()).map(|i| req.arg(i)).collect();
    let start = match parse_start(&args) {
        Ok(s) => s,
        Err(e) => return error(&e),
    };
    if !shared.live.load().config.hotkeys.enabled {
        return error("hot keys are not counted here: set [hotkeys] enabled = true");
    }
    *run = Some(Run {
        start,
        started_unix_ms: now,
        cpu_ms_at_start: crate::admin::cpu::process_ms(),
        sampled_ns_at_start: crate::admin::status::all_commands(shared).sampled_ns,
        stopped: None,
    });
    Bytes::from_static(b"+OK\r\n")
}

/// The board and the counters as they are at `unix_ms`.
fn stopped(shared: &Shared, unix_ms: u64) -> Stopped {
    let boards = shared
        .workers
        .iter()
        .map(|w| (&w.hotkeys, w.registry.now_ms()));
    let window_ms = shared.live.load().config.hotkeys.window_seconds * 1000;
    Stopped {
        unix_ms,
        keys: merged(boards, 0, window_ms).all,
        cpu_ms: crate::admin::cpu::process_ms(),
        sampled_ns: crate::admin::status::all_commands(shared).sampled_ns,
    }
}

/// One field of GET's map.
enum Field {
    Int(u64),
    Slots(Vec<(u16, u16)>),
    Keys(Vec<(Vec<u8>, u64)>),
}

fn get(shared: &Shared, run: &Run, now: u64, resp3: bool) -> Bytes {
    let at = run.stopped.clone().unwrap_or_else(|| stopped(shared, now));
    let start = &run.start;
    let slots = match start.slots.is_empty() {
        true => vec![(0, cluster::SLOT_COUNT as u16 - 1)],
        false => slot_ranges(&start.slots),
    };
    let keys: Vec<&Hot> = at
        .keys
        .iter()
        .filter(|h| {
            start.slots.is_empty()
                || start
                    .slots
                    .binary_search(&shared.placement.slot(&h.key))
                    .is_ok()
        })
        .collect();
    let all_us = at.sampled_ns.saturating_sub(run.sampled_ns_at_start) * EVERY / 1000;
    let mut fields = vec![
        ("tracking-active", Field::Int(u64::from(run.active(now)))),
        ("sample-ratio", Field::Int(EVERY)),
        ("selected-slots", Field::Slots(slots)),
        ("all-commands-all-slots-us", Field::Int(all_us)),
        (
            "collection-start-time-unix-ms",
            Field::Int(run.started_unix_ms),
        ),
        (
            "collection-duration-ms",
            Field::Int(at.unix_ms.saturating_sub(run.started_unix_ms)),
        ),
    ];
    if start.cpu {
        let [user, sys] = at.cpu_ms;
        let [user0, sys0] = run.cpu_ms_at_start;
        fields.push((
            "total-cpu-time-user-ms",
            Field::Int(user.saturating_sub(user0)),
        ));
        fields.push((
            "total-cpu-time-sys-ms",
            Field::Int(sys.saturating_sub(sys0)),
        ));
        let top = top_by(&keys, start.count, |h| h.time_ns * EVERY / 1000);
        fields.push(("by-cpu-time-us", Field::Keys(top)));
    }
    if start.net {
        let top = top_by(&keys, start.count, |h| h.net_bytes * EVERY);
        fields.push(("by-net-bytes", Field::Keys(top)));
    }
    encode(&fields, resp3)
}

/// The `count` keys of largest `measure`, largest first; keys that measured nothing are
/// left out, as Redis leaves them.
fn top_by(keys: &[&Hot], count: usize, measure: impl Fn(&Hot) -> u64) -> Vec<(Vec<u8>, u64)> {
    let mut all: Vec<(Vec<u8>, u64)> = keys
        .iter()
        .map(|h| (h.key.clone(), measure(h)))
        .filter(|(_, m)| *m > 0)
        .collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    all.truncate(count);
    all
}

/// One map (a flat array in RESP2) inside a one-element array, as Redis answers.
fn encode(fields: &[(&str, Field)], resp3: bool) -> Bytes {
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, 1);
    match resp3 {
        true => resp::write_map_header(&mut out, fields.len()),
        false => resp::write_array_header(&mut out, fields.len() * 2),
    }
    for (name, value) in fields {
        resp::write_bulk(&mut out, name.as_bytes());
        match value {
            Field::Int(n) => resp::write_int(&mut out, *n as i64),
            Field::Slots(ranges) => {
                resp::write_array_header(&mut out, ranges.len());
                for &(a, b) in ranges {
                    let one = a == b;
                    resp::write_array_header(&mut out, if one { 1 } else { 2 });
                    resp::write_int(&mut out, i64::from(a));
                    if !one {
                        resp::write_int(&mut out, i64::from(b));
                    }
                }
            }
            Field::Keys(keys) => {
                resp::write_array_header(&mut out, keys.len() * 2);
                for (key, n) in keys {
                    resp::write_bulk(&mut out, key);
                    resp::write_int(&mut out, *n as i64);
                }
            }
        }
    }
    out.freeze()
}

fn null(resp3: bool) -> Bytes {
    Bytes::from_static(match resp3 {
        true => b"_\r\n",
        false => b"$-1\r\n",
    })
}

fn help() -> Bytes {
    const LINES: &[&str] = &[
        "HOTKEYS <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "START METRICS <count> [CPU] [NET] [COUNT <k>] [DURATION <seconds>] [SAMPLE <ratio>] [SLOTS <count> <slot> ...]",
        "    Start a run over slotgate's hot-key board ([hotkeys] enabled = true).",
        "    CPU ranks keys by the time their sampled requests took, from the proxy to the reply;",
        "    NET by their request and reply bytes. COUNT keys per metric (1 to 64, default 10);",
        "    DURATION stops the run after that many seconds; SLOTS keeps the keys of those slots.",
        "    The board samples one request in 16, whatever SAMPLE asks.",
        "STOP",
        "    Stop the run; GET then answers the board as it was.",
        "GET",
        "    The run's keys by each metric, and its start, duration and totals.",
        "RESET",
        "    Forget a stopped run.",
        "HELP",
        "    Print this help.",
    ];
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, LINES.len());
    for line in LINES {
        resp::write_simple(&mut out, line.as_bytes());
    }
    out.freeze()
}
