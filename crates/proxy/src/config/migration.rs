//! `[migration]`: the keys of a pool of standalone servers (the source, placed as
//! twemproxy places them), of a Sentinel master or of a Redis Cluster moved into the pool
//! the proxy serves (a Redis Cluster, a sharded pool, a Sentinel master), while clients go
//! on through the proxy (docs/migration.md). A cluster as the source is how a migration
//! into a cluster is rolled back: the old pool served again, the cluster drained into it.

use serde::Deserialize;

use super::{ConfigError, Secret, SentinelConfig, ShardedConfig};

/// Migration, when `source.servers`, `source_sentinel.sentinels` or `source_cluster` is not
/// empty.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MigrationConfig {
    /// Names the migration's state in the target cluster (`__slotgate:migration:<name>`),
    /// which every proxy migrating the same source shares.
    pub name: String,
    /// The pool the keys leave: nutcracker's server lines, hash, distribution and tag.
    pub source: ShardedConfig,
    /// Or a Sentinel-managed master the keys leave, followed through its failovers.
    pub source_sentinel: SentinelConfig,
    /// Or a Redis Cluster the keys leave, named by seeds (`host:port`); its slot map is
    /// read every second.
    pub source_cluster: Vec<String>,
    /// The source servers' password (`AUTH`), if they have one.
    pub source_password: Secret,
    /// Keys the background copier moves per second (per proxy); 0: no copier, keys move
    /// only when clients touch them.
    pub copy_keys_per_second: u32,
    /// How long a mover's claim on a source key lasts if it dies mid-way.
    pub lease_ms: u64,
    /// Keys the verifier samples per second (half on each side); 0: no verifier.
    pub verify_samples_per_second: u32,
    /// A string, list, hash, set or sorted set taking more than this (MEMORY USAGE) is
    /// copied in slices rather than by one DUMP and RESTORE: a DUMP is held whole in the
    /// proxy's memory, and the target refuses one above its `proto-max-bulk-len`.
    pub dump_max_bytes: u64,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        MigrationConfig {
            name: "default".into(),
            source: ShardedConfig::default(),
            source_sentinel: SentinelConfig::default(),
            source_cluster: Vec::new(),
            source_password: Secret::default(),
            copy_keys_per_second: 2000,
            lease_ms: 10_000,
            verify_samples_per_second: 10,
            dump_max_bytes: 128 << 20,
        }
    }
}

impl MigrationConfig {
    pub fn is_set(&self) -> bool {
        self.source.is_set() || self.source_sentinel.is_set() || !self.source_cluster.is_empty()
    }

    /// `AUTH password` for the source servers, encoded once.
    pub(crate) fn source_auth(&self) -> Option<bytes::Bytes> {
        if self.source_password.is_empty() {
            return None;
        }
        let mut frame = bytes::BytesMut::new();
        resp::encode_command(
            &mut frame,
            &[b"AUTH", self.source_password.expose().as_bytes()],
        );
        Some(frame.freeze())
    }

    /// The checks a configured migration needs; `random_target` says whether the pool the
    /// proxy serves places keys at random (nutcracker's `random` distribution), where a
    /// moved key could never be found again.
    pub(super) fn check(&self, random_target: bool) -> Result<(), ConfigError> {
        let bad = |why: String| Err(ConfigError::Migration(why));
        if random_target {
            return bad(
                "the target pool's distribution is random: a moved key could not be found again"
                    .into(),
            );
        }
        if self.name.is_empty() || self.name.len() > 64 {
            return bad("name must be 1 to 64 characters".into());
        }
        if self.lease_ms < 100 {
            return bad("lease_ms must be at least 100".into());
        }
        let sources = [
            self.source.is_set(),
            self.source_sentinel.is_set(),
            !self.source_cluster.is_empty(),
        ];
        if sources.iter().filter(|set| **set).count() > 1 {
            return bad(
                "source, source_sentinel and source_cluster are exclusive: one source per \
                 migration"
                    .into(),
            );
        }
        if let Some(seed) = self.source_cluster.iter().find(|s| {
            s.rsplit_once(':')
                .is_none_or(|(_, port)| port.parse::<u16>().is_err())
        }) {
            return bad(format!("source_cluster: {seed:?} is not host:port"));
        }
        if !self.source_cluster.is_empty() {
            return Ok(());
        }
        if self.source_sentinel.is_set() {
            return self
                .source_sentinel
                .check()
                .map_err(|e| ConfigError::Migration(format!("source_sentinel: {e}")));
        }
        self.source
            .sharding()
            .map(drop)
            .map_err(|e| ConfigError::Migration(format!("source: {e}")))
    }
}
