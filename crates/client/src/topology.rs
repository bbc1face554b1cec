//! The client's slot map and its refresher, with the proxy's discipline
//! (crates/proxy/src/topology.rs; both should move to one shared crate).
//!
//! Requests read the map lock-free. A MOVED patches its one slot and only
//! *asks* for a refresh: asks coalesce into one pending bit, a single task runs
//! refreshes one at a time, at most one per `min_interval` plus jitter, and an
//! ask from a request routed on an older map than the current one is ignored.
//! Each refresh asks one node picked uniformly at random, preferring nodes the
//! client already has a connection to, and installs the answer only if it
//! assigns slots, is the same cluster (node ids overlap) and changes
//! something. Field report 000 is the storm this avoids.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::BytesMut;
use cluster::slot_map::SlotMap;
use rand::seq::SliceRandom;
use rand::Rng;
use resp::Value;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::stats::{bump, Counters};

/// How long one CLUSTER SLOTS round trip may take before the node is skipped.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// Nodes tried per refresh before giving up until the next one.
const TRIES_PER_REFRESH: usize = 3;

/// Refresh pacing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pacing {
    pub min_interval: Duration,
    pub periodic: Duration,
}

#[derive(Debug)]
pub(crate) struct Topology {
    map: ArcSwap<SlotMap>,
    wanted: AtomicBool,
    notify: Notify,
    next_version: AtomicU64,
    stats: Arc<Counters>,
    pacing: Pacing,
}

impl Topology {
    /// Asks the seeds, in random order, until one returns a usable map.
    pub async fn bootstrap(
        seeds: &[String],
        pool: &Pool,
        stats: Arc<Counters>,
        pacing: Pacing,
    ) -> Result<Topology> {
        let mut seeds = seeds.to_vec();
        seeds.shuffle(&mut rand::thread_rng());
        let mut last = Error::Invalid("no seeds given".into());
        for seed in &seeds {
            match fetch_map(pool, seed, 1).await {
                Ok(map) => {
                    return Ok(Topology {
                        map: ArcSwap::from_pointee(map),
                        wanted: AtomicBool::new(false),
                        notify: Notify::new(),
                        next_version: AtomicU64::new(2),
                        stats,
                        pacing,
                    })
                }
                Err(e) => last = e,
            }
        }
        Err(Error::Topology(format!(
            "no seed gave a usable map: {last}"
        )))
    }

    /// The map to route with; hold the guard only while routing.
    pub fn current(&self) -> arc_swap::Guard<Arc<SlotMap>> {
        self.map.load()
    }

    /// Asks for a refresh because a request routed on map `routed_version`
    /// was redirected. Free when a newer map is already installed.
    pub fn request_refresh(&self, routed_version: u64) {
        if routed_version < self.map.load().version() {
            bump(&self.stats.refresh_skipped_stale);
            return;
        }
        bump(&self.stats.refresh_requested);
        if !self.wanted.swap(true, Ordering::AcqRel) {
            self.notify.notify_one();
        }
    }

    /// Runs the refresher task until `shutdown`'s sender is dropped.
    pub fn spawn_refresher(self: &Arc<Self>, pool: Arc<Pool>, shutdown: watch::Receiver<()>) {
        tokio::spawn(self.clone().refresh_loop(pool, shutdown));
    }

    async fn refresh_loop(self: Arc<Self>, pool: Arc<Pool>, mut shutdown: watch::Receiver<()>) {
        let mut last = Instant::now();
        loop {
            tokio::select! {
                _ = self.notify.notified() => {}
                _ = tokio::time::sleep(jittered(self.pacing.periodic, 5)) => {}
                _ = shutdown.changed() => return,
            }
            let earliest = last + self.pacing.min_interval + jitter_up_to(self.pacing.min_interval);
            if Instant::now() < earliest {
                bump(&self.stats.refresh_throttled);
                tokio::select! {
                    _ = tokio::time::sleep_until(earliest) => {}
                    _ = shutdown.changed() => return,
                }
            }
            self.wanted.store(false, Ordering::Release);
            last = Instant::now();
            self.refresh_once(&pool).await;
        }
    }

    /// One refresh: up to `TRIES_PER_REFRESH` random nodes, first usable answer wins.
    async fn refresh_once(&self, pool: &Pool) {
        bump(&self.stats.refresh_performed);
        let current = self.map.load_full();
        let mut candidates: Vec<String> = current
            .nodes()
            .iter()
            .flat_map(|n| std::iter::once(n.addr.clone()).chain(n.replicas.iter().cloned()))
            .collect();
        candidates.shuffle(&mut rand::thread_rng());
        // Stable sort: still uniformly random within "already connected".
        candidates.sort_by_key(|a| !pool.is_open(a));
        let version = self.next_version.fetch_add(1, Ordering::Relaxed);
        for addr in candidates.iter().take(TRIES_PER_REFRESH) {
            if let Ok(map) = fetch_map(pool, addr, version).await {
                return self.install(&current, map);
            }
        }
        bump(&self.stats.refresh_failed);
    }

    fn install(&self, current: &SlotMap, map: SlotMap) {
        if !current.same_cluster(&map) {
            return; // A node that joined another cluster: keep ours.
        }
        if current.same_routes(&map) && current.nodes() == map.nodes() {
            return;
        }
        bump(&self.stats.maps_installed);
        self.map.store(Arc::new(map));
    }
}

/// `base` ± base/`div`, so many clients do not refresh in lockstep.
fn jittered(base: Duration, div: u32) -> Duration {
    let spread = base / div.max(1);
    base.saturating_sub(spread) + jitter_up_to(spread * 2)
}

/// Uniform in [0, max].
pub(crate) fn jitter_up_to(max: Duration) -> Duration {
    let ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rand::thread_rng().gen_range(0..=ms))
}

/// CLUSTER SLOTS from `addr` over the client's connection to it.
async fn fetch_map(pool: &Pool, addr: &str, version: u64) -> Result<SlotMap> {
    let mut buf = BytesMut::new();
    resp::encode_command(&mut buf, &[b"CLUSTER", b"SLOTS"]);
    let send = pool.get(addr).submit(vec![buf.freeze()], 1).wait();
    let mut replies = tokio::time::timeout(QUERY_TIMEOUT, send)
        .await
        .map_err(|_| Error::Timeout)?;
    let reply = replies
        .pop()
        .ok_or_else(|| Error::Protocol("no reply".into()))??;
    if let Value::Error(e) = &reply {
        return Err(Error::Server(String::from_utf8_lossy(e).into_owned()));
    }
    SlotMap::from_cluster_slots(version, &reply, host_of(addr))
        .map_err(|e| Error::Topology(e.to_string()))
}

/// The host part of `host:port`, brackets of an IPv6 literal removed.
pub(crate) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}
