//! MOVED replies the topology service remembers for a while, so that a refresh answered by a
//! node that has not caught up yet cannot undo them (topology scenario T11: "the MOVED patch
//! wins, a later refresh fixes the rest").
//!
//! A patch is dropped once a refreshed map agrees with it, or after `PATCH_TTL`: by then the
//! cluster has converged, and if the slot moved again a new MOVED says so.

use std::time::{Duration, Instant};

use cluster::slot_map::SlotMap;

/// How long a MOVED outranks a disagreeing refresh.
const PATCH_TTL: Duration = Duration::from_secs(10);
/// At most this many remembered patches (a migration of many slots keeps the latest).
const MAX_PATCHES: usize = 4096;

/// Recent MOVED replies: (slot, new owner, when).
#[derive(Debug, Default)]
pub(crate) struct Patches {
    recent: Vec<(u16, String, Instant)>,
}

impl Patches {
    pub(crate) fn record(&mut self, slot: u16, addr: &str) {
        self.recent.retain(|(s, _, _)| *s != slot);
        if self.recent.len() >= MAX_PATCHES {
            self.recent.remove(0);
        }
        self.recent.push((slot, addr.to_string(), Instant::now()));
    }

    /// Apply the live patches a refreshed `map` disagrees with. Returns the map to install
    /// and whether it lagged behind (then another refresh should follow).
    pub(crate) fn reapply(&mut self, mut map: SlotMap) -> (SlotMap, bool) {
        self.recent.retain(|(_, _, at)| at.elapsed() < PATCH_TTL);
        let mut lagging = false;
        self.recent.retain(|(slot, addr, _)| {
            if map.node_of(*slot).is_some_and(|n| n.addr == *addr) {
                return false; // confirmed: forget it
            }
            lagging = true;
            if !map.patch(*slot, addr) {
                map = map.with_master(addr);
                map.patch(*slot, addr);
            }
            true
        });
        (map, lagging)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster::slot_map::{NodeEntry, SlotRange};

    fn map(owner: &str) -> SlotMap {
        let master = NodeEntry {
            addr: owner.into(),
            id: None,
            replicas: vec![],
        };
        SlotMap::from_ranges(
            2,
            &[SlotRange {
                start: 0,
                end: 16383,
                master,
            }],
        )
        .unwrap()
    }

    #[test]
    fn a_lagging_map_keeps_the_patch_and_a_current_one_confirms_it() {
        let mut p = Patches::default();
        p.record(42, "b:1");
        let (fixed, lagging) = p.reapply(map("a:1"));
        assert!(lagging);
        assert_eq!(fixed.node_of(42).unwrap().addr, "b:1");
        assert_eq!(fixed.node_of(43).unwrap().addr, "a:1");
        let current = map("a:1").with_master("b:1");
        current.patch(42, "b:1");
        let (_, lagging) = p.reapply(current);
        assert!(!lagging, "confirmed patches are forgotten");
        assert!(p.recent.is_empty());
    }
}
