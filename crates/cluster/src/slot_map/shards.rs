//! CLUSTER SHARDS (Redis 7+) as a topology source: one entry per shard, its slot ranges and
//! its nodes. It stays compact when a master's slots are fragmented, where CLUSTER SLOTS
//! lists every range with the full node list again.

use resp::Value;

use super::{join_host_port, NodeEntry, SlotMap, SlotRange, TopologyError};

/// `[k1, v1, k2, v2, …]` (RESP2) or a map (RESP3): the value for `key`.
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| k.as_bytes() == Some(key.as_bytes()))
            .map(|(_, v)| v),
        _ => v
            .as_array()?
            .chunks(2)
            .find(|kv| kv[0].as_bytes() == Some(key.as_bytes()))?
            .get(1),
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_bytes)
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// One node of a shard.
struct ShardNode {
    addr: String,
    id: Option<String>,
    master: bool,
    /// `health: online` (not `loading`, a replica still syncing, nor `failed`).
    online: bool,
}

/// One node of a shard; None when it has no usable address. `tls`: its `tls-port` is the
/// one to dial (the reply names the plain `port` too).
fn node(v: &Value, responder_host: &str, tls: bool) -> Option<ShardNode> {
    let port_field = if tls { "tls-port" } else { "port" };
    let port = field(v, port_field)
        .and_then(Value::as_int)
        .filter(|p| (1..=65535).contains(p))?;
    let host = text(field(v, "endpoint"))
        .or_else(|| text(field(v, "ip")))
        .unwrap_or_default();
    let host = match host.as_str() {
        "" => responder_host.to_string(),
        // Hostname preferred and none set: the node's IP, as in CLUSTER SLOTS' metadata.
        "?" => text(field(v, "ip")).filter(|ip| !ip.is_empty() && ip != "?")?,
        _ => host,
    };
    Some(ShardNode {
        addr: join_host_port(&host, port as u16),
        id: text(field(v, "id")),
        master: text(field(v, "role")).as_deref() == Some("master"),
        // Servers without the field (none known) count as online.
        online: text(field(v, "health")).is_none_or(|h| h == "online"),
    })
}

impl SlotMap {
    /// Parse a CLUSTER SHARDS reply (read over TLS: `tls`). Shards without a reachable
    /// master are left unassigned.
    pub fn from_cluster_shards(
        version: u64,
        reply: &Value,
        responder_host: &str,
        tls: bool,
    ) -> Result<SlotMap, TopologyError> {
        let shards = reply.as_array().ok_or(TopologyError::NotAnArray)?;
        let mut ranges = Vec::new();
        for (i, shard) in shards.iter().enumerate() {
            let slots = field(shard, "slots")
                .and_then(Value::as_array)
                .ok_or(TopologyError::BadEntry(i))?;
            let nodes: Vec<_> = field(shard, "nodes")
                .and_then(Value::as_array)
                .ok_or(TopologyError::BadEntry(i))?
                .iter()
                .filter_map(|n| node(n, responder_host, tls))
                .collect();
            // During a failover a shard can list the failed master beside the new one.
            let Some(master) = (nodes.iter().filter(|n| n.master)).min_by_key(|n| !n.online) else {
                continue;
            };
            // A replica still loading its first sync answers -LOADING: not one to read from.
            // Sorted: each node lists a shard's replicas in its own order.
            let mut replicas: Vec<String> = (nodes.iter())
                .filter(|n| !n.master && n.online)
                .map(|n| n.addr.clone())
                .collect();
            replicas.sort();
            let master = NodeEntry {
                addr: master.addr.clone(),
                id: master.id.clone(),
                replicas,
            };
            for pair in slots.chunks(2) {
                let (start, end) = match (pair[0].as_int(), pair.get(1).and_then(Value::as_int)) {
                    (Some(s), Some(e)) if (0..16384).contains(&s) && (s..16384).contains(&e) => {
                        (s as u16, e as u16)
                    }
                    _ => return Err(TopologyError::BadEntry(i)),
                };
                ranges.push(SlotRange {
                    start,
                    end,
                    master: master.clone(),
                });
            }
        }
        // Shards come in the answering node's own order, which differs from node to node;
        // the map's masters are numbered by their first slot, as CLUSTER SLOTS lists them,
        // so the same cluster read from any node is the same map (SCAN cursors name a
        // master by that number).
        ranges.sort_by_key(|r| r.start);
        SlotMap::from_ranges(version, &ranges)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn s(x: &str) -> Value {
        Value::BulkString(Bytes::copy_from_slice(x.as_bytes()))
    }

    fn node(id: &str, port: i64, role: &str) -> Value {
        node_in(id, port, role, "online", "127.0.0.1")
    }

    fn node_in(id: &str, port: i64, role: &str, health: &str, endpoint: &str) -> Value {
        Value::Array(vec![
            s("id"),
            s(id),
            s("port"),
            Value::Integer(port),
            s("tls-port"),
            Value::Integer(port + 10_000),
            s("ip"),
            s("127.0.0.1"),
            s("endpoint"),
            s(endpoint),
            s("role"),
            s(role),
            s("health"),
            s(health),
        ])
    }

    #[test]
    fn shards_become_a_slot_map() {
        let shard = |ranges: &[i64], nodes: Vec<Value>| {
            let slots = Value::Array(ranges.iter().map(|r| Value::Integer(*r)).collect());
            Value::Array(vec![s("slots"), slots, s("nodes"), Value::Array(nodes)])
        };
        let reply = Value::Array(vec![
            shard(
                &[0, 99, 200, 16383],
                vec![node("a", 7000, "master"), node("c", 7002, "replica")],
            ),
            shard(&[100, 199], vec![node("b", 7001, "master")]),
        ]);
        let map = SlotMap::from_cluster_shards(1, &reply, "127.0.0.1", false).unwrap();
        assert_eq!(map.node_of(0).unwrap().addr, "127.0.0.1:7000");
        assert_eq!(map.node_of(150).unwrap().addr, "127.0.0.1:7001");
        assert_eq!(
            map.node_of(16383).unwrap().replicas,
            vec!["127.0.0.1:7002".to_string()]
        );
        assert_eq!(map.assigned(), 16384);
        assert!(SlotMap::from_cluster_shards(1, &Value::Array(vec![]), "h", false).is_err());
    }

    #[test]
    fn masters_are_numbered_by_their_first_slot_whatever_the_shard_order() {
        // Each node lists the shards in its own order; SCAN cursors name masters by index.
        let shard = |ranges: &[i64], id: &str, port: i64| {
            let slots = Value::Array(ranges.iter().map(|r| Value::Integer(*r)).collect());
            let nodes = Value::Array(vec![node(id, port, "master")]);
            Value::Array(vec![s("slots"), slots, s("nodes"), nodes])
        };
        let a = shard(&[0, 99], "a", 7000);
        let b = shard(&[100, 16383], "b", 7001);
        let one = Value::Array(vec![a.clone(), b.clone()]);
        let other = Value::Array(vec![b, a]);
        let addrs = |reply: &Value| -> Vec<String> {
            let map = SlotMap::from_cluster_shards(1, reply, "127.0.0.1", false).unwrap();
            map.nodes().iter().map(|n| n.addr.clone()).collect()
        };
        assert_eq!(addrs(&one), addrs(&other));
        assert_eq!(addrs(&other)[0], "127.0.0.1:7000");
    }

    #[test]
    fn only_online_nodes_serve_and_question_marks_take_the_ip() {
        // As Redis 7.0 lists a shard during a failover (the failed master beside the new
        // one), a replica still loading its first sync, and `?` with hostname preferred.
        let reply = Value::Array(vec![Value::Array(vec![
            s("slots"),
            Value::Array(vec![Value::Integer(0), Value::Integer(16383)]),
            s("nodes"),
            Value::Array(vec![
                node_in("old", 7000, "master", "failed", "127.0.0.1"),
                node_in("new", 7001, "master", "online", "?"),
                node_in("syncing", 7002, "replica", "loading", "127.0.0.1"),
                node_in("ready", 7003, "replica", "online", "127.0.0.1"),
            ]),
        ])]);
        let map = SlotMap::from_cluster_shards(1, &reply, "127.0.0.1", false).unwrap();
        let owner = map.node_of(0).unwrap();
        assert_eq!(owner.addr, "127.0.0.1:7001");
        assert_eq!(owner.replicas, vec!["127.0.0.1:7003".to_string()]);
        // Read over TLS: the TLS ports (the reply names both).
        let map = SlotMap::from_cluster_shards(1, &reply, "127.0.0.1", true).unwrap();
        assert_eq!(map.node_of(0).unwrap().addr, "127.0.0.1:17001");
    }
}
