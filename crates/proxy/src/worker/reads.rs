//! Where a read goes under a read policy: the worker's cache of each master's usable replica
//! connections, rebuilt only when the map or the replica view (`topology/replicas.rs`)
//! changed, so a read costs two integer compares, an index and a modulo.
//!
//! The choice is a pure function of (map, view generation, slot, the client's spread): two
//! reads of one client for one slot under the same map and view go to the same connection,
//! which `session/order.rs` relies on (`RouteKey::via`). Load spreads over a shard's
//! replicas by slot and by client (`spread` is the client's id), not per request: a
//! per-request round robin would put one client's reads of a slot on two connections, and
//! each would then wait for the one before it.

use std::rc::Rc;

use cluster::slot_map::SlotMap;

use crate::backend::Backend;
use crate::config::ReadPolicy;
use crate::topology::replicas::ReplicaView;

/// Where one read goes.
pub(crate) enum ReadChoice {
    /// The slot's master: the policy's choice, or the fallback with no usable replica.
    Master,
    /// This replica connection.
    Replica(Rc<Backend>),
    /// `replica` policy and no usable replica for the slot.
    Refuse,
}

/// One protocol's replica connections (of one database) by the map's master index.
#[derive(Default)]
pub(crate) struct ReadCache {
    /// `(map version, view generation)` this was built for; None: never built.
    built_for: Option<(u64, u64)>,
    /// Connections to each master's usable replicas.
    replicas: Vec<Vec<Rc<Backend>>>,
    /// Each master's nearest node when that is a replica (None: the master itself).
    nearest: Vec<Option<Rc<Backend>>>,
}

impl ReadCache {
    /// Whether this was built for this map and replica view.
    pub(crate) fn fits(&self, map: &SlotMap, generation: u64) -> bool {
        self.built_for == Some((map.version(), generation))
    }

    /// The view in force applied to `map`: O(nodes), once per map or view change.
    /// `connect` gives the shared connection to a replica.
    pub(crate) fn build(
        map: &SlotMap,
        generation: u64,
        view: &ReplicaView,
        mut connect: impl FnMut(&str) -> Rc<Backend>,
    ) -> ReadCache {
        let mut cache = ReadCache {
            built_for: Some((map.version(), generation)),
            ..ReadCache::default()
        };
        for node in map.nodes() {
            let usable = node.replicas.iter().filter(|addr| view.usable(addr));
            let replicas = usable.map(|addr| connect(addr)).collect();
            let nearest = view
                .nearest(&node.addr)
                .filter(|addr| node.replicas.iter().any(|r| r == addr) && view.usable(addr))
                .map(&mut connect);
            cache.replicas.push(replicas);
            cache.nearest.push(nearest);
        }
        cache
    }

    /// Where a read-only command for `slot` goes under `policy` (not `Master`); `spread`
    /// tells clients apart, so they use different replicas of a shard.
    pub(crate) fn choose(
        &self,
        map: &SlotMap,
        slot: u16,
        policy: ReadPolicy,
        spread: usize,
    ) -> ReadChoice {
        let Some(idx) = map.node_index(slot).map(usize::from) else {
            // A hole: the master path answers as for any other command.
            return ReadChoice::Master;
        };
        if policy == ReadPolicy::Nearest {
            return match self.nearest.get(idx) {
                Some(Some(b)) => ReadChoice::Replica(b.clone()),
                _ => ReadChoice::Master,
            };
        }
        match self.replicas.get(idx).map(Vec::as_slice).unwrap_or(&[]) {
            [] if policy == ReadPolicy::Replica => ReadChoice::Refuse,
            [] => ReadChoice::Master,
            replicas => {
                let at = (usize::from(slot) + spread) % replicas.len();
                ReadChoice::Replica(replicas[at].clone())
            }
        }
    }
}
