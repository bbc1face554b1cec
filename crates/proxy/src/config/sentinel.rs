//! `[sentinel]`: one master and its replicas as Redis Sentinel names them, followed through
//! failovers, in place of a cluster. Every key is the master's (`Placement::One`); reads
//! may go to its replicas by `cluster.read_policy`, as in front of a cluster.

use serde::Deserialize;

use super::ConfigError;

/// The sentinels and the name they watch the master under; set when `sentinels` is not
/// empty, and then `cluster.seeds` and `sharded.servers` must be empty.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SentinelConfig {
    /// `host:port` of each sentinel; any one that answers is enough.
    pub sentinels: Vec<String>,
    /// The master's name in the sentinels' configuration (`sentinel monitor <name> …`).
    pub master_name: String,
    /// The sentinels' own `requirepass`, if they have one (the servers' password is
    /// `cluster.backend_password`).
    pub password: super::Secret,
}

impl SentinelConfig {
    pub fn is_set(&self) -> bool {
        !self.sentinels.is_empty()
    }

    pub(super) fn check(&self) -> Result<(), ConfigError> {
        if self.master_name.is_empty() {
            return Err(ConfigError::Missing(
                "sentinel.master_name",
                "the name the sentinels monitor the master under",
            ));
        }
        match self
            .sentinels
            .iter()
            .find(|s| !super::listen::is_host_port(s))
        {
            Some(addr) => Err(ConfigError::Sentinel(addr.clone())),
            None => Ok(()),
        }
    }
}
