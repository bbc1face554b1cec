//! The slot map: which master serves each of the 16384 hash slots.
//!
//! One `SlotMap` is built per topology refresh, in O(16384 + ranges), and then shared read-only
//! by every worker (behind an atomic pointer swap in the proxy). The one mutation allowed after
//! construction is `patch`: a MOVED reply repoints a single slot in place, with a relaxed atomic
//! store, so that following a redirect never copies the 32 KiB slot table (a MOVED storm during
//! resharding would otherwise copy it once per redirected request).
//!
//! Invariant: every value stored in `slots` is either `UNASSIGNED` or an index into `nodes`;
//! `nodes` never changes after construction, so a patch can only point at a node already known.

use std::sync::atomic::{fence, AtomicU16, AtomicU64, Ordering};

use resp::Value;

use crate::redirect::{Endpoint, Host};
use crate::slot::SLOT_COUNT;

/// Marker for a slot no master serves (a hole in the map, or an owner whose address is `?`).
const UNASSIGNED: u16 = u16::MAX;

/// One master and its replicas, as described by the topology reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntry {
    /// `host:port` (IPv6 hosts in brackets), ready to dial.
    pub addr: String,
    /// The node's cluster id when the reply carried one.
    pub id: Option<String>,
    /// Replica addresses, in reply order.
    pub replicas: Vec<String>,
}

/// A contiguous range of slots and its owner, the unit CLUSTER SLOTS speaks in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
    pub master: NodeEntry,
}

/// Why a topology reply was refused. The caller keeps its previous map in every case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("topology reply is not an array of slot ranges")]
    NotAnArray,
    #[error("malformed slot range entry #{0}")]
    BadEntry(usize),
    #[error("slot range {0}-{1} is out of bounds")]
    BadRange(i64, i64),
    #[error("topology reply assigns no slot")]
    Empty,
    #[error("topology has more than 65534 masters")]
    TooManyNodes,
}

/// The routing table: slot → master index, plus the masters themselves.
#[derive(Debug)]
pub struct SlotMap {
    version: u64,
    nodes: Vec<NodeEntry>,
    slots: Box<[AtomicU16]>,
    /// Unique per instance in this process (a copy made by `with_master` gets its own).
    id: u64,
    /// Seqlock over in-place patches: odd while a `patch` is writing, +2 per patch. Lets a
    /// reader tell that two routings saw the same slots (`Stamp`) without a lock.
    seq: AtomicU64,
}

/// Which state of which map a routing saw: two stable routings with equal stamps sent every
/// slot to the same master. See `SlotMap::stamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    pub map: u64,
    pub seq: u64,
}

/// Source of `SlotMap::id`.
static NEXT_MAP_ID: AtomicU64 = AtomicU64::new(1);

// === impl SlotMap ===

impl SlotMap {
    /// Build a map from slot ranges. Later ranges win where ranges overlap; slots no range
    /// covers stay unassigned (routable maps may have holes: those slots answer CLUSTERDOWN).
    /// Fails with `Empty` when no slot is assigned: an empty map is never installed.
    pub fn from_ranges(version: u64, ranges: &[SlotRange]) -> Result<SlotMap, TopologyError> {
        let slots: Box<[AtomicU16]> = (0..SLOT_COUNT)
            .map(|_| AtomicU16::new(UNASSIGNED))
            .collect();
        let mut nodes: Vec<NodeEntry> = Vec::new();
        for range in ranges {
            if range.start > range.end || usize::from(range.end) >= SLOT_COUNT {
                return Err(TopologyError::BadRange(
                    range.start.into(),
                    range.end.into(),
                ));
            }
            // Few masters, many ranges when fragmented: a linear scan over masters per range
            // keeps this O(ranges × masters) in the worst case, fine up to ~1000 masters.
            let idx = match nodes.iter().position(|n| n.addr == range.master.addr) {
                Some(i) => i,
                None => {
                    nodes.push(range.master.clone());
                    nodes.len() - 1
                }
            };
            let idx = u16::try_from(idx)
                .ok()
                .filter(|i| *i != UNASSIGNED)
                .ok_or(TopologyError::TooManyNodes)?;
            for slot in &slots[usize::from(range.start)..=usize::from(range.end)] {
                slot.store(idx, Ordering::Relaxed);
            }
        }
        let map = SlotMap {
            version,
            nodes,
            slots,
            id: NEXT_MAP_ID.fetch_add(1, Ordering::Relaxed),
            seq: AtomicU64::new(0),
        };
        if map.assigned() == 0 {
            return Err(TopologyError::Empty);
        }
        Ok(map)
    }

    /// Parse a CLUSTER SLOTS reply. `responder_host` replaces an empty or NULL endpoint (the
    /// spec says: same host as the node that answered); ranges whose master endpoint is `?`
    /// are left unassigned.
    pub fn from_cluster_slots(
        version: u64,
        reply: &Value,
        responder_host: &str,
    ) -> Result<SlotMap, TopologyError> {
        let entries = reply.as_array().ok_or(TopologyError::NotAnArray)?;
        let mut ranges = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            if let Some(range) = parse_range(i, entry, responder_host)? {
                ranges.push(range);
            }
        }
        SlotMap::from_ranges(version, &ranges)
    }

    /// The version this map was installed with (monotonic per topology service).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Taken before routing by this map; `stamp_after` after. The routing saw exactly the
    /// state this names when both are equal (no patch ran in between, none was half done),
    /// so two such routings with equal stamps agree on every slot: a seqlock read.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            map: self.id,
            seq: self.seq.load(Ordering::Acquire),
        }
    }

    /// The closing read of `stamp` (after the slot loads). Unstable if it differs.
    pub fn stamp_after(&self) -> Stamp {
        fence(Ordering::Acquire);
        Stamp {
            map: self.id,
            seq: self.seq.load(Ordering::Relaxed),
        }
    }

    /// The masters, indexed as `node_index` returns.
    pub fn nodes(&self) -> &[NodeEntry] {
        &self.nodes
    }

    /// Index into `nodes()` of the master serving `slot`, or None for a hole.
    pub fn node_index(&self, slot: u16) -> Option<u16> {
        let idx = self.slots.get(usize::from(slot))?.load(Ordering::Relaxed);
        (idx != UNASSIGNED).then_some(idx)
    }

    /// The master serving `slot`, or None for a hole.
    pub fn node_of(&self, slot: u16) -> Option<&NodeEntry> {
        self.node_index(slot)
            .and_then(|i| self.nodes.get(usize::from(i)))
    }

    /// The address a MOVED or ASK from the node at `from` points to: its host; `from`'s
    /// host when empty (`cluster-preferred-endpoint-type unknown-endpoint`); for `?`
    /// (hostname preferred and the target has none) the one node of this map, master or
    /// replica, on that port, None when none or several are. Linear: redirects only.
    pub fn redirect_addr(&self, to: Endpoint<'_>, from: &str) -> Option<String> {
        match to.host {
            Host::Name(host) => Some(join_host_port(host, to.port)),
            Host::Same => Some(join_host_port(host_of(from), to.port)),
            Host::Unknown => {
                let port = format!(":{}", to.port);
                let mut on_port = (self.nodes.iter())
                    .flat_map(|n| std::iter::once(&n.addr).chain(&n.replicas))
                    .filter(|addr| addr.ends_with(&port));
                match (on_port.next(), on_port.next()) {
                    (Some(addr), None) => Some(addr.clone()),
                    _ => None,
                }
            }
        }
    }

    /// Index of the master at `addr`. Linear: called on redirects only, never per request.
    pub fn index_of(&self, addr: &str) -> Option<u16> {
        let idx = self.nodes.iter().position(|n| n.addr == addr)?;
        u16::try_from(idx).ok()
    }

    /// Repoint `slot` to the master at `addr` (a MOVED reply). Returns false, changing
    /// nothing, when `addr` is not a master of this map: the caller must refresh to learn it.
    pub fn patch(&self, slot: u16, addr: &str) -> bool {
        match (self.index_of(addr), self.slots.get(usize::from(slot))) {
            (Some(idx), Some(cell)) => {
                // Seqlock write: take it (odd), store, release it (+1 more). Patches come from
                // MOVED replies only, so the spin against another patch is rare and short.
                let seq = self.lock_seq();
                fence(Ordering::Release);
                cell.store(idx, Ordering::Relaxed);
                self.seq.store(seq + 2, Ordering::Release);
                true
            }
            _ => false,
        }
    }

    /// Wait for an even sequence and make it odd; returns the even value taken.
    fn lock_seq(&self) -> u64 {
        loop {
            let seq = self.seq.load(Ordering::Relaxed);
            let odd = seq + 1;
            if seq.is_multiple_of(2)
                && self
                    .seq
                    .compare_exchange_weak(seq, odd, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return seq;
            }
            std::hint::spin_loop();
        }
    }

    /// A copy of this map that also knows the master at `addr` (a MOVED named a node the
    /// map had never seen, e.g. a replica promoted by a failover). Same version: existing
    /// node indices keep their meaning, the new master comes last.
    pub fn with_master(&self, addr: &str) -> SlotMap {
        let mut nodes = self.nodes.clone();
        if !nodes.iter().any(|n| n.addr == addr) {
            nodes.push(NodeEntry {
                addr: addr.to_string(),
                id: None,
                replicas: Vec::new(),
            });
        }
        let slots = self
            .slots
            .iter()
            .map(|s| AtomicU16::new(s.load(Ordering::Relaxed)))
            .collect();
        SlotMap {
            version: self.version,
            nodes,
            slots,
            id: NEXT_MAP_ID.fetch_add(1, Ordering::Relaxed),
            seq: AtomicU64::new(0),
        }
    }

    /// How many slots have an owner.
    pub fn assigned(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) != UNASSIGNED)
            .count()
    }

    /// True when both maps send every slot to the same address: a refresh that changes
    /// nothing need not be installed.
    pub fn same_routes(&self, other: &SlotMap) -> bool {
        (0..SLOT_COUNT as u16)
            .all(|s| self.node_of(s).map(|n| &n.addr) == other.node_of(s).map(|n| &n.addr))
    }

    /// True when the two maps share at least one node id (or either lacks ids): a reply
    /// sharing none describes a different cluster and must be refused.
    pub fn same_cluster(&self, other: &SlotMap) -> bool {
        let ids =
            |m: &SlotMap| -> Vec<String> { m.nodes.iter().filter_map(|n| n.id.clone()).collect() };
        let (mine, theirs) = (ids(self), ids(other));
        mine.is_empty() || theirs.is_empty() || mine.iter().any(|id| theirs.contains(id))
    }
}

/// One CLUSTER SLOTS entry: `[start, end, [host, port, id, ...], [replica...]...]`.
/// Returns Ok(None) for a range whose master endpoint is unknown (`?`).
fn parse_range(
    i: usize,
    entry: &Value,
    responder_host: &str,
) -> Result<Option<SlotRange>, TopologyError> {
    let parts = entry.as_array().ok_or(TopologyError::BadEntry(i))?;
    let (start, end) = match (
        parts.first().and_then(Value::as_int),
        parts.get(1).and_then(Value::as_int),
    ) {
        (Some(s), Some(e)) => (s, e),
        _ => return Err(TopologyError::BadEntry(i)),
    };
    let in_bounds = |v: i64| (0..SLOT_COUNT as i64).contains(&v);
    if !in_bounds(start) || !in_bounds(end) || start > end {
        return Err(TopologyError::BadRange(start, end));
    }
    let mut endpoints = parts[2..].iter().map(|n| parse_endpoint(n, responder_host));
    let master = match endpoints.next() {
        Some(Ok(Some(m))) => m,
        Some(Ok(None)) => return Ok(None),
        _ => return Err(TopologyError::BadEntry(i)),
    };
    let replicas = endpoints
        .filter_map(|r| r.ok().flatten())
        .map(|r| r.addr)
        .collect();
    Ok(Some(SlotRange {
        start: start as u16,
        end: end as u16,
        master: NodeEntry { replicas, ..master },
    }))
}

/// `[host, port, id?, metadata?]` → a node entry. `?` (hostname preferred, none set) is
/// replaced by the `ip` of the metadata; Ok(None) when there is none.
fn parse_endpoint(node: &Value, responder_host: &str) -> Result<Option<NodeEntry>, TopologyError> {
    let parts = node.as_array().ok_or(TopologyError::BadEntry(0))?;
    let host = match parts.first() {
        Some(Value::Null) | None => responder_host.as_bytes(),
        Some(v) => v.as_bytes().unwrap_or_default(),
    };
    let host = if host.is_empty() {
        responder_host.as_bytes()
    } else {
        host
    };
    let host = match host {
        b"?" => match parts.get(3).and_then(|m| metadata(m, b"ip")) {
            Some(ip) if !ip.is_empty() => ip,
            _ => return Ok(None),
        },
        host => host,
    };
    let port = parts
        .get(1)
        .and_then(Value::as_int)
        .filter(|p| (1..=65535).contains(p))
        .ok_or(TopologyError::BadEntry(0))?;
    let host = String::from_utf8_lossy(host);
    let id = parts
        .get(2)
        .and_then(Value::as_bytes)
        .map(|b| String::from_utf8_lossy(b).into_owned());
    Ok(Some(NodeEntry {
        addr: join_host_port(&host, port as u16),
        id,
        replicas: Vec::new(),
    }))
}

/// The value of `field` in a node's networking metadata: a map (RESP3) or a flat array of
/// names and values (RESP2).
fn metadata<'a>(meta: &'a Value, field: &[u8]) -> Option<&'a [u8]> {
    match meta {
        Value::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| k.as_bytes() == Some(field))
            .and_then(|(_, v)| v.as_bytes()),
        Value::Array(flat) => flat
            .chunks(2)
            .find(|kv| kv[0].as_bytes() == Some(field))
            .and_then(|kv| kv.get(1)?.as_bytes()),
        _ => None,
    }
}

/// `host:port`, bracketing IPv6 literals so the result can be dialled as is.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The host part of `host:port`, brackets of an IPv6 literal removed: the host a redirect
/// with an empty host (hostname mode) refers to.
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

mod shards;

#[cfg(test)]
mod tests;
