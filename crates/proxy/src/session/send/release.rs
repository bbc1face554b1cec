//! The send step's side of the ordering rule (`order.rs`): admitting new requests, and
//! releasing waiting ones (resends and requests held for their turn) when the rule allows.

use std::rc::Rc;
use std::task::Context;

use bytes::Bytes;
use cluster::slot_map::Stamp;
use tokio::time::Instant;

use crate::backend::{Backend, Outgoing, Owes};
use crate::session::client::Client;
use crate::session::order::{conn_id, Admit, RouteKey, Target, Waiting};
use crate::session::queue::{ClientCell, Kind};

/// Whether a new request for `slot`, routed to `backend` by the map state `stamp`
/// (`super::stable`; None when a patch raced the routing) and `via` (`RouteKey::via`),
/// may be sent now. `alone`: a multi-key request of a slot seen migrating (`order.rs`),
/// after which nothing else of the slot goes until it is answered.
pub(crate) fn admit(
    cell: &ClientCell,
    stamp: Option<Stamp>,
    slot: Option<u16>,
    backend: &Rc<Backend>,
    via: u64,
    alone: bool,
) -> Admit {
    let Some(slot) = slot else {
        return Admit::Untracked;
    };
    let key = stamp.map(|stamp| RouteKey {
        stamp,
        wire: backend.wire(),
        via,
    });
    cell.admit(key, slot, conn_id(backend), alone)
}

/// Send every waiting request the rule lets go, in sequence order, and keep the retry
/// timer armed for the next delay. Cheap when nothing is tracked.
pub(crate) fn release_waiting(client: &mut Client, cx: &mut Context<'_>) {
    let cell = client.cell.clone();
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
            .release(now, |w| resolve(client, w), conn_id, &mut ready);
        for (w, to) in ready {
            send_released(client, w, to);
        }
    }
}

/// The connection a released request goes to, chosen when it goes (the map may have
/// changed while it waited).
fn resolve(client: &mut Client, w: &Waiting) -> Option<Rc<Backend>> {
    match &w.target {
        Target::Node(addr) if w.pinned => Some(client.dedicated_for(addr)),
        Target::Node(addr) => Some(client.worker.backend_for_addr(addr, w.wire)),
        Target::Owner { fallback } if w.pinned => {
            // A blocking command stays on the session's own connection, to the new owner.
            let map = client.worker.topology().current();
            let owner = w.route.and_then(|slot| map.node_of(slot));
            let addr = owner
                .map(|n| n.addr.to_string())
                .or(fallback.as_deref().map(str::to_string))?;
            Some(client.dedicated_for(&addr))
        }
        Target::Owner { fallback } => {
            let map = client.worker.topology().current();
            let owner = w
                .route
                .and_then(|slot| client.worker.backend_for_slot(&map, slot, w.wire));
            owner.or_else(|| {
                let addr = fallback.as_ref()?;
                Some(client.worker.backend_for_addr(addr, w.wire))
            })
        }
    }
}

fn send_released(client: &Client, w: Waiting, to: Option<Rc<Backend>>) {
    let Some(backend) = to else {
        let down = Bytes::from_static(b"-CLUSTERDOWN Hash slot not served\r\n");
        return client.cell.deliver_unsent(w.seq, w.frag, down);
    };
    // Routed by the map of now: a MOVED for it is news about that map, not an older one.
    let routed = matches!(w.target, Target::Owner { .. });
    let version = routed.then(|| client.worker.topology().current().version());
    record_sent_to(client, w.seq, w.frag, &backend, version);
    backend.send(Outgoing {
        frame: w.frame,
        client: client.cell.clone(),
        owes: Owes::Entry {
            seq: w.seq,
            frag: w.frag,
        },
        asking: w.asking,
        skip: w.skip,
        more: false,
    });
}

/// Remember where the request (or part) went, so a further redirect can tell its origin,
/// and the map version it was routed by, if routed again.
fn record_sent_to(
    client: &Client,
    seq: u64,
    frag: u32,
    backend: &Rc<Backend>,
    version: Option<u64>,
) {
    client.cell.with_entry(seq, |e| match &mut e.kind {
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
