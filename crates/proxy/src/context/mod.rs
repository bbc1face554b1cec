//! Counters and the state every worker shares.
//!
//! Each worker increments only its own `WorkerStats` (relaxed atomics on its own cache lines,
//! so no contention); INFO sums the workers on read. Reading costs O(workers), never
//! O(clients): there is no client list to walk.

pub(crate) mod asks;
pub(crate) mod cluster_view;
pub(crate) mod cmdstats;
pub(crate) mod code_flags;
pub(crate) mod errorstats;
pub(crate) mod group;
pub(crate) mod history;
pub(crate) mod hotkeys;
pub(crate) mod live;
pub(crate) mod monitor;
pub(crate) mod near_cache;
pub(crate) mod pause;
pub(crate) mod reads;
pub(crate) mod registry;
pub(crate) mod slowlog;
pub(crate) mod tracking_prefixes;
pub(crate) mod traffic_mirror;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::time::Instant;

use crate::config::Config;
use crate::topology::Topology;

/// What every worker thread holds a reference to.
pub struct Shared {
    pub config: Config,
    pub topology: Arc<Topology>,
    /// How keys map to slots: CRC16, or a sharded pool's servers (fixed at start).
    pub placement: cluster::Placement,
    /// `[mirror]`: where copies of requests go, if anywhere (fixed at start).
    pub traffic_mirror: Option<Arc<traffic_mirror::TrafficMirror>>,
    /// `[migration]`: the source pool whose keys move into the cluster (fixed at start).
    pub(crate) migration: Option<Arc<crate::migration::Migration>>,
    /// `[near_cache]`: the write epochs every worker's cache checks (None when off).
    pub(crate) write_epochs: Option<Arc<near_cache::WriteEpochs>>,
    pub workers: Vec<Arc<WorkerStats>>,
    pub started: Instant,
    /// Source of CLIENT ID values, unique across workers.
    pub next_client_id: AtomicU64,
    /// What a reload may change: limits, users, timings (`live.rs`). `config` above stays
    /// the configuration the proxy started with (listeners, threads).
    pub live: arc_swap::ArcSwap<live::Live>,
    /// Bumped after each `live` store: workers reload their snapshot when it moves.
    pub(crate) live_gen: AtomicU64,
    /// Reloads applied and refused since start.
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
    /// The file a reload re-reads, once the binary names it.
    /// Graceful shutdown's phase: 0 serving, then `DRAIN_WHEN_IDLE`, `DRAIN_STOP_READING`;
    /// sessions read it once per poll.
    pub(crate) drain: std::sync::atomic::AtomicU8,
    /// Slots that answered ASK since the map last changed: migrating (status page).
    pub(crate) ask_slots: asks::AskSlots,
    pub(crate) config_source: std::sync::Mutex<Option<crate::config::source::ConfigSource>>,
    /// The pre-encoded `AUTH` the proxy sends to each node, if configured.
    pub(crate) backend_auth: Option<bytes::Bytes>,
    /// Which replicas may serve reads, sampled by the topology thread (`read_policy`).
    pub replicas: Arc<crate::topology::ReplicaHealth>,
    /// The nodes' name and version, for INFO and HELLO (`identity.rs`).
    pub(crate) identity: Arc<crate::identity::Identity>,
    /// Clients connected right now, across workers (for maxclients).
    pub clients: std::sync::atomic::AtomicUsize,
    /// The proxy group: the pre-encoded CLUSTER replies advertising its healthy members
    /// (this proxy alone without a group) and their health.
    pub(crate) group: group::GroupState,
    /// SLOWLOG's threshold, ids and coarse clock.
    pub slowlog: crate::context::slowlog::Slowlog,
    /// CLIENT PAUSE in force, if any (`pause.rs`).
    pub(crate) pause: pause::ClientPause,
    /// Scripts and functions that declared `no-writes` (`code_flags.rs`).
    pub(crate) code_flags: code_flags::CodeFlags,
    /// The BCAST prefixes clients track (`tracking_prefixes.rs`).
    pub(crate) tracking_prefixes: Arc<tracking_prefixes::TrackingPrefixes>,
    /// Requests on connections of their own now in flight (`session/side_call.rs`).
    pub(crate) side_calls: std::sync::atomic::AtomicUsize,
    /// MONITOR's feeds (`monitor.rs`).
    pub(crate) monitors: monitor::Monitors,
    /// The status page's last minutes (`history.rs`), written by the admin thread.
    pub(crate) history: history::History,
    /// HOTKEYS START's run, if any (`hotkeys/run.rs`).
    pub(crate) hotkeys_run: std::sync::Mutex<Option<hotkeys::run::Run>>,
    /// The TLS listener's settings, when `tls.listen` is set.
    pub(crate) tls_acceptor: Option<Arc<crate::tls::Acceptor>>,
    /// TLS towards the nodes, when `backend_tls.enabled`.
    pub(crate) backend_tls: Option<Arc<crate::tls::Connector>>,
}

/// Shutting down: each client is closed at its first moment with nothing owed.
pub(crate) const DRAIN_WHEN_IDLE: u8 = 1;
/// The drain timeout passed: no more requests are read; clients close once answered.
pub(crate) const DRAIN_STOP_READING: u8 = 2;

/// One worker's counters.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct WorkerStats {
    pub connections_received: AtomicU64,
    pub connections_closed: AtomicU64,
    pub commands_processed: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub redirects_moved: AtomicU64,
    pub redirects_ask: AtomicU64,
    pub tryagain_retries: AtomicU64,
    pub cluster_error_retries: AtomicU64,
    /// Requests that never reached their node, held for the slot's next master; then sent
    /// there and answered, or failed when `cluster.failover_hold_ms` passed.
    pub failover_held: AtomicU64,
    pub failover_released: AtomicU64,
    pub failover_expired: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// TLS clients whose handshake failed or timed out.
    pub tls_handshake_failures: AtomicU64,
    pub limit_disconnects: AtomicU64,
    pub output_limit_disconnects: AtomicU64,
    /// Clients disconnected to keep the worker within its share of the memory budget.
    pub clients_evicted: AtomicU64,
    /// Reply bytes this worker holds for its clients, as last published (a gauge, refreshed
    /// when it moved by a step, not per request).
    pub client_buffer_bytes: AtomicU64,
    /// Per-command calls and sampled latency.
    pub commands: crate::context::cmdstats::CommandStats,
    /// `[mirror]`'s copies.
    pub mirror: traffic_mirror::MirrorCounters,
    /// The hot-key board (`[hotkeys]`), under this worker's own uncontended lock.
    pub hotkeys: std::sync::Mutex<hotkeys::Board>,
    /// `[near_cache]`'s hits, fills and entries.
    pub near_cache: near_cache::NearCacheCounters,
    /// Error replies by code (`errorstats.rs`).
    pub errors: crate::context::errorstats::ErrorStats,
    /// Counts requests to pick the sampled ones (this worker's thread only writes it).
    pub sample_tick: AtomicU64,
    /// This worker's SLOWLOG entries.
    pub slowlog: crate::context::slowlog::Ring,
    /// This worker's entries of COMMANDLOG's `large-request` and `large-reply` logs.
    pub large_requests: crate::context::slowlog::Ring,
    pub large_replies: crate::context::slowlog::Ring,
    /// This worker's counters per backend node.
    pub nodes: crate::backend::stats::NodeRegistry,
    /// Read-only commands by read policy and destination.
    pub reads: reads::ReadCounters,
    /// This worker's clients, for CLIENT LIST/KILL (O(1) connect and close).
    pub(crate) registry: Arc<crate::context::registry::Registry>,
}

impl WorkerStats {
    /// Add 1. Each counter has a single writer, its worker's thread, so a load and a store
    /// do: no locked read-modify-write on the request path (readers on other threads see
    /// each value whole, as with any relaxed store).
    #[inline]
    pub fn bump(counter: &AtomicU64) {
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// This worker's ring of the log of `kind`.
    pub(crate) fn log_ring(&self, kind: slowlog::LogKind) -> &slowlog::Ring {
        match kind {
            slowlog::LogKind::Slow => &self.slowlog,
            slowlog::LogKind::LargeRequest => &self.large_requests,
            slowlog::LogKind::LargeReply => &self.large_replies,
        }
    }
}

/// Sum of all workers' counters, for INFO.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    pub connections_received: u64,
    pub connections_closed: u64,
    pub commands_processed: u64,
    pub protocol_errors: u64,
    pub redirects_moved: u64,
    pub redirects_ask: u64,
    pub tryagain_retries: u64,
    pub cluster_error_retries: u64,
    pub failover_held: u64,
    pub failover_released: u64,
    pub failover_expired: u64,
    pub rejected_connections: u64,
    pub tls_handshake_failures: u64,
    pub limit_disconnects: u64,
    pub output_limit_disconnects: u64,
    pub clients_evicted: u64,
    pub client_buffer_bytes: u64,
}

impl Shared {
    /// Milliseconds since the proxy started: the clock of CLIENT PAUSE's end.
    pub(crate) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// One command's counters summed over the workers.
    pub fn command_totals(&self, command: usize) -> crate::context::cmdstats::CommandTotals {
        let mut t = crate::context::cmdstats::CommandTotals::default();
        for w in &self.workers {
            w.commands.add_to(command, &mut t);
        }
        t
    }

    /// Every worker's near-cache counters summed: O(workers).
    pub fn near_cache_totals(&self) -> near_cache::NearCacheTotals {
        let mut t = near_cache::NearCacheTotals::default();
        for w in &self.workers {
            w.near_cache.add_to(&mut t);
        }
        t
    }

    /// Every worker's mirror counters summed: O(workers).
    pub fn mirror_totals(&self) -> traffic_mirror::MirrorTotals {
        let mut t = traffic_mirror::MirrorTotals::default();
        for w in &self.workers {
            w.mirror.add_to(&mut t);
        }
        t
    }

    /// Every worker's read counters summed: O(workers).
    pub fn read_totals(&self) -> reads::ReadTotals {
        let mut t = reads::ReadTotals::default();
        for w in &self.workers {
            w.reads.add_to(&mut t);
        }
        t
    }

    /// Sum every worker's counters: O(workers).
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for w in &self.workers {
            let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
            t.connections_received += get(&w.connections_received);
            t.connections_closed += get(&w.connections_closed);
            t.commands_processed += get(&w.commands_processed);
            t.protocol_errors += get(&w.protocol_errors);
            t.redirects_moved += get(&w.redirects_moved);
            t.redirects_ask += get(&w.redirects_ask);
            t.tryagain_retries += get(&w.tryagain_retries);
            t.cluster_error_retries += get(&w.cluster_error_retries);
            t.failover_held += get(&w.failover_held);
            t.failover_released += get(&w.failover_released);
            t.failover_expired += get(&w.failover_expired);
            t.rejected_connections += get(&w.rejected_connections);
            t.tls_handshake_failures += get(&w.tls_handshake_failures);
            t.limit_disconnects += get(&w.limit_disconnects);
            t.output_limit_disconnects += get(&w.output_limit_disconnects);
            t.clients_evicted += get(&w.clients_evicted);
            t.client_buffer_bytes += get(&w.client_buffer_bytes);
        }
        t
    }
}
