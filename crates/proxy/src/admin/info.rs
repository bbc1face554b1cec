//! INFO as the proxy answers it: Redis's format (`# Section` headers, `key:value` lines,
//! CRLF) and section order, with the proxy's own numbers. Every figure is a sum of per-worker
//! counters, a field of the current slot map or the proxy process's CPU time: O(workers),
//! whatever the number of clients. The sections about the data (memory, persistence,
//! replication, keyspace) come from the masters: this renders a marker where each goes, and
//! the session's fan-out merges them in (`route/info.rs`).

use std::fmt::Write;
use std::sync::atomic::Ordering;

use resp::Request;

use crate::context::Shared;

/// Sections in the order INFO prints them, each with its renderer.
/// Renders one section's lines.
type Section = fn(&Shared, &mut String);

const SECTIONS: &[(&str, &str, Section)] = &[
    ("server", "Server", server),
    ("clients", "Clients", |shared, out| {
        // The proxy's clients, then the keys the nodes count them blocked on.
        clients(shared, out);
        merged("clients", out);
    }),
    ("memory", "Memory", |_, out| merged("memory", out)),
    ("persistence", "Persistence", |_, out| {
        merged("persistence", out)
    }),
    ("stats", "Stats", |shared, out| {
        // The proxy's counters, then the nodes' counts of what happened to the data.
        stats(shared, out);
        merged("stats", out);
    }),
    ("replication", "Replication", |_, out| {
        merged("replication", out)
    }),
    ("cpu", "CPU", crate::admin::cpu::info),
    ("topology", "Topology", topology),
    ("commandstats", "Commandstats", commandstats),
    ("errorstats", "Errorstats", errorstats),
    ("latencystats", "Latencystats", latencystats),
    ("backends", "Backends", |shared, out| {
        // The masters' lines, then their replicas'.
        crate::admin::backends::info(shared, out);
        crate::admin::replicas::info_backends(shared, out);
    }),
    ("tls", "Tls", crate::admin::tls::info),
    ("group", "Group", crate::admin::group::info),
    ("hotkeys", "Hotkeys", hotkeys),
    ("migration", "Migration", crate::admin::migration::info),
    ("keyspace", "Keyspace", |_, out| merged("keyspace", out)),
    // Left out whole behind servers without it (`route::info::merge_info`).
    ("keysizes", "Keysizes", |_, out| merged("keysizes", out)),
];

/// Where a section merged from the masters goes.
fn merged(name: &str, out: &mut String) {
    out.push_str(&crate::route::info::marker(name));
}

/// Sections left out of plain `INFO` and `INFO default`, as Redis leaves them out; `backends`
/// too, since it grows with the number of masters, and the proxy's own `tls` and `group`.
const NOT_DEFAULT: &[&str] = &[
    "commandstats",
    "latencystats",
    "backends",
    "tls",
    "group",
    "hotkeys",
    "migration",
];

/// The sections `INFO [section ...]` asks for that come from the masters (none: the proxy
/// answers alone).
pub(crate) fn from_masters(req: &Request) -> Vec<&'static str> {
    let wanted: Vec<Vec<u8>> = (1..req.argc())
        .map(|i| req.arg(i).to_ascii_lowercase())
        .collect();
    let every = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| matches!(w.as_slice(), b"default" | b"all" | b"everything"));
    crate::route::info::MERGED
        .into_iter()
        .filter(|name| every || wanted.iter().any(|w| w == name.as_bytes()))
        .collect()
}

/// Render `INFO [section ...]`: no argument, `default`, `all` or `everything` give every
/// section; unknown section names give nothing for them, as Redis does.
pub(crate) fn render(shared: &Shared, req: &Request) -> String {
    let wanted: Vec<String> = (1..req.argc())
        .map(|i| String::from_utf8_lossy(req.arg(i)).to_lowercase())
        .collect();
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let all = wanted
        .iter()
        .any(|w| matches!(w.as_str(), "all" | "everything"));
    let mut out = String::new();
    for (name, title, section) in SECTIONS {
        if *name == "migration" && shared.migration.is_none() {
            // A section of `[migration]`'s only, as Redis prints a module's only with it.
            continue;
        }
        let by_default = default && !NOT_DEFAULT.contains(name);
        if all || by_default || wanted.iter().any(|w| w == name) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            let _ = write!(out, "# {title}\r\n");
            section(shared, &mut out);
        }
    }
    out
}

/// The hot-key board merged over the workers (`context/hotkeys.rs`): the `top` keys read
/// and written, each with its sampled count over the last one or two windows, the share of
/// that count the sketch may over-count, and the estimate of requests (sampled × 16); then
/// the `top` largest replies by key seen on sampled requests, with the command that got it.
fn hotkeys(shared: &Shared, out: &mut String) {
    use crate::context::hotkeys::{merged, shown};
    let live = shared.live.load();
    let cfg = &live.config.hotkeys;
    line(out, "hotkeys_enabled", u8::from(cfg.enabled));
    line(out, "hotkeys_window_seconds", cfg.window_seconds);
    let boards = shared
        .workers
        .iter()
        .map(|w| (&w.hotkeys, w.registry.now_ms()));
    let board = merged(boards, cfg.top, cfg.window_seconds * 1000);
    line(out, "hotkeys_sampled_requests", board.sampled);
    let every = u64::from(crate::context::cmdstats::SAMPLE_EVERY);
    for (kind, list) in [("read", &board.reads), ("write", &board.writes)] {
        for (i, hot) in list.iter().enumerate() {
            let _ = write!(
                out,
                "{kind}{i}:key={},sampled={},error={},estimated={}\r\n",
                shown(&hot.key),
                hot.count,
                hot.error,
                hot.count * every
            );
        }
    }
    for (i, big) in board.big.iter().enumerate() {
        let _ = write!(
            out,
            "bigkey{i}:key={},reply_bytes={},command={}\r\n",
            shown(&big.key),
            big.reply_bytes,
            command_name(big.command)
        );
    }
}

/// A command's name by its stats index, lowercase as commandstats shows it.
fn command_name(index: u16) -> &'static str {
    cluster::command::at_stats_index(usize::from(index)).map_or("unknown", |c| c.name)
}

fn line(out: &mut String, key: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "{key}:{value}\r\n");
}

fn server(shared: &Shared, out: &mut String) {
    let uptime = shared.started.elapsed().as_secs();
    let id = shared.identity.current();
    line(out, "redis_version", &id.redis_version);
    if let Some(valkey) = &id.valkey_version {
        line(out, "server_name", &id.name);
        line(out, "valkey_version", valkey);
    }
    // A build without git, as the servers report one: tools and test suites read these.
    line(out, "redis_git_sha1", "00000000");
    line(out, "redis_git_dirty", 0);
    line(out, "slotgate_version", env!("CARGO_PKG_VERSION"));
    line(out, id.mode_field(), "proxy");
    line(out, "process_id", std::process::id());
    line(
        out,
        "tcp_port",
        shared.config.proxy.listen.rsplit(':').next().unwrap_or(""),
    );
    line(out, "uptime_in_seconds", uptime);
    line(out, "uptime_in_days", uptime / 86400);
    line(out, "worker_threads", shared.workers.len());
    if id.valkey_version.is_some() {
        line(out, "availability_zone", &id.availability_zone);
    }
}

/// Redis's Clients section, counted over the proxy's own clients (the nodes' clients are
/// the proxy's connections, not what a client of one Redis asks about). `blocked_clients`
/// is what tests and monitors wait on while a BLPOP is parked.
fn clients(shared: &Shared, out: &mut String) {
    let t = shared.totals();
    let mut census = crate::context::registry::Census::default();
    for w in &shared.workers {
        w.registry.census(&mut census);
    }
    line(
        out,
        "connected_clients",
        t.connections_received.saturating_sub(t.connections_closed),
    );
    line(out, "cluster_connections", 0);
    line(
        out,
        "maxclients",
        shared.live.load().config.limits.maxclients,
    );
    line(out, "client_recent_max_input_buffer", census.max_qbuf);
    line(out, "client_recent_max_output_buffer", census.max_omem);
    line(out, "blocked_clients", census.blocked);
    line(out, "tracking_clients", census.tracking);
    line(out, "pubsub_clients", census.pubsub);
    line(out, "watching_clients", census.watching);
    line(out, "clients_in_timeout_table", census.blocked);
    if shared.identity.current().valkey_version.is_some() {
        // Valkey's: the proxy's own CLIENT PAUSE in force (the nodes are not paused).
        let now = shared.now_ms();
        let (reason, actions, left) = match shared.pause.current(|| now) {
            Some((crate::context::pause::PauseKind::All, end)) => {
                ("client_pause", "all", end - now)
            }
            Some((crate::context::pause::PauseKind::Write, end)) => {
                ("client_pause", "write", end - now)
            }
            None => ("none", "none", 0),
        };
        line(out, "paused_reason", reason);
        line(out, "paused_actions", actions);
        line(out, "paused_timeout_milliseconds", left);
    }
}

fn stats(shared: &Shared, out: &mut String) {
    let t = shared.totals();
    line(out, "total_connections_received", t.connections_received);
    line(out, "total_commands_processed", t.commands_processed);
    line(out, "total_protocol_errors", t.protocol_errors);
    line(out, "redirects_moved", t.redirects_moved);
    line(out, "redirects_ask", t.redirects_ask);
    line(out, "tryagain_retries", t.tryagain_retries);
    line(out, "cluster_error_retries", t.cluster_error_retries);
    line(out, "failover_held_requests", t.failover_held);
    line(out, "failover_released_requests", t.failover_released);
    line(out, "failover_expired_requests", t.failover_expired);
    crate::admin::replicas::info_stats(shared, out);
    if shared.traffic_mirror.is_some() {
        let m = shared.mirror_totals();
        line(out, "mirror_sent", m.sent);
        line(out, "mirror_dropped", m.dropped);
        line(out, "mirror_answered", m.answered);
        line(out, "mirror_failed", m.failed);
    }
    if shared.write_epochs.is_some() {
        let c = shared.near_cache_totals();
        line(out, "near_cache_hits", c.hits);
        line(out, "near_cache_fills", c.fills);
        line(out, "near_cache_filled", c.filled);
        line(out, "near_cache_invalidated", c.invalidated);
        line(out, "near_cache_evicted", c.evicted);
        line(out, "near_cache_keys", c.entries);
        line(out, "near_cache_bytes", c.bytes);
    }
    line(out, "rejected_connections", t.rejected_connections);
    line(
        out,
        "config_reloads",
        shared.reloads.load(Ordering::Relaxed),
    );
    line(
        out,
        "config_reload_failures",
        shared.reload_failures.load(Ordering::Relaxed),
    );
    // The proxy's clients' prefixes; the keys tracked are the nodes' (at the section's end).
    line(
        out,
        "tracking_total_prefixes",
        shared.tracking_prefixes.count(),
    );
    let errors: u64 = shared.workers.iter().map(|w| w.errors.total()).sum();
    line(out, "total_error_replies", errors);
    line(out, "client_limit_disconnections", t.limit_disconnects);
    line(
        out,
        "client_output_buffer_limit_disconnections",
        t.output_limit_disconnects,
    );
}

/// `errorstat_<CODE>:count=<n>`, by code, summed over the workers.
fn errorstats(shared: &Shared, out: &mut String) {
    let mut all = std::collections::BTreeMap::new();
    shared
        .workers
        .iter()
        .for_each(|w| w.errors.add_to(&mut all));
    for (code, count) in all {
        let _ = write!(out, "errorstat_{code}:count={count}\r\n");
    }
}

fn topology(shared: &Shared, out: &mut String) {
    let topo = &shared.topology;
    let map = topo.current();
    let s = &topo.stats;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    line(out, "topology_version", map.version());
    line(out, "topology_masters", map.nodes().len());
    line(out, "topology_slots_assigned", map.assigned());
    line(out, "topology_refresh_requested", get(&s.refresh_requested));
    line(
        out,
        "topology_refresh_skipped_stale",
        get(&s.refresh_skipped_stale),
    );
    line(out, "topology_refresh_performed", get(&s.refresh_performed));
    line(out, "topology_refresh_throttled", get(&s.refresh_throttled));
    line(out, "topology_refresh_failed", get(&s.refresh_failed));
    line(out, "topology_maps_installed", get(&s.maps_installed));
    // What the masters taught the command table (`cluster::command::learn`): commands
    // added to Redis 7.0's, rows changed, and commands only some masters know (not routed).
    let learned = cluster::command::learn::summary();
    line(out, "commands_learned_from_masters", learned.nodes);
    line(out, "commands_learned_added", learned.added);
    line(out, "commands_learned_changed", learned.changed);
    line(out, "commands_learned_partial", learned.partial);
}

/// `cmdstat_<name>:calls=..,usec=..,usec_per_call=..` (usec estimated from 1-in-16 samples).
fn commandstats(shared: &Shared, out: &mut String) {
    for i in 0..cluster::command::learn::stats_len() {
        let t = shared.command_totals(i);
        let Some(spec) = cluster::command::at_stats_index(i) else {
            continue;
        };
        if t.calls == 0 {
            continue;
        }
        let usec = t.estimated_usec();
        let per_call = usec as f64 / t.calls as f64;
        let _ = write!(
            out,
            "cmdstat_{}:calls={},usec={usec},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            spec.name, t.calls, t.rejected, t.failed
        );
    }
}

/// `latency_percentiles_usec_<name>:p50=..,p99=..,p99.9=..` from the sampled histograms
/// (each value is the upper bound of its power-of-two bucket).
fn latencystats(shared: &Shared, out: &mut String) {
    for i in 0..cluster::command::learn::stats_len() {
        let t = shared.command_totals(i);
        let Some(spec) = cluster::command::at_stats_index(i) else {
            continue;
        };
        let (Some(p50), Some(p99), Some(p999)) = (
            t.percentile_us(0.5),
            t.percentile_us(0.99),
            t.percentile_us(0.999),
        ) else {
            continue;
        };
        let _ = write!(
            out,
            "latency_percentiles_usec_{}:p50={p50}.000,p99={p99}.000,p99.9={p999}.000\r\n",
            spec.name
        );
    }
}
