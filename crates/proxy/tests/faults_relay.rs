//! The faults of reliability.md §C that need the network between nodes cut, staged on
//! loopback without root by `testkit::relay` (a user-space TCP relay that holds bytes per
//! source address), under the harness of `common/faults`:
//!
//! - F4, minority partition: one primary cut from the rest of the cluster bus (its own
//!   outgoing connections come from 127.0.0.2, `bind-source-addr`, and every node announces a
//!   relayed bus port), while the proxy and the clients still reach it. It acknowledges
//!   writes until it notices it lost the majority (CLUSTERDOWN), its replica is promoted on
//!   the other side, and what it acknowledged meanwhile is lost at the heal: Redis Cluster's
//!   own loss, which the proxy must pass through, neither hide nor add to. The replica
//!   (outgoing address 127.0.0.3) replicates through a relay of the primary's client port,
//!   cut with the bus; the proxy (127.0.0.1) goes through the same relay, never cut.
//! - F11, blackholed node: the proxy reaches a primary only through a relay that stops
//!   moving bytes (no RST, no FIN). Requests time out as unknown outcomes; nothing else is
//!   wedged; service returns when the route does.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use common::faults::{master_and_replica, Expect, Run};
use common::{start_proxy, tempdir, wait_until, Harness};
use testkit::relay::Relay;

const VICTIM: &str = "fv";
const MINORITY: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const MAJORITY: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// The victim's replica: on the majority side, but told apart from the proxy.
const REPLICA: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

fn cluster() -> devcluster::Cluster {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 1,
        dir: tempdir("faults-relay"),
        ..Default::default()
    };
    devcluster::Cluster::start(&opts).expect("cluster starts")
}

fn config(cluster: &devcluster::Cluster, node: SocketAddr, args: &[&str]) {
    let mut full = vec!["CONFIG", "SET"];
    full.extend_from_slice(args);
    let reply = cluster.command(node, &full).unwrap();
    assert!(!reply.is_error(), "CONFIG SET {args:?}: {reply:?}");
}

/// The text of `CLUSTER NODES` as `node` sees it.
fn nodes_view(cluster: &devcluster::Cluster, node: SocketAddr) -> String {
    (cluster.command(node, &["CLUSTER", "NODES"]))
        .map(|r| r.as_text().unwrap_or_default())
        .unwrap_or_default()
}

fn elsewhere(h: &Harness) -> String {
    let victim = h.cluster.owner_of(b"{fv}").unwrap();
    (0..100)
        .map(|i| format!("fo{i}"))
        .find(|t| h.cluster.owner_of(format!("{{{t}}}").as_bytes()).unwrap() != victim)
        .unwrap()
}

#[test]
fn f4_minority_partition_of_a_primary() {
    let cluster = cluster();
    let h = Harness {
        proxy: Some(start_proxy(&cluster, |_| {})),
        cluster,
    };
    let other = elsewhere(&h);
    let (m, r) = master_and_replica(&h, VICTIM);
    let nodes = h.cluster.nodes().to_vec();
    let (victim, replica) = (nodes[m].addr, nodes[r].addr);
    config(
        &h.cluster,
        victim,
        &["bind-source-addr", &MINORITY.to_string()],
    );
    config(
        &h.cluster,
        replica,
        &["bind-source-addr", &REPLICA.to_string()],
    );
    let client_relay = Relay::start(victim).unwrap();
    let port = client_relay.addr().port().to_string();
    config(&h.cluster, victim, &["cluster-announce-port", &port]);
    let relays: Vec<Relay> = (nodes.iter())
        .map(|n| {
            let bus = SocketAddr::new(n.addr.ip(), n.addr.port() + devcluster::BUS_OFFSET);
            let relay = Relay::start(bus).unwrap();
            config(
                &h.cluster,
                n.addr,
                &[
                    "cluster-announce-bus-port",
                    &relay.addr().port().to_string(),
                ],
            );
            relay
        })
        .collect();
    // Every bus link re-made through the relays, the victim's from its own address.
    wait_until(Duration::from_secs(60), || {
        let relayed = (nodes.iter()).all(|n| {
            let view = nodes_view(&h.cluster, n.addr);
            relays
                .iter()
                .all(|r| view.contains(&format!("@{} ", r.addr().port())))
                && !view.contains("disconnected")
        });
        let from_victim = (relays.iter().enumerate())
            .filter(|(i, _)| *i != m)
            .all(|(_, r)| r.accepted().contains(&MINORITY));
        let info = h.cluster.command(replica, &["INFO", "replication"]);
        let info = info.map(|r| r.lines().join("\n")).unwrap_or_default();
        let replicating = info.contains(&format!("master_port:{port}"))
            && info.contains("master_link_status:up")
            && client_relay.accepted().contains(&REPLICA);
        relayed && from_victim && replicating
    });
    h.cluster.wait_healthy(Duration::from_secs(60)).unwrap();
    let run = Run::start(
        &h,
        "F4",
        "minority partition of a primary (bus and replication cut)",
        &[VICTIM, &other],
    );
    for (i, relay) in relays.iter().enumerate() {
        if i == m {
            relay.hold_sources(&[MAJORITY, REPLICA]);
        } else {
            relay.hold_sources(&[MINORITY]);
        }
    }
    client_relay.hold_sources(&[REPLICA]);
    // The majority promotes the replica; the victim finds itself alone and refuses writes.
    wait_until(Duration::from_secs(60), || {
        let role = h.cluster.command(replica, &["ROLE"]);
        role.map(|r| r.lines().first().cloned().unwrap_or_default() == "master")
            .unwrap_or(false)
    });
    wait_until(Duration::from_secs(60), || {
        let info = h.cluster.command(victim, &["CLUSTER", "INFO"]);
        info.map(|r| r.lines().join("\n").contains("cluster_state:fail"))
            .unwrap_or(false)
    });
    relays.iter().for_each(|r| r.hold_sources(&[]));
    client_relay.hold_sources(&[]);
    wait_until(Duration::from_secs(60), || {
        let info = h.cluster.command(victim, &["INFO", "replication"]);
        info.map(|r| r.lines().join("\n").contains("role:slave"))
            .unwrap_or(false)
    });
    h.cluster.wait_healthy(Duration::from_secs(60)).unwrap();
    run.wait_acks(200);
    run.finish(
        &h,
        Expect {
            max_lost: usize::MAX,
            ..Expect::safe(8)
        },
    );
    drop((relays, client_relay));
}

#[test]
fn f11_blackholed_primary() {
    let cluster = cluster();
    let victim = cluster.owner_of(b"{fv}").unwrap();
    let relay = Relay::start(victim).unwrap();
    config(
        &cluster,
        victim,
        &["cluster-announce-port", &relay.addr().port().to_string()],
    );
    // Everyone, the proxy included, reaches the victim through the relay.
    wait_until(Duration::from_secs(60), || {
        cluster.owner_of(b"{fv}").ok() == Some(relay.addr())
            && cluster.wait_healthy(Duration::from_secs(1)).is_ok()
    });
    let h = Harness {
        proxy: Some(start_proxy(&cluster, |_| {})),
        cluster,
    };
    let other = elsewhere(&h);
    let run = Run::start(
        &h,
        "F11",
        "primary blackholed (relay holds all bytes, no RST)",
        &[VICTIM, &other],
    );
    relay.blackhole(true);
    // Until the proxy's request timeout failed a request of the victim's slot.
    run.wait_proxy_failure();
    relay.blackhole(false);
    run.wait_acks(200);
    // One unknown outcome per proxy client of the victim's slot and timeout round.
    run.finish(&h, Expect::safe(8));
}
