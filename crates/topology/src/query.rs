//! Which topology query a source sends and how its reply becomes a map (R7): CLUSTER SLOTS
//! (single-pass since Redis 6.2.2, cached by Valkey 8), CLUSTER SHARDS (Redis 7+, compact
//! when slot ranges are fragmented, and current: Redis 7.0 lists a replica that just joined
//! in SHARDS at once but in SLOTS only seconds later, and SHARDS says which replicas are
//! still loading), or `Auto`: SHARDS, and SLOTS from a node that refuses it. Never CLUSTER
//! NODES.

use cluster::slot_map::{host_of, SlotMap, TopologyError};
use resp::Value;

/// The topology query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TopologyCommand {
    #[default]
    Slots,
    Shards,
    /// SHARDS; the source falls back to `Slots` when a node answers it with an error.
    Auto,
}

impl TopologyCommand {
    /// From a config value: `slots` or `shards`.
    pub fn from_name(name: &str) -> Option<TopologyCommand> {
        match name {
            "slots" => Some(TopologyCommand::Slots),
            "shards" => Some(TopologyCommand::Shards),
            "auto" => Some(TopologyCommand::Auto),
            _ => None,
        }
    }

    /// The command's arguments.
    pub fn args(self) -> &'static [&'static [u8]] {
        match self {
            TopologyCommand::Slots => &[b"CLUSTER", b"SLOTS"],
            TopologyCommand::Shards | TopologyCommand::Auto => &[b"CLUSTER", b"SHARDS"],
        }
    }

    /// The map `reply` describes, stamped `version`; an empty host in it means
    /// `responder`'s host (hostname mode). `tls`: the reply came over TLS, so the nodes'
    /// TLS ports are the ones to dial (CLUSTER SHARDS names both; SLOTS answers per
    /// connection).
    pub fn parse(
        self,
        version: u64,
        reply: &Value,
        responder: &str,
        tls: bool,
    ) -> Result<SlotMap, TopologyError> {
        match self {
            TopologyCommand::Slots => {
                SlotMap::from_cluster_slots(version, reply, host_of(responder))
            }
            TopologyCommand::Shards | TopologyCommand::Auto => {
                SlotMap::from_cluster_shards(version, reply, host_of(responder), tls)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn bulk(s: &str) -> Value {
        Value::BulkString(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn names_and_arguments() {
        assert_eq!(
            TopologyCommand::from_name("slots"),
            Some(TopologyCommand::Slots)
        );
        assert_eq!(
            TopologyCommand::from_name("shards"),
            Some(TopologyCommand::Shards)
        );
        assert_eq!(TopologyCommand::from_name("nodes"), None);
        assert_eq!(
            TopologyCommand::default().args(),
            [&b"CLUSTER"[..], b"SLOTS"]
        );
        assert_eq!(TopologyCommand::Shards.args()[1], b"SHARDS");
    }

    #[test]
    fn an_empty_host_is_the_responders() {
        let node = Value::Array(vec![bulk(""), Value::Integer(7000), bulk("id")]);
        let reply = Value::Array(vec![Value::Array(vec![
            Value::Integer(0),
            Value::Integer(16383),
            node,
        ])]);
        let map = TopologyCommand::Slots
            .parse(3, &reply, "[::1]:7001", false)
            .unwrap();
        assert_eq!(map.version(), 3);
        assert_eq!(map.node_of(0).unwrap().addr, "[::1]:7000");
        assert!(TopologyCommand::Shards
            .parse(3, &reply, "h:1", false)
            .is_err());
    }
}
