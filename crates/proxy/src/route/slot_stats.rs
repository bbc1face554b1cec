//! CLUSTER SLOT-STATS through the proxy (Valkey 8, Redis 8.2): each master reports the
//! slots it owns, so every master is asked and their entries are merged into the one list
//! a node owning every slot would give: by slot for `SLOTSRANGE`, by the metric for
//! `ORDERBY` (descending unless `ASC`, ties by slot, at most `LIMIT`), as Valkey's
//! `cluster_slot_stats.c` orders them. A master's top entries hold the cluster's top ones,
//! so merging each master's `LIMIT` best is exact. Arguments are checked by the masters:
//! a bad call gets their error.

use bytes::{Bytes, BytesMut};
use resp::{Request, Value};

use super::frames::array_elements;

/// The order a SLOT-STATS call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotOrder {
    /// The `ORDERBY` metric; None for `SLOTSRANGE` (by slot) or a call the masters refuse.
    by: Option<Metric>,
    desc: bool,
    /// `LIMIT`, when given (the masters' default, all their slots, otherwise).
    limit: Option<u16>,
}

/// The metrics `ORDERBY` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    KeyCount,
    CpuUsec,
    NetworkBytesIn,
    NetworkBytesOut,
}

impl Metric {
    fn name(self) -> &'static [u8] {
        match self {
            Metric::KeyCount => b"key-count",
            Metric::CpuUsec => b"cpu-usec",
            Metric::NetworkBytesIn => b"network-bytes-in",
            Metric::NetworkBytesOut => b"network-bytes-out",
        }
    }
}

impl SlotOrder {
    /// From `CLUSTER SLOT-STATS ORDERBY metric [LIMIT n] [ASC|DESC]` or `SLOTSRANGE a b`.
    pub(crate) fn of(req: &Request) -> SlotOrder {
        let mut order = SlotOrder {
            by: None,
            desc: true,
            limit: None,
        };
        if req.argc() < 4 || !req.arg(2).eq_ignore_ascii_case(b"orderby") {
            return order;
        }
        let metric = req.arg(3);
        order.by = [
            Metric::KeyCount,
            Metric::CpuUsec,
            Metric::NetworkBytesIn,
            Metric::NetworkBytesOut,
        ]
        .into_iter()
        .find(|m| m.name().eq_ignore_ascii_case(metric));
        let mut i = 4;
        while i < req.argc() {
            let arg = req.arg(i);
            if arg.eq_ignore_ascii_case(b"limit") && i + 1 < req.argc() {
                order.limit = std::str::from_utf8(req.arg(i + 1))
                    .ok()
                    .and_then(|n| n.parse().ok());
                i += 1;
            } else if arg.eq_ignore_ascii_case(b"asc") {
                order.desc = false;
            } else if arg.eq_ignore_ascii_case(b"desc") {
                order.desc = true;
            }
            i += 1;
        }
        order
    }
}

/// The masters' entries as one list (each reply an array of `[slot, stats]`).
pub(crate) fn merge(order: SlotOrder, replies: &[&Bytes]) -> Bytes {
    // (metric, slot, the entry's own frame)
    let mut entries: Vec<(i64, i64, Bytes)> = Vec::new();
    for entry in replies.iter().filter_map(|r| array_elements(r)).flatten() {
        let Some((slot, stats)) = read_entry(&entry) else {
            continue;
        };
        let metric = order.by.map_or(0, |m| stat(&stats, m.name()));
        entries.push((metric, slot, entry));
    }
    match order.by {
        None => entries.sort_by_key(|e| e.1),
        Some(_) if order.desc => entries.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1))),
        Some(_) => entries.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1))),
    }
    if order.by.is_some() {
        entries.truncate(order.limit.map_or(usize::MAX, usize::from));
    }
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, entries.len());
    entries.iter().for_each(|e| out.extend_from_slice(&e.2));
    out.freeze()
}

fn read_entry(frame: &Bytes) -> Option<(i64, Value)> {
    let (Value::Array(mut parts), _) = resp::decode(frame).ok()?? else {
        return None;
    };
    if parts.len() != 2 {
        return None;
    }
    let stats = parts.pop()?;
    match parts.pop()? {
        Value::Integer(slot) => Some((slot, stats)),
        _ => None,
    }
}

/// One statistic of an entry's map (RESP3) or flat array (RESP2); 0 when absent.
fn stat(stats: &Value, name: &[u8]) -> i64 {
    let is_name = |v: &Value| matches!(v, Value::BulkString(b) | Value::SimpleString(b) if b.as_ref() == name);
    match stats {
        Value::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| is_name(k))
            .and_then(|(_, v)| match v {
                Value::Integer(n) => Some(*n),
                _ => None,
            }),
        Value::Array(flat) => {
            flat.chunks_exact(2)
                .find(|kv| is_name(&kv[0]))
                .and_then(|kv| match kv[1] {
                    Value::Integer(n) => Some(n),
                    _ => None,
                })
        }
        _ => None,
    }
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A master's reply in RESP2: `[[slot, [key-count, n]], ...]`.
    fn reply(entries: &[(i64, i64)]) -> Bytes {
        let mut out = BytesMut::new();
        resp::write_array_header(&mut out, entries.len());
        for (slot, keys) in entries {
            resp::write_array_header(&mut out, 2);
            resp::write_int(&mut out, *slot);
            resp::write_array_header(&mut out, 2);
            resp::write_bulk(&mut out, b"key-count");
            resp::write_int(&mut out, *keys);
        }
        out.freeze()
    }

    fn order(args: &[&str]) -> SlotOrder {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        SlotOrder::of(&Request::from_args(&args))
    }

    #[test]
    fn slotsrange_merges_by_slot() {
        let a = reply(&[(0, 5), (2, 1)]);
        let b = reply(&[(1, 7)]);
        let o = order(&["cluster", "slot-stats", "slotsrange", "0", "2"]);
        assert_eq!(merge(o, &[&a, &b]), reply(&[(0, 5), (1, 7), (2, 1)]));
    }

    #[test]
    fn orderby_sorts_the_masters_best_then_cuts_at_the_limit() {
        let a = reply(&[(3, 9), (0, 2)]);
        let b = reply(&[(7, 9), (5, 4)]);
        let o = order(&[
            "cluster",
            "slot-stats",
            "orderby",
            "KEY-COUNT",
            "limit",
            "3",
        ]);
        assert_eq!(merge(o, &[&a, &b]), reply(&[(3, 9), (7, 9), (5, 4)]));
        let asc = order(&["cluster", "slot-stats", "orderby", "key-count", "asc"]);
        assert_eq!(
            merge(asc, &[&a, &b]),
            reply(&[(0, 2), (5, 4), (3, 9), (7, 9)])
        );
    }
}
