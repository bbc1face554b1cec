//! Slot map: which node serves each of the 16384 slots (owned by the lead; being written).
