//! Dispatch of the requests that go to more than one node, or to a node chosen by cursor:
//! split and broadcast commands (see `fanout`), SCAN across masters and INFO's keyspace
//! (see `scan`). They all become one reply-queue entry with parts, merged on delivery.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use cluster::slot_map::{SlotMap, Stamp};
use resp::Request;

use crate::backend::{Backend, Outgoing};
use crate::fanout::{Fanout, Merge, Part};
use crate::order::Admit;
use crate::pending::Entry;
use crate::router::error;
use crate::scan::parse_cursor;
use crate::session::Session;

// === impl Session (multi-node requests) ===

impl Session {
    /// Send every part of a split or broadcast request; the reply queue merges them.
    /// Parts without a slot go to the master of the same index.
    pub(crate) fn fan_out(&mut self, mut fanout: Fanout) {
        let map = self.worker.topology().current();
        let stamp = map.stamp();
        let resp3 = self.resp3();
        let backends: Vec<Option<Rc<Backend>>> = fanout
            .parts
            .iter()
            .enumerate()
            .map(|(i, part)| match part.slot {
                Some(slot) => self.worker.backend_for_slot(&map, slot, resp3),
                None => map
                    .nodes()
                    .get(i)
                    .map(|n| self.worker.backend_for_addr(&n.addr, resp3)),
            })
            .collect();
        for (part, backend) in fanout.parts.iter_mut().zip(&backends) {
            part.sent_to = backend.clone();
        }
        let stamp = crate::order::stable(stamp, &map);
        self.send_parts(fanout, backends, &map, stamp);
    }

    /// Push the request's entry, then send each part (or queue it behind earlier requests
    /// of its slot, `order.rs`); a part with no connection fails at once.
    fn send_parts(
        &mut self,
        fanout: Fanout,
        backends: Vec<Option<Rc<Backend>>>,
        map: &SlotMap,
        stamp: Option<Stamp>,
    ) {
        // Decided before the push: the entry's own parts must not count as in flight.
        let admits: Vec<Admit> = (fanout.parts.iter().zip(&backends))
            .map(|(part, b)| match b {
                Some(b) => self.admit(stamp, part.slot, b),
                None => Admit::Untracked,
            })
            .collect();
        let parts: Vec<(Bytes, Option<u16>)> = fanout
            .parts
            .iter()
            .map(|p| (p.frame.clone(), p.slot))
            .collect();
        let mut entry = Entry::ready(Bytes::new());
        entry.reply = None;
        entry.map_version = map.version();
        entry.fanout = Some(Box::new(fanout));
        let seq = self.cell.push(entry);
        let sends = backends.into_iter().zip(parts).zip(admits);
        for (frag, ((backend, (frame, slot)), admit)) in sends.enumerate() {
            let frag = frag as u32;
            let Some(b) = backend else {
                let down = Bytes::from_static(b"-CLUSTERDOWN Hash slot not served\r\n");
                self.cell.deliver_unsent(seq, frag, down);
                continue;
            };
            let out = Outgoing {
                frag,
                ..Outgoing::new(frame, self.cell.clone(), seq)
            };
            self.send_admitted(admit, out, &b, slot);
        }
    }

    /// SCAN: the cursor names the master; its page comes back with the cursor rewritten.
    pub(crate) fn scan(&mut self, req: &Request) {
        let map = self.worker.topology().current();
        let masters = map.nodes().len();
        let cursor = match parse_cursor(req.arg(1), masters) {
            Ok(c) => c,
            Err(msg) => return self.cell.push_ready(error(msg)),
        };
        let cursor_text = cursor.node_cursor.to_string();
        let mut args: Vec<&[u8]> = vec![req.arg(0), cursor_text.as_bytes()];
        args.extend((2..req.argc()).map(|i| req.arg(i)));
        let mut frame = BytesMut::new();
        resp::encode_command(&mut frame, &args);
        let backend = self
            .worker
            .backend_for_addr(&map.nodes()[cursor.node].addr, self.resp3());
        let part = Part {
            frame: frame.freeze(),
            reply: None,
            sent_to: Some(backend.clone()),
            hops: 0,
            retries: 0,
            slot: None,
        };
        let merge = Merge::Scan {
            node: cursor.node,
            masters,
        };
        self.send_parts(
            Fanout::from_parts(vec![part], merge),
            vec![Some(backend)],
            &map,
            None,
        );
    }

    /// INFO including the keyspace: the proxy's sections, then every master's keyspace summed.
    pub(crate) fn info_with_keyspace(&mut self, req: &Request) {
        let own = crate::info::render(&self.worker.shared, req);
        let masters = self.worker.topology().current().nodes().len();
        let probe = Request::from_args(&[b"INFO", b"keyspace"]);
        let mut fanout = Fanout::broadcast(&probe, masters, Merge::InfoKeyspace);
        fanout.prefix = Bytes::from(own);
        self.fan_out(fanout);
    }
}
