//! Client counters: topology refreshes and redirects, so an operator can see a
//! refresh storm (field report 000) or a migration in progress from the client
//! side. Each is one relaxed atomic add, never on a hot path's critical section.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub refresh_requested: AtomicU64,
    pub refresh_skipped_stale: AtomicU64,
    pub refresh_performed: AtomicU64,
    pub refresh_throttled: AtomicU64,
    pub refresh_failed: AtomicU64,
    pub maps_installed: AtomicU64,
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
    pub fn snapshot(&self) -> Stats {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            refresh_requested: r(&self.refresh_requested),
            refresh_skipped_stale: r(&self.refresh_skipped_stale),
            refresh_performed: r(&self.refresh_performed),
            refresh_throttled: r(&self.refresh_throttled),
            refresh_failed: r(&self.refresh_failed),
            maps_installed: r(&self.maps_installed),
            moved: r(&self.moved),
            ask: r(&self.ask),
            tryagain: r(&self.tryagain),
            reconnects: r(&self.reconnects),
        }
    }
}
