//! Following MOVED and ASK for a client's requests, as the cluster spec prescribes.
//!
//! MOVED: the slot has a new owner. Patch that one slot in the shared map at once (so the
//! next request goes straight there), ask the topology service for a refresh (coalesced and
//! throttled there), and resend the request to the new owner.
//! ASK: the slot is being migrated and this key is already on the target. Resend the request
//! there preceded by ASKING in the same write; the map is not touched.
//!
//! A request follows at most `max_redirects` hops; after that its client gets the server's
//! own redirect error text, unchanged. A malformed redirect is passed through unchanged too.

use bytes::Bytes;
use cluster::redirect::{parse_redirect, Host, Redirect};
use cluster::slot_map::join_host_port;

use crate::backend::Outgoing;
use crate::pending::Entry;
use crate::session::Session;
use crate::stats::WorkerStats;
use crate::topology::host_of;

/// A redirect the session decided to follow.
struct Plan {
    ask: bool,
    slot: u16,
    addr: String,
    frame: Bytes,
    map_version: u64,
}

/// Follow every redirect delivered to this session since the last turn.
pub(crate) fn follow(session: &mut Session) {
    let mut seqs = std::mem::take(&mut session.redirected);
    session.cell.take_redirected(&mut seqs);
    for &seq in &seqs {
        follow_one(session, seq);
    }
    seqs.clear();
    session.redirected = seqs;
}

fn follow_one(session: &mut Session, seq: u64) {
    let max = session.worker.shared.config.cluster.max_redirects;
    let Some(Some(plan)) = session.cell.with_entry(seq, |e| plan(e, max)) else {
        return;
    };
    let worker = session.worker.clone();
    if plan.ask {
        WorkerStats::bump(&worker.stats.redirects_ask);
    } else {
        WorkerStats::bump(&worker.stats.redirects_moved);
        let map = worker.topology().current();
        let already_known = map.node_of(plan.slot).is_some_and(|n| n.addr == plan.addr);
        if !already_known {
            map.patch(plan.slot, &plan.addr);
            worker.topology().request_refresh(plan.map_version);
        }
    }
    let backend = worker.backend_for_addr(&plan.addr);
    session
        .cell
        .with_entry(seq, |e| e.sent_to = Some(backend.clone()));
    backend.send(Outgoing {
        frame: plan.frame,
        client: session.cell.clone(),
        seq,
        asking: plan.ask,
    });
}

/// Decide whether to follow the redirect in `entry`; on yes, clear its reply and count the hop.
fn plan(entry: &mut Entry, max_redirects: u8) -> Option<Plan> {
    if entry.hops >= max_redirects {
        return None;
    }
    let reply = entry.reply.as_ref()?;
    let line = reply.get(1..reply.len().checked_sub(2)?)?;
    let (ask, slot, to) = match parse_redirect(line)? {
        Redirect::Moved { slot, to } => (false, slot, to),
        Redirect::Ask { slot, to } => (true, slot, to),
    };
    let addr = match to.host {
        Host::Name(host) => join_host_port(host, to.port),
        Host::Same => join_host_port(host_of(&entry.sent_to.as_ref()?.addr), to.port),
        Host::Unknown => return None,
    };
    let frame = entry.request.as_ref()?.raw().clone();
    entry.reply = None;
    entry.hops += 1;
    Some(Plan {
        ask,
        slot,
        addr,
        frame,
        map_version: entry.map_version,
    })
}
