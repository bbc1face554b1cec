//! The cluster-aware client's view of the slot map, shared by all generator threads.
//!
//! Two refresh policies reproduce the two behaviours the field reports contrast:
//! `smart` patches the one slot a MOVED names and refreshes at most once per second, from a
//! random node; `naive` behaves like hiredis-vip in seed 000: every MOVED triggers a full
//! CLUSTER SLOTS, asking the nodes in the same fixed order, so the first node takes the storm.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use arc_swap::ArcSwap;
use bytes::Bytes;
use cluster::slot_map::SlotMap;

use crate::keys::Rng;

/// How the client reacts to MOVED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshPolicy {
    /// Patch the slot, then a throttled (≤ 1/s) refresh from a random node.
    Smart,
    /// A full CLUSTER SLOTS per MOVED, nodes asked in a fixed order.
    Naive,
}

impl std::str::FromStr for RefreshPolicy {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<RefreshPolicy> {
        match s {
            "smart" => Ok(RefreshPolicy::Smart),
            "naive" => Ok(RefreshPolicy::Naive),
            _ => bail!("unknown refresh policy {s:?} (smart|naive)"),
        }
    }
}

/// The shared slot map and refresh bookkeeping.
pub struct Topology {
    map: ArcSwap<SlotMap>,
    /// Which policy MOVED triggers.
    pub policy: RefreshPolicy,
    epoch: Instant,
    /// Milliseconds since `epoch` of the last smart refresh (the throttle).
    last_refresh_ms: AtomicU64,
    /// CLUSTER SLOTS calls this process made, all policies.
    pub refreshes: AtomicU64,
    version: AtomicU64,
}

impl Topology {
    /// Fetches the first map from the seeds (first that answers).
    pub async fn load(seeds: &[SocketAddr], policy: RefreshPolicy) -> Result<Arc<Topology>> {
        let mut last = None;
        for seed in seeds {
            match fetch(*seed, 1).await {
                Ok(map) => {
                    return Ok(Arc::new(Topology {
                        map: ArcSwap::from_pointee(map),
                        policy,
                        epoch: Instant::now(),
                        last_refresh_ms: AtomicU64::new(0),
                        refreshes: AtomicU64::new(1),
                        version: AtomicU64::new(1),
                    }))
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no seed given")))
    }

    /// The current map (a cheap refcount bump).
    pub fn map(&self) -> Arc<SlotMap> {
        self.map.load_full()
    }

    /// Reacts to `MOVED slot addr` per the policy. Naive refreshes inline (the caller waits,
    /// as hiredis-vip does); smart patches and refreshes in the background at most once a second.
    pub async fn on_moved(self: &Arc<Self>, slot: u16, addr: &str, rng: &mut Rng) {
        match self.policy {
            RefreshPolicy::Naive => {
                let _ = self.refresh_fixed_order().await;
            }
            RefreshPolicy::Smart => {
                // An address the map does not know yet is not patched; the refresh learns it.
                self.map.load().patch(slot, addr);
                self.kick(rng);
            }
        }
    }

    /// Starts a throttled background refresh from a random node (smart policy, or after a
    /// connection failure under any policy).
    pub fn kick(self: &Arc<Self>, rng: &mut Rng) {
        let now = self.epoch.elapsed().as_millis() as u64;
        let last = self.last_refresh_ms.load(Ordering::Relaxed);
        if now < last + 1000 && last != 0 {
            return;
        }
        if self
            .last_refresh_ms
            .compare_exchange(last, now.max(1), Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return; // another task won the slot for this second
        }
        let nodes = addrs(&self.map());
        let Some(&pick) = nodes.get(rng.below(nodes.len() as u64) as usize) else {
            return;
        };
        let me = Arc::clone(self);
        tokio::task::spawn_local(async move {
            let _ = me.refresh_from(pick).await;
        });
    }

    async fn refresh_fixed_order(&self) -> Result<()> {
        let mut nodes = addrs(&self.map());
        nodes.sort();
        for node in nodes {
            if self.refresh_from(node).await.is_ok() {
                return Ok(());
            }
        }
        bail!("no node answered CLUSTER SLOTS")
    }

    async fn refresh_from(&self, node: SocketAddr) -> Result<()> {
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        let version = self.version.fetch_add(1, Ordering::Relaxed) + 1;
        let map = fetch(node, version).await?;
        self.map.store(Arc::new(map));
        Ok(())
    }
}

/// The masters' addresses that parse as socket addresses.
fn addrs(map: &SlotMap) -> Vec<SocketAddr> {
    map.nodes()
        .iter()
        .filter_map(|n| n.addr.parse().ok())
        .collect()
}

/// One CLUSTER SLOTS round trip, parsed into a map.
pub async fn fetch(node: SocketAddr, version: u64) -> Result<SlotMap> {
    let frame = crate::conn::call(node, &[b"CLUSTER", b"SLOTS"])
        .await
        .with_context(|| format!("CLUSTER SLOTS from {node}"))?;
    let bytes = Bytes::from(frame);
    let (value, _) = resp::decode(&bytes)?.context("incomplete CLUSTER SLOTS reply")?;
    if let resp::Value::Error(e) = &value {
        bail!("{node}: {}", String::from_utf8_lossy(e));
    }
    Ok(SlotMap::from_cluster_slots(
        version,
        &value,
        &node.ip().to_string(),
    )?)
}
