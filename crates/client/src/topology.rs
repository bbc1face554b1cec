//! The client's side of the shared topology discipline (crate `topology`, the same code the
//! proxy runs): how a map is fetched, namely CLUSTER SLOTS (or SHARDS, per
//! `Config::topology_command`) over the client's own connection to the node, so a refresh opens no connection of its own (R8), and how the refresher
//! task is started.
//!
//! Throttling, coalescing, target choice, validation and MOVED patches live in `topology`.

use std::sync::Arc;
use std::time::Duration;

use ::topology::{Pacing, Source, Topology, TopologyCommand};
use bytes::BytesMut;
use cluster::slot_map::SlotMap;
use resp::Value;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::pool::Pool;

/// How long one topology query round trip may take before the node is skipped.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// Asks the seeds, in random order, until one returns a usable map; then runs the refresher
/// task until `shutdown`'s sender is dropped.
pub(crate) async fn start(
    seeds: &[String],
    pool: &Arc<Pool>,
    pacing: Pacing,
    command: TopologyCommand,
    mut shutdown: watch::Receiver<()>,
) -> Result<Arc<Topology>> {
    let mut source = PoolSource {
        pool: pool.clone(),
        command,
    };
    let map = ::topology::bootstrap(seeds, &mut source)
        .await
        .map_err(|e| Error::Topology(format!("no seed gave a usable map: {e}")))?;
    let topo = Arc::new(Topology::new(map, pacing));
    let stop = async move {
        let _ = shutdown.changed().await;
    };
    tokio::spawn(topo.clone().run_refresher(source, stop));
    Ok(topo)
}

/// Maps fetched over the client's connection pool, shared with requests.
struct PoolSource {
    pool: Arc<Pool>,
    command: TopologyCommand,
}

impl Source for PoolSource {
    type Error = Error;

    async fn fetch(&mut self, addr: &str, version: u64) -> Result<SlotMap> {
        let mut buf = BytesMut::new();
        resp::encode_command(&mut buf, self.command.args());
        let send = self.pool.get(addr).submit(vec![buf.freeze()], 1).wait();
        let mut replies = tokio::time::timeout(QUERY_TIMEOUT, send)
            .await
            .map_err(|_| Error::Timeout)?;
        let reply = replies
            .pop()
            .ok_or_else(|| Error::Protocol("no reply".into()))??;
        if let Value::Error(e) = &reply {
            return Err(Error::Server(String::from_utf8_lossy(e).into_owned()));
        }
        self.command
            .parse(version, &reply, addr, false)
            .map_err(|e| Error::Topology(e.to_string()))
    }
}
