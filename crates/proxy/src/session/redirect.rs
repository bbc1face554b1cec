//! Following MOVED and ASK for a client's requests, as the cluster spec prescribes.
//!
//! MOVED: the slot has a new owner. Patch that one slot in the shared map at once (so the
//! next request goes straight there), ask the topology service for a refresh (coalesced and
//! throttled there), and resend the request to the new owner.
//! ASK: the slot is being migrated and this key is already on the target. Resend the request
//! there preceded by ASKING in the same write; the map is not touched.
//!
//! TRYAGAIN: a multi-key command met a half-migrated slot and was refused before it ran, so
//! resending is always safe: the same node again after a jittered, doubling delay.
//! CLUSTERDOWN, MASTERDOWN, READONLY, LOADING, and a blocked command's UNBLOCKED when its
//! master was demoted: not run either; resent after the same delay to the slot's owner in
//! the map of that moment (a failover may have changed it).
//!
//! Every resend goes through the client's ordered queue (`order.rs`): it leaves only when
//! no earlier request of the client for its slot waits or is in flight elsewhere, and the
//! delays wait on the session's one timer, so nothing is sent after the client left.
//!
//! A request follows `max_redirects` hops: two at once, each later one after a jittered,
//! doubling delay and a refresh request, so nodes that bounce it between them have time to
//! agree (topology.md R13). Past that budget each hop counts as a retry (below), and when
//! those are spent too, its client gets the server's own redirect error text, unchanged. A
//! malformed redirect is passed through unchanged too.
//!
//! A transaction (`MULTI, cmd…, EXEC` in one write) refused by its node before anything ran
//! comes back as the refusal itself (`backend/refusal.rs`) and is resent whole, the same way;
//! after WATCH it cannot be (the WATCH is on the node that refused): EXEC answers nil.

use std::rc::Rc;
use std::task::Context;
use std::time::Duration;

use bytes::Bytes;
use cluster::redirect::{parse_redirect, Redirect};
use tokio::time::Instant;
use topology::Backoff;

use crate::backend::Backend;
use crate::context::WorkerStats;
use crate::session::fanout::Part;
use crate::session::order::{Target, Waiting};
use crate::session::queue::{Conn, Entry, Kind as EntryKind, Resend, Sent};
use crate::session::Session;
use crate::worker::Worker;

mod hold;
mod plan;
mod transaction;

use plan::{Hop, Kind, Plan};

/// Hops followed at once; later ones are paced like retries (topology.md R13: nodes that
/// bounce a request between them disagree until gossip or a failover settles, which takes
/// longer than a few immediate round trips).
const PACED_AFTER: u8 = 2;

/// Retries per request for "not executed" errors, paced by `Backoff::DEFAULT` (10 ms
/// doubling to 1 s, jittered): 1.6 to 3.3 s in all, enough to ride over a failover's
/// CLUSTERDOWN window on loopback.
const MAX_RETRIES: u8 = 9;

/// What deciding needs besides the request: the session's limits and counters.
struct Rules<'a> {
    max_redirects: u8,
    hold_limit: Duration,
    stats: &'a WorkerStats,
    /// The map in force: where a redirect to `?` points (`SlotMap::redirect_addr`).
    map: &'a cluster::slot_map::SlotMap,
}

/// Follow every redirect delivered to this session since the last turn: each becomes a
/// waiting request, released in the client's order (`order.rs`), with the retry timer.
///
/// A released request can be turned back at once, inside this call (its node is down:
/// `hold.rs`), and its answer must not be taken for its reply: so the redirects that came
/// meanwhile are followed too. Each such pass delays what it follows, so one more pass
/// normally ends it; the bound is a safety net.
pub(crate) fn follow(session: &mut Session, cx: &mut Context<'_>) {
    for _ in 0..8 {
        let mut pending = std::mem::take(&mut session.client.redirected);
        session.client.cell.take_redirected(&mut pending);
        if !pending.is_empty() {
            // Before any reply is cleared below: what has none now is what is in flight.
            session.client.cell.start_ordering();
        }
        for &(seq, frag) in &pending {
            follow_one(session, seq, frag);
        }
        pending.clear();
        session.client.redirected = pending;
        crate::session::send::release::release_waiting(&mut session.client, cx);
        if !session.client.cell.has_redirected() {
            return;
        }
    }
}

fn follow_one(session: &mut Session, seq: u64, frag: u32) {
    let (max_redirects, hold_ms) = session.client.worker.redirect_limits();
    let map = session.client.worker.map();
    let rules = Rules {
        max_redirects,
        hold_limit: Duration::from_millis(hold_ms),
        stats: &session.client.worker.stats,
        map: &map,
    };
    let Some(Some(plan)) = session
        .client
        .cell
        .with_entry(seq, |e| plan_entry(e, frag, &rules))
    else {
        return;
    };
    count_and_learn(&session.client.worker, &plan);
    if matches!(plan.kind, Kind::Ask { .. }) {
        // The request runs on a node the map does not give its slot: a later WAIT cannot
        // tell which master to ask, so it asks every one (review S6).
        session.client.written.note_unknown();
    }
    let pinned = session
        .client
        .cell
        .with_entry(
            seq,
            |e| matches!(&e.kind, EntryKind::Sent(s) if s.conn == Conn::Own),
        )
        .unwrap_or(false);
    let wire = plan.wire.unwrap_or(session.client.wire());
    let asking = matches!(plan.kind, Kind::Ask { .. });
    let (target, delay) = match plan.kind {
        Kind::Moved { to, .. } | Kind::Ask { to, .. } => (Target::Node(to.into()), plan.pace),
        Kind::Second { to } => (Target::Node(to.into()), None),
        Kind::Retry { delay, to } => (Target::Node(to.into()), Some(delay)),
        Kind::Held { delay, fallback } => {
            let fallback = Some(fallback.into());
            (Target::Owner { fallback }, Some(delay))
        }
        Kind::Reroute { delay, fallback } => {
            let fallback = fallback.map(Into::into);
            (Target::Owner { fallback }, Some(delay))
        }
    };
    session.client.cell.wait(Waiting {
        seq,
        frag,
        slot: plan.key_slot,
        route: plan.slot,
        not_before: delay.map(|d| Instant::now() + d),
        asking,
        target,
        frame: plan.frame,
        pinned,
        skip: plan.skip,
        wire,
    });
}

/// Count the hop and, for MOVED, patch the shared map now so the next request for this
/// slot goes straight to the new owner; a Reroute wants a fresh map before it fires.
fn count_and_learn(worker: &Worker, plan: &Plan) {
    if plan.pace.is_some() {
        worker.topology().request_refresh_now();
    }
    match &plan.kind {
        Kind::Second { .. } => {}
        // Throttled by the topology service; the dead master's replacement is what it waits for.
        Kind::Held { .. } => worker.topology().request_refresh_now(),
        Kind::Ask { slot, .. } => worker.note_ask(*slot),
        Kind::Retry { .. } => {
            WorkerStats::bump(&worker.stats.tryagain_retries);
            if let Some(slot) = plan.key_slot {
                worker.note_migrating(slot);
            }
        }
        Kind::Reroute { .. } => {
            WorkerStats::bump(&worker.stats.cluster_error_retries);
            worker.topology().request_refresh_now();
        }
        Kind::Moved { slot, to } => {
            WorkerStats::bump(&worker.stats.redirects_moved);
            let map = worker.map();
            let already_known = map.node_of(*slot).is_some_and(|n| n.addr == *to);
            drop(map);
            if !already_known {
                worker.topology().learn_moved(*slot, to, plan.map_version);
            }
        }
    }
}

/// Decide for a whole request or for one of its parts. A part whose redirect is not followed
/// is complete with that error as its reply (and may complete the whole request).
fn plan_entry(entry: &mut Entry, frag: u32, rules: &Rules<'_>) -> Option<Plan> {
    let fanout = match &mut entry.kind {
        EntryKind::Local => return None,
        EntryKind::Sent(sent) => return plan_sent(&mut entry.reply, sent, rules),
        EntryKind::Fanout(fanout) => fanout,
    };
    let map_version = fanout.map_version;
    let part = fanout.parts.get_mut(frag as usize)?;
    if part.second && part.reply.is_none() {
        part.second = false;
        return second_round(part, map_version);
    }
    let frame = Some(part.frame.clone());
    let hop = Hop {
        reply: &mut part.reply,
        frame,
        sent_to: &part.sent_to,
        hops: &mut part.hops,
        retries: &mut part.retries,
        hold: &mut part.hold,
        own: false,
    };
    if let Some(mut plan) = plan(hop, rules, map_version) {
        plan.slot = plan.slot.or(part.slot);
        plan.key_slot = part.slot;
        plan.skip = part.skip();
        return Some(plan);
    }
    let final_reply = part.reply.take()?;
    entry.reply = fanout.complete(frag as usize, final_reply);
    None
}

/// A second-round part, sent as it was routed (`Fanout::twice`).
fn second_round(part: &Part, map_version: u64) -> Option<Plan> {
    let to = part.sent_to.as_ref()?;
    Some(Plan {
        kind: Kind::Second {
            to: to.addr.to_string(),
        },
        slot: None,
        frame: part.frame.clone(),
        map_version,
        key_slot: None,
        wire: Some(to.wire()),
        skip: 0,
        pace: None,
    })
}

/// Decide for a request sent whole.
fn plan_sent(reply: &mut Option<Bytes>, sent: &mut Sent, rules: &Rules<'_>) -> Option<Plan> {
    let skip = match sent.resend {
        Resend::Transaction { watched: true, .. } => return transaction::settle(reply, sent, true),
        Resend::Transaction { skip, .. } => skip,
        _ => 0,
    };
    let hop = Hop {
        reply,
        frame: sent.resend_frame(),
        sent_to: &sent.sent_to,
        hops: &mut sent.hops,
        retries: &mut sent.retries,
        hold: &mut sent.hold,
        own: sent.conn == Conn::Own,
    };
    let Some(mut plan) = plan(hop, rules, sent.map_version) else {
        return transaction::settle(reply, sent, false);
    };
    plan.slot = plan.slot.or(sent.slot);
    plan.key_slot = sent.slot;
    plan.skip = skip;
    Some(plan)
}

/// Decide whether to follow the reply in `hop`; on yes, clear it and count the hop or retry.
fn plan(mut hop: Hop<'_>, rules: &Rules<'_>, map_version: u64) -> Option<Plan> {
    if let Some(held) = hold::plan_hold(&mut hop, map_version, rules.hold_limit, rules.stats) {
        return held;
    }
    let max_redirects = rules.max_redirects;
    let reply = hop.reply.as_ref()?;
    if reply.starts_with(b"-TRYAGAIN") {
        return plan_retry(hop, map_version, false);
    }
    if !reply.starts_with(b"-MOVED ") && !reply.starts_with(b"-ASK ") {
        // Not executed: routed again by slot after a fresh map, paced (a request on the
        // session's own connection stays on one, `send/release.rs`).
        return plan_retry(hop, map_version, true);
    }
    if let Some(node) = hop.sent_to.as_ref().map(|b| &b.node) {
        node.redirected();
    }
    // Past the hop budget the nodes still disagree (a failover in the middle of a migration
    // leaves one answering ASK and the other MOVED back, for seconds): each further hop
    // costs a retry and waits as long, 2 to 3 s in all. Then the client gets the node's own
    // redirect (topology.md T6, R13): never a hot loop.
    let over = *hop.hops >= max_redirects;
    if over && *hop.retries >= MAX_RETRIES {
        return None;
    }
    let Some(kind) = redirect_target(reply, hop.sent_to, rules.map) else {
        // `?` (`cluster-preferred-endpoint-type hostname` and the target has none) naming
        // a port no node of the map, or several, listens on: routed again by slot once a
        // fresh map is in, which has the target's IP from CLUSTER SLOTS' metadata
        // (`slot_map.rs`); paced and bounded like any retry.
        return plan_retry(hop, map_version, true);
    };
    let frame = hop.frame?;
    if let Kind::Moved { to, .. } | Kind::Ask { to, .. } = &kind {
        tracing::debug!(from = ?hop.sent_to.as_ref().map(|b| b.addr.clone()), %to,
            hops = *hop.hops, retries = *hop.retries, "following a redirect");
    }
    *hop.reply = None;
    let pace = if over {
        *hop.retries += 1;
        Some(Backoff::DEFAULT.delay(u32::from(*hop.retries - 1)))
    } else {
        *hop.hops += 1;
        let paced = hop.hops.saturating_sub(PACED_AFTER + 1);
        (*hop.hops > PACED_AFTER).then(|| Backoff::DEFAULT.delay(u32::from(paced)))
    };
    let slot = match kind {
        Kind::Moved { slot, .. } => Some(slot),
        _ => None,
    };
    Some(Plan {
        kind,
        slot,
        frame,
        map_version,
        key_slot: None,
        wire: hop.sent_to.as_ref().map(|b| b.wire()),
        skip: 0,
        pace,
    })
}

/// Parse a `-MOVED`/`-ASK` reply line into its kind, with its target address resolved
/// against `sent_to`, the node that sent it, and `map` (`SlotMap::redirect_addr`).
fn redirect_target(
    reply: &[u8],
    sent_to: &Option<Rc<Backend>>,
    map: &cluster::slot_map::SlotMap,
) -> Option<Kind> {
    let line = reply.get(1..reply.len().checked_sub(2)?)?;
    let from = &sent_to.as_ref()?.addr;
    Some(match parse_redirect(line)? {
        Redirect::Moved { slot, to } => Kind::Moved {
            slot,
            to: map.redirect_addr(to, from)?,
        },
        Redirect::Ask { slot, to } => Kind::Ask {
            slot,
            to: map.redirect_addr(to, from)?,
        },
    })
}

/// Retry after a jittered, doubling delay: on the same node (`reroute` false) or by slot.
/// A request that never had a node (its slot had no owner) can only be routed again.
fn plan_retry(hop: Hop<'_>, map_version: u64, reroute: bool) -> Option<Plan> {
    if *hop.retries >= MAX_RETRIES {
        return None;
    }
    let node = hop.sent_to.as_ref().map(|b| b.addr.to_string());
    let delay = Backoff::DEFAULT.delay(u32::from(*hop.retries));
    let frame = hop.frame?;
    *hop.reply = None;
    *hop.retries += 1;
    let kind = match node {
        Some(to) if !reroute => Kind::Retry { delay, to },
        fallback => Kind::Reroute { delay, fallback },
    };
    Some(Plan {
        kind,
        slot: None,
        frame,
        map_version,
        key_slot: None,
        wire: hop.sent_to.as_ref().map(|b| b.wire()),
        skip: 0,
        pace: None,
    })
}
