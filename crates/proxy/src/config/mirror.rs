//! `[mirror]`: a copy of the clients' writes (or of every command) sent to a second pool of
//! standalone servers, for a share of the requests, without delaying or failing anyone: a
//! new pool warmed with real traffic, or compared with the one in service, before a move.

use serde::Deserialize;

use super::{ConfigError, ShardedConfig};

/// Mirroring, when `pool.servers` is not empty.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MirrorConfig {
    /// The pool copies go to, placed as twemproxy places keys (`[sharded]`'s settings).
    pub pool: ShardedConfig,
    /// Share of the eligible requests copied, 0 to 100.
    pub percent: u32,
    /// `writes` (commands that may change data) or `all` (every keyed command).
    pub commands: String,
}

impl Default for MirrorConfig {
    fn default() -> Self {
        MirrorConfig {
            pool: ShardedConfig::default(),
            percent: 100,
            commands: "writes".into(),
        }
    }
}

impl MirrorConfig {
    pub fn is_set(&self) -> bool {
        self.pool.is_set()
    }

    /// Whether only writes are copied (`commands = "writes"`).
    pub fn writes_only(&self) -> bool {
        self.commands != "all"
    }

    pub(super) fn check(&self) -> Result<(), ConfigError> {
        if self.percent > 100 {
            return Err(ConfigError::Mirror("percent must be 0 to 100".into()));
        }
        if !matches!(self.commands.as_str(), "writes" | "all") {
            return Err(ConfigError::Mirror(format!(
                "commands must be \"writes\" or \"all\", not {:?}",
                self.commands
            )));
        }
        self.pool
            .sharding()
            .map(drop)
            .map_err(|e| ConfigError::Mirror(e.to_string()))
    }
}
