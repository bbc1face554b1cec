//! The near cache's state shared by the workers (`session/near_cache.rs` is each worker's
//! cache): its counters, and the write epochs, how a worker's cache learns of writes sent
//! through this proxy, on any worker, before they are acknowledged.
//!
//! Counters, three kinds: one per key (2^16 of them, by a hash of the key, so a write
//! ends the entries of its own key and of the few others that share its counter), one per
//! slot, and one for the writes with no single slot (FLUSHALL, a split MSET, EVAL without
//! keys). A write of one key bumps its key's counter, a write of several keys in one slot
//! (and EXEC, for the commands its transaction queued) its slot's, any other write the
//! shared one. It bumps it twice: when it is dispatched, before it leaves for its node, and
//! when its reply arrives, before the client can see it. A cached value remembers its
//! key's, its slot's and the shared counter as they were when its fill was sent; it is
//! served only while all three are unchanged. So a write acknowledged before a read
//! arrives always ends the entry's life: it either finished before the fill left (then the
//! fill read it), or bumped a counter after the fill's snapshot.
//!
//! ```text
//!   write dispatched ─▶ bump ─▶ node runs it ─▶ reply arrives ─▶ bump ─▶ client sees +OK
//!   fill: snapshot ─▶ GETRANGE on the tracking connection ─▶ reply ─▶ kept if unchanged
//!   hit: served only if the counters still equal the snapshot
//! ```
//!
//! Shared by the workers (one allocation of 320 KiB), touched only when the near cache is
//! on.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicU64};

/// What a write bumps, decided once at its dispatch and carried by its reply-queue entry
/// to its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// One key: the index of its counter.
    Key(u32),
    /// Several keys of one slot, or EXEC (what its transaction queued).
    Slot(u16),
    /// Anything else that writes.
    Any,
}

/// What `req` bumps, if it may change data: what replicates (writes, scripts and functions
/// that may write, PFCOUNT) and EXEC, whose queued commands the node runs then. PUBLISH and
/// SPUBLISH replicate without changing a key. `slot`: the route's one slot, if it has one.
pub(crate) fn written(req: &resp::Request, command: usize, slot: Option<u16>) -> Option<Written> {
    let spec = cluster::command::at_stats_index(command)?;
    if spec.name == "exec" {
        return Some(slot.map_or(Written::Any, Written::Slot));
    }
    if !spec.replicates() || matches!(spec.name, "publish" | "spublish") {
        return None;
    }
    let resolved = spec.resolve(req.argc(), |i| req.arg(i));
    let keys = resolved.key_positions(req.argc(), |i| req.arg(i)).ok();
    let mut keys = keys.iter().flat_map(|k| k.iter());
    Some(match (keys.next(), keys.next(), slot) {
        (Some(only), None, _) => Written::Key(key_index(req.arg(only))),
        (Some(_), Some(_), Some(slot)) => Written::Slot(slot),
        _ => Written::Any,
    })
}

/// The counter of `key`: FNV-1a, folded to `KEY_COUNTERS`.
pub(crate) fn key_index(key: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in key {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h ^ (h >> 16)) & (KEY_COUNTERS as u32 - 1)
}

/// Key counters: a write ends the entries of about 1 / 65,536 of the keys besides its own.
const KEY_COUNTERS: usize = 1 << 16;

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

/// The counters of every key (by hash), every slot, and of the writes without one.
pub(crate) struct WriteEpochs {
    keys: Box<[AtomicU32]>,
    slots: Box<[AtomicU32]>,
    any: AtomicU32,
}

/// The counters a value was read under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot {
    key: u32,
    slot: u32,
    any: u32,
}

impl WriteEpochs {
    pub(crate) fn new() -> WriteEpochs {
        let counters = |n| (0..n).map(|_| AtomicU32::new(0)).collect();
        WriteEpochs {
            keys: counters(KEY_COUNTERS),
            slots: counters(cluster::slot::SLOT_COUNT),
            any: AtomicU32::new(0),
        }
    }

    /// A write was dispatched, or answered.
    pub(crate) fn bump(&self, written: Written) {
        let counter = match written {
            Written::Key(i) => self.keys.get(i as usize),
            Written::Slot(s) => self.slots.get(usize::from(s)),
            Written::Any => None,
        };
        counter.unwrap_or(&self.any).fetch_add(1, Release);
    }

    /// The counters `key` of `slot` is read under now.
    pub(crate) fn snapshot(&self, key: &[u8], slot: u16) -> Snapshot {
        let load = |c: Option<&AtomicU32>| c.map_or(0, |c| c.load(Acquire));
        Snapshot {
            key: load(self.keys.get(key_index(key) as usize)),
            slot: load(self.slots.get(usize::from(slot))),
            any: self.any.load(Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_of_the_key_its_slot_or_without_one_changes_the_snapshot() {
        let e = WriteEpochs::new();
        let before = e.snapshot(b"k", 7);
        e.bump(Written::Key(key_index(b"other")));
        e.bump(Written::Slot(8));
        assert_eq!(
            e.snapshot(b"k", 7),
            before,
            "another key's and slot's writes"
        );
        for w in [
            Written::Key(key_index(b"k")),
            Written::Slot(7),
            Written::Any,
        ] {
            let was = e.snapshot(b"k", 7);
            e.bump(w);
            assert_ne!(e.snapshot(b"k", 7), was, "{w:?}");
        }
    }

    #[test]
    fn what_a_request_bumps() {
        let index = |name: &str| {
            let spec = cluster::lookup(name.as_bytes()).unwrap();
            cluster::command::stats_index(spec).unwrap()
        };
        let req = |args: &[&[u8]]| resp::Request::from_args(args);
        let set = req(&[b"SET", b"k", b"v"]);
        assert_eq!(
            written(&set, index("set"), Some(3)),
            Some(Written::Key(key_index(b"k")))
        );
        let mset = req(&[b"MSET", b"{a}x", b"1", b"{a}y", b"2"]);
        assert_eq!(
            written(&mset, index("mset"), Some(9)),
            Some(Written::Slot(9))
        );
        assert_eq!(written(&mset, index("mset"), None), Some(Written::Any));
        let get = req(&[b"GET", b"k"]);
        assert_eq!(written(&get, index("get"), Some(3)), None);
        let publish = req(&[b"PUBLISH", b"ch", b"m"]);
        assert_eq!(written(&publish, index("publish"), None), None);
        let flush = req(&[b"FLUSHALL"]);
        assert_eq!(written(&flush, index("flushall"), None), Some(Written::Any));
        let exec = req(&[b"EXEC"]);
        assert_eq!(
            written(&exec, index("exec"), Some(5)),
            Some(Written::Slot(5))
        );
    }
}
