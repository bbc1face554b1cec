//! The reply queue's part in execution order (`order.rs`): the ordering state lives here,
//! next to the entries, because deliveries (from the backends) are what drain its lanes.

use std::cell::RefMut;

use bytes::Bytes;

use super::{ClientCell, Entry};
use crate::order::{conn_id, Admit, ConnId, Order, RouteKey, Waiting};

impl ClientCell {
    pub(crate) fn order(&self) -> RefMut<'_, Order> {
        self.order.borrow_mut()
    }

    /// A new request for `slot`, routed by `key` to `conn`. The common case (nothing tracked,
    /// routed as the previous one) is a few compares; see `order.rs`.
    pub(crate) fn admit(&self, key: Option<RouteKey>, slot: u16, conn: ConnId) -> Admit {
        let changed = self.order().route_changed(key);
        if !self.order().is_active() {
            if !changed {
                return Admit::Untracked;
            }
            // Requests in flight may sit on other connections than this route picks.
            self.start_ordering();
            if !self.order().is_active() {
                return Admit::Untracked;
            }
        }
        self.order().admit(slot, conn)
    }

    /// Start tracking, if not yet, with the requests (and parts) in flight now: those with
    /// a slot, no reply yet, and a connection.
    pub(crate) fn start_ordering(&self) {
        let q = self.queue.borrow();
        let mut order = self.order();
        if order.is_active() {
            return;
        }
        for entry in &q.entries {
            match &entry.fanout {
                None => {
                    if let (None, Some(slot), Some(b)) = (&entry.reply, entry.slot, &entry.sent_to)
                    {
                        order.track(slot, conn_id(b));
                    }
                }
                Some(f) => {
                    for p in &f.parts {
                        if let (None, Some(slot), Some(b)) = (&p.reply, p.slot, &p.sent_to) {
                            order.track(slot, conn_id(b));
                        }
                    }
                }
            }
        }
        order.settle();
    }

    /// Queue a request until the ordering rule lets it go (tracking has started).
    pub(crate) fn wait(&self, w: Waiting) {
        self.order().wait(w);
    }

    /// An answer for a request that was never sent (no route when its turn came).
    pub(crate) fn deliver_unsent(&self, seq: u64, frag: u32, reply: Bytes) {
        self.deliver_as(seq, frag, reply, false);
    }

    /// A request (or part) in flight was answered: drain its lane. True when requests
    /// waiting behind it may go now.
    pub(super) fn order_answered(&self, entry: &Entry, frag: u32) -> bool {
        let mut order = self.order();
        if !order.is_active() {
            return false;
        }
        let slot = match &entry.fanout {
            None => entry.slot,
            Some(f) => f.parts.get(frag as usize).and_then(|p| p.slot),
        };
        slot.is_some_and(|s| order.answered(s))
    }
}
