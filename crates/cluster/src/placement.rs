//! Which slot a key is routed by: Redis Cluster's CRC16 slot, or, in front of a sharded
//! pool of standalone servers, the index of the server twemproxy's placement names, or,
//! behind routes by key prefix, that index past the servers of the pools before its own
//! (`routes.rs`), or slot 0 in front of one master (Sentinel's).
//!
//! Everything downstream of routing (ordering per slot, splitting multi-key commands,
//! fan-out, the slot map's owner lookup) reads only the slot number, so a sharded pool is
//! served by the same machinery as a cluster: its map gives slot `i` to server `i`.

use std::sync::Arc;

use crate::routes::Routes;
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
    /// Several sharded pools chosen by key prefix; slot = the pool's base + server index.
    Routes(Arc<Routes>),
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
            Placement::Routes(routes) => routes.slot(key),
            Placement::One => 0,
        }
    }

    /// Whether every key has a server although the map names few slots.
    pub fn covers_every_key(&self) -> bool {
        !matches!(self, Placement::Slots)
    }

    /// How many slots, from 0, hold the servers that commands without keys go to: the
    /// catch-all pool's behind routes; None where any server will do.
    pub fn keyless_slots(&self) -> Option<u16> {
        match self {
            Placement::Routes(routes) => Some(routes.catch_all_servers()),
            _ => None,
        }
    }

    /// The pools' fixed map (slot `i` owned by server `i`, the pools end to end), for a
    /// sharded pool or routes over sharded pools.
    pub fn static_map(&self) -> Option<Result<SlotMap, TopologyError>> {
        let ranges: Vec<SlotRange> = match self {
            Placement::Servers(pool) => ranges(0, pool).collect(),
            Placement::Routes(routes) => routes
                .pools()
                .into_iter()
                .flat_map(|(_, base, pool)| ranges(base, pool))
                .collect(),
            Placement::Slots | Placement::One => return None,
        };
        Some(SlotMap::from_ranges(1, &ranges))
    }
}

/// One single-slot range per server of `pool`, from slot `base`.
fn ranges(base: u16, pool: &Sharding) -> impl Iterator<Item = SlotRange> + '_ {
    pool.servers()
        .iter()
        .enumerate()
        .map(move |(i, s)| SlotRange {
            start: base + i as u16,
            end: base + i as u16,
            master: NodeEntry {
                addr: s.addr.clone(),
                id: None,
                replicas: Vec::new(),
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(ports: &[u16]) -> Sharding {
        crate::sharding::local_pool(ports, b"")
    }

    #[test]
    fn routes_lay_their_pools_end_to_end_and_share_servers() {
        let routes = Routes::new(
            pool(&[1, 2]),
            vec![
                (b"a:".to_vec(), pool(&[2, 3])),
                (b"b:".to_vec(), pool(&[4])),
            ],
        )
        .unwrap();
        let placement = Placement::Routes(Arc::new(routes));
        let map = placement.static_map().unwrap().unwrap();
        let owners: Vec<&str> = (0..5).map(|s| &*map.node_of(s).unwrap().addr).collect();
        assert_eq!(
            owners,
            [
                "127.0.0.1:1",
                "127.0.0.1:2",
                "127.0.0.1:2",
                "127.0.0.1:3",
                "127.0.0.1:4"
            ]
        );
        // A server in two pools is one node: fan-out asks it once.
        assert_eq!(map.nodes().len(), 4);
        assert_eq!(map.assigned(), 5);
        assert_eq!(placement.keyless_slots(), Some(2));
        assert!(placement.covers_every_key());
        assert_eq!(Placement::Slots.keyless_slots(), None);
    }
}
