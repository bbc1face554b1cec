//! Commands that one node cannot answer alone: split by slot, or sent to every master, and the
//! replies merged back into the one reply Redis would have given.
//!
//! ```text
//!   MGET a b c ─split by slot─▶ part 0: MGET a c  ─▶ node X ─▶ [va, vc] ─┐
//!                              part 1: MGET b    ─▶ node Y ─▶ [vb]     ─┴─merge (key order)─▶ [va, vb, vc]
//! ```
//!
//! What to do is read from the command table, not from command names: a `MultiShard`
//! request policy means "split the keys by slot", `AllShards`/`AllNodes` means "send to every
//! master", and the response policy says how to merge (`AggSum` adds integers, `AllSucceeded`
//! wants every part to succeed, `Default` concatenates or reorders arrays…). A part that ends
//! in an error makes the whole reply that error, as it would on a single node.
//!
//! Invariant: `order[i]` names the part and position that holds the reply for the request's
//! i-th key, so a split MGET returns values in the caller's key order.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use cluster::command::{KeyPositions, ResponsePolicy};
use resp::{ReplyFramer, Request};

use crate::backend::Backend;

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
    /// INFO: the proxy's sections (`Fanout::prefix`) plus the masters' keyspace summed.
    InfoKeyspace,
}

/// One sub-request and its fate.
pub(crate) struct Part {
    pub frame: Bytes,
    pub reply: Option<Bytes>,
    pub sent_to: Option<Rc<Backend>>,
    pub hops: u8,
    pub retries: u8,
    /// The slot of its keys, or None for a broadcast part (sent to master `index`).
    pub slot: Option<u16>,
}

/// A request in flight as several parts.
pub(crate) struct Fanout {
    pub merge: Merge,
    pub parts: Vec<Part>,
    pub remaining: usize,
    order: Vec<(u32, u32)>,
    /// Text placed before the merged part (INFO's own sections).
    pub prefix: Bytes,
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

// === impl Fanout ===

impl Fanout {
    /// Split a multi-key command by slot. `keys` are the key positions (a range: MGET, DEL…
    /// step 1; MSET step 2, each key followed by its value).
    pub(crate) fn split(req: &Request, keys: &KeyPositions, merge: Merge) -> Fanout {
        let step = match keys {
            KeyPositions::Range { step, .. } => (*step).max(1),
            _ => 1,
        };
        let (groups, order) = group_by_slot(req, keys);
        let parts = groups
            .into_iter()
            .map(|(slot, idxs)| slot_part(req, slot, idxs, step))
            .collect::<Vec<_>>();
        Fanout {
            merge,
            remaining: parts.len(),
            parts,
            order,
            prefix: Bytes::new(),
        }
    }

    /// A request made of the given parts.
    pub(crate) fn from_parts(parts: Vec<Part>, merge: Merge) -> Fanout {
        Fanout {
            merge,
            remaining: parts.len(),
            parts,
            order: Vec::new(),
            prefix: Bytes::new(),
        }
    }

    /// The same request to each of `masters` masters.
    pub(crate) fn broadcast(req: &Request, masters: usize, merge: Merge) -> Fanout {
        let parts = (0..masters)
            .map(|_| Part {
                frame: req.raw().clone(),
                reply: None,
                sent_to: None,
                hops: 0,
                retries: 0,
                slot: None,
            })
            .collect::<Vec<_>>();
        Fanout::from_parts(parts, merge)
    }

    /// Record a final reply for part `frag`; returns the merged reply once every part is in.
    pub(crate) fn complete(&mut self, frag: usize, reply: Bytes) -> Option<Bytes> {
        let part = self.parts.get_mut(frag)?;
        if part.reply.replace(reply).is_none() {
            self.remaining = self.remaining.saturating_sub(1);
        }
        (self.remaining == 0).then(|| self.merged())
    }

    fn merged(&self) -> Bytes {
        let replies: Vec<&Bytes> = self.parts.iter().filter_map(|p| p.reply.as_ref()).collect();
        if let Some(err) = replies.iter().find(|r| resp::is_error_frame(r)) {
            // INFO stays available while a master is down: its keyspace is just not counted.
            if !matches!(self.merge, Merge::OneSucceeded | Merge::InfoKeyspace) {
                return (*err).clone();
            }
        }
        match self.merge {
            Merge::KeyOrder => self.key_order(&replies),
            Merge::Sum => int_reply(replies.iter().filter_map(|r| parse_int(r)).sum()),
            Merge::AllSucceeded => replies[0].clone(),
            Merge::OneSucceeded => {
                let ok = replies.iter().find(|r| !resp::is_error_frame(r));
                (*ok.unwrap_or(&replies[0])).clone()
            }
            Merge::Concat => concat(&replies),
            Merge::LogicalAnd => logical_and(&replies),
            Merge::Union => union(&replies),
            Merge::SumPairs => sum_pairs(&replies),
            Merge::Scan { node, masters } => crate::scan::rewrite_reply(replies[0], node, masters),
            Merge::InfoKeyspace => crate::scan::merge_keyspace(&self.prefix, &replies),
        }
    }

    /// Rebuild MGET's array in key order from the parts' arrays.
    fn key_order(&self, replies: &[&Bytes]) -> Bytes {
        let elements: Vec<Vec<Bytes>> = replies
            .iter()
            .map(|r| array_elements(r).unwrap_or_default())
            .collect();
        let mut out = BytesMut::new();
        resp::write_array_header(&mut out, self.order.len());
        for &(part, pos) in &self.order {
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
}

/// Key argument indexes grouped by slot, in first-seen order.
type SlotGroups = Vec<(u16, Vec<usize>)>;

/// Group the key positions by slot, in first-seen order, and note for each key its
/// (part, index within part) so the merge can put replies back in request order.
fn group_by_slot(req: &Request, keys: &KeyPositions) -> (SlotGroups, Vec<(u32, u32)>) {
    let mut groups: SlotGroups = Vec::new();
    let mut order = Vec::with_capacity(keys.count());
    for idx in keys.iter() {
        let slot = cluster::key_slot(req.arg(idx));
        let g = match groups.iter().position(|(s, _)| *s == slot) {
            Some(g) => g,
            None => {
                groups.push((slot, Vec::new()));
                groups.len() - 1
            }
        };
        order.push((g as u32, groups[g].1.len() as u32));
        groups[g].1.push(idx);
    }
    (groups, order)
}

/// One slot's request: the command name, then each of its keys with the `step - 1`
/// arguments that follow it (MSET's values).
fn slot_part(req: &Request, slot: u16, idxs: Vec<usize>, step: usize) -> Part {
    let mut args: Vec<&[u8]> = vec![req.arg(0)];
    for i in idxs {
        // The router checked the argument count; never read past it anyway.
        args.extend(
            (i..i + step)
                .filter(|&j| j < req.argc())
                .map(|j| req.arg(j)),
        );
    }
    let mut frame = BytesMut::new();
    resp::encode_command(&mut frame, &args);
    Part {
        frame: frame.freeze(),
        reply: None,
        sent_to: None,
        hops: 0,
        retries: 0,
        slot: Some(slot),
    }
}

/// The elements of an array reply, each as its own frame (a slice, no copy).
pub(crate) fn array_elements(frame: &Bytes) -> Option<Vec<Bytes>> {
    let header_end = frame.windows(2).position(|w| w == b"\r\n")?;
    if !matches!(frame.first(), Some(b'*' | b'~' | b'>')) {
        return None;
    }
    let n: i64 = std::str::from_utf8(&frame[1..header_end])
        .ok()?
        .parse()
        .ok()?;
    let mut pos = header_end + 2;
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for _ in 0..n.max(0) {
        let len = ReplyFramer::new().next_frame(&frame[pos..]).ok()??;
        out.push(frame.slice(pos..pos + len));
        pos += len;
    }
    Some(out)
}

fn parse_int(frame: &Bytes) -> Option<i64> {
    let body = frame.strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    std::str::from_utf8(body).ok()?.parse().ok()
}

fn int_reply(n: i64) -> Bytes {
    Bytes::from(format!(":{n}\r\n"))
}

fn concat(replies: &[&Bytes]) -> Bytes {
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

fn union(replies: &[&Bytes]) -> Bytes {
    let mut seen: Vec<Bytes> = Vec::new();
    for el in replies.iter().filter_map(|r| array_elements(r)).flatten() {
        if !seen.contains(&el) {
            seen.push(el);
        }
    }
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, seen.len());
    seen.iter().for_each(|el| out.extend_from_slice(el));
    out.freeze()
}

fn sum_pairs(replies: &[&Bytes]) -> Bytes {
    let mut totals: Vec<(Bytes, i64)> = Vec::new();
    for elements in replies.iter().filter_map(|r| array_elements(r)) {
        for pair in elements.chunks(2) {
            let (name, n) = (
                pair[0].clone(),
                pair.get(1).and_then(parse_int).unwrap_or(0),
            );
            match totals.iter_mut().find(|(k, _)| *k == name) {
                Some(t) => t.1 += n,
                None => totals.push((name, n)),
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

fn logical_and(replies: &[&Bytes]) -> Bytes {
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

#[cfg(test)]
mod tests;
