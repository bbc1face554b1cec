//! Cluster routing logic without I/O (placeholder; the cluster helper owns this file).
pub mod slot_map;
