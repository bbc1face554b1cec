//! How the replies of a request's parts become its one reply: the merge policies of the
//! command table (`response_policy`) and the proxy's own (SCAN, INFO, PUBSUB counts), as
//! pure functions over reply frames. No I/O: the session's fan-out calls them.

use bytes::{Bytes, BytesMut};
use cluster::command::ResponsePolicy;

use super::frames::{array_elements, int_reply, parse_int};

/// How part replies become the client's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merge {
    /// Arrays of per-key replies, reassembled in the request's key order (MGET).
    KeyOrder,
    /// Integers added (DEL, EXISTS, DBSIZE…).
    Sum,
    /// Every part must succeed; the first part's reply stands for all (MSET, FLUSHALL…).
    AllSucceeded,
    /// The first successful part wins (SCRIPT KILL…).
    OneSucceeded,
    /// Arrays concatenated, or the first non-null scalar (KEYS, RANDOMKEY).
    Concat,
    /// Arrays of integers combined element-wise with AND (SCRIPT EXISTS).
    LogicalAnd,
    /// Arrays concatenated without duplicates, first occurrence first (PUBSUB CHANNELS).
    Union,
    /// Flat `[name, count, …]` arrays with the counts summed per name (PUBSUB NUMSUB).
    SumPairs,
    /// One SCAN page from master `node` of `masters`: the cursor is rewritten.
    Scan { node: usize, masters: usize },
    /// INFO: the proxy's sections (`Fanout::prefix`) with the masters' memory, persistence,
    /// replication and keyspace merged in (`info.rs`).
    Info,
    /// CONFIG GET, asked of one master: its reply with the passwords hidden (`redact.rs`).
    ConfigGet,
    /// CLUSTER SLOT-STATS: every master's slots in one list, in the order asked
    /// (`slot_stats.rs`).
    SlotStats(super::slot_stats::SlotOrder),
    /// LATENCY HISTOGRAM, LATEST, HISTORY, DOCTOR, GRAPH: every master's monitor merged
    /// (`latency.rs`).
    Latency(super::latency::Latency),
}

/// The merge a response policy asks for, or None when the proxy cannot merge it (yet).
pub(crate) fn merge_for(policy: ResponsePolicy, split: bool) -> Option<Merge> {
    Some(match policy {
        ResponsePolicy::Default if split => Merge::KeyOrder,
        ResponsePolicy::Default => Merge::Concat,
        ResponsePolicy::AggSum => Merge::Sum,
        ResponsePolicy::AllSucceeded => Merge::AllSucceeded,
        ResponsePolicy::OneSucceeded => Merge::OneSucceeded,
        ResponsePolicy::AggLogicalAnd => Merge::LogicalAnd,
        _ => return None,
    })
}

pub(crate) fn concat(replies: &[&Bytes]) -> Bytes {
    let arrays: Option<Vec<Vec<Bytes>>> = replies.iter().map(|r| array_elements(r)).collect();
    let Some(arrays) = arrays else {
        // Scalars (RANDOMKEY): a random non-null one, so every master's keys can come up.
        let found: Vec<&&Bytes> = replies
            .iter()
            .filter(|r| !r.starts_with(b"$-1") && !r.starts_with(b"_"))
            .collect();
        return match found.len() {
            0 => replies[0].clone(),
            n => (*found[rand::random::<usize>() % n]).clone(),
        };
    };
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, arrays.iter().map(Vec::len).sum());
    for el in arrays.iter().flatten() {
        out.extend_from_slice(el);
    }
    out.freeze()
}

pub(crate) fn union(replies: &[&Bytes]) -> Bytes {
    // A set beside the list: KEYS can bring a great many names.
    let mut known = std::collections::HashSet::new();
    let mut seen: Vec<Bytes> = Vec::new();
    for el in replies.iter().filter_map(|r| array_elements(r)).flatten() {
        if known.insert(el.clone()) {
            seen.push(el);
        }
    }
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, seen.len());
    seen.iter().for_each(|el| out.extend_from_slice(el));
    out.freeze()
}

/// PUBSUB NUMSUB and SHARDNUMSUB: every master answers the same channels in the request's
/// order (duplicates included), so the counts are summed position by position, as one
/// Redis would list them. Only replies that do not line up (a node that answered something
/// else) are merged by name.
pub(crate) fn sum_pairs(replies: &[&Bytes]) -> Bytes {
    let lists: Vec<Vec<Bytes>> = replies.iter().filter_map(|r| array_elements(r)).collect();
    sum_aligned(&lists).unwrap_or_else(|| sum_by_name(&lists))
}

/// Position by position, when every list has the same names in the same places: no hashing
/// of 200k names per reply (review S10).
fn sum_aligned(lists: &[Vec<Bytes>]) -> Option<Bytes> {
    let first = lists.first()?;
    if first.len() % 2 != 0 || lists.iter().any(|l| l.len() != first.len()) {
        return None;
    }
    let mut out = BytesMut::with_capacity(first.iter().map(Bytes::len).sum());
    resp::write_array_header(&mut out, first.len());
    for (i, name) in first.iter().enumerate().step_by(2) {
        let mut total = 0i64;
        for list in lists {
            if list[i] != *name {
                return None;
            }
            total = total.saturating_add(parse_int(&list[i + 1]).unwrap_or(0));
        }
        out.extend_from_slice(name);
        resp::write_int(&mut out, total);
    }
    Some(out.freeze())
}

/// In first-seen order, found by hash: PUBSUB NUMSUB may name 100k channels (S10).
fn sum_by_name(lists: &[Vec<Bytes>]) -> Bytes {
    let mut totals: Vec<(Bytes, i64)> = Vec::new();
    let mut index: std::collections::HashMap<Bytes, usize> = std::collections::HashMap::new();
    for elements in lists {
        for pair in elements.chunks(2) {
            let (name, n) = (
                pair[0].clone(),
                pair.get(1).and_then(parse_int).unwrap_or(0),
            );
            match index.get(&name) {
                Some(&i) => totals[i].1 = totals[i].1.saturating_add(n),
                None => {
                    index.insert(name.clone(), totals.len());
                    totals.push((name, n));
                }
            }
        }
    }
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, totals.len() * 2);
    for (name, n) in &totals {
        out.extend_from_slice(name);
        resp::write_int(&mut out, *n);
    }
    out.freeze()
}

pub(crate) fn logical_and(replies: &[&Bytes]) -> Bytes {
    let arrays: Vec<Vec<Bytes>> = replies
        .iter()
        .map(|r| array_elements(r).unwrap_or_default())
        .collect();
    let len = arrays.iter().map(Vec::len).min().unwrap_or(0);
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, len);
    for i in 0..len {
        let all = arrays.iter().all(|a| parse_int(&a[i]).unwrap_or(0) != 0);
        resp::write_int(&mut out, i64::from(all));
    }
    out.freeze()
}

/// The client's reply from every part's final reply (in part order). `order` maps each key
/// of a split request to (part, position) for `KeyOrder`; `prefix` is INFO's own text, or
/// LATENCY HISTOGRAM's own entries.
pub(crate) fn merged(
    merge: Merge,
    replies: &[&Bytes],
    order: &[(u32, u32)],
    prefix: &Bytes,
) -> Bytes {
    if let Some(err) = replies.iter().find(|r| resp::is_error_frame(r)) {
        // INFO stays available while a master is down: its figures are just not counted.
        if !matches!(merge, Merge::OneSucceeded | Merge::Info) {
            return (*err).clone();
        }
    }
    match merge {
        Merge::KeyOrder => key_order(replies, order),
        Merge::Sum => int_reply(replies.iter().filter_map(|r| parse_int(r)).sum()),
        Merge::AllSucceeded => replies[0].clone(),
        Merge::OneSucceeded => {
            let ok = replies.iter().find(|r| !resp::is_error_frame(r));
            (*ok.unwrap_or(&replies[0])).clone()
        }
        Merge::Concat => concat(replies),
        Merge::LogicalAnd => logical_and(replies),
        Merge::Union => union(replies),
        Merge::SumPairs => sum_pairs(replies),
        Merge::Scan { node, masters } => super::scan::rewrite_reply(replies[0], node, masters),
        Merge::Info => super::info::merge_info(prefix, replies),
        Merge::ConfigGet => crate::redact::config_reply(replies[0]),
        Merge::SlotStats(order) => super::slot_stats::merge(order, replies),
        Merge::Latency(kind) => super::latency::merge(kind, replies, prefix),
    }
}

/// Rebuild MGET's array in key order from the parts' arrays.
fn key_order(replies: &[&Bytes], order: &[(u32, u32)]) -> Bytes {
    let elements: Vec<Vec<Bytes>> = replies
        .iter()
        .map(|r| array_elements(r).unwrap_or_default())
        .collect();
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, order.len());
    for &(part, pos) in order {
        match elements
            .get(part as usize)
            .and_then(|e| e.get(pos as usize))
        {
            Some(el) => out.extend_from_slice(el),
            None => resp::write_null(&mut out),
        }
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, i64)]) -> Bytes {
        let mut out = BytesMut::new();
        resp::write_array_header(&mut out, items.len() * 2);
        for (name, n) in items {
            resp::write_bulk(&mut out, name.as_bytes());
            resp::write_int(&mut out, *n);
        }
        out.freeze()
    }

    #[test]
    fn numsub_sums_by_position_and_keeps_duplicates_as_redis_lists_them() {
        let a = pairs(&[("x", 1), ("y", 0), ("x", 1)]);
        let b = pairs(&[("x", 2), ("y", 5), ("x", 2)]);
        assert_eq!(sum_pairs(&[&a, &b]), pairs(&[("x", 3), ("y", 5), ("x", 3)]));
    }

    #[test]
    fn numsub_replies_that_do_not_line_up_are_merged_by_name() {
        let a = pairs(&[("x", 1), ("y", 2)]);
        let b = pairs(&[("y", 3)]);
        assert_eq!(sum_pairs(&[&a, &b]), pairs(&[("x", 1), ("y", 5)]));
    }
}
