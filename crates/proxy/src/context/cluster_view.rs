//! The proxy as cluster-aware clients see it: a Redis Cluster whose nodes are the healthy
//! members of its proxy group (docs/group.md), or this proxy alone, owning all 16384 slots.
//! Clients such as `redis-cli -c`, Jedis, go-redis or redis-py's RedisCluster ask CLUSTER
//! SLOTS (or SHARDS, NODES) at start; they spread their requests over the members by slot,
//! and never see a MOVED: every member serves every key, and follows the real cluster's
//! redirects itself.
//!
//! The slots are split over the members sorted by address, in contiguous ranges, so every
//! member that sees the same healthy set gives the same answer. Each member's node id is
//! the SHA-1 of its address: stable across restarts and the same from every member.
//!
//! Every reply is encoded once, when the member set changes: answering costs O(1) whatever
//! the size of the real cluster behind (field report 000: CLUSTER SLOTS was O(masters ×
//! 16384) on the servers, and clients called it in storms).

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use cluster::slot_map::SlotMap;
use resp::Value;

/// Pre-encoded replies for the CLUSTER subcommands the proxy answers.
pub(crate) struct ClusterView {
    /// The members advertised, sorted.
    members: Vec<SocketAddr>,
    me: SocketAddr,
    /// This proxy's config epoch: its place in `members`, from 1.
    my_epoch: usize,
    myid: Bytes,
    myshardid: Bytes,
    slots: Bytes,
    nodes: Bytes,
    shards_resp2: Bytes,
    shards_resp3: Bytes,
}

/// One advertised member and the slots it is given.
struct Member {
    id: String,
    ip: String,
    port: i64,
    first: i64,
    last: i64,
    me: bool,
}

// === impl ClusterView ===

impl ClusterView {
    /// The replies of a proxy at `me` whose group's healthy members are `members` (`me`
    /// is added when missing: a proxy answering is alive).
    pub(crate) fn new(members: &[SocketAddr], me: SocketAddr) -> ClusterView {
        let mut sorted = members.to_vec();
        if !sorted.contains(&me) {
            sorted.push(me);
        }
        sorted.sort();
        let list = split(&sorted, me);
        let bulk = |s: &str| Value::BulkString(Bytes::copy_from_slice(s.as_bytes()));
        let slots = Value::Array(list.iter().map(|m| slots_entry(m, &bulk)).collect());
        let shards = Value::Array(list.iter().map(|m| shard(m, &bulk)).collect());
        let mut lines = String::new();
        for (epoch, m) in list.iter().enumerate() {
            let flags = if m.me { "myself,master" } else { "master" };
            lines.push_str(&format!(
                "{} {}:{}@{} {flags} - 0 0 {} connected {}-{}\n",
                m.id,
                m.ip,
                m.port,
                m.port + 10000,
                epoch + 1,
                m.first,
                m.last
            ));
        }
        let my_epoch = sorted.iter().position(|a| *a == me).map_or(1, |i| i + 1);
        ClusterView {
            members: sorted,
            me,
            my_epoch,
            myid: encode2(&bulk(&node_id(me))),
            myshardid: encode2(&bulk(&shard_id(me))),
            slots: encode2(&slots),
            nodes: encode2(&bulk(&lines)),
            shards_resp2: encode2(&shards),
            shards_resp3: encode3(&shards),
        }
    }

    /// The members advertised, sorted (this proxy included).
    pub(crate) fn members(&self) -> &[SocketAddr] {
        &self.members
    }

    /// Whether this view is the one for `me` advertising exactly `members` (sorted).
    pub(crate) fn is(&self, members: &[SocketAddr], me: SocketAddr) -> bool {
        self.me == me && self.members == members
    }

    pub(crate) fn myid(&self) -> Bytes {
        self.myid.clone()
    }

    /// CLUSTER MYSHARDID: each member is a shard of its own (a master without replicas).
    pub(crate) fn myshardid(&self) -> Bytes {
        self.myshardid.clone()
    }

    pub(crate) fn slots(&self) -> Bytes {
        self.slots.clone()
    }

    pub(crate) fn nodes(&self) -> Bytes {
        self.nodes.clone()
    }

    pub(crate) fn shards(&self, resp3: bool) -> Bytes {
        if resp3 {
            self.shards_resp3.clone()
        } else {
            self.shards_resp2.clone()
        }
    }

    /// CLUSTER INFO: the state is the real cluster's as the proxy sees it (every slot owned
    /// or not); the size is the group's. In front of a sharded pool every slot is served
    /// (the pool's map has one slot per server, but every key has a server).
    pub(crate) fn info(&self, map: &SlotMap, placement: &cluster::Placement) -> Bytes {
        let assigned = match placement.covers_every_key() {
            false => map.assigned(),
            true => cluster::SLOT_COUNT,
        };
        let state = if assigned == cluster::SLOT_COUNT {
            "ok"
        } else {
            "fail"
        };
        let n = self.members.len();
        let text = format!(
            "cluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\n\
             cluster_slots_pfail:0\r\ncluster_slots_fail:{}\r\ncluster_known_nodes:{n}\r\ncluster_size:{n}\r\n\
             cluster_current_epoch:{n}\r\ncluster_my_epoch:{}\r\n",
            cluster::SLOT_COUNT - assigned,
            self.my_epoch
        );
        let mut out = BytesMut::new();
        resp::write_bulk(&mut out, text.as_bytes());
        out.freeze()
    }
}

/// Contiguous ranges over the sorted members: member i of n gets slots
/// [i·16384/n, (i+1)·16384/n).
fn split(sorted: &[SocketAddr], me: SocketAddr) -> Vec<Member> {
    let n = sorted.len();
    let total = cluster::SLOT_COUNT;
    sorted
        .iter()
        .enumerate()
        .map(|(i, addr)| Member {
            id: node_id(*addr),
            ip: addr.ip().to_string(),
            port: i64::from(addr.port()),
            first: (i * total / n) as i64,
            last: ((i + 1) * total / n) as i64 - 1,
            me: *addr == me,
        })
        .collect()
}

/// `[first, last, [ip, port, id]]`.
fn slots_entry(m: &Member, bulk: &impl Fn(&str) -> Value) -> Value {
    let node = Value::Array(vec![bulk(&m.ip), Value::Integer(m.port), bulk(&m.id)]);
    Value::Array(vec![Value::Integer(m.first), Value::Integer(m.last), node])
}

/// One shard per member: its range and itself as the master.
fn shard(m: &Member, bulk: &impl Fn(&str) -> Value) -> Value {
    let node = Value::Map(vec![
        (bulk("id"), bulk(&m.id)),
        (bulk("port"), Value::Integer(m.port)),
        (bulk("ip"), bulk(&m.ip)),
        (bulk("endpoint"), bulk(&m.ip)),
        (bulk("role"), bulk("master")),
        (bulk("replication-offset"), Value::Integer(0)),
        (bulk("health"), bulk("online")),
    ]);
    let range = Value::Array(vec![Value::Integer(m.first), Value::Integer(m.last)]);
    Value::Map(vec![
        (bulk("slots"), range),
        (bulk("nodes"), Value::Array(vec![node])),
    ])
}

/// A stable 40-hex-digit node id: the SHA-1 of the address as `ip:port`, so every proxy of
/// a group computes the same id for a member, and a restart keeps it.
pub(crate) fn node_id(addr: SocketAddr) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        addr.to_string().as_bytes(),
    );
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A member's shard id: like its node id, 40 hex digits from its address, but not the same
/// (Redis keeps the two apart, and tools match shards by it).
pub(crate) fn shard_id(addr: SocketAddr) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("shard {addr}").as_bytes(),
    );
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
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
mod tests;
