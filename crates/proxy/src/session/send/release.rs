//! The send step's side of the ordering rule (`order.rs`) for requests that waited:
//! releasing them (resends and requests held for their turn) when the rule allows.

use std::rc::Rc;
use std::task::Context;

use tokio::time::Instant;

use crate::backend::{Backend, Outgoing, Owes};
use crate::session::client::Client;
use crate::session::order::{conn_id, Target, Waiting};
use crate::session::queue::Kind;

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
            let map = client.worker.map();
            let owner = w.route.and_then(|slot| map.node_of(slot));
            let addr = owner
                .map(|n| n.addr.to_string())
                .or(fallback.as_deref().map(str::to_string))?;
            Some(client.dedicated_for(&addr))
        }
        Target::Owner { fallback } => {
            let map = client.worker.map();
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
        return client.cell.deliver_no_route(w.seq, w.frag);
    };
    // Routed by the map of now: a MOVED for it is news about that map, not an older one.
    let routed = matches!(w.target, Target::Owner { .. });
    let version = routed.then(|| client.worker.map().version());
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
        queued: false,
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
