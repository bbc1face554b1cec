//! The proxy's side of the shared topology discipline (crate `topology`): one `Topology` per
//! process, shared by every worker, refreshed on its own thread, and the proxy's way of
//! fetching a map: CLUSTER SLOTS or CLUSTER SHARDS (`cluster.topology_command`), after the
//! backend AUTH, over a few connections kept open between refreshes (R8) rather than the
//! workers' pipelined ones, so a slow topology reply never delays a client's request.
//!
//! Throttling, coalescing, target choice, validation and MOVED patches live in `topology`;
//! only the I/O is here.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use cluster::slot_map::SlotMap;
use resp::Value;
use tokio::sync::watch;

use ::topology::TopologyCommand;
pub use ::topology::{Topology, TopologyStats};

use crate::config::ClusterConfig;
use crate::node_query::NodeConn;

mod identity;
mod replica_info;
pub mod replicas;
pub(crate) mod sentinel;
pub use replicas::ReplicaHealth;

/// TLS towards the nodes, when `backend_tls.enabled`.
pub(crate) type Tls = Option<Arc<crate::tls::Connector>>;

/// Connections to nodes the refresher keeps open between refreshes, at most.
const MAX_KEPT_CONNECTIONS: usize = 8;

/// Why no topology could be had at start.
#[derive(Debug, thiserror::Error)]
#[error("no seed node answered CLUSTER SLOTS with a usable map: {0}")]
pub struct BootstrapError(String);

/// Ask the seeds, in random order, until one returns a usable map. Blocking; call once at
/// start, outside any runtime.
pub(crate) fn bootstrap(cfg: &ClusterConfig, tls: Tls) -> Result<Arc<Topology>, BootstrapError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BootstrapError(e.to_string()))?;
    // Connections opened here belong to this runtime and close with the source.
    let mut source = NodeSource::new(cfg, tls);
    let map = rt
        .block_on(::topology::bootstrap(&cfg.seeds, &mut source))
        .map_err(|e| BootstrapError(e.to_string()))?;
    Ok(with_map(cfg, map))
}

/// The master the sentinels name (`[sentinel]`), as a one-slot map. Blocking, like
/// `bootstrap`.
pub(crate) fn bootstrap_sentinel(
    cfg: &crate::config::Config,
    tls: Tls,
) -> Result<Arc<Topology>, BootstrapError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BootstrapError(e.to_string()))?;
    let mut source = sentinel::SentinelSource::new(&cfg.sentinel, tls);
    let map = rt
        .block_on(::topology::bootstrap(&cfg.sentinel.sentinels, &mut source))
        .map_err(|e| BootstrapError(e.to_string()))?;
    Ok(with_map(&cfg.cluster, map))
}

/// A topology starting from `map` (which must carry version 1).
pub fn with_map(cfg: &ClusterConfig, map: SlotMap) -> Arc<Topology> {
    Arc::new(Topology::new(map, pacing(cfg)))
}

/// The proxy's refresh pacing. The extra wait is a quarter of the interval: enough to keep a
/// fleet of proxies apart, and the interval stays a true minimum.
pub(crate) fn pacing(cfg: &ClusterConfig) -> ::topology::Pacing {
    let min_interval = Duration::from_millis(cfg.min_refresh_interval_ms);
    ::topology::Pacing {
        min_interval,
        max_extra: min_interval / 4,
        periodic: Duration::from_millis(cfg.periodic_refresh_ms),
    }
}

/// Run the refresher, the replica sampler and the identity sampler on their own thread (with its own runtime, so
/// no worker's event loop ever runs a topology query) until `shutdown` turns true.
pub(crate) fn spawn_refresher(
    topo: &Arc<Topology>,
    config: &crate::config::Config,
    replicas: &Arc<ReplicaHealth>,
    identity: &Arc<crate::identity::Identity>,
    tls: Tls,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let cfg = &config.cluster;
    let topo = topo.clone();
    let sampler = replicas::run_sampler(
        replicas.clone(),
        topo.clone(),
        backend_auth(cfg),
        tls.clone(),
    );
    let identified = identity::run_sampler(
        identity.clone(),
        topo.clone(),
        backend_auth(cfg),
        tls.clone(),
    );
    // A sharded pool's map is its configuration: no node can tell a newer one.
    let follow = match (config.sentinel.is_set(), config.sharded.is_set()) {
        (true, _) => Follow::Sentinel(
            sentinel::SentinelSource::new(&config.sentinel, tls.clone()),
            config.sentinel.clone(),
            tls,
        ),
        (false, true) => Follow::Fixed,
        (false, false) => Follow::Cluster(NodeSource::new(cfg, tls)),
    };
    let identity = identity.clone();
    std::thread::Builder::new()
        .name("slotgate-topology".into())
        .spawn(move || {
            // The identity sampler installs the table learned from this proxy's masters.
            identity.route_this_thread();
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return tracing::error!(error = %e, "topology refresher cannot start"),
            };
            let stop = async move {
                let _ = shutdown.changed().await;
            };
            let refresher = async move {
                match follow {
                    Follow::Cluster(source) => topo.run_refresher(source, stop).await,
                    Follow::Fixed => stop.await,
                    Follow::Sentinel(source, sentinels, tls) => tokio::select! {
                        _ = topo.clone().run_refresher(source, stop) => {}
                        _ = sentinel::follow(topo, sentinels, tls) => {}
                    },
                }
            };
            rt.block_on(async move {
                // The sampler never ends; the refresher ends at shutdown and takes it along.
                tokio::select! {
                    _ = refresher => {}
                    _ = sampler => {}
                    _ = identified => {}
                }
            });
        })
}

/// Where the map comes from after the start.
enum Follow {
    /// CLUSTER SHARDS or SLOTS from the nodes.
    Cluster(NodeSource),
    /// Nowhere: a sharded pool's map is its configuration.
    Fixed,
    /// The sentinels, asked by the refresher and followed by subscription.
    Sentinel(sentinel::SentinelSource, crate::config::SentinelConfig, Tls),
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

/// Maps fetched over kept connections: the optional AUTH, then CLUSTER SLOTS or SHARDS.
struct NodeSource {
    conns: HashMap<String, NodeConn>,
    auth: Option<bytes::Bytes>,
    tls: Tls,
    command: TopologyCommand,
}

impl NodeSource {
    fn new(cfg: &ClusterConfig, tls: Tls) -> NodeSource {
        NodeSource {
            conns: HashMap::new(),
            auth: backend_auth(cfg),
            tls,
            // `Config::validate` refused any other name.
            command: TopologyCommand::from_name(&cfg.topology_command).unwrap_or_default(),
        }
    }

    /// The query's reply from `addr`, over its kept connection or a new one (then kept).
    async fn call(&mut self, addr: &str) -> Result<Value, String> {
        // The target is uniformly random, so the cache would otherwise grow to every node;
        // at one refresh a second, reopening now and then costs nothing.
        if self.conns.len() >= MAX_KEPT_CONNECTIONS && !self.conns.contains_key(addr) {
            self.conns.clear();
        }
        let result = match self.conns.get_mut(addr) {
            Some(conn) => conn.call(self.command.args()).await,
            None => match NodeConn::connect(addr, self.auth.as_ref(), self.tls.as_deref()).await {
                Ok(mut conn) => {
                    let r = conn.call(self.command.args()).await;
                    self.conns.insert(addr.to_string(), conn);
                    r
                }
                Err(e) => Err(e),
            },
        };
        if result.is_err() {
            self.conns.remove(addr);
        }
        result
    }
}

impl ::topology::Source for NodeSource {
    type Error = String;

    async fn fetch(&mut self, addr: &str, version: u64) -> Result<SlotMap, String> {
        let mut reply = self.call(addr).await?;
        if matches!(reply, Value::Error(_)) && self.command == TopologyCommand::Auto {
            // A server before Redis 7 (or one that refuses SHARDS to the backend user).
            tracing::info!(%addr, "CLUSTER SHARDS refused; reading the topology with CLUSTER SLOTS");
            self.command = TopologyCommand::Slots;
            reply = self.call(addr).await?;
        }
        if let Value::Error(e) = &reply {
            return Err(String::from_utf8_lossy(e).into_owned());
        }
        self.command
            .parse(version, &reply, addr, self.tls.is_some())
            .map_err(|e| e.to_string())
    }
}
