//! Requests that never reached their node, held for a failover.
//!
//! When a master dies, the proxy notices within a refresh or two, but Redis needs its
//! `cluster-node-timeout` and an election before a replica takes over. A request for one of
//! that master's slots that was never written to it (the node is down, or cannot be
//! dialled) did not run anywhere, so it can wait for the new master instead of failing:
//! the client sees latency, not errors.
//!
//! ```text
//!   backend: "not sent" ─▶ held (since = now) ─▶ routed by slot again after 10..100 ms
//!        ├─ the map names a live master ─▶ sent; its reply ends the hold (released)
//!        └─ `failover_hold_ms` passed ─▶ the client gets the "unreachable" error (expired)
//! ```
//!
//! A request that was written before the node died is never held: its outcome is unknown,
//! and it fails with "may or may not have run". Except on a replica connection, which carries
//! only read-only commands: running one again on the master changes nothing, so what a dead
//! replica owed comes here too and goes to the master (`backend/replies.rs`). Nor is one on the session's own connection
//! (WATCH, a blocking command, EXEC): it relies on that connection, so it fails at once.
//! A held request keeps its place in its client's order (`order.rs`): later requests for
//! its slot wait behind it. Memory: it is an entry of its client's reply queue, bounded
//! like every request in flight.

use std::time::Duration;

use topology::Backoff;

use super::plan::{Hop, Kind, Plan};
use crate::context::WorkerStats;
use crate::session::failover_hold::Hold;

/// Pace of a held request's attempts: a new master is taken up within 100 ms of the map
/// naming it, and a dead one costs nothing to try (it fails without a packet).
const HOLD_PACE: Backoff = Backoff {
    base: Duration::from_millis(10),
    cap: Duration::from_millis(100),
};

/// If the reply in `hop` is "not sent": the plan to try again, or None when the hold is
/// over (its client then gets that error).
pub(super) fn plan_hold(
    hop: &mut Hop<'_>,
    map_version: u64,
    limit: Duration,
    stats: &WorkerStats,
) -> Option<Option<Plan>> {
    if !std::mem::take(&mut hop.hold.pending) {
        return None;
    }
    let expired = hop.hold.since.is_some_and(|since| since.elapsed() >= limit);
    if hop.own || expired {
        *hop.hold = Hold::default();
        WorkerStats::bump(&stats.failover_expired);
        return Some(None);
    }
    let (Some(frame), Some(to)) = (hop.frame.clone(), hop.sent_to.as_ref()) else {
        return Some(None);
    };
    let delay = HOLD_PACE.delay(u32::from(*hop.retries));
    *hop.retries = hop.retries.saturating_add(1);
    *hop.reply = None;
    Some(Some(Plan {
        kind: Kind::Held {
            delay,
            fallback: to.addr.to_string(),
        },
        slot: None,
        frame,
        map_version,
        key_slot: None,
        wire: Some(to.wire()),
        skip: 0,
        pace: None,
    }))
}
