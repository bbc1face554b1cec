//! The fault catalogue of reliability.md §C on a real 3x1 cluster, through one harness
//! (`common/faults`): the same clients through the proxy and straight to the nodes, the same
//! checks after every fault, one report row each (docs/faults.md). The relay-based faults
//! (F4 partition, F11 blackhole) are in `faults_relay.rs`.
//!
//! Report: `FAULTS_REPORT=/tmp/faults.md cargo test -p proxy --test faults_catalogue
//! --test faults_relay -- --test-threads=1`.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::faults::{master_and_replica, signal, Expect, Run};
use common::migrate::Move;
use common::{text, wait_until, Client, Harness};
use resp::Value;

const VICTIM: &str = "fv";

/// A primary that dies or stops may have acknowledged a write or two (one per client, at
/// the instant of the fault) that its replica never got: Redis's own loss, which the direct
/// clients see as well. Nothing else may go.
const ASYNC_REPLICATION: Expect = Expect {
    max_lost: 4,
    max_unknown: 4,
    no_errors: false,
};

/// A tag served by another master than `VICTIM`'s.
fn elsewhere(h: &Harness) -> String {
    let victim = h.cluster.owner_of(b"{fv}").unwrap();
    (0..100)
        .map(|i| format!("fo{i}"))
        .find(|t| h.cluster.owner_of(format!("{{{t}}}").as_bytes()).unwrap() != victim)
        .unwrap()
}

fn role(h: &Harness, node: SocketAddr) -> String {
    match h.cluster.command(node, &["ROLE"]) {
        Ok(r) => r.lines().first().cloned().unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Until `node` is a master and every live node agrees on the slots.
fn wait_promoted(h: &Harness, node: SocketAddr) {
    wait_until(Duration::from_secs(60), || role(h, node) == "master");
    h.cluster.wait_healthy(Duration::from_secs(60)).unwrap();
}

/// Until `node` is a replica with its link to the master up.
fn wait_replica(h: &Harness, node: SocketAddr) {
    wait_until(Duration::from_secs(60), || {
        let info = h.cluster.command(node, &["INFO", "replication"]);
        let info = info.map(|r| r.lines().join("\n")).unwrap_or_default();
        info.contains("role:slave") && info.contains("master_link_status:up")
    });
}

/// The proxy's INFO stats `cluster_error_retries` (CLUSTERDOWN and the like, retried).
fn cluster_error_retries(c: &mut Client) -> u64 {
    let info = text(&c.call(&["INFO", "stats"]));
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("cluster_error_retries:"));
    line.and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no cluster_error_retries in {info}"))
}

#[test]
fn f1_primary_killed() {
    let mut h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let (m, r) = master_and_replica(&h, VICTIM);
    let (victim, replica) = (h.cluster.nodes()[m].addr, h.cluster.nodes()[r].addr);
    let run = Run::start(&h, "F1", "kill -9 of a primary", &[VICTIM, &other]);
    h.cluster.kill(victim).unwrap();
    wait_promoted(&h, replica);
    run.wait_acks(200);
    // Back as a replica, so the end check sees a whole cluster.
    h.cluster.restart(victim).unwrap();
    wait_replica(&h, victim);
    run.finish(&h, ASYNC_REPLICATION);
}

#[test]
fn f2_primary_paused_past_the_node_timeout() {
    let h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let (m, r) = master_and_replica(&h, VICTIM);
    let (victim, replica) = (&h.cluster.nodes()[m], h.cluster.nodes()[r].addr);
    let run = Run::start(
        &h,
        "F2",
        "SIGSTOP of a primary, SIGCONT after the failover",
        &[VICTIM, &other],
    );
    signal(victim.pid, "STOP");
    wait_until(Duration::from_secs(60), || role(&h, replica) == "master");
    run.wait_acks(200);
    signal(victim.pid, "CONT");
    wait_replica(&h, victim.addr);
    run.finish(&h, ASYNC_REPLICATION);
}

#[test]
fn f3_primary_busy_in_debug_sleep() {
    let h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let victim = h.cluster.owner_of(b"{fv}").unwrap();
    let run = Run::start(&h, "F3", "DEBUG SLEEP 1 on a primary", &[VICTIM, &other]);
    // Well below the node timeout (2 s): busy, not failed over.
    let reply = h.cluster.command(victim, &["DEBUG", "SLEEP", "1"]).unwrap();
    assert!(!reply.is_error());
    run.wait_acks(200);
    run.finish(
        &h,
        Expect {
            no_errors: true,
            ..Expect::safe(0)
        },
    );
}

#[test]
fn f5_two_of_three_primaries_paused() {
    let h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let survivor = h
        .cluster
        .owner_of(format!("{{{other}}}").as_bytes())
        .unwrap();
    let stopped: Vec<u32> = (h.cluster.nodes().iter())
        .filter(|n| n.master_of.is_none() && n.addr != survivor)
        .map(|n| n.pid)
        .collect();
    let run = Run::start(&h, "F5", "SIGSTOP of 2 of 3 primaries", &[VICTIM, &other]);
    let mut stats = h.client();
    let retries = cluster_error_retries(&mut stats);
    stopped.iter().for_each(|&p| signal(p, "STOP"));
    // The survivor sees it has no majority and refuses keyed commands.
    wait_until(Duration::from_secs(60), || {
        let info = h.cluster.command(survivor, &["CLUSTER", "INFO"]);
        info.map(|r| r.lines().join("\n"))
            .unwrap_or_default()
            .contains("cluster_state:fail")
    });
    // The outage lasts until the proxy's clients have met it: the proxy retried the
    // survivor's refusals, then passed one on (or a request failed otherwise).
    wait_until(Duration::from_secs(60), || {
        cluster_error_retries(&mut stats) > retries
    });
    run.wait_proxy_failure();
    stopped.iter().for_each(|&p| signal(p, "CONT"));
    h.cluster.wait_healthy(Duration::from_secs(60)).unwrap();
    run.wait_acks(200);
    run.finish(&h, Expect::safe(4));
}

#[test]
fn f6_primary_dies_with_unreplicated_writes() {
    let mut h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let (m, r) = master_and_replica(&h, VICTIM);
    let (victim, replica) = (h.cluster.nodes()[m].addr, h.cluster.nodes()[r].clone());
    let run = Run::start(
        &h,
        "F6",
        "primary killed with writes its replica never got",
        &[VICTIM, &other],
    );
    signal(replica.pid, "STOP");
    let killed = h
        .cluster
        .command(victim, &["CLIENT", "KILL", "TYPE", "replica"]);
    assert!(!killed.unwrap().is_error());
    run.wait_acks(400);
    // WAIT through the proxy is the only early sign: no replica has these writes.
    let mut c = h.client();
    assert!(matches!(
        c.call(&["RPUSH", "{fv}:wait", "x"]),
        Value::Integer(_)
    ));
    assert_eq!(c.call(&["WAIT", "1", "100"]), Value::Integer(0));
    h.cluster.kill(victim).unwrap();
    signal(replica.pid, "CONT");
    wait_promoted(&h, replica.addr);
    run.wait_acks(200);
    h.cluster.restart(victim).unwrap();
    wait_replica(&h, victim);
    run.finish(
        &h,
        Expect {
            max_lost: usize::MAX,
            ..Expect::safe(4)
        },
    );
}

#[test]
fn f7_manual_failover() {
    let h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let (m, r) = master_and_replica(&h, VICTIM);
    let (victim, replica) = (h.cluster.nodes()[m].addr, h.cluster.nodes()[r].addr);
    let run = Run::start(&h, "F7", "CLUSTER FAILOVER on a replica", &[VICTIM, &other]);
    let reply = h
        .cluster
        .command(replica, &["CLUSTER", "FAILOVER"])
        .unwrap();
    assert!(!reply.is_error());
    wait_promoted(&h, replica);
    wait_replica(&h, victim);
    run.wait_acks(200);
    run.finish(
        &h,
        Expect {
            no_errors: true,
            ..Expect::safe(0)
        },
    );
}

#[test]
fn f8_slot_migrated_under_load() {
    let h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let run = Run::start(
        &h,
        "F8",
        "the victim's slot migrated key by key",
        &[VICTIM, &other],
    );
    let mv = Move::begin(&h.cluster, "{fv}");
    // Until no key is left behind (clients keep creating them on the source meanwhile).
    loop {
        let keys = h
            .cluster
            .command(mv.src, &["CLUSTER", "GETKEYSINSLOT", &mv.slot, "100"]);
        let keys = keys.unwrap().lines();
        if keys.is_empty() {
            break;
        }
        mv.migrate(&keys);
        run.wait_acks(20);
    }
    mv.finish();
    run.wait_acks(200);
    run.finish(
        &h,
        Expect {
            no_errors: true,
            ..Expect::safe(0)
        },
    );
}

#[test]
fn f9_restarted_primary_rejoins_as_a_replica() {
    let mut h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let (m, r) = master_and_replica(&h, VICTIM);
    let (victim, replica) = (h.cluster.nodes()[m].addr, h.cluster.nodes()[r].addr);
    h.cluster.kill(victim).unwrap();
    wait_promoted(&h, replica);
    let run = Run::start(
        &h,
        "F9",
        "killed primary restarted under load",
        &[VICTIM, &other],
    );
    h.cluster.restart(victim).unwrap();
    wait_replica(&h, victim);
    run.wait_acks(200);
    run.finish(&h, Expect::safe(0));
}

#[test]
fn f10_backend_connections_killed() {
    let h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let run = Run::start(
        &h,
        "F10",
        "CLIENT KILL of every client of the primaries, 20 rounds",
        &[VICTIM, &other],
    );
    for round in 0..20 {
        let node = h.cluster.masters()[round % 3];
        let mut admin = Client::connect(node);
        let me = text(&admin.call(&["CLIENT", "ID"]))
            .trim_start_matches(':')
            .to_string();
        let list = text(&admin.call(&["CLIENT", "LIST", "TYPE", "normal"]));
        for id in list
            .lines()
            .filter_map(|l| l.strip_prefix("id=")?.split(' ').next())
        {
            if id != me {
                admin.call(&["CLIENT", "KILL", "ID", id]);
            }
        }
        run.wait_acks(50);
    }
    // One request in flight per proxy client per round, at most.
    run.finish(&h, Expect::safe(4 * 20));
}

/// A script that keeps its node busy for 1.5 s.
const BUSY_SCRIPT: &str = "local t = redis.call('TIME') \
    local start = t[1] * 1000000 + t[2] \
    while true do \
        local n = redis.call('TIME') \
        if n[1] * 1000000 + n[2] - start > 1500000 then break end \
    end return 1";

#[test]
fn f12_long_script_busy() {
    let h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let victim = h.cluster.owner_of(b"{fv}").unwrap();
    // BUSY after 300 ms; the node keeps answering its cluster bus meanwhile.
    let set = h
        .cluster
        .command(victim, &["CONFIG", "SET", "busy-reply-threshold", "300"]);
    assert!(!set.unwrap().is_error());
    let run = Run::start(
        &h,
        "F12",
        "EVAL busy for 1.5 s on a primary (BUSY)",
        &[VICTIM, &other],
    );
    let reply = h
        .cluster
        .command(victim, &["EVAL", BUSY_SCRIPT, "0"])
        .unwrap();
    assert!(!reply.is_error(), "{reply:?}");
    run.wait_acks(200);
    run.finish(&h, Expect::safe(0));
}

#[test]
fn f13_loading_primary() {
    let h = Harness::start(3, 1);
    let other = elsewhere(&h);
    let victim = h.cluster.owner_of(b"{fv}").unwrap();
    // The scenario is LOADING, not a failover: on a loaded machine (CI runs the catalogue's
    // scenarios side by side) the reload outlived the node timeout, the replica took over
    // and dropped the writes it had not received, through the proxy and directly alike.
    let (_, replica) = master_and_replica(&h, "fv");
    let replica = h.cluster.nodes()[replica].addr;
    let no_failover = ["CONFIG", "SET", "cluster-replica-no-failover", "yes"];
    assert!(!h.cluster.command(replica, &no_failover).unwrap().is_error());
    let populate = h
        .cluster
        .command(victim, &["DEBUG", "POPULATE", "500000", "{fv}:pop", "64"]);
    assert!(!populate.unwrap().is_error());
    let run = Run::start(
        &h,
        "F13",
        "DEBUG RELOAD of a primary with 500k keys (LOADING)",
        &[VICTIM, &other],
    );
    // Saves, then loads the RDB again: clients get -LOADING meanwhile.
    let reply = h.cluster.command(victim, &["DEBUG", "RELOAD"]).unwrap();
    assert!(!reply.is_error(), "{reply:?}");
    run.wait_acks(200);
    run.finish(&h, Expect::safe(0));
}
