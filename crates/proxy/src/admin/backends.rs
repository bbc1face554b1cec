//! The per-node report: INFO `backends` (one `nodeN:` line per master, in the style of
//! Redis's `slaveN:` lines) and the `slotgate_backend_*{node}` metrics. The nodes are the
//! masters of the installed slot map; their figures are the per-worker counters of
//! `backend_stats`, summed. Cost: O(workers × nodes + 16384) per read.

use std::collections::HashMap;
use std::fmt::Write;

use cluster::slot_map::SlotMap;

use crate::admin::exposition::{sample, Described};
use crate::backend::stats::{now_ms, NodeState, NodeTotals};
use crate::context::Shared;

/// Each master of the current map with its slot count and summed counters.
fn masters(shared: &Shared) -> Vec<(String, usize, NodeTotals)> {
    let map = shared.topology.current();
    let slots = slot_counts(&map);
    let all = totals(shared);
    map.nodes()
        .iter()
        .zip(slots)
        .map(|(node, n)| {
            let t = all.get(&node.addr).copied().unwrap_or_default();
            (node.addr.clone(), n, t)
        })
        .collect()
}

/// Slots per node of `map`, in `map.nodes()` order.
pub(crate) fn slot_counts(map: &SlotMap) -> Vec<usize> {
    let mut counts = vec![0; map.nodes().len()];
    for slot in 0..cluster::SLOT_COUNT as u16 {
        if let Some(c) = map
            .node_index(slot)
            .and_then(|i| counts.get_mut(usize::from(i)))
        {
            *c += 1;
        }
    }
    counts
}

/// INFO `backends`: the masters (the replicas' lines follow, `replicas.rs`).
pub(crate) fn info(shared: &Shared, out: &mut String) {
    let masters = masters(shared);
    let down = masters
        .iter()
        .filter(|(_, _, t)| t.state() == NodeState::Down)
        .count();
    let _ = write!(
        out,
        "backend_nodes:{}\r\nbackend_nodes_down:{down}\r\n",
        masters.len()
    );
    let now = now_ms();
    for (i, (addr, slots, t)) in masters.iter().enumerate() {
        let age = t.last_error_age_s(now).map_or(-1, |s| s as i64);
        let _ = write!(
            out,
            "node{i}:addr={addr},role=master,slots={slots},state={},inflight={},connections={},connect_failures={},conn_lost={},redirects={},last_error_s={age}\r\n",
            t.state().name(),
            t.inflight,
            t.open,
            t.connect_failures,
            t.conn_lost,
            t.redirects,
        );
    }
}

/// The `slotgate_backend_*` samples, one per master and metric.
pub(crate) fn metrics(shared: &Shared, out: &mut String, described: &mut Described) {
    let masters = masters(shared);
    let now = now_ms();
    type Field = fn(&NodeTotals, usize, u64) -> i64;
    let fields: [(&'static str, Field); 8] = [
        ("slotgate_backend_up", |t, _, _| {
            i64::from(t.state() != NodeState::Down)
        }),
        ("slotgate_backend_inflight", |t, _, _| t.inflight as i64),
        ("slotgate_backend_connections", |t, _, _| t.open as i64),
        ("slotgate_backend_slots", |_, slots, _| slots as i64),
        ("slotgate_backend_connect_failures_total", |t, _, _| {
            t.connect_failures as i64
        }),
        ("slotgate_backend_connections_lost_total", |t, _, _| {
            t.conn_lost as i64
        }),
        ("slotgate_backend_redirects_total", |t, _, _| {
            t.redirects as i64
        }),
        ("slotgate_backend_last_error_age_seconds", |t, _, now| {
            t.last_error_age_s(now).map_or(-1, |s| s as i64)
        }),
    ];
    for (name, field) in fields {
        for (addr, slots, t) in &masters {
            let label = format!("node=\"{addr}\"");
            sample(out, described, name, &label, field(t, *slots, now));
        }
    }
}

/// Every node's counters, summed over the workers: O(workers × nodes).
pub(crate) fn totals(shared: &Shared) -> HashMap<String, NodeTotals> {
    let mut out = HashMap::new();
    for w in &shared.workers {
        w.nodes.add_to(&mut out);
    }
    out
}
