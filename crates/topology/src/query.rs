//! Which topology query a source sends and how its reply becomes a map (R7): CLUSTER SLOTS
//! by default (single-pass since Redis 6.2.2, cached by Valkey 8), CLUSTER SHARDS as an
//! option (Redis 7+, compact when slot ranges are fragmented). Never CLUSTER NODES.

use cluster::slot_map::{host_of, SlotMap, TopologyError};
use resp::Value;

/// The topology query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TopologyCommand {
    #[default]
    Slots,
    Shards,
}

impl TopologyCommand {
    /// From a config value: `slots` or `shards`.
    pub fn from_name(name: &str) -> Option<TopologyCommand> {
        match name {
            "slots" => Some(TopologyCommand::Slots),
            "shards" => Some(TopologyCommand::Shards),
            _ => None,
        }
    }

    /// The command's arguments.
    pub fn args(self) -> &'static [&'static [u8]] {
        match self {
            TopologyCommand::Slots => &[b"CLUSTER", b"SLOTS"],
            TopologyCommand::Shards => &[b"CLUSTER", b"SHARDS"],
        }
    }

    /// The map `reply` describes, stamped `version`; an empty host in it means
    /// `responder`'s host (hostname mode).
    pub fn parse(
        self,
        version: u64,
        reply: &Value,
        responder: &str,
    ) -> Result<SlotMap, TopologyError> {
        match self {
            TopologyCommand::Slots => {
                SlotMap::from_cluster_slots(version, reply, host_of(responder))
            }
            TopologyCommand::Shards => {
                SlotMap::from_cluster_shards(version, reply, host_of(responder))
            }
        }
    }
}
