//! The reply queue's part in execution order (`order.rs`): the ordering state lives here,
//! next to the entries, because deliveries (from the backends) are what drain its lanes.

use std::cell::RefMut;

use bytes::Bytes;

use super::{ClientCell, Entry, Kind};
use crate::session::order::{conn_id, Admit, ConnId, Order, RouteKey, Waiting};

impl ClientCell {
    pub(crate) fn order(&self) -> RefMut<'_, Order> {
        self.order.borrow_mut()
    }

    /// A new request for `slot`, routed by `key` to `conn`. The common case (nothing tracked,
    /// routed as the previous one) is a few compares; see `order.rs`. `alone`: a multi-key
    /// request of a slot seen migrating: tracking starts if it had not, and nothing else of
    /// the slot goes until it is answered.
    pub(crate) fn admit(
        &self,
        key: Option<RouteKey>,
        slot: u16,
        conn: ConnId,
        alone: bool,
    ) -> Admit {
        let changed = self.order().route_changed(key);
        if !self.order().is_active() {
            if !changed && !alone {
                return Admit::Untracked;
            }
            // Requests in flight may sit on other connections than this route picks.
            self.start_ordering();
            if !self.order().is_active() && !alone {
                return Admit::Untracked;
            }
        }
        self.order().admit(slot, conn, alone)
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
            match &entry.kind {
                Kind::Local => {}
                Kind::Sent(s) => {
                    if let (None, Some(slot), Some(b)) = (&entry.reply, s.slot, &s.sent_to) {
                        order.track(slot, conn_id(b));
                    }
                }
                Kind::Fanout(f) => {
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

    /// A request (or part) whose slot has no owner in the map: what a node says of a slot
    /// it does not know to be served, followed like a node's (`session/redirect.rs`).
    pub(crate) fn deliver_no_route(&self, seq: u64, frag: u32) {
        let down = Bytes::from_static(crate::reply::NO_ROUTE);
        self.deliver_as(seq, frag, down, super::deliver::Arrival::NoRoute);
    }

    /// A request (or part) in flight was answered: drain its lane. True when requests
    /// waiting behind it may go now.
    pub(super) fn order_answered(&self, entry: &Entry, frag: u32) -> bool {
        let mut order = self.order();
        if !order.is_active() {
            return false;
        }
        entry.slot_of(frag).is_some_and(|s| order.answered(s))
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;
    use std::sync::Arc;
    use std::time::Duration;

    use bytes::Bytes;
    use cluster::slot_map::{NodeEntry, SlotMap, SlotRange, Stamp};
    use tokio::time::Instant;

    use super::super::{ClientCell, Conn, Entry, Resend, Sent};
    use crate::backend::{Backend, Settings};
    use crate::session::order::{conn_id, Admit, RouteKey, Waiting};

    /// A connection handle that is never used to send.
    fn backend(addr: &str) -> Rc<Backend> {
        let master = NodeEntry {
            addr: addr.into(),
            id: None,
            replicas: Vec::new(),
        };
        let map = SlotMap::from_ranges(
            1,
            &[SlotRange {
                start: 0,
                end: 16383,
                master,
            }],
        );
        let topology = crate::topology::with_map(&Default::default(), map.unwrap());
        let settings = Settings {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::ZERO,
            slow_timeout: Duration::ZERO,
            resp3: false,
            db: 0,
            no_touch: false,
            import_source: false,
            tracker: 0,
            learn_id: false,
            auth: None,
            acting: None,
            tracking: None,
            tls: None,
            node: Arc::default(),
            quantum: 1024 * 1024,
            replica: None,
            readonly: false,
        };
        crate::backend::open(addr, settings, topology)
    }

    fn key(seq: u64) -> Option<RouteKey> {
        let stamp = Stamp { map: 1, seq };
        Some(RouteKey {
            stamp,
            wire: Default::default(),
            via: 0,
        })
    }

    /// Push a request of slot 7 in flight on `to`.
    fn sent(cell: &ClientCell, to: &Rc<Backend>) -> u64 {
        cell.push(Entry::sent(Sent::new(
            Resend::Never,
            to,
            Some(7),
            Conn::Shared,
        )))
    }

    #[test]
    fn a_replica_read_waits_for_the_clients_write_of_its_slot_on_the_master() {
        let (cell, master, replica) = (ClientCell::new(), backend("m:1"), backend("r:1"));
        assert_eq!(
            cell.admit(key(0), 7, conn_id(&master), false),
            Admit::Untracked
        );
        sent(&cell, &master);
        let read = key(0).map(|k| RouteKey { via: 9, ..k });
        assert_eq!(
            cell.admit(read, 7, conn_id(&replica), false),
            Admit::Wait,
            "same map, another connection: the read is not sent past the write"
        );
        assert_eq!(
            cell.admit(read, 8, conn_id(&replica), false),
            Admit::Go,
            "another slot"
        );
    }

    #[test]
    fn a_route_change_counts_what_is_in_flight_and_replies_drain_it() {
        let (cell, x, y) = (ClientCell::new(), backend("x:1"), backend("y:1"));
        assert_eq!(cell.admit(key(0), 7, conn_id(&x), false), Admit::Untracked);
        let first = sent(&cell, &x);
        assert_eq!(
            cell.admit(key(0), 7, conn_id(&x), false),
            Admit::Untracked,
            "same route"
        );
        let second = sent(&cell, &x);
        assert_eq!(
            cell.admit(key(2), 7, conn_id(&y), false),
            Admit::Wait,
            "patched to y"
        );
        let mut unsent = Sent::new(Resend::Never, &y, Some(7), Conn::Shared);
        unsent.sent_to = None;
        let third = cell.push(Entry::sent(unsent));
        cell.wait(Waiting::fresh(
            third,
            0,
            7,
            Bytes::new(),
            Default::default(),
        ));
        cell.deliver(first, 0, Bytes::from_static(b"+OK\r\n"));
        cell.deliver(second, 0, Bytes::from_static(b"-MOVED 7 y:1\r\n"));
        let mut ready = Vec::new();
        let now = Instant::now();
        assert!(
            cell.order().wants_pass(now),
            "both answered: the third may go"
        );
        cell.order()
            .release(now, |_| Some(y.clone()), conn_id, &mut ready);
        assert_eq!(ready.len(), 1);
        assert!(cell.order().is_active(), "the third is in flight on y");
        cell.deliver(third, 0, Bytes::from_static(b"+OK\r\n"));
        assert!(!cell.order().is_active(), "drained: untracked again");
    }
}
