//! slotgate's proxy: speaks RESP to any client and serves it from a Redis Cluster.
//!
//! ```text
//!              ┌──────────── worker thread (one per core) ─────────────┐
//!   client ──▶ │ listener (SO_REUSEPORT) ─▶ session ─▶ router          │
//!              │      ▲ replies in order      │ slot → backend         │ ──▶ redis nodes
//!              │      └──── ReplyQueue ◀──── backend conn (one per node)│
//!              └────────────────────────────────────────────────────────┘
//!                      ▲ reads the slot map (atomic pointer)
//!              topology service thread (crate `topology`): coalesced + throttled
//! ```
//!
//! Tour: `session` (one client), `pending` (the reply-order queue), `router` (where a request
//! goes), `backend` (one multiplexed connection per node per worker), `redirect` (MOVED/ASK),
//! `topology` (the shared map, its refresher thread and topology queries), `local` and `info` (commands answered here),
//! `worker` (the per-thread state), `config` and `stats`.
//!
//! Invariants: each client receives its replies in its own request order; nothing on the
//! request path takes a lock, hops threads or logs at info level.

// Time is read through tokio's clock, which tests can pause (`clippy.toml`).
#![deny(clippy::disallowed_types)]

mod accept;
mod admin;
mod auth;
mod backend;
mod budget;
pub mod config;
mod context;
mod group;
mod identity;
mod keepalive;
mod migration;
mod node_query;
mod patience;
mod redact;
mod reload;
mod reply;
mod route;
mod session;
mod tls;
pub mod topology;
mod worker;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::time::Instant;

use tokio::sync::watch;

use self::topology::Topology;
pub use config::source::ConfigSource;
pub use config::{Config, Secret};
use context::{Shared, WorkerStats};
pub use reload::{ReloadError, ReloadReport};

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Topology(#[from] topology::BootstrapError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
    #[error("sharded pool: {0}")]
    Pool(cluster::slot_map::TopologyError),
    #[error("migration source: {0}")]
    MigrationSource(String),
}

/// A running proxy. Dropping it does not stop it; call `shutdown`.
pub struct Proxy {
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    admin_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    /// Tells the accept loops to hand over their queues and close (graceful shutdown).
    drain: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Validate `config`, learn the topology from the seeds, bind the listeners and start the
    /// workers. Returns once clients can connect.
    pub fn start(config: Config) -> Result<Proxy, StartError> {
        let listen = config.validate()?;
        raise_fd_limit(config.limits.maxclients);
        let tls = Tls::load(&config)?;
        let placement = config.placement()?;
        let traffic_mirror = context::traffic_mirror::TrafficMirror::from_config(&config.mirror)?;
        let topology = match placement.static_map() {
            Some(map) => topology::with_map(&config.cluster, map.map_err(StartError::Pool)?),
            None if config.sentinel.is_set() => {
                topology::bootstrap_sentinel(&config, tls.backend.clone())?
            }
            None => topology::bootstrap(&config.cluster, tls.backend.clone())?,
        };
        let n = config.worker_threads();
        let listeners = accept::bind_listeners(listen, n).map_err(|e| StartError::Listen {
            addr: e.addr,
            source: e.source,
        })?;
        let addr = listeners.addr;
        let workers: Vec<Arc<WorkerStats>> = (0..n).map(|_| Arc::default()).collect();
        let pools = (placement, traffic_mirror.map(Arc::new));
        let migration = match config.migration.is_set() {
            true => {
                let m = migration::Migration::new(
                    &config.migration,
                    pools.0.clone(),
                    topology::backend_auth(&config.cluster),
                    tls.backend.clone(),
                )?;
                migration::copier::learn_source(&m).map_err(StartError::MigrationSource)?;
                Some(Arc::new(m))
            }
            false => None,
        };
        let shared = build_shared(config, addr, &topology, pools, migration, &workers, tls);
        let (tx, rx) = watch::channel(false);
        let admin = start_admin(&shared, rx.clone())?;
        let (drain, drain_rx) = watch::channel(false);
        let tls_addr = listeners.tls_addr;
        let stops = (rx, drain_rx);
        let copier = match &shared.migration {
            Some(m) => Some(
                migration::copier::spawn(m.clone(), topology.clone(), stops.0.clone())
                    .map_err(StartError::Thread)?,
            ),
            None => None,
        };
        let mut threads = spawn_threads(&topology, &shared, listeners.per_worker, workers, stops)?;
        threads.extend(copier);
        let admin_addr = admin.map(|(addr, thread)| {
            threads.push(thread);
            addr
        });
        tracing::info!(%addr, ?tls_addr, workers = n, masters = topology.current().nodes().len(), "slotgate proxy ready");
        Ok(Proxy {
            addr,
            tls_addr,
            admin_addr,
            shutdown: tx,
            drain,
            threads,
            shared,
        })
    }

    /// The address clients connect to (the real port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TLS listener's address, when `tls.listen` is set.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// Where `GET /metrics` is served, when enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The shared topology (for tests and the admin side).
    pub fn topology(&self) -> &Arc<Topology> {
        &self.shared.topology
    }

    /// Re-read the configuration from `source` on every later reload (SIGHUP, `POST
    /// /reload`); without one, only `reload_with` can reload.
    pub fn set_config_source(&self, source: ConfigSource) {
        *self
            .shared
            .config_source
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(source);
    }

    /// Re-read the configuration file and apply what can change live (docs/operations.md).
    /// On error nothing changed.
    pub fn reload(&self) -> Result<ReloadReport, ReloadError> {
        reload::from_source(&self.shared)
    }

    /// Apply `config` as a reload of the file would.
    pub fn reload_with(&self, config: Config) -> Result<ReloadReport, ReloadError> {
        reload::apply(&self.shared, config)
    }

    /// A handle that reloads from another thread (a signal handler) while `self` waits.
    pub fn reloader(&self) -> Reloader {
        Reloader(self.shared.clone())
    }

    /// Stop accepting, close every client and backend connection, join the threads.
    pub fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.threads {
            let _ = t.join();
        }
    }

    /// Stop as an upgrade needs it: stop accepting (clients already queued are still
    /// served; a new process may listen on the same port meanwhile), close each client at
    /// its first moment with nothing owed, and after `drain` read nothing more and close
    /// each client once what it sent is answered (at most `DRAIN_GRACE` more). Then stop.
    pub fn shutdown_gracefully(self, drain: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let started = tokio::time::Instant::now();
        self.shared.drain.store(context::DRAIN_WHEN_IDLE, Relaxed);
        let _ = self.drain.send(true);
        self.wake_clients();
        let gone = || self.shared.clients.load(Relaxed) == 0;
        wait_until(started + drain, gone);
        if !gone() {
            self.shared
                .drain
                .store(context::DRAIN_STOP_READING, Relaxed);
            self.wake_clients();
            wait_until(tokio::time::Instant::now() + DRAIN_GRACE, gone);
        }
        tracing::info!(left = self.shared.clients.load(Relaxed), "drained");
        self.shutdown();
    }

    /// `proxy.drain_timeout_ms` as in force (a reload may change it).
    pub fn drain_timeout(&self) -> std::time::Duration {
        let ms = self.shared.live.load().config.proxy.drain_timeout_ms;
        std::time::Duration::from_millis(ms)
    }

    /// Make every session look at the drain phase now, idle ones included.
    fn wake_clients(&self) {
        for w in &self.shared.workers {
            w.registry.wake_all();
        }
    }

    /// Block until the proxy stops (it stops only through `shutdown` from another handle).
    pub fn wait(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// How long clients still connected after the drain timeout get for the replies they are
/// owed before the proxy stops anyway.
const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Poll `done` every 10 ms until it holds or `deadline` passes (shutdown only).
fn wait_until(deadline: tokio::time::Instant, done: impl Fn() -> bool) {
    while !done() && tokio::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Reloads the proxy it came from (`Proxy::reloader`).
#[derive(Clone)]
pub struct Reloader(Arc<Shared>);

impl Reloader {
    /// As `Proxy::reload`.
    pub fn reload(&self) -> Result<ReloadReport, ReloadError> {
        reload::from_source(&self.0)
    }
}

/// The state every worker and the admin side share; `addr` is the bound address, which
/// replaces `proxy.listen` so a configured port 0 reads back as the real port.
fn build_shared(
    mut config: Config,
    addr: SocketAddr,
    topology: &Arc<Topology>,
    (placement, traffic_mirror): (
        cluster::Placement,
        Option<Arc<context::traffic_mirror::TrafficMirror>>,
    ),
    migration: Option<Arc<migration::Migration>>,
    workers: &[Arc<WorkerStats>],
    tls: Tls,
) -> Arc<Shared> {
    // As configured: a reload compares the file with it (port 0 stays 0).
    let live = context::live::Live::new(config.clone());
    config.proxy.listen = addr.to_string();
    let config_cluster = config.cluster.clone();
    let slowlog = context::slowlog::Slowlog::new(&config.slowlog);
    let write_epochs =
        (config.near_cache.enabled).then(|| Arc::new(context::near_cache::WriteEpochs::new()));
    Arc::new(Shared {
        config,
        topology: topology.clone(),
        placement,
        traffic_mirror,
        migration,
        write_epochs,
        workers: workers.to_vec(),
        started: Instant::now(),
        next_client_id: AtomicU64::new(1),
        group: context::group::GroupState::new(addr),
        clients: Default::default(),
        live: arc_swap::ArcSwap::from_pointee(live),
        live_gen: AtomicU64::new(0),
        reloads: AtomicU64::new(0),
        reload_failures: AtomicU64::new(0),
        config_source: Default::default(),
        drain: Default::default(),
        ask_slots: Default::default(),
        backend_auth: topology::backend_auth(&config_cluster),
        replicas: topology::ReplicaHealth::new(
            config_cluster.max_replica_lag,
            &config_cluster.availability_zone,
        ),
        identity: Default::default(),
        slowlog,
        pause: Default::default(),
        monitors: Default::default(),
        history: Default::default(),
        hotkeys_run: Default::default(),
        code_flags: Default::default(),
        tracking_prefixes: Default::default(),
        side_calls: Default::default(),
        tls_acceptor: tls.acceptor,
        backend_tls: tls.backend,
    })
}

/// Both sides' TLS settings, loaded before anything listens or dials.
struct Tls {
    acceptor: Option<Arc<tls::Acceptor>>,
    backend: Option<Arc<tls::Connector>>,
}

impl Tls {
    fn load(config: &Config) -> Result<Tls, StartError> {
        let acceptor = match config.tls.listen.is_empty() {
            true => None,
            false => Some(Arc::new(tls::Acceptor::new(&config.tls)?)),
        };
        let backend = tls::Connector::new(&config.backend_tls)?;
        Ok(Tls { acceptor, backend })
    }
}

/// How long the start waits for the identity sampler's first round (`identity.rs`).
const FIRST_ROUND_CEILING: std::time::Duration = std::time::Duration::from_secs(5);

/// The topology refresher, the group's health checks and one worker per listener, all stopped by
/// the same shutdown channel.
fn spawn_threads(
    topology: &Arc<Topology>,
    shared: &Arc<Shared>,
    listeners: Vec<accept::Listeners<std::net::TcpListener>>,
    workers: Vec<Arc<WorkerStats>>,
    (rx, drain): (watch::Receiver<bool>, watch::Receiver<bool>),
) -> Result<Vec<JoinHandle<()>>, StartError> {
    let mut threads = vec![topology::spawn_refresher(
        topology,
        &shared.config,
        &shared.replicas,
        &shared.identity,
        shared.backend_tls.clone(),
        rx.clone(),
    )
    .map_err(StartError::Thread)?];
    threads.push(group::spawn(shared.clone(), rx.clone()).map_err(StartError::Thread)?);
    // No client is served before the nodes' identity and commands are known: one that came
    // first would see the default identity (HELLO, INFO server) and miss the commands the
    // servers added. Clients that connect meanwhile wait in the listeners' backlog.
    if !shared.identity.wait_first_round(FIRST_ROUND_CEILING) {
        tracing::warn!(
            "no node answered INFO and COMMAND INFO within {FIRST_ROUND_CEILING:?}: serving with the default identity until one does"
        );
    }
    for (i, (listener, stats)) in listeners.into_iter().zip(workers).enumerate() {
        threads.push(spawn_worker(
            i,
            listener,
            shared.clone(),
            stats,
            (rx.clone(), drain.clone()),
        )?);
    }
    Ok(threads)
}

/// Each client and backend connection is a file descriptor: raise the soft limit towards
/// what `maxclients` needs (the hard limit caps it; then warn, as Redis does).
fn raise_fd_limit(maxclients: usize) {
    let want = maxclients as u64 + 1024;
    let Ok((soft, hard)) = rlimit::Resource::NOFILE.get() else {
        return;
    };
    let target = want.min(hard);
    if target > soft && rlimit::Resource::NOFILE.set(target, hard).is_err() {
        return tracing::warn!(soft, "could not raise the open-files limit");
    }
    if target < want {
        tracing::warn!(
            limit = target,
            maxclients,
            "the open-files limit is below what maxclients needs; connections past it are refused"
        );
    }
}

/// Serve the admin endpoint when `admin.listen` is set, until `shutdown`; returns the
/// bound address and its thread.
fn start_admin(
    shared: &Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) -> Result<Option<(SocketAddr, JoinHandle<()>)>, StartError> {
    let Some(addr) = shared.config.admin_addr()? else {
        return Ok(None);
    };
    let (bound, thread) = admin::http::spawn(addr, shared.clone(), shutdown)
        .map_err(|source| StartError::Listen { addr, source })?;
    let token = !shared.config.admin.token.is_empty();
    tracing::info!(%bound, token, "admin endpoint ready");
    Ok(Some((bound, thread)))
}

fn spawn_worker(
    i: usize,
    listeners: accept::Listeners<std::net::TcpListener>,
    shared: Arc<Shared>,
    stats: Arc<WorkerStats>,
    (shutdown, drain): (watch::Receiver<bool>, watch::Receiver<bool>),
) -> Result<JoinHandle<()>, StartError> {
    std::thread::Builder::new()
        .name(format!("slotgate-w{i}"))
        .spawn(move || {
            shared.identity.route_this_thread();
            // A local runtime, not a `LocalSet`: a `LocalSet` runs 61 tasks per look at the
            // sockets whatever `event_interval` says, so a client whose request arrived
            // waited behind 61 slices of a big value (`worker.rs`, fairness).
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .event_interval(shared.config.proxy.event_interval)
                .build_local(tokio::runtime::LocalOptions::default())
            {
                Ok(rt) => rt,
                Err(e) => return tracing::error!(error = %e, "worker runtime failed to start"),
            };
            rt.block_on(async move {
                let listeners = match listeners.into_tokio() {
                    Ok(l) => l,
                    Err(e) => return tracing::error!(error = %e, "worker cannot use its listener"),
                };
                let worker = worker::Worker::new(shared, stats);
                accept::accept_loop(listeners, worker.clone(), shutdown.clone(), drain).await;
                accept::wait_for_clients(&worker, shutdown).await;
            });
        })
        .map_err(StartError::Thread)
}
