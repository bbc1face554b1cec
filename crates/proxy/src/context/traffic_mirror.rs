//! `[mirror]` as it runs: the second pool's placement, the share copied, and each worker's
//! counters (sent, dropped, answered, failed). The copying itself is the session's
//! (`session/traffic_mirror.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

use cluster::sharding::Sharding;

use crate::config::{ConfigError, MirrorConfig};

/// The mirror pool and what goes to it, fixed at start.
#[derive(Debug)]
pub struct TrafficMirror {
    pub pool: Sharding,
    /// Copied when a draw below 100 falls under it.
    pub percent: u32,
    pub writes_only: bool,
}

impl TrafficMirror {
    /// None when `[mirror]` is not configured.
    pub fn from_config(cfg: &MirrorConfig) -> Result<Option<TrafficMirror>, ConfigError> {
        if !cfg.is_set() {
            return Ok(None);
        }
        Ok(Some(TrafficMirror {
            pool: cfg.pool.sharding()?,
            percent: cfg.percent,
            writes_only: cfg.writes_only(),
        }))
    }
}

/// One worker's mirror counters, written by its own thread only.
#[derive(Debug, Default)]
pub struct MirrorCounters {
    /// Copies queued to a mirror server.
    pub sent: AtomicU64,
    /// Eligible requests not copied: keys over several mirror servers, or the mirror
    /// server's connection too far behind.
    pub dropped: AtomicU64,
    /// Copies the mirror server answered (with anything but an error).
    pub answered: AtomicU64,
    /// Copies answered with an error, or lost with their connection.
    pub failed: AtomicU64,
}

/// The counters summed over the workers.
#[derive(Debug, Default, Clone, Copy)]
pub struct MirrorTotals {
    pub sent: u64,
    pub dropped: u64,
    pub answered: u64,
    pub failed: u64,
}

impl MirrorCounters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn add_to(&self, t: &mut MirrorTotals) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        t.sent += get(&self.sent);
        t.dropped += get(&self.dropped);
        t.answered += get(&self.answered);
        t.failed += get(&self.failed);
    }
}
