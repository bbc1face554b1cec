//! Which slot a key is routed by: Redis Cluster's CRC16 slot, or, in front of a sharded
//! pool of standalone servers, the index of the server twemproxy's placement names, or
//! slot 0 in front of one master (Sentinel's).
//!
//! Everything downstream of routing (ordering per slot, splitting multi-key commands,
//! fan-out, the slot map's owner lookup) reads only the slot number, so a sharded pool is
//! served by the same machinery as a cluster: its map gives slot `i` to server `i`.

use std::sync::Arc;

use crate::sharding::Sharding;
use crate::slot_map::{NodeEntry, SlotMap, SlotRange, TopologyError};

/// How keys map to slots for one proxy.
#[derive(Debug, Clone, Default)]
pub enum Placement {
    /// CRC16 of the key (or its `{tag}`) modulo 16384, as Redis Cluster.
    #[default]
    Slots,
    /// The server twemproxy's hash and distribution pick; slot = server index.
    Servers(Arc<Sharding>),
    /// Every key on one master (a Sentinel-managed one, which may change): slot 0.
    One,
}

impl Placement {
    /// The slot `key` routes by.
    #[inline]
    pub fn slot(&self, key: &[u8]) -> u16 {
        match self {
            Placement::Slots => crate::key_slot(key),
            Placement::Servers(pool) => pool.server_of(key),
            Placement::One => 0,
        }
    }

    /// Whether every key has a server although the map names few slots.
    pub fn covers_every_key(&self) -> bool {
        !matches!(self, Placement::Slots)
    }

    /// The pool's fixed map (slot `i` owned by server `i`), for a sharded pool.
    pub fn static_map(&self) -> Option<Result<SlotMap, TopologyError>> {
        let Placement::Servers(pool) = self else {
            return None;
        };
        let ranges: Vec<SlotRange> = pool
            .servers()
            .iter()
            .enumerate()
            .map(|(i, s)| SlotRange {
                start: i as u16,
                end: i as u16,
                master: NodeEntry {
                    addr: s.addr.clone(),
                    id: None,
                    replicas: Vec::new(),
                },
            })
            .collect();
        Some(SlotMap::from_ranges(1, &ranges))
    }
}
