//! The proxy as cluster-aware clients see it: a one-node Redis Cluster that owns all 16384
//! slots. Clients such as `redis-cli -c`, Jedis, go-redis or redis-py's RedisCluster ask
//! CLUSTER SLOTS (or SHARDS, NODES) at start; they learn that every slot lives at the proxy,
//! send everything here, and never see a MOVED, because the proxy follows those itself.
//!
//! Every reply is encoded once, when the proxy starts: answering costs O(1) whatever the size
//! of the real cluster behind (field report 000: CLUSTER SLOTS was O(masters × 16384) on the
//! servers, and clients called it in storms).

use std::hash::{Hash, Hasher};
use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use cluster::slot_map::SlotMap;
use resp::Value;

/// Pre-encoded replies for the CLUSTER subcommands the proxy answers.
pub(crate) struct ClusterView {
    myid: Bytes,
    slots: Bytes,
    nodes: Bytes,
    shards_resp2: Bytes,
    shards_resp3: Bytes,
}

// === impl ClusterView ===

impl ClusterView {
    /// Build the replies for a proxy reachable at `addr`.
    pub(crate) fn new(addr: SocketAddr) -> ClusterView {
        let id = node_id(addr);
        let ip = addr.ip().to_string();
        let port = i64::from(addr.port());
        let bulk = |s: &str| Value::BulkString(Bytes::copy_from_slice(s.as_bytes()));
        let me = Value::Array(vec![bulk(&ip), Value::Integer(port), bulk(&id)]);
        let slots = Value::Array(vec![Value::Array(vec![
            Value::Integer(0),
            Value::Integer(16383),
            me,
        ])]);
        let node = Value::Map(vec![
            (bulk("id"), bulk(&id)),
            (bulk("port"), Value::Integer(port)),
            (bulk("ip"), bulk(&ip)),
            (bulk("endpoint"), bulk(&ip)),
            (bulk("role"), bulk("master")),
            (bulk("replication-offset"), Value::Integer(0)),
            (bulk("health"), bulk("online")),
        ]);
        let shard = Value::Map(vec![
            (
                bulk("slots"),
                Value::Array(vec![Value::Integer(0), Value::Integer(16383)]),
            ),
            (bulk("nodes"), Value::Array(vec![node])),
        ]);
        let shards = Value::Array(vec![shard]);
        let line = format!(
            "{id} {ip}:{port}@{} myself,master - 0 0 1 connected 0-16383\n",
            port + 10000
        );
        ClusterView {
            myid: encode2(&bulk(&id)),
            slots: encode2(&slots),
            nodes: encode2(&bulk(&line)),
            shards_resp2: encode2(&shards),
            shards_resp3: encode3(&shards),
        }
    }

    pub(crate) fn myid(&self) -> Bytes {
        self.myid.clone()
    }

    pub(crate) fn slots(&self) -> Bytes {
        self.slots.clone()
    }

    pub(crate) fn nodes(&self) -> Bytes {
        self.nodes.clone()
    }

    pub(crate) fn shards(&self, protocol: u8) -> Bytes {
        if protocol == 3 {
            self.shards_resp3.clone()
        } else {
            self.shards_resp2.clone()
        }
    }

    /// CLUSTER INFO: the state is the real cluster's as the proxy sees it (every slot owned
    /// or not); the shape is a one-node cluster's.
    pub(crate) fn info(&self, map: &SlotMap) -> Bytes {
        let assigned = map.assigned();
        let state = if assigned == cluster::SLOT_COUNT {
            "ok"
        } else {
            "fail"
        };
        let text = format!(
            "cluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\n\
             cluster_slots_pfail:0\r\ncluster_slots_fail:{}\r\ncluster_known_nodes:1\r\ncluster_size:1\r\n\
             cluster_current_epoch:1\r\ncluster_my_epoch:1\r\n",
            cluster::SLOT_COUNT - assigned
        );
        let mut out = BytesMut::new();
        resp::write_bulk(&mut out, text.as_bytes());
        out.freeze()
    }
}

/// A stable 40-hex-digit node id derived from the proxy's address, so every proxy of a
/// fleet has its own and a restart keeps it.
fn node_id(addr: SocketAddr) -> String {
    let mut hex = String::with_capacity(40);
    for salt in 0u8..3 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (salt, addr).hash(&mut h);
        hex.push_str(&format!("{:016x}", h.finish()));
    }
    hex.truncate(40);
    hex
}

fn encode2(v: &Value) -> Bytes {
    let mut out = BytesMut::new();
    v.encode_resp2(&mut out);
    out.freeze()
}

fn encode3(v: &Value) -> Bytes {
    let mut out = BytesMut::new();
    v.encode(&mut out);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_describe_one_node_owning_every_slot() {
        let view = ClusterView::new("127.0.0.1:7777".parse().unwrap());
        let slots = view.slots();
        let (value, _) = resp::decode(&slots).unwrap().unwrap();
        let range = &value.as_array().unwrap()[0];
        let parts = range.as_array().unwrap();
        assert_eq!(
            (parts[0].as_int(), parts[1].as_int()),
            (Some(0), Some(16383))
        );
        let node = parts[2].as_array().unwrap();
        assert_eq!(node[0].as_bytes(), Some(&b"127.0.0.1"[..]));
        assert_eq!(node[1].as_int(), Some(7777));
        assert_eq!(node[2].as_bytes().unwrap().len(), 40);
        let nodes = String::from_utf8(view.nodes().to_vec()).unwrap();
        assert!(nodes.contains("127.0.0.1:7777@17777 myself,master - 0 0 1 connected 0-16383"));
        assert!(view.shards(2).starts_with(b"*1\r\n*4\r\n"));
        assert!(view.shards(3).starts_with(b"*1\r\n%2\r\n"));
    }
}
