//! Prometheus metrics: the list of every metric (name, type, help) in one place, and its
//! rendering in the text exposition format. Every value is a sum of per-worker atomics or a
//! topology counter, so a scrape costs O(workers × commands), never O(clients).

use std::fmt::Write;
use std::sync::atomic::Ordering;

use crate::admin::exposition::{sample, Described, Metric};
use crate::context::cmdstats::{bucket_bound_us, BUCKETS};
use crate::context::{Shared, Totals};

/// Every metric the proxy exports; `docs/metrics.md` documents each (a test checks it).
pub const METRICS: &[Metric] = &[
    (
        "slotgate_config_reloads_total",
        "counter",
        "Configuration reloads, applied (ok) or refused with nothing changed (failed).",
    ),
    (
        "slotgate_tls_handshake_failures_total",
        "counter",
        "TLS clients whose handshake failed or timed out.",
    ),
    (
        "slotgate_tls_certificate_days_left",
        "gauge",
        "Whole days until a certificate the proxy presents expires, by role and file.",
    ),
    (
        "slotgate_connections_received_total",
        "counter",
        "Client connections accepted.",
    ),
    (
        "slotgate_connected_clients",
        "gauge",
        "Client connections open now.",
    ),
    (
        "slotgate_output_limit_disconnects_total",
        "counter",
        "Clients closed for queuing more replies than the output hard limit.",
    ),
    (
        "slotgate_rejected_connections_total",
        "counter",
        "Connections refused by maxclients.",
    ),
    (
        "slotgate_limit_disconnects_total",
        "counter",
        "Clients closed by the idle timeout or the request deadline.",
    ),
    (
        "slotgate_protocol_errors_total",
        "counter",
        "Requests refused for a protocol error (connection closed).",
    ),
    (
        "slotgate_commands_total",
        "counter",
        "Commands received, by command.",
    ),
    (
        "slotgate_command_duration_seconds",
        "histogram",
        "Sampled command latency (1 in 16), dispatch to reply, by command.",
    ),
    (
        "slotgate_redirects_total",
        "counter",
        "MOVED and ASK redirects followed, by kind.",
    ),
    (
        "slotgate_retries_total",
        "counter",
        "Requests resent after TRYAGAIN or a cluster error, by reason.",
    ),
    (
        "slotgate_failover_held_total",
        "counter",
        "Requests that never reached their node, held for the slot's next master, by outcome.",
    ),
    (
        "slotgate_mirror_total",
        "counter",
        "Copies of requests for the mirror pool ([mirror]), by outcome.",
    ),
    (
        "slotgate_near_cache_total",
        "counter",
        "Near cache events ([near_cache]): GETs answered (hit), values asked of a master (fill) and kept (kept), entries dropped by an invalidation (invalidated) or for room (evicted).",
    ),
    (
        "slotgate_near_cache_keys",
        "gauge",
        "Keys the near cache holds ([near_cache]).",
    ),
    (
        "slotgate_near_cache_bytes",
        "gauge",
        "Bytes the near cache holds, charged to the memory budget ([near_cache]).",
    ),
    (
        "slotgate_hotkey_requests",
        "gauge",
        "Estimated requests of the hottest keys over the last one or two windows ([hotkeys]), by kind and rank.",
    ),
    (
        "slotgate_bigkey_reply_bytes",
        "gauge",
        "The largest reply seen for each of the keys with the largest replies, on sampled requests over the last one or two windows ([hotkeys]), by rank.",
    ),
    (
        "slotgate_topology_refresh_total",
        "counter",
        "Topology refreshes, by outcome.",
    ),
    (
        "slotgate_topology_version",
        "gauge",
        "Version of the installed slot map.",
    ),
    (
        "slotgate_topology_slots_assigned",
        "gauge",
        "Slots with an owner in the installed map.",
    ),
    (
        "slotgate_slowlog_logged_total",
        "counter",
        "Requests written to the SLOWLOG since start (RESET does not lower it).",
    ),
    (
        "slotgate_backend_up",
        "gauge",
        "1 unless the node's latest connect failed or its latest connection was lost, by node.",
    ),
    (
        "slotgate_backend_inflight",
        "gauge",
        "Requests sent to the node whose replies have not come back, by node.",
    ),
    (
        "slotgate_backend_connections",
        "gauge",
        "Connections open to the node (shared, dedicated and pub/sub), by node.",
    ),
    (
        "slotgate_backend_slots",
        "gauge",
        "Slots the node serves in the installed map, by node.",
    ),
    (
        "slotgate_backend_connect_failures_total",
        "counter",
        "Failed connection attempts to the node, by node.",
    ),
    (
        "slotgate_backend_connections_lost_total",
        "counter",
        "Connections to the node that broke (error, close by the node, request timeout), by node.",
    ),
    (
        "slotgate_backend_redirects_total",
        "counter",
        "MOVED and ASK replies received from the node, by node.",
    ),
    (
        "slotgate_backend_last_error_age_seconds",
        "gauge",
        "Seconds since the node's latest connect failure or connection loss (-1: none), by node.",
    ),
    (
        "slotgate_group_members",
        "gauge",
        "Proxy group members advertised to clients (up, this proxy included) and failing their checks (down).",
    ),
    (
        "slotgate_clients_evicted_total",
        "counter",
        "Clients closed to keep within limits.memory_budget_bytes.",
    ),
    (
        "slotgate_client_buffer_bytes",
        "gauge",
        "Reply bytes held for clients (counted against limits.memory_budget_bytes).",
    ),
];

/// The whole scrape.
pub fn render(shared: &Shared) -> String {
    let mut out = String::new();
    let mut described = Described::new(&[
        METRICS,
        crate::admin::replicas::METRICS,
        crate::admin::migration::METRICS,
    ]);
    worker_totals(shared, &mut out, &mut described);
    topology(shared, &mut out, &mut described);
    let logged = shared.slowlog.logged();
    sample(
        &mut out,
        &mut described,
        "slotgate_slowlog_logged_total",
        "",
        logged,
    );
    crate::admin::backends::metrics(shared, &mut out, &mut described);
    crate::admin::replicas::metrics(shared, &mut out, &mut described);
    crate::admin::tls::metrics(shared, &mut out, &mut described);
    crate::admin::group::metrics(shared, &mut out, &mut described);
    crate::admin::migration::metrics(shared, &mut out, &mut described);
    for (result, counter) in [("ok", &shared.reloads), ("failed", &shared.reload_failures)] {
        let labels = format!("result=\"{result}\"");
        let n = counter.load(Ordering::Relaxed);
        sample(
            &mut out,
            &mut described,
            "slotgate_config_reloads_total",
            &labels,
            n,
        );
    }
    commands(shared, &mut out, &mut described);
    out
}

/// The session counters, summed over workers once per scrape, plus the live client count.
fn worker_totals(shared: &Shared, out: &mut String, described: &mut Described) {
    let t = shared.totals();
    let clients = shared.clients.load(Ordering::Relaxed) as u64;
    client_totals(&t, clients, out, described);
    redirect_totals(&t, out, described);
    mirror_totals(shared, out, described);
    near_cache_totals(shared, out, described);
    hot_keys(shared, out, described);
}

/// `[hotkeys]`'s board: at most `top` keys per kind and `top` big keys, so the series stay
/// bounded (64 × 3). A key is a label value, escaped as the text format requires, bytes
/// outside printable ASCII as INFO shows them.
fn hot_keys(shared: &Shared, out: &mut String, described: &mut Described) {
    let live = shared.live.load();
    let cfg = &live.config.hotkeys;
    if !cfg.enabled {
        return;
    }
    let boards = shared
        .workers
        .iter()
        .map(|w| (&w.hotkeys, w.registry.now_ms()));
    let board = crate::context::hotkeys::merged(boards, cfg.top, cfg.window_seconds * 1000);
    let every = u64::from(crate::context::cmdstats::SAMPLE_EVERY);
    for (kind, list) in [("read", &board.reads), ("write", &board.writes)] {
        for (rank, hot) in list.iter().enumerate() {
            let labels = format!(
                "kind=\"{kind}\",rank=\"{rank}\",key=\"{}\"",
                label(&hot.key)
            );
            let name = "slotgate_hotkey_requests";
            sample(out, described, name, &labels, hot.count * every);
        }
    }
    for (rank, big) in board.big.iter().enumerate() {
        let labels = format!("rank=\"{rank}\",key=\"{}\"", label(&big.key));
        let name = "slotgate_bigkey_reply_bytes";
        sample(out, described, name, &labels, big.reply_bytes);
    }
}

/// A key as a label value: as INFO shows it, then the text format's escapes (backslash and
/// double quote).
fn label(key: &[u8]) -> String {
    crate::context::hotkeys::shown(key)
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

/// `[mirror]`'s copies by outcome, when it is configured.
fn mirror_totals(shared: &Shared, out: &mut String, described: &mut Described) {
    if shared.traffic_mirror.is_none() {
        return;
    }
    let m = shared.mirror_totals();
    let outcomes = [
        ("sent", m.sent),
        ("dropped", m.dropped),
        ("answered", m.answered),
        ("failed", m.failed),
    ];
    for (outcome, value) in outcomes {
        let labels = format!("outcome=\"{outcome}\"");
        sample(out, described, "slotgate_mirror_total", &labels, value);
    }
}

/// `[near_cache]`'s events and size, when it is on.
fn near_cache_totals(shared: &Shared, out: &mut String, described: &mut Described) {
    if shared.write_epochs.is_none() {
        return;
    }
    let c = shared.near_cache_totals();
    let events = [
        ("hit", c.hits),
        ("fill", c.fills),
        ("kept", c.filled),
        ("invalidated", c.invalidated),
        ("evicted", c.evicted),
    ];
    for (event, value) in events {
        let labels = format!("event=\"{event}\"");
        sample(out, described, "slotgate_near_cache_total", &labels, value);
    }
    sample(out, described, "slotgate_near_cache_keys", "", c.entries);
    sample(out, described, "slotgate_near_cache_bytes", "", c.bytes);
}

/// Client connections, their limits and the reply bytes held for them.
fn client_totals(t: &Totals, clients: u64, out: &mut String, described: &mut Described) {
    let simple: [(&str, &str, u64); 8] = [
        ("slotgate_clients_evicted_total", "", t.clients_evicted),
        ("slotgate_client_buffer_bytes", "", t.client_buffer_bytes),
        (
            "slotgate_output_limit_disconnects_total",
            "",
            t.output_limit_disconnects,
        ),
        (
            "slotgate_connections_received_total",
            "",
            t.connections_received,
        ),
        ("slotgate_connected_clients", "", clients),
        (
            "slotgate_rejected_connections_total",
            "",
            t.rejected_connections,
        ),
        ("slotgate_limit_disconnects_total", "", t.limit_disconnects),
        ("slotgate_protocol_errors_total", "", t.protocol_errors),
    ];
    for (name, labels, value) in simple {
        sample(out, described, name, labels, value);
    }
}

/// Redirects followed and "not executed" retries, by kind.
fn redirect_totals(t: &Totals, out: &mut String, described: &mut Described) {
    let simple: [(&str, &str, u64); 7] = [
        (
            "slotgate_redirects_total",
            "kind=\"moved\"",
            t.redirects_moved,
        ),
        ("slotgate_redirects_total", "kind=\"ask\"", t.redirects_ask),
        (
            "slotgate_retries_total",
            "reason=\"tryagain\"",
            t.tryagain_retries,
        ),
        (
            "slotgate_retries_total",
            "reason=\"cluster_error\"",
            t.cluster_error_retries,
        ),
        (
            "slotgate_failover_held_total",
            "outcome=\"held\"",
            t.failover_held,
        ),
        (
            "slotgate_failover_held_total",
            "outcome=\"released\"",
            t.failover_released,
        ),
        (
            "slotgate_failover_held_total",
            "outcome=\"expired\"",
            t.failover_expired,
        ),
    ];
    for (name, labels, value) in simple {
        sample(out, described, name, labels, value);
    }
}

/// Refreshes by outcome, the map's version and its assigned slots.
fn topology(shared: &Shared, out: &mut String, described: &mut Described) {
    let topo = &shared.topology.stats;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let refresh: [(&str, u64); 5] = [
        ("requested", get(&topo.refresh_requested)),
        ("performed", get(&topo.refresh_performed)),
        ("throttled", get(&topo.refresh_throttled)),
        ("failed", get(&topo.refresh_failed)),
        ("skipped_stale", get(&topo.refresh_skipped_stale)),
    ];
    for (result, value) in refresh {
        let label = format!("result=\"{result}\"");
        sample(
            out,
            described,
            "slotgate_topology_refresh_total",
            &label,
            value,
        );
    }
    let map = shared.topology.current();
    sample(
        out,
        described,
        "slotgate_topology_version",
        "",
        map.version(),
    );
    let assigned = map.assigned() as u64;
    sample(
        out,
        described,
        "slotgate_topology_slots_assigned",
        "",
        assigned,
    );
}

fn commands(shared: &Shared, out: &mut String, described: &mut Described) {
    for i in 0..cluster::command::learn::stats_len() {
        let t = shared.command_totals(i);
        let Some(spec) = cluster::command::at_stats_index(i) else {
            continue;
        };
        if t.calls == 0 {
            continue;
        }
        let label = format!("command=\"{}\"", spec.name);
        sample(out, described, "slotgate_commands_total", &label, t.calls);
        let name = "slotgate_command_duration_seconds";
        described.describe(out, name);
        let mut cumulative = 0;
        for b in 0..BUCKETS {
            cumulative += t.buckets[b];
            let le =
                bucket_bound_us(b).map_or("+Inf".to_string(), |us| format!("{}", us as f64 / 1e6));
            let _ = writeln!(out, "{name}_bucket{{{label},le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_sum{{{label}}} {}", t.sampled_ns as f64 / 1e9);
        let _ = writeln!(out, "{name}_count{{{label}}} {}", t.samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_are_unique_and_documented() {
        let doc = include_str!("../../../../docs/metrics.md");
        let all: Vec<_> = METRICS
            .iter()
            .chain(crate::admin::replicas::METRICS)
            .chain(crate::admin::migration::METRICS)
            .collect();
        for (i, (name, kind, _)) in all.iter().enumerate() {
            assert!(
                all[..i].iter().all(|(n, _, _)| n != name),
                "{name} listed twice"
            );
            assert!(
                doc.contains(&format!("`{name}`")),
                "{name} missing from docs/metrics.md"
            );
            assert!(["counter", "gauge", "histogram"].contains(kind));
        }
    }
}
