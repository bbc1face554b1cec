//! The session's side of the ordering rule (`order.rs`): admitting new requests, and
//! releasing waiting ones (resends and requests held for their turn) when the rule allows.

use std::rc::Rc;
use std::task::Context;

use bytes::Bytes;
use cluster::slot_map::Stamp;
use tokio::time::Instant;

use super::{conn_id, Admit, RouteKey, Target, Waiting};
use crate::backend::{Backend, Outgoing, Owes};
use crate::patience::Patience;
use crate::session::queue::Kind;
use crate::session::Session;

// === impl Session (execution order) ===

impl Session {
    /// Whether a new request for `slot`, routed to `backend` by the map state `stamp`
    /// (`super::stable`; None when a patch raced the routing) and `via` (`RouteKey::via`),
    /// may be sent now.
    pub(crate) fn admit(
        &self,
        stamp: Option<Stamp>,
        slot: Option<u16>,
        backend: &Rc<Backend>,
        via: u64,
    ) -> Admit {
        let Some(slot) = slot else {
            return Admit::Untracked;
        };
        let key = stamp.map(|stamp| RouteKey {
            stamp,
            wire: backend.wire(),
            via,
        });
        self.client.cell.admit(key, slot, conn_id(backend))
    }

    /// `admit` for a request that must go alone (`order.rs`: a multi-key request of a slot
    /// seen migrating).
    pub(crate) fn admit_alone(
        &self,
        stamp: Option<Stamp>,
        slot: u16,
        backend: &Rc<Backend>,
        via: u64,
    ) -> Admit {
        let key = stamp.map(|stamp| RouteKey {
            stamp,
            wire: backend.wire(),
            via,
        });
        self.client.cell.admit_alone(key, slot, conn_id(backend))
    }

    /// Send a new request (or part) as `admit` decided: now, or once its turn comes.
    pub(crate) fn send_admitted(
        &self,
        admit: Admit,
        out: Outgoing,
        backend: &Rc<Backend>,
        slot: Option<u16>,
        patience: Patience,
    ) {
        match (admit, slot, out.owes) {
            // Released later through `Backend::send`, which reads its patience again.
            (Admit::Wait, Some(slot), Owes::Entry { seq, frag }) => {
                let w = Waiting::fresh(seq, frag, slot, out.frame, backend.wire());
                self.client.cell.wait(w);
            }
            _ => backend.send_with(out, patience),
        }
    }

    /// Send every waiting request the rule lets go, in sequence order, and keep the retry
    /// timer armed for the next delay. Cheap when nothing is tracked.
    pub(crate) fn release_waiting(&mut self, cx: &mut Context<'_>) {
        let cell = self.client.cell.clone();
        loop {
            if !cell.order().is_active() {
                return;
            }
            let now = Instant::now();
            if !cell.order().wants_pass(now) {
                if !cell.order().poll_timer(cx) {
                    return;
                }
                continue;
            }
            let mut ready = Vec::new();
            cell.order()
                .release(now, |w| self.resolve(w), conn_id, &mut ready);
            for (w, to) in ready {
                self.send_released(w, to);
            }
        }
    }

    /// The connection a released request goes to, chosen when it goes (the map may have
    /// changed while it waited).
    fn resolve(&mut self, w: &Waiting) -> Option<Rc<Backend>> {
        match &w.target {
            Target::Node(addr) if w.pinned => Some(self.client.dedicated_for(addr)),
            Target::Node(addr) => Some(self.client.worker.backend_for_addr(addr, w.wire)),
            Target::Owner { fallback } if w.pinned => {
                // A blocking command stays on the session's own connection, to the new owner.
                let map = self.client.worker.topology().current();
                let owner = w.route.and_then(|slot| map.node_of(slot));
                let addr = owner
                    .map(|n| n.addr.to_string())
                    .or(fallback.as_deref().map(str::to_string))?;
                Some(self.client.dedicated_for(&addr))
            }
            Target::Owner { fallback } => {
                let map = self.client.worker.topology().current();
                let owner = w
                    .route
                    .and_then(|slot| self.client.worker.backend_for_slot(&map, slot, w.wire));
                owner.or_else(|| {
                    let addr = fallback.as_ref()?;
                    Some(self.client.worker.backend_for_addr(addr, w.wire))
                })
            }
        }
    }

    fn send_released(&self, w: Waiting, to: Option<Rc<Backend>>) {
        let Some(backend) = to else {
            let down = Bytes::from_static(b"-CLUSTERDOWN Hash slot not served\r\n");
            return self.client.cell.deliver_unsent(w.seq, w.frag, down);
        };
        // Routed by the map of now: a MOVED for it is news about that map, not an older one.
        let routed = matches!(w.target, Target::Owner { .. });
        let version = routed.then(|| self.client.worker.topology().current().version());
        record_sent_to(self, w.seq, w.frag, &backend, version);
        backend.send(Outgoing {
            frame: w.frame,
            client: self.client.cell.clone(),
            owes: Owes::Entry {
                seq: w.seq,
                frag: w.frag,
            },
            asking: w.asking,
            skip: w.skip,
            more: false,
        });
    }
}

/// Remember where the request (or part) went, so a further redirect can tell its origin,
/// and the map version it was routed by, if routed again.
fn record_sent_to(
    session: &Session,
    seq: u64,
    frag: u32,
    backend: &Rc<Backend>,
    version: Option<u64>,
) {
    session.client.cell.with_entry(seq, |e| match &mut e.kind {
        Kind::Local => {}
        Kind::Sent(s) => {
            s.sent_to = Some(backend.clone());
            s.map_version = version.unwrap_or(s.map_version);
        }
        Kind::Fanout(f) => {
            if let Some(part) = f.parts.get_mut(frag as usize) {
                part.sent_to = Some(backend.clone());
            }
        }
    });
}
