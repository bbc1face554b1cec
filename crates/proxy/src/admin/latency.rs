//! LATENCY HISTOGRAM's entries for the commands the proxy answers itself (PING, ECHO, INFO,
//! WAIT, HELLO, CLIENT ID, CLUSTER SLOTS…; a subcommand by its own name, `client|id`, as
//! Redis counts it): the masters never see a client send them, so their histograms hold
//! only the proxy's own connections' calls, if any. These entries replace the masters' for
//! those names when the replies are merged (`route/latency.rs`).
//!
//! `calls` is exact; `histogram_usec` comes from the sampled latencies (one request in
//! `cmdstats::SAMPLE_EVERY`, timed from dispatch to the reply handed to the writer), each
//! power-of-two bucket's cumulative count scaled to the calls, so the last bucket counts
//! them all; a command with no sample yet has an empty one.

use bytes::{Bytes, BytesMut};
use resp::{Request, Value};

use crate::context::cmdstats::BUCKETS;
use crate::context::Shared;

/// The proxy's entries as one more master's reply would hold them (a RESP3 map or a RESP2
/// flat array), for the commands `req` (`LATENCY HISTOGRAM [command …]`) asks about.
pub(crate) fn own_histogram(shared: &Shared, req: &Request, resp3: bool) -> Bytes {
    let asked: Vec<String> = (2..req.argc())
        .map(|i| String::from_utf8_lossy(req.arg(i)).to_ascii_lowercase())
        .collect();
    let wanted = |name: &str| {
        asked.is_empty()
            || asked.iter().any(|a| {
                a == name
                    || name
                        .strip_prefix(a.as_str())
                        .is_some_and(|r| r.starts_with('|'))
            })
    };
    let mut entries: Vec<(Value, Value)> = Vec::new();
    for i in 0..cluster::command::learn::stats_len() {
        let Some(spec) = cluster::command::at_stats_index(i) else {
            continue;
        };
        // A container counts no call of its own: its subcommands do.
        if !spec.subcommands.is_empty()
            || !crate::route::answered_by_proxy(spec.name)
            || !wanted(spec.name)
        {
            continue;
        }
        let t = shared.command_totals(i);
        if t.calls == 0 {
            continue;
        }
        let mut buckets = Vec::new();
        let mut cumulative = 0u64;
        for (b, count) in t.buckets.iter().enumerate().take(BUCKETS) {
            if *count == 0 {
                continue;
            }
            cumulative += count;
            let scaled = (u128::from(cumulative) * u128::from(t.calls))
                .checked_div(u128::from(t.samples))
                .unwrap_or(0) as i64;
            buckets.push((Value::Integer(1i64 << b), Value::Integer(scaled)));
        }
        let stats = vec![
            (bulk("calls"), Value::Integer(t.calls as i64)),
            (bulk("histogram_usec"), shaped(resp3, buckets)),
        ];
        entries.push((bulk(spec.name), shaped(resp3, stats)));
    }
    if entries.is_empty() {
        return Bytes::new();
    }
    let mut out = BytesMut::new();
    shaped(resp3, entries).encode(&mut out);
    out.freeze()
}

fn bulk(s: &str) -> Value {
    Value::BulkString(Bytes::copy_from_slice(s.as_bytes()))
}

fn shaped(resp3: bool, pairs: Vec<(Value, Value)>) -> Value {
    match resp3 {
        true => Value::Map(pairs),
        false => Value::Array(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect()),
    }
}
