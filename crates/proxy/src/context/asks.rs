//! Slots seen migrating: a slot whose owner answered ASK (or TRYAGAIN) is being moved to
//! another node (Redis marks it migrating there, importing on the target). The status page
//! shows them, and a multi-key request of a marked slot goes alone (`session/order.rs`).
//! One bit per slot; a set bit is only read again, so workers that keep meeting the same
//! migration share the cache line without writing it. Forgotten when the map changes
//! (a finished migration shows up as a new owner).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The bitmap and the map version it belongs to.
#[derive(Debug)]
pub(crate) struct AskSlots {
    bits: Box<[AtomicU64]>,
    version: AtomicU64,
}

impl Default for AskSlots {
    fn default() -> Self {
        AskSlots {
            bits: (0..cluster::SLOT_COUNT / 64)
                .map(|_| AtomicU64::new(0))
                .collect(),
            version: AtomicU64::new(0),
        }
    }
}

impl AskSlots {
    /// `slot` answered ASK or TRYAGAIN under map `map_version` (the redirect path, never
    /// the request path). Marks of an older map are forgotten first.
    pub(crate) fn mark(&self, slot: u16, map_version: u64) {
        let Some(word) = self.bits.get(usize::from(slot / 64)) else {
            return;
        };
        if self.version.load(Relaxed) != map_version {
            self.bits.iter().for_each(|w| w.store(0, Relaxed));
            self.version.store(map_version, Relaxed);
        }
        let bit = 1u64 << (slot % 64);
        if word.load(Relaxed) & bit == 0 {
            word.fetch_or(bit, Relaxed);
        }
    }

    /// Whether `slot` was seen migrating under map `map_version`: two relaxed loads. A mark
    /// is a hint (a race with a new map may lose or keep one for a moment); what it buys is
    /// order, at the price of a round trip (`session/order.rs`, "alone").
    pub(crate) fn is_marked(&self, slot: u16, map_version: u64) -> bool {
        let Some(word) = self.bits.get(usize::from(slot / 64)) else {
            return false;
        };
        word.load(Relaxed) & (1u64 << (slot % 64)) != 0 && self.version.load(Relaxed) == map_version
    }

    /// The marked slots, after forgetting them if the map moved past `map_version`.
    pub(crate) fn read(&self, map_version: u64) -> Vec<u16> {
        if self.version.swap(map_version, Relaxed) != map_version {
            self.bits.iter().for_each(|w| w.store(0, Relaxed));
        }
        let mut out = Vec::new();
        for (i, word) in self.bits.iter().enumerate() {
            let w = word.load(Relaxed);
            out.extend(
                (0..64)
                    .filter(|b| w & (1 << b) != 0)
                    .map(|b| (i * 64 + b) as u16),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_slots_are_read_until_the_map_changes() {
        let asks = AskSlots::default();
        assert!(asks.read(1).is_empty());
        for slot in [16383, 0, 64, 64] {
            asks.mark(slot, 1);
        }
        assert!(asks.is_marked(64, 1) && !asks.is_marked(65, 1));
        assert_eq!(asks.read(1), vec![0, 64, 16383]);
        assert_eq!(asks.read(1), vec![0, 64, 16383], "reading keeps them");
        assert!(asks.read(2).is_empty(), "a new map forgets them");
        asks.mark(5, 3);
        assert!(asks.is_marked(5, 3) && !asks.is_marked(5, 4));
    }
}
