//! The refresher: waits for an ask (or the periodic check), honours the minimum interval,
//! asks one node picked uniformly at random through the caller's [`Source`], and installs
//! the answer only if it is the same cluster and changes something.
//!
//! Uniformly random, connected or not: preferring nodes with an open connection made every
//! refresh of one process ask the same node (perhaps the busy migration source, R5).

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use cluster::slot_map::SlotMap;
use rand::seq::SliceRandom;
use tokio::time::Instant;

use crate::{bump, jitter_up_to, jittered, Topology};

/// Nodes tried per refresh before giving up until the next one.
const TRIES_PER_REFRESH: usize = 3;

/// Where maps come from: one topology query to one node. Implementations keep whatever
/// connections they like between calls and bound each call's time themselves.
pub trait Source {
    type Error: fmt::Display;

    /// The map `addr` describes, stamped with `version`. A reply that is an error, malformed
    /// or assigns no slot is an `Err`; the refresher then tries another node.
    fn fetch(
        &mut self,
        addr: &str,
        version: u64,
    ) -> impl Future<Output = Result<SlotMap, Self::Error>> + Send;
}

/// Why no first map could be had.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError<E> {
    #[error("no seeds configured")]
    NoSeeds,
    /// The last seed tried, and what went wrong with it.
    #[error("{seed}: {error}")]
    Seed { seed: String, error: E },
}

/// Ask the seeds, in random order, until one returns a usable map (version 1).
pub async fn bootstrap<S: Source>(
    seeds: &[String],
    source: &mut S,
) -> Result<SlotMap, BootstrapError<S::Error>> {
    let mut seeds = seeds.to_vec();
    seeds.shuffle(&mut rand::thread_rng());
    let mut last = BootstrapError::NoSeeds;
    for seed in seeds {
        match source.fetch(&seed, 1).await {
            Ok(map) => return Ok(map),
            Err(error) => last = BootstrapError::Seed { seed, error },
        }
    }
    Err(last)
}

// === impl Topology ===

impl Topology {
    /// Run refreshes until `shutdown` completes. The first refresh waits out one interval
    /// from the start, as if the bootstrap had been a refresh.
    pub async fn run_refresher<S: Source>(
        self: Arc<Self>,
        mut source: S,
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut last = Instant::now();
        loop {
            let pacing = self.pacing();
            tokio::select! {
                _ = self.notify.notified() => {}
                _ = tokio::time::sleep(jittered(pacing.periodic, 5)) => {}
                _ = &mut shutdown => return,
            }
            let earliest = last + pacing.min_interval + jitter_up_to(pacing.max_extra);
            if Instant::now() < earliest {
                bump(&self.stats.refresh_throttled);
                tokio::select! {
                    _ = tokio::time::sleep_until(earliest) => {}
                    _ = &mut shutdown => return,
                }
            }
            // Cleared before the query: an ask arriving during it earns exactly one more.
            self.wanted
                .store(false, std::sync::atomic::Ordering::Release);
            last = Instant::now();
            // Each query has its own timeout; shutdown need not wait for them either.
            tokio::select! {
                _ = self.refresh_once(&mut source) => {}
                _ = &mut shutdown => return,
            }
        }
    }

    /// One refresh: up to `TRIES_PER_REFRESH` random nodes, the first usable answer wins.
    /// Returns whether some node answered (installed or not).
    pub async fn refresh_once<S: Source>(&self, source: &mut S) -> bool {
        bump(&self.stats.refresh_performed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.stats
            .last_refresh_unix_ms
            .store(now, std::sync::atomic::Ordering::Relaxed);
        let current = self.map.load_full();
        let mut candidates: Vec<String> = current
            .nodes()
            .iter()
            .flat_map(|n| std::iter::once(n.addr.clone()).chain(n.replicas.iter().cloned()))
            .collect();
        candidates.shuffle(&mut rand::thread_rng());
        let version = self
            .next_version
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for addr in candidates.iter().take(TRIES_PER_REFRESH) {
            match source.fetch(addr, version).await {
                Ok(map) => {
                    self.install(&current, map);
                    return true;
                }
                Err(e) => tracing::debug!(node = %addr, error = %e, "topology query failed"),
            }
        }
        bump(&self.stats.refresh_failed);
        tracing::warn!(
            tries = TRIES_PER_REFRESH,
            "topology refresh failed; keeping the current map"
        );
        false
    }

    /// Validate and install `map`: a map of another cluster (no common node id) is refused;
    /// MOVED patches it has not caught up with are applied over it (and another refresh is
    /// asked for); a map that changes nothing is dropped.
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
        // The slots with an owner: fewer than 16384 in front of a cluster is a hole (a shard
        // without a reachable master, as a failover can show for a moment), and requests
        // for those slots wait for the next map (`session/send/mod.rs`).
        tracing::info!(
            version = map.version(),
            masters = map.nodes().len(),
            slots = map.assigned(),
            "installing new slot map"
        );
        bump(&self.stats.maps_installed);
        self.map.store(Arc::new(map));
    }
}
