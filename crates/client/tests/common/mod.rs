//! Shared set-up for the client's integration tests: a real local Redis
//! Cluster on free ports (devcluster), stopped when the handle drops.

#![allow(dead_code)]

use std::net::SocketAddr;

/// A 3-master cluster without replicas (the fastest to form).
pub fn cluster() -> devcluster::Cluster {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        ..Default::default()
    };
    devcluster::Cluster::start(&opts).expect("cluster starts")
}

/// The seed address as the client takes it.
pub fn seed(c: &devcluster::Cluster) -> String {
    c.seed().to_string()
}

/// An async client on `c`'s seed.
pub async fn connect(c: &devcluster::Cluster) -> slotgate_client::Client {
    slotgate_client::Client::cluster([seed(c)])
        .await
        .expect("connect")
}

/// A multi-thread runtime for tests that mix tasks and threads.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The cluster node id of `addr`.
pub fn node_id(c: &devcluster::Cluster, addr: SocketAddr) -> String {
    c.nodes()
        .iter()
        .find(|n| n.addr == addr)
        .expect("node of this cluster")
        .id
        .clone()
}

/// Runs an admin command and insists it succeeded.
pub fn admin(c: &devcluster::Cluster, addr: SocketAddr, args: &[&str]) -> devcluster::Reply {
    c.command(addr, args)
        .expect("admin command")
        .ok()
        .expect("ok reply")
}

/// Moves every key of `slot` from `src` to `dst` and reassigns the slot on all
/// masters: afterwards `src` answers MOVED for it.
pub fn migrate_slot(c: &devcluster::Cluster, slot: u16, src: SocketAddr, dst: SocketAddr) {
    let (s, src_id, dst_id) = (slot.to_string(), node_id(c, src), node_id(c, dst));
    admin(c, dst, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &src_id]);
    admin(c, src, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &dst_id]);
    loop {
        let keys = admin(c, src, &["CLUSTER", "GETKEYSINSLOT", &s, "100"]).lines();
        if keys.is_empty() {
            break;
        }
        let port = dst.port().to_string();
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().map(String::as_str));
        admin(c, src, &args);
    }
    for node in c.masters() {
        admin(c, node, &["CLUSTER", "SETSLOT", &s, "NODE", &dst_id]);
    }
}
