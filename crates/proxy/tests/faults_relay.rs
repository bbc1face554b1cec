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

/// True once `node` answers `args` with a text holding `needle`.
fn answers(h: &Harness, node: SocketAddr, args: &[&str], needle: &str) -> bool {
    (h.cluster.command(node, args))
        .map(|r| r.lines().join("\n").contains(needle))
        .unwrap_or(false)
}

/// The relays that can cut primary `m` (and the link to its replica `r`) from the rest.
struct Partition {
    /// One per node, in front of its bus port, announced with `cluster-announce-bus-port`.
    bus: Vec<Relay>,
    /// In front of the victim's client port: its replica and the proxy come through it.
    client: Relay,
    m: usize,
}

impl Partition {
    /// Gives the victim and its replica their own source addresses and routes every bus
    /// link and the replication link through relays; returns once all links are re-made.
    fn stage(h: &Harness, m: usize, r: usize) -> Partition {
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
        let client = Relay::start(victim).unwrap();
        let port = client.addr().port().to_string();
        config(&h.cluster, victim, &["cluster-announce-port", &port]);
        let bus: Vec<Relay> = (nodes.iter())
            .map(|n| {
                let relay = Relay::start(SocketAddr::new(
                    n.addr.ip(),
                    n.addr.port() + devcluster::BUS_OFFSET,
                ))
                .unwrap();
                let port = relay.addr().port().to_string();
                config(&h.cluster, n.addr, &["cluster-announce-bus-port", &port]);
                relay
            })
            .collect();
        wait_until(Duration::from_secs(60), || {
            let relayed = (nodes.iter()).all(|n| {
                let view = nodes_view(&h.cluster, n.addr);
                (bus.iter()).all(|r| view.contains(&format!("@{} ", r.addr().port())))
                    && !view.contains("disconnected")
            });
            let from_victim =
                (bus.iter().enumerate()).all(|(i, r)| i == m || r.accepted().contains(&MINORITY));
            let info = ["INFO", "replication"];
            let replicating = answers(h, replica, &info, &format!("master_port:{port}"))
                && answers(h, replica, &info, "master_link_status:up")
                && client.accepted().contains(&REPLICA);
            relayed && from_victim && replicating
        });
        Partition { bus, client, m }
    }

    fn cut(&self) {
        for (i, relay) in self.bus.iter().enumerate() {
            if i == self.m {
                relay.hold_sources(&[MAJORITY, REPLICA]);
            } else {
                relay.hold_sources(&[MINORITY]);
            }
        }
        self.client.hold_sources(&[REPLICA]);
    }

    fn heal(&self) {
        self.bus.iter().for_each(|r| r.hold_sources(&[]));
        self.client.hold_sources(&[]);
    }
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
    let (victim, replica) = (h.cluster.nodes()[m].addr, h.cluster.nodes()[r].addr);
    let partition = Partition::stage(&h, m, r);
    h.cluster.wait_healthy(Duration::from_secs(60)).unwrap();
    let what = "minority partition of a primary (bus and replication cut)";
    let run = Run::start(&h, "F4", what, &[VICTIM, &other]);
    partition.cut();
    // The majority promotes the replica; the victim finds itself alone and refuses writes.
    wait_until(Duration::from_secs(60), || {
        answers(&h, replica, &["ROLE"], "master")
    });
    let info = ["CLUSTER", "INFO"];
    wait_until(Duration::from_secs(60), || {
        answers(&h, victim, &info, "cluster_state:fail")
    });
    partition.heal();
    let info = ["INFO", "replication"];
    wait_until(Duration::from_secs(60), || {
        answers(&h, victim, &info, "role:slave")
    });
    h.cluster.wait_healthy(Duration::from_secs(60)).unwrap();
    run.wait_acks(200);
    let expect = Expect {
        max_lost: usize::MAX,
        ..Expect::safe(8)
    };
    run.finish(&h, expect);
    drop(partition);
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
