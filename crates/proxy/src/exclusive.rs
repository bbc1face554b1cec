//! Requests that cannot share a multiplexed connection: blocking commands (BLPOP, XREAD
//! BLOCK…), WATCH and EXEC. Each runs on the session's own dedicated connection to the node.
//!
//! ```text
//!   request needing its own connection ─▶ held until every earlier request is answered
//!        ─▶ sent on the session's dedicated connection ─▶ no further request is read
//!           until its reply arrives (Redis runs a client's commands one at a time too)
//! ```
//!
//! Holding keeps the client's order of execution, not only its order of replies: a request
//! pipelined before a BLPOP has been answered before the BLPOP is sent. A blocked client
//! therefore never stalls the shared connections of its worker. The dedicated connection is
//! kept for the session's next exclusive request to the same node, and closed when the
//! session ends: the node sees the socket close, which releases a client blocked there.

use std::rc::Rc;

use bytes::Bytes;
use resp::Request;

use crate::backend::{Backend, Outgoing};
use crate::pending::Entry;
use crate::pubsub::PubSubTarget;
use crate::session::Session;

/// A request waiting for its turn on the dedicated connection.
pub(crate) struct Held {
    /// The bytes to send: one command, or MULTI…EXEC for a transaction.
    pub frame: Bytes,
    /// Commands in `frame` before the one whose reply the client gets.
    pub skip: u32,
    /// The slot that decides the node; None for any master.
    pub slot: Option<u16>,
    /// Kept so a MOVED reply can resend it (None for a transaction).
    pub resend: Option<Bytes>,
    /// A pub/sub command: goes to the subscription connection, not the dedicated one.
    pub pubsub: Option<PubSubTarget>,
}

impl Held {
    pub(crate) fn single(req: Request, slot: Option<u16>) -> Held {
        let frame = req.raw().clone();
        Held {
            resend: Some(frame.clone()),
            frame,
            skip: 0,
            slot,
            pubsub: None,
        }
    }
}

// === impl Session (exclusive requests) ===

impl Session {
    /// Queue `held` to run alone once the requests before it are answered.
    pub(crate) fn hold(&mut self, held: Held) {
        self.held = Some(held);
        self.release_held();
    }

    /// Run the held request if nothing is in flight any more; also ends serial mode.
    pub(crate) fn release_held(&mut self) {
        if self.cell.in_flight() > 0 {
            return;
        }
        self.serial = false;
        match self.held.take() {
            Some(Held {
                frame,
                pubsub: Some(target),
                ..
            }) => self.send_pubsub(frame, target),
            Some(held) => self.run_exclusive(held),
            None => {}
        }
    }

    fn run_exclusive(&mut self, held: Held) {
        let map = self.worker.topology().current();
        let addr = match held.slot {
            Some(slot) => map.node_of(slot).map(|n| n.addr.clone()),
            None => map.nodes().first().map(|n| n.addr.clone()),
        };
        let Some(addr) = addr else {
            self.cell.push(Entry::ready(Bytes::from_static(
                b"-CLUSTERDOWN Hash slot not served\r\n",
            )));
            return;
        };
        let backend = self.dedicated_for(&addr);
        let mut entry = Entry::ready(Bytes::new());
        entry.reply = None;
        entry.frame = held.resend;
        entry.sent_to = Some(backend.clone());
        entry.map_version = map.version();
        entry.pinned = true;
        entry.slot = held.slot;
        let seq = self.cell.push(entry);
        let out = Outgoing {
            skip: held.skip,
            ..Outgoing::new(held.frame, self.cell.clone(), seq)
        };
        backend.send(out);
        self.serial = true;
    }

    /// The session's dedicated connection to `addr`, opening it (and closing one to another
    /// node) as needed.
    pub(crate) fn dedicated_for(&mut self, addr: &str) -> Rc<Backend> {
        let resp3 = self.info.protocol == 3;
        if let Some(d) = &self.dedicated {
            if &*d.addr == addr && d.resp3 == resp3 {
                return d.clone();
            }
            d.close();
        }
        let backend = self.worker.new_backend(addr, resp3);
        self.dedicated = Some(backend.clone());
        backend
    }

    /// Close the dedicated connection (session end, or a WATCH that must be forgotten).
    pub(crate) fn drop_dedicated(&mut self) {
        if let Some(d) = self.dedicated.take() {
            d.close();
        }
    }

    /// True while an exclusive request waits or runs, or a streamed upload waits for the
    /// requests before it: no further request is read.
    pub(crate) fn exclusive_busy(&self) -> bool {
        self.held.is_some() || ((self.serial || self.upload_waiting) && self.cell.in_flight() > 0)
    }
}
