//! Counters of read-only commands by read policy and by where they went: a replica, the
//! master (the policy's choice or its fallback), or refused (`replica` with none usable).
//! Per worker, summed on read, like the rest of `WorkerStats`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::read_policy::{ReadPolicy, ALL};

/// One worker's read counters, indexed by `ReadPolicy::index`.
#[derive(Debug, Default)]
pub struct ReadCounters {
    to_replica: [AtomicU64; ALL.len()],
    to_master: [AtomicU64; ALL.len()],
    refused: AtomicU64,
}

/// The counters summed over the workers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadTotals {
    pub to_replica: [u64; ALL.len()],
    pub to_master: [u64; ALL.len()],
    pub refused: u64,
}

impl ReadCounters {
    pub(crate) fn replica(&self, policy: ReadPolicy) {
        self.to_replica[policy.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn master(&self, policy: ReadPolicy) {
        self.to_master[policy.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add_to(&self, t: &mut ReadTotals) {
        for i in 0..ALL.len() {
            t.to_replica[i] += self.to_replica[i].load(Ordering::Relaxed);
            t.to_master[i] += self.to_master[i].load(Ordering::Relaxed);
        }
        t.refused += self.refused.load(Ordering::Relaxed);
    }
}
