//! Client counters: topology refreshes and redirects, so an operator can see a
//! refresh storm (field report 000) or a migration in progress from the client
//! side. Each is one relaxed atomic add, never on a hot path's critical section.

use std::sync::atomic::{AtomicU64, Ordering};

use topology::TopologyStats;

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub moved: AtomicU64,
    pub ask: AtomicU64,
    pub tryagain: AtomicU64,
    pub reconnects: AtomicU64,
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A snapshot of the client's counters.
///
/// # Examples
///
/// ```no_run
/// # fn f(client: &slotgate_client::Client) {
/// let s = client.stats();
/// println!("{} MOVED, {} refreshes", s.moved, s.refresh_performed);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Refreshes asked for (by MOVED, CLUSTERDOWN, lost connections).
    pub refresh_requested: u64,
    /// Requests ignored because the redirected request was routed on an older map.
    pub refresh_skipped_stale: u64,
    /// CLUSTER SLOTS queries actually run.
    pub refresh_performed: u64,
    /// Refreshes delayed by the minimum interval.
    pub refresh_throttled: u64,
    /// Refreshes where no node gave a usable map.
    pub refresh_failed: u64,
    /// New maps installed.
    pub maps_installed: u64,
    /// MOVED redirects followed.
    pub moved: u64,
    /// ASK redirects followed.
    pub ask: u64,
    /// TRYAGAIN / CLUSTERDOWN retries.
    pub tryagain: u64,
    /// Node connections opened after the first one to that node.
    pub reconnects: u64,
}

impl Counters {
    /// This client's counters, with the refresher's (`topo`; none in single-node mode).
    pub fn snapshot(&self, topo: Option<&TopologyStats>) -> Stats {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let t = |pick: fn(&TopologyStats) -> &AtomicU64| topo.map_or(0, |s| r(pick(s)));
        Stats {
            refresh_requested: t(|s| &s.refresh_requested),
            refresh_skipped_stale: t(|s| &s.refresh_skipped_stale),
            refresh_performed: t(|s| &s.refresh_performed),
            refresh_throttled: t(|s| &s.refresh_throttled),
            refresh_failed: t(|s| &s.refresh_failed),
            maps_installed: t(|s| &s.maps_installed),
            moved: r(&self.moved),
            ask: r(&self.ask),
            tryagain: r(&self.tryagain),
            reconnects: r(&self.reconnects),
        }
    }
}
