//! The near cache's state shared by the workers (`session/near_cache.rs` is each worker's
//! cache): its counters, and the write epochs, how a worker's cache learns of writes sent
//! through this proxy, on any worker, before they are acknowledged.
//!
//! Each slot has a counter, and one more counts the writes with no single slot (FLUSHALL,
//! a split MSET, a transaction's EXEC seen whole). A write bumps its counter twice: when it
//! is dispatched, before it leaves for its node, and when its reply arrives, before the
//! client can see it. A cached value remembers the counters as they were when its fill was
//! sent; it is served only while both are unchanged. So a write acknowledged before a
//! read arrives always ends the entry's life: it either finished before the fill left
//! (then the fill read it), or bumped a counter after the fill's snapshot.
//!
//! ```text
//!   write dispatched ─▶ bump ─▶ node runs it ─▶ reply arrives ─▶ bump ─▶ client sees +OK
//!   fill: snapshot ─▶ GET on the tracking connection ─▶ reply ─▶ kept if unchanged
//!   hit: served only if the counters still equal the snapshot
//! ```
//!
//! Shared by the workers (one allocation of 64 KiB), touched only when the near cache is on.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicU64};

/// Whether a command (by its index in the command table) may change data, so its
/// dispatch and its reply bump the write epochs: what replicates (writes, scripts and
/// functions that may write, PFCOUNT) and EXEC, whose queued commands the node runs then.
/// PUBLISH and SPUBLISH replicate without changing a key.
pub(crate) fn is_write(command: usize) -> bool {
    cluster::command::at_stats_index(command).is_some_and(|c| {
        (c.replicates() && !matches!(c.name, "publish" | "spublish")) || c.name == "exec"
    })
}

/// One worker's near-cache counters, written by its own thread only.
#[derive(Debug, Default)]
pub struct NearCacheCounters {
    /// GETs answered from the cache.
    pub hits: AtomicU64,
    /// Values asked of a master for the cache, and those kept.
    pub fills: AtomicU64,
    pub filled: AtomicU64,
    /// Entries dropped: by a master's invalidation (or a lost tracking connection), and to
    /// stay within `max_bytes`.
    pub invalidated: AtomicU64,
    pub evicted: AtomicU64,
    /// Entries held, and their bytes (gauges).
    pub entries: AtomicU64,
    pub bytes: AtomicU64,
}

/// The counters summed over the workers.
#[derive(Debug, Default, Clone, Copy)]
pub struct NearCacheTotals {
    pub hits: u64,
    pub fills: u64,
    pub filled: u64,
    pub invalidated: u64,
    pub evicted: u64,
    pub entries: u64,
    pub bytes: u64,
}

impl NearCacheCounters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    pub fn add_to(&self, t: &mut NearCacheTotals) {
        let get = |c: &AtomicU64| c.load(Relaxed);
        t.hits += get(&self.hits);
        t.fills += get(&self.fills);
        t.filled += get(&self.filled);
        t.invalidated += get(&self.invalidated);
        t.evicted += get(&self.evicted);
        t.entries += get(&self.entries);
        t.bytes += get(&self.bytes);
    }
}

/// The counters of every slot and of the writes without one.
pub(crate) struct WriteEpochs {
    slots: Box<[AtomicU32]>,
    any: AtomicU32,
}

/// The counters a value was read under: its slot's and the keyless writes'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot {
    slot: u32,
    any: u32,
}

impl WriteEpochs {
    pub(crate) fn new() -> WriteEpochs {
        WriteEpochs {
            slots: (0..cluster::slot::SLOT_COUNT)
                .map(|_| AtomicU32::new(0))
                .collect(),
            any: AtomicU32::new(0),
        }
    }

    /// A write for `slot` (None: no single slot) was dispatched, or answered.
    pub(crate) fn bump(&self, slot: Option<u16>) {
        let counter = match slot.and_then(|s| self.slots.get(usize::from(s))) {
            Some(c) => c,
            None => &self.any,
        };
        counter.fetch_add(1, Release);
    }

    pub(crate) fn snapshot(&self, slot: u16) -> Snapshot {
        Snapshot {
            slot: self
                .slots
                .get(usize::from(slot))
                .map_or(0, |c| c.load(Acquire)),
            any: self.any.load(Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_of_the_slot_or_without_one_changes_the_snapshot() {
        let e = WriteEpochs::new();
        let before = e.snapshot(7);
        e.bump(Some(8));
        assert_eq!(e.snapshot(7), before, "another slot's write");
        e.bump(Some(7));
        let after_slot = e.snapshot(7);
        assert_ne!(after_slot, before);
        e.bump(None);
        assert_ne!(e.snapshot(7), after_slot, "a keyless write");
    }
}
