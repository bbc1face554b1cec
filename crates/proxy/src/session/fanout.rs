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
use cluster::command::KeyPositions;
use resp::Request;

use crate::backend::Backend;
use crate::route::merge::{self, Merge};
use crate::route::PartShape;
use crate::session::failover_hold::Hold;

/// One sub-request and its fate.
pub(crate) struct Part {
    pub frame: Bytes,
    pub reply: Option<Bytes>,
    pub sent_to: Option<Rc<Backend>>,
    pub hops: u8,
    pub retries: u8,
    /// The slot of its keys, or None for a broadcast part (sent to master `index`).
    pub slot: Option<u16>,
    /// Sent only once every first-round part is answered (`Fanout::twice`).
    pub second: bool,
    /// Held for a failover (`failover_hold::Hold`).
    pub hold: Hold,
    /// `frame` is `MULTI, the command, EXEC`: a command of a transaction replayed at EXEC
    /// (`transaction.rs`) runs inside a transaction on each master, as it ran inside one
    /// on one Redis (FLUSHALL there frees at once, not in the background). Two replies are
    /// dropped before EXEC's, whose one element is the part's reply (`Fanout::complete`).
    pub in_multi: bool,
}

impl Part {
    /// Replies the node sends before the one owed (`backend::Outgoing::skip`), on every send
    /// of `frame` (a resend too).
    pub(crate) fn skip(&self) -> u32 {
        match self.in_multi {
            true => 2,
            false => 0,
        }
    }
}

/// A request in flight as several parts.
pub(crate) struct Fanout {
    pub merge: Merge,
    pub parts: Vec<Part>,
    pub remaining: usize,
    order: Vec<(u32, u32)>,
    /// Text placed before the merged part (INFO's own sections).
    pub prefix: Bytes,
    /// Slot-map version the parts were routed with.
    pub map_version: u64,
    /// Second-round parts (the last ones) not yet released (`Fanout::twice`).
    second_round: usize,
}

// === impl Fanout ===

impl Fanout {
    /// Split a multi-key command by slot. `keys` are the key positions (a range: MGET, DEL…
    /// step 1; MSET step 2, each key followed by its value).
    pub(crate) fn split(
        req: &Request,
        keys: &KeyPositions,
        merge: Merge,
        shape: PartShape,
        placement: &cluster::Placement,
    ) -> Fanout {
        let step = match keys {
            KeyPositions::Range { step, .. } => (*step).max(1),
            _ => 1,
        };
        let (groups, order) = group_by_slot(req, keys, placement);
        let parts = groups
            .into_iter()
            .map(|(slot, idxs)| slot_part(req, slot, idxs, step, shape))
            .collect::<Vec<_>>();
        Fanout {
            merge,
            remaining: parts.len(),
            parts,
            order,
            prefix: Bytes::new(),
            map_version: 0,
            second_round: 0,
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
            map_version: 0,
            second_round: 0,
        }
    }

    /// The same request to each of `masters` masters; `in_multi`: inside a transaction of
    /// its own on each (`Part::in_multi`).
    pub(crate) fn broadcast(req: &Request, masters: usize, merge: Merge, in_multi: bool) -> Fanout {
        let frame = match in_multi {
            true => {
                let mut frame = BytesMut::new();
                resp::encode_command(&mut frame, &[b"MULTI"]);
                frame.extend_from_slice(req.raw());
                resp::encode_command(&mut frame, &[b"EXEC"]);
                frame.freeze()
            }
            false => req.raw().clone(),
        };
        let parts = (0..masters)
            .map(|_| Part {
                frame: frame.clone(),
                reply: None,
                sent_to: None,
                hops: 0,
                retries: 0,
                slot: None,
                second: false,
                hold: Hold::default(),
                in_multi,
            })
            .collect::<Vec<_>>();
        Fanout::from_parts(parts, merge)
    }

    /// KEYS: every master read twice, the second round sent once the first is answered, and
    /// the names merged without duplicates. A key being migrated is on its source until it
    /// is on its target; each second-round read comes after every first-round one, so if
    /// the source's first read missed the key, the target's second read has it. One round
    /// reads the masters at unrelated moments and can miss it (or, with `Concat`, count it
    /// twice), where one Redis never does.
    pub(crate) fn twice(req: &Request, masters: usize) -> Fanout {
        let mut fanout = Fanout::broadcast(req, masters * 2, Merge::Union, false);
        fanout.parts[masters..]
            .iter_mut()
            .for_each(|p| p.second = true);
        fanout.second_round = masters;
        fanout
    }

    /// Record a final reply for part `frag`; returns the merged reply once every part is in.
    pub(crate) fn complete(&mut self, frag: usize, reply: Bytes) -> Option<Bytes> {
        let part = self.parts.get_mut(frag)?;
        // EXEC's array of one: its element. Anything else (EXECABORT: the node refused the
        // command when queued) stands for the part as it is.
        let reply = match part.in_multi && reply.starts_with(b"*1\r\n") {
            true => reply.slice(4..),
            false => reply,
        };
        if part.reply.replace(reply).is_none() {
            self.remaining = self.remaining.saturating_sub(1);
        }
        if self.second_round > 0 && self.remaining == self.second_round && self.first_failed() {
            // The reply is that error whatever a second round would say.
            self.parts.truncate(self.parts.len() - self.second_round);
            (self.remaining, self.second_round) = (0, 0);
        }
        (self.remaining == 0).then(|| self.merged())
    }

    fn first_failed(&self) -> bool {
        let first = &self.parts[..self.parts.len() - self.second_round];
        first
            .iter()
            .any(|p| p.reply.as_deref().is_some_and(resp::is_error_frame))
    }

    /// The second-round parts to send now, once: when every first-round part is answered.
    pub(crate) fn release_second_round(&mut self) -> Option<std::ops::Range<u32>> {
        if self.second_round == 0 || self.remaining != self.second_round {
            return None;
        }
        let first = (self.parts.len() - self.second_round) as u32;
        self.second_round = 0;
        Some(first..self.parts.len() as u32)
    }

    fn merged(&self) -> Bytes {
        let replies: Vec<&Bytes> = self.parts.iter().filter_map(|p| p.reply.as_ref()).collect();
        merge::merged(self.merge, &replies, &self.order, &self.prefix)
    }
}

/// Key argument indexes grouped by slot, in first-seen order.
type SlotGroups = Vec<(u16, Vec<usize>)>;

/// Group the key positions by slot, in first-seen order, and note for each key its
/// (part, index within part) so the merge can put replies back in request order.
fn group_by_slot(
    req: &Request,
    keys: &KeyPositions,
    placement: &cluster::Placement,
) -> (SlotGroups, Vec<(u32, u32)>) {
    let mut groups: SlotGroups = Vec::new();
    let mut order = Vec::with_capacity(keys.count());
    // A scan finds the few slots of an ordinary MGET; a client naming keys of thousands of
    // slots gets an index instead of a scan per key (review S10's class).
    let mut index: Option<std::collections::HashMap<u16, usize>> = None;
    for idx in keys.iter() {
        let slot = placement.slot(req.arg(idx));
        let found = match &index {
            Some(index) => index.get(&slot).copied(),
            None => groups.iter().position(|(s, _)| *s == slot),
        };
        let g = match found {
            Some(g) => g,
            None => {
                groups.push((slot, Vec::new()));
                if let Some(index) = index.as_mut() {
                    index.insert(slot, groups.len() - 1);
                } else if groups.len() > 16 {
                    index = Some(
                        groups
                            .iter()
                            .enumerate()
                            .map(|(g, (s, _))| (*s, g))
                            .collect(),
                    );
                }
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
fn slot_part(req: &Request, slot: u16, idxs: Vec<usize>, step: usize, shape: PartShape) -> Part {
    let count = idxs.len().to_string();
    let mut args: Vec<&[u8]> = match shape {
        PartShape::Keys => vec![req.arg(0)],
        PartShape::NumKeys {
            numkeys_at,
            keys_at,
            ..
        } => {
            let head = (0..keys_at.min(req.argc())).map(|i| match i == numkeys_at {
                true => count.as_bytes(),
                false => req.arg(i),
            });
            head.collect()
        }
    };
    for i in idxs {
        // The router checked the argument count; never read past it anyway.
        args.extend(
            (i..i + step)
                .filter(|&j| j < req.argc())
                .map(|j| req.arg(j)),
        );
    }
    if let PartShape::NumKeys { options_at, .. } = shape {
        args.extend((options_at..req.argc()).map(|i| req.arg(i)));
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
        second: false,
        hold: Hold::default(),
        in_multi: false,
    }
}

#[cfg(test)]
mod tests;
