//! Moving the keys of a source (a pool of standalone servers, or a Sentinel master) into
//! the pool the proxy serves (the target: a Redis Cluster, a sharded pool, a Sentinel
//! master) while clients go on through the proxy: docs/migration.md is the design and the
//! runbook.
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
mod verifier;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use cluster::sharding::Sharding;
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
    /// Keys the copier's passes met.
    pub scanned: AtomicU64,
    /// Complete copier passes over every source server.
    pub passes: AtomicU64,
    /// Payload bytes moved.
    pub bytes: AtomicU64,
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
}

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

    /// The source's servers now: the pool's, or the master the sentinels name.
    pub fn source_servers(&self) -> Vec<String> {
        match &self.source {
            Source::Pool(pool) => pool.servers().iter().map(|s| s.addr.clone()).collect(),
            Source::Sentinel(master) => vec![read(master)],
        }
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

    /// The source server `key` lives on until it moves.
    pub(crate) fn source_of(&self, key: &[u8]) -> String {
        match &self.source {
            Source::Pool(pool) => pool.servers()[usize::from(pool.server_of(key))]
                .addr
                .clone(),
            Source::Sentinel(master) => read(master),
        }
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
