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

mod accept;
mod admin;
mod auth;
mod backend;
mod budget;
pub mod config;
mod context;
mod keepalive;
mod node_query;
mod patience;
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
use std::time::Instant;

use tokio::sync::watch;

use self::topology::Topology;
pub use config::{Config, ConfigSource};
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
}

/// A running proxy. Dropping it does not stop it; call `shutdown`.
pub struct Proxy {
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    admin_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
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
        let topology = topology::bootstrap(&config.cluster, tls.backend.clone())?;
        let n = config.worker_threads();
        let listeners = bind_listeners(listen, n)?;
        let addr = listeners.addr;
        let workers: Vec<Arc<WorkerStats>> = (0..n).map(|_| Arc::default()).collect();
        let shared = build_shared(config, addr, &topology, &workers, tls);
        let admin_addr = start_admin(&shared)?;
        let (tx, rx) = watch::channel(false);
        let tls_addr = listeners.tls_addr;
        let threads = spawn_threads(&topology, &shared, listeners.per_worker, workers, rx)?;
        tracing::info!(%addr, ?tls_addr, workers = n, masters = topology.current().nodes().len(), "slotgate proxy ready");
        Ok(Proxy {
            addr,
            tls_addr,
            admin_addr,
            shutdown: tx,
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

    /// Block until the proxy stops (it stops only through `shutdown` from another handle).
    pub fn wait(self) {
        for t in self.threads {
            let _ = t.join();
        }
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
    workers: &[Arc<WorkerStats>],
    tls: Tls,
) -> Arc<Shared> {
    // As configured: a reload compares the file with it (port 0 stays 0).
    let live = context::live::Live::new(config.clone());
    config.proxy.listen = addr.to_string();
    let config_cluster = config.cluster.clone();
    let slowlog = context::slowlog::Slowlog::new(&config.slowlog);
    Arc::new(Shared {
        config,
        topology: topology.clone(),
        workers: workers.to_vec(),
        started: Instant::now(),
        next_client_id: AtomicU64::new(1),
        cluster_view: context::cluster_view::ClusterView::new(addr),
        clients: Default::default(),
        live: arc_swap::ArcSwap::from_pointee(live),
        reloads: AtomicU64::new(0),
        reload_failures: AtomicU64::new(0),
        config_source: Default::default(),
        backend_auth: topology::backend_auth(&config_cluster),
        slowlog,
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

/// The topology refresher, the slowlog clock and one worker per listener, all stopped by
/// the same shutdown channel.
fn spawn_threads(
    topology: &Arc<Topology>,
    shared: &Arc<Shared>,
    listeners: Vec<accept::Listeners<std::net::TcpListener>>,
    workers: Vec<Arc<WorkerStats>>,
    rx: watch::Receiver<bool>,
) -> Result<Vec<JoinHandle<()>>, StartError> {
    let mut threads = vec![topology::spawn_refresher(
        topology,
        &shared.config.cluster,
        shared.backend_tls.clone(),
        rx.clone(),
    )
    .map_err(StartError::Thread)?];
    for (i, (listener, stats)) in listeners.into_iter().zip(workers).enumerate() {
        threads.push(spawn_worker(
            i,
            listener,
            shared.clone(),
            stats,
            rx.clone(),
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

/// Serve `/metrics` when `admin.listen` is set; returns the bound address.
fn start_admin(shared: &Arc<Shared>) -> Result<Option<SocketAddr>, StartError> {
    let Some(addr) = shared.config.admin_addr()? else {
        return Ok(None);
    };
    let bound = admin::http::spawn(addr, shared.clone())
        .map_err(|source| StartError::Listen { addr, source })?;
    tracing::info!(%bound, "admin endpoint (GET /metrics) ready");
    Ok(Some(bound))
}

/// Every worker's listening sockets, and the addresses they were bound to.
struct Bound {
    /// The plain listener's address, or the TLS one's when there is no plain listener.
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    per_worker: Vec<accept::Listeners<std::net::TcpListener>>,
}

/// The plain and the TLS listeners, one of each per worker.
fn bind_listeners(addrs: config::ListenAddrs, n: usize) -> Result<Bound, StartError> {
    let plain = addrs.plain.map(|a| bind_n(a, n)).transpose()?;
    let tls = addrs.tls.map(|a| bind_n(a, n)).transpose()?;
    let first = |set: &Option<(SocketAddr, Vec<_>)>| set.as_ref().map(|(a, _)| *a);
    let tls_addr = first(&tls);
    // `validate` guarantees at least one listener.
    let addr = first(&plain)
        .or(tls_addr)
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
    let mut plain = plain.map(|(_, l)| l.into_iter());
    let mut tls = tls.map(|(_, l)| l.into_iter());
    let per_worker = (0..n)
        .map(|_| accept::Listeners {
            plain: plain.as_mut().and_then(Iterator::next),
            tls: tls.as_mut().and_then(Iterator::next),
        })
        .collect();
    Ok(Bound {
        addr,
        tls_addr,
        per_worker,
    })
}

/// One listening socket per worker on the same address (SO_REUSEPORT): the kernel spreads
/// connections over workers, so accepting never hops threads. Returns the bound address.
fn bind_n(
    addr: SocketAddr,
    n: usize,
) -> Result<(SocketAddr, Vec<std::net::TcpListener>), StartError> {
    let mut out: Vec<std::net::TcpListener> = Vec::with_capacity(n);
    let mut addr = addr;
    for _ in 0..n {
        let listener = bind_one(addr).map_err(|source| StartError::Listen { addr, source })?;
        if addr.port() == 0 {
            // The first bind chose the port; the others must share it.
            addr = listener
                .local_addr()
                .map_err(|source| StartError::Listen { addr, source })?;
        }
        out.push(listener);
    }
    Ok((addr, out))
}

fn bind_one(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    // Linux copies TCP_NODELAY from the listener to every accepted socket: one setsockopt
    // here instead of one per connection (short-lived clients pay for each syscall).
    socket.set_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

fn spawn_worker(
    i: usize,
    listeners: accept::Listeners<std::net::TcpListener>,
    shared: Arc<Shared>,
    stats: Arc<WorkerStats>,
    shutdown: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, StartError> {
    std::thread::Builder::new()
        .name(format!("slotgate-w{i}"))
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return tracing::error!(error = %e, "worker runtime failed to start"),
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let listeners = match listeners.into_tokio() {
                    Ok(l) => l,
                    Err(e) => return tracing::error!(error = %e, "worker cannot use its listener"),
                };
                let worker = worker::Worker::new(shared, stats);
                accept::accept_loop(listeners, worker, shutdown).await;
            });
        })
        .map_err(StartError::Thread)
}
