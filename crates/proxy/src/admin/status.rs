//! The status page's data, `GET /status.json`: the slot map as ranges (owner, migrating),
//! each master's state and counters, request and latency totals (the page turns them into
//! rates between two reads), clients, topology version and last refresh, limits hit, and
//! readiness. O(workers × (masters + commands) + 16384) per read, on the admin thread.

use serde_json::{json, Value};

use crate::admin::{backends, health};
use crate::context::cmdstats::CommandTotals;
use crate::context::Shared;

/// The page itself: small, static, embedded in the binary.
pub(crate) const PAGE: &str = include_str!("status.html");

/// The whole document.
pub(crate) fn json(shared: &Shared) -> String {
    let map = shared.topology.current();
    let t = shared.totals();
    let topo = &shared.topology.stats;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let (ready, why) = health::ready(shared);
    let latency = all_commands(shared);
    let doc = json!({
        "proxy": {
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": shared.started.elapsed().as_secs(),
            "workers": shared.workers.len(),
            "listen": shared.config.proxy.listen,
            "tls_listen": shared.config.tls.listen,
            "ready": ready,
            "ready_detail": why.trim_end(),
        },
        "topology": {
            "version": map.version(),
            "masters": map.nodes().len(),
            "slots_assigned": map.assigned(),
            "refreshes": get(&topo.refresh_performed),
            "refresh_failures": get(&topo.refresh_failed),
            "maps_installed": get(&topo.maps_installed),
            "last_refresh_unix_ms": get(&topo.last_refresh_unix_ms),
        },
        "now_unix_ms": now_ms(),
        "ranges": ranges(shared, &map),
        "nodes": nodes(shared, &map),
        "clients": shared.clients.load(std::sync::atomic::Ordering::Relaxed),
        "requests_total": t.commands_processed,
        "latency": {
            "samples": latency.samples,
            "sampled_ns": latency.sampled_ns,
            "p50_us": latency.percentile_us(0.5),
            "p99_us": latency.percentile_us(0.99),
        },
        "limits_hit": {
            "maxclients": t.rejected_connections,
            "timeouts": t.limit_disconnects,
            "output_limit": t.output_limit_disconnects,
            "memory_budget": t.clients_evicted,
            "tls_handshakes": t.tls_handshake_failures,
        },
    });
    doc.to_string()
}

/// Runs of consecutive slots with one owner and one migrating state.
fn ranges(shared: &Shared, map: &cluster::slot_map::SlotMap) -> Vec<Value> {
    let migrating = shared.ask_slots.read(map.version());
    let key = |slot: u16| (map.node_index(slot), migrating.binary_search(&slot).is_ok());
    let mut out = Vec::new();
    let mut start = 0u16;
    for slot in 1..=cluster::SLOT_COUNT as u16 {
        if slot as usize == cluster::SLOT_COUNT || key(slot) != key(start) {
            let (owner, migrating) = key(start);
            let node = owner.and_then(|i| map.nodes().get(usize::from(i)));
            out.push(json!({
                "start": start,
                "end": slot - 1,
                "master": node.map(|n| n.addr.as_str()),
                "migrating": migrating,
            }));
            start = slot;
        }
    }
    out
}

/// Each master with its slots and the workers' summed counters.
fn nodes(shared: &Shared, map: &cluster::slot_map::SlotMap) -> Vec<Value> {
    let totals = backends::totals(shared);
    let slots = backends::slot_counts(map);
    map.nodes()
        .iter()
        .zip(slots)
        .map(|(node, slots)| {
            let t = totals.get(&node.addr).copied().unwrap_or_default();
            json!({
                "addr": node.addr,
                "slots": slots,
                "state": t.state().name(),
                "inflight": t.inflight,
                "connections": t.open,
                "connect_failures": t.connect_failures,
                "connections_lost": t.conn_lost,
                "redirects": t.redirects,
            })
        })
        .collect()
}

/// Every command's sampled latency together.
fn all_commands(shared: &Shared) -> CommandTotals {
    let mut all = CommandTotals::default();
    for i in 0..cluster::command::learn::stats_len() {
        let t = shared.command_totals(i);
        all.calls += t.calls;
        all.samples += t.samples;
        all.sampled_ns += t.sampled_ns;
        for (a, b) in all.buckets.iter_mut().zip(t.buckets) {
            *a += b;
        }
    }
    all
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
