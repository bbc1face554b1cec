//! Moving the keys of a source (a pool of standalone servers, a Sentinel master, or a Redis
//! Cluster) into the pool the proxy serves (the target: a Redis Cluster, a sharded pool, a
//! Sentinel master) while clients go on through the proxy: docs/migration.md is the design
//! and the runbook. A cluster as the source is the roll-back of a migration into it.
//!
//! ```text
//!   client ─▶ session ─gate (session/migration_gate.rs)─▶ keys known moved? ─yes─▶ target
//!                              │ no
//!                              ▼
//!                mover.rs: take on the source (lease, DUMP, PTTL) ─▶ RESTORE on the target
//!                          ─▶ release on the source (DEL) ─▶ the request goes on
//!   copier.rs: SCAN every source server ─▶ the same mover, paced ─▶ `left` when a pass ends
//! ```
//!
//! Each key is on the source until it moves and on the target after, never on both as two
//! live copies: the source server serializes the movers of a key (a lease in Lua), and no
//! request for a key reaches the target before the key left the source. The phase (copying,
//! paused, done) is kept in the target, so every proxy migrating the same source
//! reads the same one.

pub(crate) mod copier;
pub(crate) mod mover;
pub(crate) mod pipes;
mod typed_copy;
mod verifier;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use bytes::Bytes;
use cluster::sharding::Sharding;
use cluster::slot_map::SlotMap;
use resp::Value;

use crate::config::{ConfigError, MigrationConfig, SentinelConfig};
use crate::node_query::NodeConn;
use crate::tls::Connector;

/// Where a migration stands; every proxy of it converges on the phase the target holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The gate moves keys clients touch; the copier moves the rest.
    Copying = 0,
    /// The gate moves keys clients touch; the copier waits.
    Paused = 1,
    /// Cut over: the source is empty and no longer asked.
    Done = 2,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Copying => "copying",
            Phase::Paused => "paused",
            Phase::Done => "done",
        }
    }

    fn parse(text: &[u8]) -> Option<Phase> {
        match text {
            b"copying" => Some(Phase::Copying),
            b"paused" => Some(Phase::Paused),
            b"done" => Some(Phase::Done),
            _ => None,
        }
    }

    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Copying,
            1 => Phase::Paused,
            _ => Phase::Done,
        }
    }
}

/// Counters, summed over the process (INFO `# Migration`, `/metrics`).
#[derive(Default)]
pub struct Stats {
    /// Keys this process moved (restored on the target, deleted from the source).
    pub moved: AtomicU64,
    /// Keys found moved already (absent from the source) when asked.
    pub absent: AtomicU64,
    /// Keys the target already had when restored (a mover died after its RESTORE): the
    /// target's copy kept.
    pub kept: AtomicU64,
    /// Waits for another mover's lease.
    pub busy: AtomicU64,
    /// Moves that failed (the key stays on the source; the request got TRYAGAIN).
    pub errors: AtomicU64,
    /// Requests the gate held until their keys moved.
    pub gated: AtomicU64,
    /// Keys the gates restored on the target for clients (the copier gives way to them).
    pub gate_moves: AtomicU64,
    /// Keys the copier's passes met.
    pub scanned: AtomicU64,
    /// Complete copier passes over every source server.
    pub passes: AtomicU64,
    /// Payload bytes moved (DUMP payloads, and the elements of keys copied by slices).
    pub bytes: AtomicU64,
    /// Keys too big to DUMP (`dump_max_bytes`) restored by slices (`typed_copy.rs`).
    pub sliced: AtomicU64,
    /// Keys the verifier sampled and looked for on the other side.
    pub verified: AtomicU64,
    /// Sampled keys live on both sides with no mover's lease (`verifier.rs`).
    pub conflicts: AtomicU64,
}

/// A lock's value, whoever poisoned it.
fn read(lock: &RwLock<String>) -> String {
    lock.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// No pass has ended yet: `left` is unknown.
const LEFT_UNKNOWN: u64 = u64::MAX;

/// Where the keys not moved yet are.
enum Source {
    /// A pool of standalone servers, each key on the server the placement names.
    Pool(Sharding),
    /// One master, the one the sentinels name now (`copier.rs` asks them every second).
    Sentinel(RwLock<String>),
    /// A Redis Cluster: each key on its slot's master in the map last read from it
    /// (`copier.rs` reads it every second; None before the first read).
    Cluster {
        seeds: Vec<String>,
        map: RwLock<Option<Arc<SlotMap>>>,
    },
}

/// Internal keys (leases, migration states) are never moved: a migration's own machinery,
/// not data. A roll-back's source (a cluster) holds the first migration's state hash.
pub(crate) const INTERNAL_PREFIX: &[u8] = b"__slotgate:";

/// The prefix of a lease's key on the source (`lease_key`).
const LEASE_PREFIX: &[u8] = b"__slotgate:lease:";

/// One migration, shared by the workers, the copier and the admin endpoint.
pub struct Migration {
    name: String,
    source: Source,
    /// The sentinels of a Sentinel source.
    pub(crate) sentinel: Option<SentinelConfig>,
    /// How the pool the proxy serves places keys: a cluster's slots, a sharded pool's
    /// servers, a Sentinel master's slot 0 (`target.slot(key)` then the map's owner).
    target: cluster::Placement,
    source_auth: Option<Bytes>,
    target_auth: Option<Bytes>,
    target_tls: Option<Arc<Connector>>,
    lease_ms: u64,
    /// Strings and collections taking more are copied by slices (`typed_copy.rs`).
    dump_max_bytes: u64,
    copy_rate: u32,
    verify_rate: u32,
    /// This process's part of every lease token, so two proxies' tokens never match.
    token: String,
    next_token: AtomicU64,
    phase: AtomicU8,
    /// Keys the copier's last complete pass found on the source (`LEFT_UNKNOWN` before).
    left: AtomicU64,
    pub stats: Stats,
    last_error: Mutex<String>,
    last_conflict: Mutex<Vec<u8>>,
}

impl Migration {
    pub(crate) fn new(
        config: &MigrationConfig,
        target: cluster::Placement,
        target_auth: Option<Bytes>,
        target_tls: Option<Arc<Connector>>,
    ) -> Result<Migration, ConfigError> {
        let (source, sentinel) = match config.source_sentinel.is_set() {
            true => (
                Source::Sentinel(RwLock::new(String::new())),
                Some(config.source_sentinel.clone()),
            ),
            false if !config.source_cluster.is_empty() => (
                Source::Cluster {
                    seeds: config.source_cluster.clone(),
                    map: RwLock::new(None),
                },
                None,
            ),
            false => {
                let pool = config
                    .source
                    .sharding()
                    .map_err(|e| ConfigError::Migration(format!("source: {e}")))?;
                (Source::Pool(pool), None)
            }
        };
        Ok(Migration {
            name: config.name.clone(),
            source,
            sentinel,
            target,
            source_auth: config.source_auth(),
            target_auth,
            target_tls,
            lease_ms: config.lease_ms,
            dump_max_bytes: config.dump_max_bytes,
            copy_rate: config.copy_keys_per_second,
            verify_rate: config.verify_samples_per_second,
            token: format!("{:016x}", rand::random::<u64>()),
            next_token: AtomicU64::new(0),
            phase: AtomicU8::new(Phase::Copying as u8),
            left: AtomicU64::new(LEFT_UNKNOWN),
            stats: Stats::default(),
            last_error: Mutex::new(String::new()),
            last_conflict: Mutex::new(Vec::new()),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Relaxed))
    }

    fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Relaxed);
    }

    /// Whether requests must wait for their keys to leave the source.
    #[inline]
    pub fn gating(&self) -> bool {
        self.phase.load(Relaxed) != Phase::Done as u8
    }

    /// Keys the copier's last complete pass found on the source; None before one ended.
    pub fn left(&self) -> Option<u64> {
        Some(self.left.load(Relaxed)).filter(|l| *l != LEFT_UNKNOWN)
    }

    /// The source's servers now: the pool's, the master the sentinels name, or the
    /// cluster's masters.
    pub fn source_servers(&self) -> Vec<String> {
        match &self.source {
            Source::Pool(pool) => pool.servers().iter().map(|s| s.addr.clone()).collect(),
            Source::Sentinel(master) => vec![read(master)],
            Source::Cluster { .. } => self
                .source_map()
                .map(|map| map.nodes().iter().map(|n| n.addr.clone()).collect())
                .unwrap_or_default(),
        }
    }

    fn source_map(&self) -> Option<Arc<SlotMap>> {
        let Source::Cluster { map, .. } = &self.source else {
            return None;
        };
        map.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A cluster source's slot map, read from one of its nodes (the masters last known,
    /// then the seeds). Nothing to do for the other sources.
    pub(crate) async fn learn_source_slots(&self) -> Result<(), String> {
        let Source::Cluster { seeds, map } = &self.source else {
            return Ok(());
        };
        let mut tried = self.source_servers();
        tried.extend(seeds.iter().cloned());
        let mut last = "no seed".to_string();
        for addr in tried {
            let reply = match NodeConn::connect(&addr, self.source_auth.as_ref(), None).await {
                Ok(mut conn) => conn.call(&[b"CLUSTER", b"SLOTS"]).await,
                Err(e) => Err(e),
            };
            let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
            match reply.map(|r| SlotMap::from_cluster_slots(0, &r, host)) {
                Ok(Ok(learned)) => {
                    *map.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(learned));
                    return Ok(());
                }
                Ok(Err(e)) => last = format!("{addr}: CLUSTER SLOTS: {e}"),
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(format!("the source cluster's slots: {last}"))
    }

    /// A Sentinel source's master changed (or was learned): true when it is a new one.
    pub(crate) fn set_master(&self, addr: String) -> bool {
        let Source::Sentinel(master) = &self.source else {
            return false;
        };
        let mut current = master.write().unwrap_or_else(|p| p.into_inner());
        let changed = *current != addr;
        *current = addr;
        changed
    }

    pub fn last_error(&self) -> String {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The last key the verifier found live on both sides (empty: none).
    pub fn last_conflict(&self) -> Vec<u8> {
        self.last_conflict
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn note_conflict(&self, key: &[u8]) {
        *self.last_conflict.lock().unwrap_or_else(|p| p.into_inner()) = key.to_vec();
    }

    pub(crate) fn note_error(&self, error: &str) {
        self.stats.errors.fetch_add(1, Relaxed);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = error.to_string();
    }

    /// The source server `key` lives on until it moves. Err: a cluster source whose map
    /// has no master for the key's slot (not read yet, or a hole).
    pub(crate) fn source_of(&self, key: &[u8]) -> Result<String, String> {
        match &self.source {
            Source::Pool(pool) => Ok(pool.servers()[usize::from(pool.server_of(key))]
                .addr
                .clone()),
            Source::Sentinel(master) => Ok(read(master)),
            Source::Cluster { .. } => self
                .source_map()
                .and_then(|map| map.node_of(cluster::key_slot(key)).map(|n| n.addr.clone()))
                .ok_or_else(|| "no master of the source cluster serves the key's slot".into()),
        }
    }

    /// The key of `key`'s lease on the source: in `key`'s slot on a cluster source, where a
    /// script may only touch keys of one slot.
    pub(crate) fn lease_key(&self, key: &[u8]) -> Vec<u8> {
        let mut lease = LEASE_PREFIX.to_vec();
        if let Source::Cluster { .. } = self.source {
            lease.push(b'{');
            lease.extend_from_slice(slot_tag(cluster::key_slot(key)).as_bytes());
            lease.push(b'}');
        }
        lease.extend_from_slice(key);
        lease
    }

    /// The target server `key` belongs on now (its slot's owner in the current map).
    pub(crate) fn target_of(&self, topology: &topology::Topology, key: &[u8]) -> Option<String> {
        let map = topology.current();
        map.node_of(self.target.slot(key))
            .map(|n| n.addr.to_string())
    }

    /// A token no other mover of any proxy holds.
    fn token(&self) -> Bytes {
        let n = self.next_token.fetch_add(1, Relaxed);
        Bytes::from(format!("{}:{n}", self.token))
    }

    /// The hash in the target that holds the phase, shared by every proxy of the migration.
    fn state_key(&self) -> Vec<u8> {
        format!("__slotgate:migration:{}", self.name).into_bytes()
    }

    /// Read the phase the target holds and adopt it (none stored: copying).
    pub(crate) async fn load_phase(&self, topology: &topology::Topology) -> Result<Phase, String> {
        let key = self.state_key();
        let reply = self.on_target(topology, &[b"HGET", &key, b"phase"]).await?;
        let phase = match reply {
            Value::BulkString(b) => Phase::parse(&b).ok_or("unknown phase in the target")?,
            Value::Null => Phase::Copying,
            other => return Err(format!("HGET: {other:?}")),
        };
        // Done is for good: a stale read never reopens the gate.
        if self.phase() != Phase::Done {
            self.set_phase(phase);
        }
        Ok(self.phase())
    }

    /// An operator's action (`POST /migration/<action>`): the new phase stored in the target,
    /// then adopted. Err: why not, in words for the operator.
    pub(crate) async fn act(
        &self,
        topology: &topology::Topology,
        action: &str,
    ) -> Result<Phase, String> {
        let now = self.load_phase(topology).await?;
        let next = match (action, now) {
            (_, Phase::Done) => return Err("the migration is done (cut over)".into()),
            ("pause", _) => Phase::Paused,
            ("resume", _) => Phase::Copying,
            ("cutover", _) => match self.left() {
                Some(0) => Phase::Done,
                Some(n) => {
                    return Err(format!(
                        "the copier's last pass still found {n} keys on the source; cut over \
                         once a pass finds none"
                    ))
                }
                None => {
                    return Err("no copier pass has ended yet on this proxy; cut over once \
                                one finds the source empty"
                        .into())
                }
            },
            _ => {
                return Err(format!(
                    "unknown action {action:?}: pause, resume or cutover"
                ))
            }
        };
        let key = self.state_key();
        let reply = self
            .on_target(topology, &[b"HSET", &key, b"phase", next.name().as_bytes()])
            .await?;
        if let Value::Error(e) = reply {
            return Err(String::from_utf8_lossy(&e).into_owned());
        }
        self.set_phase(next);
        Ok(next)
    }

    /// One call about the state key on the target master of its slot, following a MOVED.
    async fn on_target(
        &self,
        topology: &topology::Topology,
        args: &[&[u8]],
    ) -> Result<Value, String> {
        let slot = self.target.slot(&self.state_key());
        let map = topology.current();
        let mut addr = map
            .node_of(slot)
            .map(|n| n.addr.to_string())
            .ok_or("no master serves the state key's slot")?;
        for _ in 0..3 {
            let mut conn =
                NodeConn::connect(&addr, self.target_auth.as_ref(), self.target_tls.as_deref())
                    .await?;
            let reply = conn.call(args).await?;
            let Value::Error(e) = &reply else {
                return Ok(reply);
            };
            match cluster::parse_redirect(e) {
                Some(cluster::Redirect::Moved { to, .. }) => {
                    topology.request_refresh_now();
                    addr = map.redirect_addr(to, &addr).ok_or("bad MOVED")?;
                }
                _ => return Ok(reply),
            }
        }
        Err("too many redirects for the state key".into())
    }
}

/// A hash tag whose slot is `slot`: the shortest base-36 numerals, found once by trying
/// them in order until every slot has one (about 170,000 CRC16s, a few milliseconds).
fn slot_tag(slot: u16) -> &'static str {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let count = cluster::SLOT_COUNT;
        let mut tags = vec![String::new(); count];
        let mut missing = count;
        let mut n = 0u64;
        while missing > 0 {
            let tag = base36(n);
            let at = usize::from(cluster::key_slot(tag.as_bytes()));
            if tags[at].is_empty() {
                tags[at] = tag;
                missing -= 1;
            }
            n += 1;
        }
        tags
    });
    &tags[usize::from(slot)]
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_has_a_tag_that_hashes_to_it() {
        for slot in [0u16, 1, 5000, 12182, 16383] {
            let tag = slot_tag(slot);
            assert_eq!(cluster::key_slot(tag.as_bytes()), slot, "{tag}");
            let lease = format!("x{{{tag}}}{{user1}}:a");
            assert_eq!(cluster::key_slot(lease.as_bytes()), slot);
        }
        assert!((0..cluster::SLOT_COUNT as u16).all(|s| slot_tag(s).len() <= 5));
    }
}
