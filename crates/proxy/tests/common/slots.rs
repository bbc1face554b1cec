//! Moving a key's slot between masters by hand, as a resharding tool does: IMPORTING on the
//! target, MIGRATING on the owner, MIGRATE of its keys, then SETSLOT NODE on every master.

use std::net::SocketAddr;

use devcluster::Cluster;

fn admin(cluster: &Cluster, addr: SocketAddr, args: &[&str]) -> String {
    let reply = cluster.command(addr, args).expect("node reachable");
    assert!(!reply.is_error(), "{args:?} on {addr}: {reply:?}");
    reply.as_text().unwrap_or_default()
}

/// Move the slot of `key` to another master; returns (old owner, new owner).
pub fn move_slot_of(cluster: &Cluster, key: &str) -> (SocketAddr, SocketAddr) {
    let src = cluster.owner_of(key.as_bytes()).expect("owner");
    let dst = *cluster.masters().iter().find(|a| **a != src).expect("dst");
    let slot = cluster::key_slot(key.as_bytes()).to_string();
    let src_id = admin(cluster, src, &["CLUSTER", "MYID"]);
    let dst_id = admin(cluster, dst, &["CLUSTER", "MYID"]);
    admin(
        cluster,
        dst,
        &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src_id],
    );
    admin(
        cluster,
        src,
        &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst_id],
    );
    let port = dst.port().to_string();
    let host = dst.ip().to_string();
    loop {
        let keys = cluster
            .command(src, &["CLUSTER", "GETKEYSINSLOT", &slot, "100"])
            .expect("keys");
        let keys: Vec<String> = keys.lines().into_iter().filter(|k| k != "(nil)").collect();
        if keys.is_empty() {
            break;
        }
        let mut args = vec!["MIGRATE", &host, &port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().map(String::as_str));
        admin(cluster, src, &args);
    }
    for m in cluster.masters() {
        admin(cluster, m, &["CLUSTER", "SETSLOT", &slot, "NODE", &dst_id]);
    }
    (src, dst)
}
