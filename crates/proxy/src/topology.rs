//! The topology service: one per process, shared by every worker.
//!
//! Workers read the current `SlotMap` lock-free (an atomic pointer load) and never wait for a
//! refresh. A MOVED is followed at once by the worker and patches its slot in place; it only
//! *asks* for a refresh. Asks are coalesced into a single pending bit, refreshes run one at a
//! time on the service's own thread, at most one per `min_refresh_interval_ms` (plus jitter),
//! and each asks one node picked uniformly at random over a connection kept open between
//! refreshes. That is the opposite of the storm in field report 000, where every client
//! answered every MOVED with its own CLUSTER SLOTS to the same node.
//!
//! A refreshed map is installed only if it assigns slots, belongs to the same cluster (node
//! ids overlap) and differs from the current one; otherwise the old map stays.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::BytesMut;
use cluster::slot_map::SlotMap;
use rand::seq::SliceRandom;
use rand::Rng;
use resp::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::config::ClusterConfig;
use crate::patches::Patches;

/// How long one CLUSTER SLOTS round trip may take before the node is skipped.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections to nodes the refresher keeps open between refreshes, at most.
const MAX_KEPT_CONNECTIONS: usize = 8;
/// Nodes tried per refresh before giving up until the next one.
const TRIES_PER_REFRESH: usize = 3;

/// Counters the INFO command shows; each is one relaxed atomic add, off the request path.
#[derive(Debug, Default)]
pub struct TopologyStats {
    pub refresh_requested: AtomicU64,
    pub refresh_skipped_stale: AtomicU64,
    pub refresh_performed: AtomicU64,
    pub refresh_throttled: AtomicU64,
    pub refresh_failed: AtomicU64,
    pub maps_installed: AtomicU64,
}

/// The shared topology.
pub struct Topology {
    map: ArcSwap<SlotMap>,
    /// Recent MOVED replies, re-applied over refreshes that have not caught up with them.
    patches: std::sync::Mutex<Patches>,
    wanted: AtomicBool,
    notify: Notify,
    next_version: AtomicU64,
    pub stats: TopologyStats,
    cfg: ClusterConfig,
}

/// Why no topology could be had at start.
#[derive(Debug, thiserror::Error)]
#[error("no seed node answered CLUSTER SLOTS with a usable map: {0}")]
pub struct BootstrapError(String);

// === impl Topology ===

impl Topology {
    /// Ask the seeds, in random order, until one returns a usable map. Blocking; call once at
    /// start, outside any runtime.
    pub fn bootstrap(cfg: &ClusterConfig) -> Result<Arc<Topology>, BootstrapError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BootstrapError(e.to_string()))?;
        let mut seeds = cfg.seeds.clone();
        seeds.shuffle(&mut rand::thread_rng());
        let mut last_err = String::from("no seeds configured");
        for seed in &seeds {
            match rt.block_on(fetch_map(seed, 1, None, Query::new(cfg))) {
                Ok(map) => return Ok(Topology::with_map(cfg, map)),
                Err(e) => last_err = format!("{seed}: {e}"),
            }
        }
        Err(BootstrapError(last_err))
    }

    /// A topology starting from `map` (which must carry version 1).
    pub fn with_map(cfg: &ClusterConfig, map: SlotMap) -> Arc<Topology> {
        Arc::new(Topology {
            map: ArcSwap::from_pointee(map),
            patches: Default::default(),
            wanted: AtomicBool::new(false),
            notify: Notify::new(),
            next_version: AtomicU64::new(2),
            stats: TopologyStats::default(),
            cfg: cfg.clone(),
        })
    }

    /// The map to route with. Lock-free; hold the guard only while routing one request.
    pub fn current(&self) -> arc_swap::Guard<Arc<SlotMap>> {
        self.map.load()
    }

    /// Ask for a refresh because a request routed with map `routed_version` was redirected.
    /// Free when a newer map is already installed (it was made after that redirect's cause).
    pub fn request_refresh(&self, routed_version: u64) {
        if routed_version < self.map.load().version() {
            self.stats
                .refresh_skipped_stale
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.stats.refresh_requested.fetch_add(1, Ordering::Relaxed);
        if !self.wanted.swap(true, Ordering::AcqRel) {
            self.notify.notify_one();
        }
    }

    /// A MOVED said `slot` now lives at `addr`: repoint it at once (in place when `addr` is a
    /// known master; otherwise through a copy of the map that knows it), remember it against
    /// lagging refreshes, and ask for a refresh. Off the request path: MOVED replies only.
    pub fn learn_moved(&self, slot: u16, addr: &str, routed_version: u64) {
        if let Ok(mut patches) = self.patches.lock() {
            patches.record(slot, addr);
        }
        let current = self.map.load();
        if !current.patch(slot, addr) {
            self.map.rcu(|map| {
                let bigger = map.with_master(addr);
                bigger.patch(slot, addr);
                bigger
            });
        }
        self.request_refresh(routed_version);
    }

    /// Ask for a refresh because a node misbehaved (unreachable, connection lost, cluster
    /// down): coalesced and throttled like every other request.
    pub fn request_refresh_now(&self) {
        self.stats.refresh_requested.fetch_add(1, Ordering::Relaxed);
        if !self.wanted.swap(true, Ordering::AcqRel) {
            self.notify.notify_one();
        }
    }

    /// Run the refresher on its own thread until `shutdown` turns true.
    pub fn spawn_refresher(
        self: &Arc<Self>,
        shutdown: watch::Receiver<bool>,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        let topo = self.clone();
        std::thread::Builder::new()
            .name("slotgate-topology".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => return tracing::error!(error = %e, "topology refresher cannot start"),
                };
                rt.block_on(topo.refresh_loop(shutdown));
            })
    }

    async fn refresh_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut conns: HashMap<String, NodeConn> = HashMap::new();
        let mut last = Instant::now();
        loop {
            let periodic = jittered(self.cfg.periodic_refresh_ms, 5);
            tokio::select! {
                _ = self.notify.notified() => {}
                _ = tokio::time::sleep(periodic) => {}
                _ = shutdown.changed() => return,
            }
            let earliest = last + jittered(self.cfg.min_refresh_interval_ms, 4);
            if Instant::now() < earliest {
                self.stats.refresh_throttled.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep_until(earliest).await;
            }
            self.wanted.store(false, Ordering::Release);
            last = Instant::now();
            self.refresh_once(&mut conns).await;
        }
    }

    /// One refresh: up to `TRIES_PER_REFRESH` random nodes, first usable answer wins.
    async fn refresh_once(&self, conns: &mut HashMap<String, NodeConn>) {
        self.stats.refresh_performed.fetch_add(1, Ordering::Relaxed);
        let current = self.map.load_full();
        let mut candidates: Vec<String> = current
            .nodes()
            .iter()
            .flat_map(|n| std::iter::once(n.addr.clone()).chain(n.replicas.iter().cloned()))
            .collect();
        candidates.shuffle(&mut rand::thread_rng());
        // Uniformly random, connected or not: preferring kept connections would make every
        // refresh of this proxy ask the same node (perhaps the busy migration source). At one
        // refresh a second, a new connection now and then costs nothing; the cache is bounded.
        if conns.len() > MAX_KEPT_CONNECTIONS {
            conns.clear();
        }
        let version = self.next_version.fetch_add(1, Ordering::Relaxed);
        for addr in candidates.iter().take(TRIES_PER_REFRESH) {
            match fetch_map(addr, version, Some(conns), Query::new(&self.cfg)).await {
                Ok(map) => return self.install(&current, map),
                Err(e) => tracing::debug!(node = %addr, error = %e, "topology query failed"),
            }
        }
        self.stats.refresh_failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "topology refresh failed on {} nodes; keeping the current map",
            TRIES_PER_REFRESH
        );
    }

    fn install(&self, current: &SlotMap, map: SlotMap) {
        if !current.same_cluster(&map) {
            tracing::warn!("refusing a topology that shares no node id with the current one");
            return;
        }
        let (map, lagging) = match self.patches.lock() {
            Ok(mut patches) => patches.reapply(map),
            Err(_) => (map, false),
        };
        if lagging {
            // The node asked had not caught up with a MOVED we saw: ask again later.
            self.request_refresh_now();
        }
        if current.same_routes(&map) && current.nodes() == map.nodes() {
            return;
        }
        tracing::info!(
            version = map.version(),
            masters = map.nodes().len(),
            "installing new slot map"
        );
        self.stats.maps_installed.fetch_add(1, Ordering::Relaxed);
        self.map.store(Arc::new(map));
    }
}

/// `base_ms` ± base/`div`, so a fleet of proxies does not refresh in lockstep.
fn jittered(base_ms: u64, div: u64) -> Duration {
    let spread = base_ms / div.max(1);
    let ms = base_ms.saturating_sub(spread) + rand::thread_rng().gen_range(0..=spread * 2);
    Duration::from_millis(ms)
}

/// CLUSTER SLOTS from `addr`, over a kept connection when `conns` is given.
async fn fetch_map(
    addr: &str,
    version: u64,
    conns: Option<&mut HashMap<String, NodeConn>>,
    query: Query,
) -> Result<SlotMap, String> {
    let Query { auth, command } = query;
    let reply = match conns {
        Some(conns) => {
            let result = match conns.get_mut(addr) {
                Some(conn) => conn.call(command).await,
                None => match NodeConn::connect(addr, auth.as_ref()).await {
                    Ok(mut conn) => {
                        let r = conn.call(command).await;
                        conns.insert(addr.to_string(), conn);
                        r
                    }
                    Err(e) => Err(e),
                },
            };
            if result.is_err() {
                conns.remove(addr);
            }
            result?
        }
        None => {
            NodeConn::connect(addr, auth.as_ref())
                .await?
                .call(command)
                .await?
        }
    };
    if let Value::Error(e) = &reply {
        return Err(String::from_utf8_lossy(e).into_owned());
    }
    let parsed = match command[1] {
        b"SHARDS" => SlotMap::from_cluster_shards(version, &reply, host_of(addr)),
        _ => SlotMap::from_cluster_slots(version, &reply, host_of(addr)),
    };
    parsed.map_err(|e| e.to_string())
}

/// What a topology query sends: the optional AUTH, then CLUSTER SLOTS or CLUSTER SHARDS.
struct Query {
    auth: Option<bytes::Bytes>,
    command: &'static [&'static [u8]],
}

impl Query {
    fn new(cfg: &ClusterConfig) -> Query {
        let command: &'static [&'static [u8]] = match cfg.topology_command.as_str() {
            "shards" => &[b"CLUSTER", b"SHARDS"],
            _ => &[b"CLUSTER", b"SLOTS"],
        };
        Query {
            auth: backend_auth(cfg),
            command,
        }
    }
}

/// `AUTH [user] password` for the nodes, encoded once; None when no password is configured.
pub(crate) fn backend_auth(cfg: &ClusterConfig) -> Option<bytes::Bytes> {
    if cfg.backend_password.is_empty() {
        return None;
    }
    let mut frame = BytesMut::new();
    match cfg.backend_user.is_empty() {
        true => resp::encode_command(&mut frame, &[b"AUTH", cfg.backend_password.as_bytes()]),
        false => resp::encode_command(
            &mut frame,
            &[
                b"AUTH",
                cfg.backend_user.as_bytes(),
                cfg.backend_password.as_bytes(),
            ],
        ),
    }
    Some(frame.freeze())
}

/// The host part of `host:port` (brackets of an IPv6 literal removed).
pub(crate) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// A minimal request/response connection for the service's own queries.
struct NodeConn {
    stream: TcpStream,
    buf: BytesMut,
}

impl NodeConn {
    async fn connect(addr: &str, auth: Option<&bytes::Bytes>) -> Result<NodeConn, String> {
        let stream = tokio::time::timeout(QUERY_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| "connect timed out".to_string())?
            .map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        let mut conn = NodeConn {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
        };
        if let Some(auth) = auth {
            conn.stream
                .write_all(auth)
                .await
                .map_err(|e| e.to_string())?;
            if let Value::Error(e) = conn.read_reply().await? {
                // Redis's error text never contains the password.
                return Err(format!("AUTH refused: {}", String::from_utf8_lossy(&e)));
            }
        }
        Ok(conn)
    }

    async fn call(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        tokio::time::timeout(QUERY_TIMEOUT, self.call_inner(args))
            .await
            .map_err(|_| "query timed out".to_string())?
    }

    async fn call_inner(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        let mut out = BytesMut::new();
        resp::encode_command(&mut out, args);
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| e.to_string())?;
        self.read_reply().await
    }

    async fn read_reply(&mut self) -> Result<Value, String> {
        self.buf.clear();
        let mut framer = resp::ReplyFramer::new();
        loop {
            if let Some(len) = framer.next_frame(&self.buf).map_err(|e| e.to_string())? {
                let frame = self.buf.split_to(len).freeze();
                return match resp::decode(&frame).map_err(|e| e.to_string())? {
                    Some((value, _)) => Ok(value),
                    None => Err("framer and decoder disagree".into()),
                };
            }
            if self
                .stream
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| e.to_string())?
                == 0
            {
                return Err("connection closed".into());
            }
        }
    }
}
