//! `[migration]`: the keys of a pool of standalone servers (the source, placed as
//! twemproxy places them) or of a Sentinel master moved into the pool the proxy serves (a
//! Redis Cluster, a sharded pool, a Sentinel master), while clients go on through the
//! proxy (docs/migration.md).

use serde::Deserialize;

use super::{ConfigError, Secret, SentinelConfig, ShardedConfig};

/// Migration, when `source.servers` or `source_sentinel.sentinels` is not empty.
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
    /// The source servers' password (`AUTH`), if they have one.
    pub source_password: Secret,
    /// Keys the background copier moves per second (per proxy); 0: no copier, keys move
    /// only when clients touch them.
    pub copy_keys_per_second: u32,
    /// How long a mover's claim on a source key lasts if it dies mid-way.
    pub lease_ms: u64,
    /// Keys the verifier samples per second (half on each side); 0: no verifier.
    pub verify_samples_per_second: u32,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        MigrationConfig {
            name: "default".into(),
            source: ShardedConfig::default(),
            source_sentinel: SentinelConfig::default(),
            source_password: Secret::default(),
            copy_keys_per_second: 2000,
            lease_ms: 10_000,
            verify_samples_per_second: 10,
        }
    }
}

impl MigrationConfig {
    pub fn is_set(&self) -> bool {
        self.source.is_set() || self.source_sentinel.is_set()
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
            return bad("the target pool's distribution is random: a moved key could not be                         found again"
                .into());
        }
        if self.name.is_empty() || self.name.len() > 64 {
            return bad("name must be 1 to 64 characters".into());
        }
        if self.lease_ms < 100 {
            return bad("lease_ms must be at least 100".into());
        }
        if self.source.is_set() && self.source_sentinel.is_set() {
            return bad(
                "source and source_sentinel are exclusive: one source per migration".into(),
            );
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
