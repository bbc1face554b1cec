//! Local Redis Clusters made of real cluster-enabled `redis-server`
//! processes, for slotgate's demo, integration tests and benchmarks
//! (`slotgate cluster up|down|status`). Everything is blocking std code: no
//! async runtime is needed to start a handful of processes and poll them.
//!
//! ```no_run
//! let cluster = devcluster::Cluster::start(&devcluster::Options::default())?;
//! let reply = cluster.command(cluster.seed(), &["CLUSTER", "INFO"])?;
//! # Ok::<(), anyhow::Error>(())
//! ```

mod admin;
mod cli;
mod cluster;
mod form;
mod health;
mod launch;
mod ports;
mod process;
mod resp;

mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use ::cluster::key_slot;
pub use admin::{down, status};
pub use cli::{run_cli, ClusterCommand};
pub use cluster::Cluster;
pub use form::SLOTS;
pub use ports::{free_port_pair, BUS_OFFSET};
pub use resp::Reply;

/// Prefix of the directories [`Options::default`] invents; only those are
/// removed again when their cluster stops.
pub(crate) const TEMP_PREFIX: &str = "slotgate-devcluster-";

/// How to build a cluster.
#[derive(Debug, Clone)]
pub struct Options {
    /// Number of masters, at least 1; slots are split evenly between them.
    pub masters: usize,
    /// Replicas per master.
    pub replicas: usize,
    /// First client port; node `i` gets `base_port + i`. `None` picks free
    /// port pairs (see [`free_port_pair`]). The bus port is always `+10000`.
    pub base_port: Option<u16>,
    /// Holds the node dirs (`node-000`, ...), their configs and logs, and
    /// the state file `cluster.state`.
    pub dir: PathBuf,
    /// `cluster-node-timeout` in milliseconds; failover takes a few of these.
    pub node_timeout_ms: u64,
    /// The redis-server binary.
    pub redis_server: PathBuf,
    /// Extra `key value` lines appended to every node's config.
    pub extra_config: Vec<(String, String)>,
    /// Serve clients over TLS too (a `tls-port` per node, `tls-cluster yes`,
    /// `tls-replication yes`); the plain port stays for devcluster's own use.
    pub tls: Option<TlsFiles>,
}

/// PEM files for TLS nodes. Each node presents `cert` (with the loopback IP
/// in its subjectAltName), also as its client certificate on the cluster bus,
/// and checks peers and clients against `ca`. Clients must present a
/// certificate signed by `ca` unless `auth_clients` is false.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    /// Redis `tls-auth-clients`: yes (its default) or no.
    pub auth_clients: bool,
}

impl Default for Options {
    /// 3 masters with 1 replica each on free ports, in a fresh directory under
    /// the system temp dir; `REDIS_SERVER` overrides the binary.
    fn default() -> Options {
        Options {
            masters: 3,
            replicas: 1,
            base_port: None,
            dir: fresh_temp_dir(),
            node_timeout_ms: 2000,
            redis_server: std::env::var_os("REDIS_SERVER")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("redis-server")),
            extra_config: Vec::new(),
            tls: None,
        }
    }
}

/// A name no other test thread or process will pick: pid, a process-wide
/// counter and a random suffix (the pid alone may be reused).
fn fresh_temp_dir() -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let salt: u32 = rand::random();
    let name = format!("{TEMP_PREFIX}{}-{n}-{salt:08x}", std::process::id());
    std::env::temp_dir().join(name)
}

/// One node as started. Roles are as planned at start: after a failover,
/// ask the nodes (`ROLE`) for the current picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Client address (always on 127.0.0.1).
    pub addr: SocketAddr,
    /// Process id of the redis-server.
    pub pid: u32,
    /// Cluster node id (40 hex chars).
    pub id: String,
    /// The master's node id if this node was started as a replica.
    pub master_of: Option<String>,
}
