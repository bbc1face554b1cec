//! Slot migration by hand, as a resharding tool does it (SETSLOT IMPORTING/MIGRATING,
//! MIGRATE, SETSLOT NODE), and the proxy's INFO counters, for tests that move slots while
//! clients use the proxy.

use std::net::SocketAddr;

use devcluster::Cluster;
use testkit::reply::slot_of;

use super::{text, Client};

/// Run `args` on `addr`, panicking on a Redis error (setup steps must not fail).
pub fn admin(cluster: &Cluster, addr: SocketAddr, args: &[&str]) -> String {
    let reply = cluster.command(addr, args).expect("node reachable");
    assert!(!reply.is_error(), "{args:?} on {addr}: {reply:?}");
    reply.as_text().unwrap_or_default()
}

pub fn id_of(cluster: &Cluster, addr: SocketAddr) -> String {
    admin(cluster, addr, &["CLUSTER", "MYID"])
}

/// A slot being moved from `src` to `dst`.
pub struct Move<'a> {
    pub cluster: &'a Cluster,
    pub slot: String,
    pub src: SocketAddr,
    pub dst: SocketAddr,
}

impl<'a> Move<'a> {
    /// Mark the slot of `tag` importing on another master and migrating on its owner.
    pub fn begin(cluster: &'a Cluster, tag: &str) -> Move<'a> {
        let src = cluster.owner_of(tag.as_bytes()).expect("owner");
        let dst = *cluster.masters().iter().find(|a| **a != src).expect("dst");
        let slot = slot_of(tag.as_bytes()).to_string();
        let m = Move {
            cluster,
            slot,
            src,
            dst,
        };
        let src_id = id_of(cluster, src);
        admin(
            cluster,
            dst,
            &["CLUSTER", "SETSLOT", &m.slot, "IMPORTING", &src_id],
        );
        let dst_id = id_of(cluster, dst);
        admin(
            cluster,
            src,
            &["CLUSTER", "SETSLOT", &m.slot, "MIGRATING", &dst_id],
        );
        m
    }

    /// Move these keys' data to `dst` (the slot stays migrating).
    pub fn migrate(&self, keys: &[String]) {
        let port = self.dst.port().to_string();
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().map(String::as_str));
        admin(self.cluster, self.src, &args);
    }

    /// End the migration: the slot belongs to `dst` on every master (target first).
    pub fn finish(&self) {
        let dst_id = id_of(self.cluster, self.dst);
        let mut masters = self.cluster.masters();
        masters.sort_by_key(|a| (*a != self.dst, *a == self.src));
        for m in masters {
            admin(
                self.cluster,
                m,
                &["CLUSTER", "SETSLOT", &self.slot, "NODE", &dst_id],
            );
        }
    }
}

/// `key:value` from the proxy's INFO, as a number.
pub fn info(c: &mut Client, key: &str) -> u64 {
    let all = text(&c.call(&["INFO", "everything"]));
    let line = all.lines().find_map(|l| l.strip_prefix(&format!("{key}:")));
    line.and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO has no {key}"))
}
