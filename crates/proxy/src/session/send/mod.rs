//! The send step: a routed request leaves for its node here, as one write queued on a
//! connection, or waits for its turn (`order.rs`). Requests in parts (split, broadcast,
//! SCAN, INFO from the masters) are `parts.rs`.
//!
//! Sending a request to one node: the slot's master, any master for a keyless command, or,
//! for a command the table flags read-only, the node the client's read policy picks
//! (`worker/reads.rs`).
//!
//! The read policy is the proxy's `cluster.read_policy`, raised to `prefer-replica` by the
//! client's READONLY (`ReadPolicy::for_client`). A client holding a WATCH reads from
//! masters: its EXEC's outcome must depend on what it read there. Inside MULTI nothing
//! comes here (the transaction runs whole on one master). Read-your-writes is not promised
//! on a replica, but the client's order is kept: a read for a slot waits for the client's
//! earlier requests of that slot in flight on another connection (`order.rs`).

use std::rc::Rc;

use bytes::Bytes;
use cluster::slot_map::{SlotMap, Stamp};
use resp::Request;

pub(crate) mod parts;
pub(crate) mod release;

use crate::backend::{Backend, Outgoing, Owes};
use crate::config::ReadPolicy;
use crate::patience::Patience;
use crate::reply::NO_ROUTE;
use crate::session::client::Client;
use crate::session::order::{conn_id, Admit, RouteKey, Waiting};
use crate::session::queue::{ClientCell, Conn, Entry, Resend, Sent};
use crate::worker::ReadChoice;

/// Requests bigger than this are charged to the memory budget until answered; smaller ones
/// pay only their entry's bookkeeping (one compare per request).
const CHARGED_REQUEST: usize = 64 * 1024;

/// Send to the master of `slot` (or any master).
pub(crate) fn forward(client: &Client, req: &Request, slot: Option<u16>) {
    let wire = client.wire();
    client.worker.with_map(|map| {
        let stamp = map.stamp();
        let backend = match slot {
            Some(slot) => client.worker.backend_for_slot(map, slot, wire),
            None => client.worker.any_backend(map, wire),
        };
        let Some(backend) = backend else {
            return match slot {
                Some(slot) => no_owner(client, req, slot, map),
                None => client.reply_now(Bytes::from_static(NO_ROUTE)),
            };
        };
        send_routed(client, req, slot, (map, stamp), &backend, 0);
    })
}

/// A request whose slot has no owner in the map: a hole, as a refresh taken while a
/// failover is under way can show one (the failed master left out, its replica not yet
/// promoted in the view of the node asked). It is answered as a node's CLUSTERDOWN would
/// be: a fresh map is asked for and it is routed by slot again, paced, before its client
/// gets the error. It waits in the client's order from now, so nothing later of its slot
/// overtakes it.
fn no_owner(client: &Client, req: &Request, slot: u16, map: &SlotMap) {
    let frame = req.raw().clone();
    let mut sent = Sent::unrouted(Resend::Frame(frame.clone()), slot);
    sent.map_version = map.version();
    let seq = client.cell.push(Entry::sent(sent));
    if frame.len() > CHARGED_REQUEST {
        client.cell.charge_request(frame.len());
    }
    client.cell.start_ordering();
    client
        .cell
        .wait(Waiting::fresh(seq, 0, slot, frame, client.wire()));
    client.worker.topology().request_refresh_now();
}

/// A read-only command for `slot`: to a replica or the master, as the policy says.
/// `watching`: the client holds a WATCH, so it reads from masters.
pub(crate) fn forward_read(client: &Client, req: &Request, slot: u16, watching: bool) {
    let policy = read_policy(client, watching);
    // A tracking client in the default mode or NOLOOP reads where the node tracks its
    // reads (`tracking/own.rs`): a master.
    if policy == ReadPolicy::Master || client.info.tracker != 0 {
        return forward(client, req, Some(slot));
    }
    let map = client.worker.map();
    let stamp = map.stamp();
    let spread = client.info.id as usize;
    let (choice, generation) = client
        .worker
        .read_choice(&map, slot, policy, spread, client.wire());
    // An `Rc` (not the stats' `Arc`): no atomic reference count per read.
    let worker = client.worker.clone();
    let stats = &worker.stats;
    let backend = match choice {
        ReadChoice::Replica(backend) => backend,
        ReadChoice::Master => {
            stats.reads.master(policy);
            return forward(client, req, Some(slot));
        }
        ReadChoice::Refuse => {
            stats.reads.refused();
            return client.reply_now(no_usable_replica(slot));
        }
    };
    // Never 0 (the master's): the view generation and the policy, as `RouteKey::via`.
    let via = (generation << 3) | (policy.index() as u64 + 1);
    match send_routed(client, req, Some(slot), (&map, stamp), &backend, via) {
        true => {
            stats.reads.replica(policy);
            backend.node.replica_read();
        }
        // It waits for the client's earlier requests of its slot, then goes to the master.
        false => stats.reads.master(policy),
    }
}

/// The read policy of this client now.
fn read_policy(client: &Client, watching: bool) -> ReadPolicy {
    if watching {
        return ReadPolicy::Master;
    }
    let proxy = client.worker.live().config.cluster.read_policy;
    proxy.for_client(client.info.readonly)
}

/// Queue the request's entry and send it to `backend`; false when it must wait for its
/// turn instead, and then goes to the slot's master (`release.rs`).
fn send_routed(
    client: &Client,
    req: &Request,
    slot: Option<u16>,
    (map, stamp): (&SlotMap, Stamp),
    backend: &Rc<Backend>,
    via: u64,
) -> bool {
    let stable = crate::session::order::stable(stamp, map);
    let admit = match slot {
        Some(slot) if client.worker.is_migrating(slot, map) && multi_key(req) => {
            admit(&client.cell, stable, Some(slot), backend, via, true)
        }
        _ => admit(&client.cell, stable, slot, backend, via, false),
    };
    let frame = req.raw().clone();
    let mut sent = Sent::new(Resend::Frame(frame.clone()), backend, slot, Conn::Shared);
    sent.map_version = map.version();
    let seq = client.cell.push(Entry::sent(sent));
    if frame.len() > CHARGED_REQUEST {
        // The hostile fuzzer's PUBLISH of a 10 MiB channel: 3 GiB queued for a node
        // in 6 s, counted nowhere.
        client.cell.charge_request(frame.len());
    }
    let out = Outgoing::new(frame, client.cell.clone(), seq);
    let patience = Patience::of_request(req);
    send_admitted(client, admit, out, backend, slot, patience);
    admit != Admit::Wait
}

/// Send a new request (or part) as `admit` decided: now, or once its turn comes.
pub(crate) fn send_admitted(
    client: &Client,
    admit: Admit,
    out: Outgoing,
    backend: &Rc<Backend>,
    slot: Option<u16>,
    patience: Patience,
) {
    match (admit, slot, out.owes) {
        // Released later through `Backend::send`, which reads its patience again.
        (Admit::Wait, Some(slot), Owes::Entry { seq, frag }) => {
            let w = Waiting {
                skip: out.skip,
                ..Waiting::fresh(seq, frag, slot, out.frame, backend.wire())
            };
            client.cell.wait(w);
        }
        _ => backend.send_with(out, patience),
    }
}

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

/// Whether `req` names more than one key (asked only for a slot seen migrating).
fn multi_key(req: &Request) -> bool {
    let Some(spec) = cluster::lookup(req.arg(0)) else {
        return false;
    };
    let spec = spec.resolve(req.argc(), |i| req.arg(i));
    spec.key_positions(req.argc(), |i| req.arg(i))
        .is_ok_and(|keys| keys.count() > 1)
}

/// `replica` policy, and no replica of the slot's master may serve reads now.
fn no_usable_replica(slot: u16) -> Bytes {
    Bytes::from(format!(
        "-CLUSTERDOWN No usable replica for hash slot {slot} (read_policy replica)\r\n"
    ))
}
