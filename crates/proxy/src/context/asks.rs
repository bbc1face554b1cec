//! Slots seen migrating: a slot whose owner answered ASK is being moved to another node
//! (Redis marks it migrating there, importing on the target). The status page shows them.
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
    /// `slot` answered ASK (the redirect path, never the request path).
    pub(crate) fn mark(&self, slot: u16) {
        let Some(word) = self.bits.get(usize::from(slot / 64)) else {
            return;
        };
        let bit = 1u64 << (slot % 64);
        if word.load(Relaxed) & bit == 0 {
            word.fetch_or(bit, Relaxed);
        }
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
            asks.mark(slot);
        }
        assert_eq!(asks.read(1), vec![0, 64, 16383]);
        assert_eq!(asks.read(1), vec![0, 64, 16383], "reading keeps them");
        assert!(asks.read(2).is_empty(), "a new map forgets them");
    }
}
