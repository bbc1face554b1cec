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

/// One node of a shard: (address, id, is master).
fn node(v: &Value, responder_host: &str) -> Option<(String, Option<String>, bool)> {
    let port = field(v, "port")
        .and_then(Value::as_int)
        .filter(|p| (1..=65535).contains(p))?;
    let host = text(field(v, "endpoint"))
        .or_else(|| text(field(v, "ip")))
        .unwrap_or_default();
    let host = if host.is_empty() {
        responder_host.to_string()
    } else {
        host
    };
    if host == "?" {
        return None;
    }
    let master = text(field(v, "role")).as_deref() == Some("master");
    Some((
        join_host_port(&host, port as u16),
        text(field(v, "id")),
        master,
    ))
}

impl SlotMap {
    /// Parse a CLUSTER SHARDS reply. Shards without a reachable master are left unassigned.
    pub fn from_cluster_shards(
        version: u64,
        reply: &Value,
        responder_host: &str,
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
                .filter_map(|n| node(n, responder_host))
                .collect();
            let Some((addr, id, _)) = nodes.iter().find(|(_, _, m)| *m).cloned() else {
                continue;
            };
            let replicas = nodes
                .iter()
                .filter(|(_, _, m)| !m)
                .map(|(a, _, _)| a.clone())
                .collect();
            let master = NodeEntry { addr, id, replicas };
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
        Value::Array(vec![
            s("id"),
            s(id),
            s("port"),
            Value::Integer(port),
            s("ip"),
            s("127.0.0.1"),
            s("endpoint"),
            s("127.0.0.1"),
            s("role"),
            s(role),
            s("health"),
            s("online"),
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
        let map = SlotMap::from_cluster_shards(1, &reply, "127.0.0.1").unwrap();
        assert_eq!(map.node_of(0).unwrap().addr, "127.0.0.1:7000");
        assert_eq!(map.node_of(150).unwrap().addr, "127.0.0.1:7001");
        assert_eq!(
            map.node_of(16383).unwrap().replicas,
            vec!["127.0.0.1:7002".to_string()]
        );
        assert_eq!(map.assigned(), 16384);
        assert!(SlotMap::from_cluster_shards(1, &Value::Array(vec![]), "h").is_err());
    }
}
