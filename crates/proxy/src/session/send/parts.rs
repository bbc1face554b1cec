//! Sending the requests that go to more than one node, or to a node chosen by cursor:
//! split and broadcast commands (see `fanout`), SCAN across masters and INFO's keyspace
//! (see `scan`). They all become one reply-queue entry with parts, merged on delivery.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use cluster::slot_map::{SlotMap, Stamp};
use resp::Request;

use crate::backend::{Backend, Outgoing, Owes};
use crate::patience::Patience;
use crate::reply::error;
use crate::route::scan::parse_cursor;
use crate::route::Merge;
use crate::session::client::Client;
use crate::session::fanout::{Fanout, Part};
use crate::session::order::Admit;
use crate::session::queue::Entry;

/// Send every part of a split request; the reply queue merges them.
pub(crate) fn fan_out(client: &Client, fanout: Fanout) {
    let map = client.worker.map();
    fan_out_on(client, fanout, &map, Patience::Normal);
}

/// A broadcast: one part per master of one snapshot of the map, sent with that same
/// snapshot. Counting the masters in one read and addressing the parts in another let a
/// refresh in between skip a master (or send a part to nobody). (KEYS waits for its turn
/// first, and comes back as `keys_twice`.)
///
/// `in_multi`: a command of a transaction replayed at EXEC, run inside a transaction of
/// its own on each master (`Part::in_multi`).
pub(crate) fn broadcast(client: &Client, req: &Request, merge: Merge, in_multi: bool) {
    let map = client.worker.map();
    let patience = Patience::of_request(req);
    // CONFIG GET needs one master's answer, not every master's.
    let parts = match merge {
        Merge::ConfigGet => map.nodes().len().min(1),
        _ => map.nodes().len(),
    };
    let mut fanout = Fanout::broadcast(req, parts, merge, in_multi);
    if merge == Merge::Latency(crate::route::latency::Latency::Histogram) {
        let shared = &client.worker.shared;
        fanout.prefix = crate::admin::latency::own_histogram(shared, req, client.resp3());
    }
    fan_out_on(client, fanout, &map, patience);
}

/// KEYS, once every earlier request is answered (`Held::Keys`).
pub(crate) fn keys_twice(client: &Client, req: &Request) {
    let map = client.worker.map();
    let fanout = Fanout::twice(req, map.nodes().len());
    fan_out_on(client, fanout, &map, Patience::of_request(req));
}

/// Send every part as `map` says: a part with a slot to its master, a part without to
/// the master of the same index.
fn fan_out_on(client: &Client, mut fanout: Fanout, map: &SlotMap, patience: Patience) {
    let stamp = map.stamp();
    let wire = client.wire();
    let backends: Vec<Option<Rc<Backend>>> = fanout
        .parts
        .iter()
        .enumerate()
        .map(|(i, part)| match part.slot {
            Some(slot) => client.worker.backend_for_slot(map, slot, wire),
            None => {
                // Part `i` of a broadcast read twice goes to master `i % masters`.
                let index = i.checked_rem(map.nodes().len()).unwrap_or(i);
                let addr = part_addr(map, index, None);
                addr.map(|a| client.worker.backend_for_addr(a, wire))
            }
        })
        .collect();
    for (part, backend) in fanout.parts.iter_mut().zip(&backends) {
        part.sent_to = backend.clone();
    }
    let stamp = crate::session::order::stable(stamp, map);
    send_parts(client, fanout, backends, map, stamp, patience);
}

/// Push the request's entry, then send each part (or queue it behind earlier requests
/// of its slot, `order.rs`), each owed a reply within `patience` (`watchdog.rs`); a
/// part with no connection fails at once.
fn send_parts(
    client: &Client,
    fanout: Fanout,
    backends: Vec<Option<Rc<Backend>>>,
    map: &SlotMap,
    stamp: Option<Stamp>,
    patience: Patience,
) {
    // Decided before the push: the entry's own parts must not count as in flight.
    let admits: Vec<Admit> = (fanout.parts.iter().zip(&backends))
        .map(|(part, b)| match b {
            Some(b) => super::admit(&client.cell, stamp, part.slot, b, 0, false),
            None => Admit::Untracked,
        })
        .collect();
    let parts: Vec<(Bytes, Option<u16>, bool, u32)> = fanout
        .parts
        .iter()
        .map(|p| (p.frame.clone(), p.slot, p.second, p.skip()))
        .collect();
    let mut fanout = fanout;
    fanout.map_version = map.version();
    let seq = client.cell.push(Entry::fanout(fanout));
    let sends = backends.into_iter().zip(parts).zip(admits);
    for (frag, ((backend, (frame, slot, second, skip)), admit)) in sends.enumerate() {
        let frag = frag as u32;
        if second && backend.is_some() {
            continue; // sent once the first round is answered (`Fanout::twice`)
        }
        let Some(b) = backend else {
            client.cell.deliver_no_route(seq, frag);
            continue;
        };
        let out = Outgoing {
            owes: Owes::Entry { seq, frag },
            skip,
            ..Outgoing::new(frame, client.cell.clone(), seq)
        };
        super::send_admitted(client, admit, out, &b, slot, patience);
    }
}

/// SCAN: the cursor names the master; its page comes back with the cursor rewritten.
pub(crate) fn scan(client: &Client, req: &Request) {
    let map = client.worker.map();
    let masters = map.nodes().len();
    let cursor = match parse_cursor(req.arg(1), masters) {
        Ok(c) => c,
        Err(msg) => return client.cell.push_ready(error(msg)),
    };
    let cursor_text = cursor.node_cursor.to_string();
    let mut args: Vec<&[u8]> = vec![req.arg(0), cursor_text.as_bytes()];
    args.extend((2..req.argc()).map(|i| req.arg(i)));
    let mut frame = BytesMut::new();
    resp::encode_command(&mut frame, &args);
    let backend = client
        .worker
        .backend_for_addr(&map.nodes()[cursor.node].addr, client.wire());
    let part = Part {
        frame: frame.freeze(),
        reply: None,
        sent_to: Some(backend.clone()),
        hops: 0,
        retries: 0,
        slot: None,
        second: false,
        hold: Default::default(),
        in_multi: false,
    };
    let merge = Merge::Scan {
        node: cursor.node,
        masters,
    };
    send_parts(
        client,
        Fanout::from_parts(vec![part], merge),
        vec![Some(backend)],
        &map,
        None,
        Patience::Normal,
    );
}

/// INFO with sections from the masters (`sections`): the proxy's own, with theirs merged in.
pub(crate) fn info_with_masters(client: &Client, req: &Request, sections: &[&str]) {
    let own = crate::admin::info::render(&client.worker.shared, req);
    let map = client.worker.map();
    let mut args: Vec<&[u8]> = vec![b"INFO"];
    args.extend(sections.iter().map(|s| s.as_bytes()));
    let probe = Request::from_args(&args);
    let mut fanout = Fanout::broadcast(&probe, map.nodes().len(), Merge::Info, false);
    fanout.prefix = Bytes::from(own);
    fan_out_on(client, fanout, &map, Patience::Normal);
}

/// The node part `index` goes to in `map`: its slot's master, or (no slot: a broadcast
/// part) the master of the same index.
fn part_addr(map: &SlotMap, index: usize, slot: Option<u16>) -> Option<&str> {
    match slot {
        Some(slot) => map.node_of(slot).map(|n| &*n.addr),
        None => map.nodes().get(index).map(|n| &*n.addr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster::slot_map::{NodeEntry, SlotRange};

    fn map_of(masters: u16) -> SlotMap {
        let per = 16384 / masters;
        let ranges: Vec<SlotRange> = (0..masters)
            .map(|i| SlotRange {
                start: i * per,
                end: if i + 1 == masters {
                    16383
                } else {
                    (i + 1) * per - 1
                },
                master: NodeEntry {
                    addr: format!("127.0.0.1:{}", 7000 + i),
                    id: None,
                    replicas: vec![],
                },
            })
            .collect();
        SlotMap::from_ranges(1, &ranges).unwrap()
    }

    fn targets<'m>(fanout: &Fanout, map: &'m SlotMap) -> Vec<Option<&'m str>> {
        let parts = fanout.parts.iter().enumerate();
        parts.map(|(i, p)| part_addr(map, i, p.slot)).collect()
    }

    /// R4: a broadcast sized by one map and addressed by another misses a master (a master
    /// added by a refresh in between); sized and addressed by one snapshot, as
    /// `broadcast` now does, every master gets exactly one part.
    #[test]
    fn a_broadcast_reaches_every_master_of_its_snapshot() {
        let req = Request::from_args(&[b"FLUSHALL"]);
        let (before, after) = (map_of(3), map_of(4));
        let sized_by_before =
            Fanout::broadcast(&req, before.nodes().len(), Merge::AllSucceeded, false);
        let mixed = targets(&sized_by_before, &after);
        assert!(!mixed.contains(&Some("127.0.0.1:7003")), "{mixed:?}");
        for map in [&before, &after] {
            let fanout = Fanout::broadcast(&req, map.nodes().len(), Merge::AllSucceeded, false);
            let mut got: Vec<&str> = targets(&fanout, map).into_iter().flatten().collect();
            got.sort();
            let mut want: Vec<&str> = map.nodes().iter().map(|n| &*n.addr).collect();
            want.sort();
            assert_eq!(got, want);
        }
    }
}
