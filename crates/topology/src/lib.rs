//! The topology refresh discipline of the proxy and of the client library, in one place so
//! the two cannot drift apart: the shared slot map, MOVED patches, coalesced and throttled
//! refreshes from a uniformly random node, validation before install, the counters, and the
//! retry pacing (jitter, backoff, redirect budget).
//!
//! **Invariant:** one refresh at a time, at most one per interval, and a reader never waits:
//! routing is one atomic pointer load whatever the refresher is doing.
//!
//! ```text
//!   MOVED ─learn_moved─▶ patch the slot now (+ remember it against lagging refreshes)
//!     │                          │
//!     └─request_refresh─▶ pending bit ─notify─▶ refresher (one task) ─throttle─▶
//!        Source::fetch(random node) ─▶ same cluster? ─▶ re-apply patches ─▶ ArcSwap::store
//! ```
//!
//! How a map is fetched is the caller's business ([`Source`]): the proxy asks over its own
//! kept connections (AUTH, CLUSTER SLOTS or SHARDS), the client over its connection pool.
//! Field report 000 is the storm this avoids: every client answering every MOVED with its
//! own CLUSTER SLOTS to the same node.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use cluster::slot_map::SlotMap;
use tokio::sync::Notify;

mod pacing;
mod patches;
mod query;
mod refresher;

pub use pacing::{jitter_up_to, jittered, not_executed, Backoff, Pacing, MAX_REDIRECTS};
pub use query::TopologyCommand;
pub use refresher::{bootstrap, BootstrapError, Source};

use patches::Patches;

/// Counters for INFO, metrics and client stats; each is one relaxed atomic add, off the
/// request path.
#[derive(Debug, Default)]
pub struct TopologyStats {
    /// Refreshes asked for (MOVED, cluster errors, lost connections).
    pub refresh_requested: AtomicU64,
    /// Asks ignored because the redirected request was routed on an older map.
    pub refresh_skipped_stale: AtomicU64,
    /// Refreshes run (each asks up to a few nodes).
    pub refresh_performed: AtomicU64,
    /// Refreshes delayed by the minimum interval.
    pub refresh_throttled: AtomicU64,
    /// Refreshes where no node gave a usable map.
    pub refresh_failed: AtomicU64,
    /// New maps installed.
    pub maps_installed: AtomicU64,
    /// When the latest refresh ran, in milliseconds since the Unix epoch (0: none yet).
    pub last_refresh_unix_ms: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The shared topology: the current map plus what the refresher needs to keep it current.
#[derive(Debug)]
pub struct Topology {
    map: ArcSwap<SlotMap>,
    /// Recent MOVED replies, re-applied over refreshes that have not caught up with them.
    patches: Mutex<Patches>,
    /// The pending bit: set by any number of asks, cleared by the refresh that serves them.
    wanted: AtomicBool,
    notify: Notify,
    next_version: AtomicU64,
    pub stats: TopologyStats,
    /// Read once per refresher turn, never per request; a reload may replace it.
    pacing: Mutex<Pacing>,
}

// === impl Topology ===

impl Topology {
    /// A topology starting from `map` (which should carry version 1, as [`bootstrap`]'s does).
    pub fn new(map: SlotMap, pacing: Pacing) -> Topology {
        Topology {
            map: ArcSwap::from_pointee(map),
            patches: Mutex::default(),
            wanted: AtomicBool::new(false),
            notify: Notify::new(),
            // The starting map is version 1; refreshed maps count on from there.
            next_version: AtomicU64::new(2),
            stats: TopologyStats::default(),
            pacing: Mutex::new(pacing),
        }
    }

    /// The refresh pacing in force.
    pub fn pacing(&self) -> Pacing {
        *self.pacing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// New refresh pacing (a config reload): used from the refresher's next turn on.
    pub fn set_pacing(&self, pacing: Pacing) {
        *self.pacing.lock().unwrap_or_else(|p| p.into_inner()) = pacing;
    }

    /// The map to route with. Lock-free; hold the guard only while routing one request.
    pub fn current(&self) -> arc_swap::Guard<Arc<SlotMap>> {
        self.map.load()
    }

    /// A reader of the map for one thread (`MapReader`): what the request path uses.
    pub fn reader(self: &Arc<Self>) -> MapReader {
        MapReader {
            cache: RefCell::new(arc_swap::Cache::new(TopologyMap(self.clone()))),
            topology: self.clone(),
        }
    }

    /// Ask for a refresh because a request routed with map `routed_version` was redirected.
    /// Free when a newer map is already installed (it was made after that redirect's cause).
    pub fn request_refresh(&self, routed_version: u64) {
        if routed_version < self.map.load().version() {
            bump(&self.stats.refresh_skipped_stale);
            return;
        }
        self.request_refresh_now();
    }

    /// Ask for a refresh because a node misbehaved (unreachable, connection lost, cluster
    /// down): coalesced and throttled like every other ask.
    pub fn request_refresh_now(&self) {
        bump(&self.stats.refresh_requested);
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

    /// Whether an ask is pending (set, and not yet taken by a refresh).
    pub fn refresh_pending(&self) -> bool {
        self.wanted.load(Ordering::Acquire)
    }
}

/// One thread's reader of the map. `Topology::current` costs a guard per read (arc_swap's
/// debt slots: about a hundred instructions); this costs one atomic load while the map is
/// unchanged, and sees a new map as soon as it is stored, as `current` does.
pub struct MapReader {
    cache: RefCell<arc_swap::Cache<TopologyMap, Arc<SlotMap>>>,
    /// For a read nested inside `with` (the cache is borrowed then).
    topology: Arc<Topology>,
}

impl MapReader {
    /// The map in force now.
    #[inline]
    pub fn get(&self) -> Arc<SlotMap> {
        match self.cache.try_borrow_mut() {
            Ok(mut cache) => cache.load().clone(),
            Err(_) => self.topology.map.load_full(),
        }
    }

    /// `f` of the map in force now, without a reference count taken (a nested read inside
    /// `f` pays `get`'s fallback, a full load).
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&Arc<SlotMap>) -> R) -> R {
        match self.cache.try_borrow_mut() {
            Ok(mut cache) => f(cache.load()),
            Err(_) => f(&self.topology.map.load_full()),
        }
    }
}

impl std::fmt::Debug for MapReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MapReader")
    }
}

/// What a `MapReader`'s cache reads through: the shared topology's map.
pub struct TopologyMap(Arc<Topology>);

impl std::ops::Deref for TopologyMap {
    type Target = ArcSwap<SlotMap>;

    fn deref(&self) -> &ArcSwap<SlotMap> {
        &self.0.map
    }
}

#[cfg(test)]
mod tests;
