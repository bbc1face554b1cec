//! Health for load balancers and Kubernetes: `/healthz` answers while the process serves
//! HTTP at all (liveness: restart me if not), `/readyz` only while the proxy can serve
//! every slot (readiness: send me clients): a topology is installed, every one of the
//! 16384 slots has a master (in front of a sharded pool: every server is configured), and
//! no such master is known to be unreachable.
//!
//! "Unreachable" is what the workers saw: every connection to the node failed or was lost
//! since its last success (`backends` state `down`). A node no worker has dialled yet
//! counts as reachable, so an idle proxy is ready; the first failed dial flips it.

use std::fmt::Write;

use crate::admin::backends;
use crate::backend::stats::NodeState;
use crate::context::Shared;

/// Liveness: the admin thread answers, so the process is alive.
pub(crate) fn live() -> (bool, String) {
    (true, "ok\n".into())
}

/// Readiness, with the reasons when not ready (one per line, for a human reading a probe).
pub(crate) fn ready(shared: &Shared) -> (bool, String) {
    let map = shared.topology.current();
    let mut why = String::new();
    // A sharded pool's map names one slot per server, and every key has a server.
    let sharded = shared.placement.covers_every_key();
    let unowned = cluster::SLOT_COUNT - map.assigned();
    if unowned > 0 && !sharded {
        let _ = writeln!(why, "{unowned} slots have no master");
    }
    let totals = backends::totals(shared);
    let owners = backends::slot_counts(&map);
    for (node, slots) in map.nodes().iter().zip(owners) {
        let down = totals
            .get(&node.addr)
            .is_some_and(|t| t.state() == NodeState::Down);
        if slots > 0 && down {
            let _ = writeln!(why, "master {} ({slots} slots) is unreachable", node.addr);
        }
    }
    match why.is_empty() {
        true => (true, format!("ready: topology version {}\n", map.version())),
        false => (false, why),
    }
}
