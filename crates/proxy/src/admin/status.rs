//! The status page's data, `GET /status.json`: the slot map as ranges (owner, migrating),
//! each master's state and counters, request and latency totals (the page turns them into
//! rates between two reads), clients, topology version and last refresh, limits hit,
//! readiness, the hot-key board (`[hotkeys]`: reads, writes, big keys), the near cache's
//! counters (`[near_cache]`) and the last minutes of requests/s and latency, overall and
//! per master, from the ring the admin thread fills every 2 s (`context/history.rs`, `sample_history`). O(workers × (masters +
//! commands + 64) + 16384) per read, on the admin thread.

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
        "hotkeys": hotkeys(shared),
        "near_cache": near_cache(shared),
        "migration": migration(shared),
        "history": history(shared),
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

/// `[near_cache]`'s counters summed over the workers; null while it is off.
fn near_cache(shared: &Shared) -> Value {
    if shared.write_epochs.is_none() {
        return Value::Null;
    }
    let c = shared.near_cache_totals();
    json!({
        "hits": c.hits,
        "fills": c.fills,
        "kept": c.filled,
        "invalidated": c.invalidated,
        "evicted": c.evicted,
        "keys": c.entries,
        "bytes": c.bytes,
    })
}

/// `[migration]`'s phase and progress; null without one.
fn migration(shared: &Shared) -> Value {
    let Some(m) = shared.migration.as_deref() else {
        return Value::Null;
    };
    let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    json!({
        "name": m.name(),
        "phase": m.phase().name(),
        "moved": get(&m.stats.moved),
        "absent": get(&m.stats.absent),
        "errors": get(&m.stats.errors),
        "gated": get(&m.stats.gated),
        "scanned": get(&m.stats.scanned),
        "passes": get(&m.stats.passes),
        "left": m.left(),
        "last_error": m.last_error(),
    })
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

/// `[hotkeys]`'s board merged: the `top` keys read and written (estimated requests over
/// the last one or two windows) and the largest replies by key.
fn hotkeys(shared: &Shared) -> Value {
    use crate::context::hotkeys::{merged, shown};
    let live = shared.live.load();
    let cfg = &live.config.hotkeys;
    if !cfg.enabled {
        return json!({ "enabled": false });
    }
    let boards = shared
        .workers
        .iter()
        .map(|w| (&w.hotkeys, w.registry.now_ms()));
    let board = merged(boards, cfg.top, cfg.window_seconds * 1000);
    let every = u64::from(crate::context::cmdstats::SAMPLE_EVERY);
    let hot = |list: &[crate::context::hotkeys::Hot]| -> Vec<Value> {
        list.iter()
            .map(|h| json!({ "key": shown(&h.key), "estimated": h.count * every, "sampled": h.count, "error": h.error }))
            .collect()
    };
    let big: Vec<Value> = board
        .big
        .iter()
        .map(|b| {
            let command = cluster::command::at_stats_index(usize::from(b.command));
            json!({ "key": shown(&b.key), "reply_bytes": b.reply_bytes, "command": command.map_or("unknown", |c| c.name) })
        })
        .collect();
    json!({
        "enabled": true,
        "window_seconds": cfg.window_seconds,
        "sampled": board.sampled,
        "reads": hot(&board.reads),
        "writes": hot(&board.writes),
        "big": big,
    })
}

/// Take one point of the ring every `STEP_MS`, for as long as the admin thread runs.
pub(crate) async fn sample_history(shared: &Shared) {
    let step = std::time::Duration::from_millis(crate::context::history::STEP_MS);
    let mut tick = tokio::time::interval(step);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        shared.history.push(point(shared));
    }
}

/// The counters now: requests, sampled latency, and each master's sampled requests.
fn point(shared: &Shared) -> crate::context::history::Point {
    let all = all_commands(shared);
    let totals = backends::totals(shared);
    let map = shared.topology.current();
    let masters = map
        .nodes()
        .iter()
        .map(|n| {
            let t = totals.get(&n.addr).copied().unwrap_or_default();
            (n.addr.clone(), t.samples, t.sampled_ns)
        })
        .collect();
    crate::context::history::Point {
        unix_ms: now_ms(),
        requests: shared.totals().commands_processed,
        samples: all.samples,
        sampled_ns: all.sampled_ns,
        masters,
    }
}

/// The ring as rates between neighbouring points: requests/s and mean sampled latency
/// (µs, null for an interval with no sample), overall and per master (requests/s
/// estimated from the sampled ones, × 16; a master absent from a point counts nothing).
fn history(shared: &Shared) -> Value {
    let points = shared.history.points();
    let every = u64::from(crate::context::cmdstats::SAMPLE_EVERY) as f64;
    let pairs: Vec<_> = points.windows(2).map(|w| (&w[0], &w[1])).collect();
    let secs = |a: &crate::context::history::Point, b: &crate::context::history::Point| {
        (b.unix_ms.saturating_sub(a.unix_ms) as f64 / 1000.0).max(0.001)
    };
    let mean_us = |n: u64, ns: u64| (n > 0).then(|| (ns as f64 / n as f64 / 1000.0).round());
    let t: Vec<u64> = pairs.iter().map(|(_, b)| b.unix_ms).collect();
    let rps: Vec<f64> = pairs
        .iter()
        .map(|(a, b)| (b.requests.saturating_sub(a.requests) as f64 / secs(a, b)).round())
        .collect();
    let latency: Vec<Option<f64>> = pairs
        .iter()
        .map(|(a, b)| {
            mean_us(
                b.samples.saturating_sub(a.samples),
                b.sampled_ns.saturating_sub(a.sampled_ns),
            )
        })
        .collect();
    let mut addrs: Vec<&str> = Vec::new();
    for p in &points {
        for (addr, _, _) in &p.masters {
            if !addrs.contains(&addr.as_str()) {
                addrs.push(addr);
            }
        }
    }
    let find = |p: &crate::context::history::Point, addr: &str| {
        p.masters
            .iter()
            .find(|m| m.0 == addr)
            .map_or((0, 0), |m| (m.1, m.2))
    };
    let masters: Vec<Value> = addrs
        .iter()
        .map(|addr| {
            let (mut rps, mut lat) = (Vec::new(), Vec::new());
            for (a, b) in &pairs {
                let ((n0, ns0), (n1, ns1)) = (find(a, addr), find(b, addr));
                let n = n1.saturating_sub(n0);
                rps.push((n as f64 * every / secs(a, b)).round());
                lat.push(mean_us(n, ns1.saturating_sub(ns0)));
            }
            json!({ "addr": addr, "rps": rps, "latency_us": lat })
        })
        .collect();
    json!({
        "step_ms": crate::context::history::STEP_MS,
        "t": t,
        "rps": rps,
        "latency_us": latency,
        "masters": masters,
    })
}

/// Every command's sampled latency together.
pub(crate) fn all_commands(shared: &Shared) -> CommandTotals {
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

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
