//! Read policies on real clusters with replicas: under `prefer-replica` the reads are served
//! by the replicas (their own INFO commandstats say so) and the writes by the masters; a
//! client's READONLY opts it in under the default `master` policy and READWRITE out; a
//! replica killed with SIGKILL under read load costs no client an error (its reads go back
//! to the master); a replica made to lag (CLIENT PAUSE WRITE stalls its replication) is
//! skipped; `replica` with no replica answers the documented -CLUSTERDOWN.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{text, wait_until, Client, Harness};
use proxy::config::ReadPolicy;
use resp::Value;

/// Generous ceiling for every state the tests wait for.
const CEILING: Duration = Duration::from_secs(30);

/// A 3x1 cluster whose replicas are all online and in sync.
fn cluster_with_replicas() -> Harness {
    let h = Harness::start(3, 1);
    wait_until(CEILING, || {
        h.cluster.masters().iter().all(|m| {
            let info = text(&Client::connect(*m).call(&["INFO", "replication"]));
            info.contains("connected_slaves:1") && info.contains("state=online")
        })
    });
    h
}

/// A proxy in front of `h`'s cluster with `policy`, once it sees `usable` replicas as usable.
fn proxy_with(h: &Harness, policy: ReadPolicy, max_lag: u64, usable: usize) -> proxy::Proxy {
    let proxy = common::start_proxy(&h.cluster, |cfg| {
        cfg.cluster.read_policy = policy;
        cfg.cluster.max_replica_lag = max_lag;
    });
    wait_until(CEILING, || usable_replicas(proxy.local_addr()) == usable);
    proxy
}

/// Replicas the proxy's INFO backends shows as `state=up`.
fn usable_replicas(proxy: SocketAddr) -> usize {
    replica_lines(proxy)
        .iter()
        .filter(|l| l.contains("state=up"))
        .count()
}

fn replica_lines(proxy: SocketAddr) -> Vec<String> {
    let info = text(&Client::connect(proxy).call(&["INFO", "backends"]));
    info.lines()
        .filter(|l| l.starts_with("replica"))
        .map(str::to_string)
        .collect()
}

/// The replica of the master serving `key`, and that master.
fn replica_of_key(h: &Harness, key: &str) -> (SocketAddr, SocketAddr) {
    let master = h.cluster.owner_of(key.as_bytes()).unwrap();
    (h.replica_of(key).addr, master)
}

fn replicas(h: &Harness) -> Vec<SocketAddr> {
    let nodes = h.cluster.nodes();
    nodes
        .iter()
        .filter(|n| n.master_of.is_some())
        .map(|n| n.addr)
        .collect()
}

/// `cmdstat_<name>` calls on `node`, from its own INFO commandstats.
fn calls(node: SocketAddr, name: &str) -> u64 {
    let stats = text(&Client::connect(node).call(&["INFO", "commandstats"]));
    let prefix = format!("cmdstat_{name}:calls=");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

fn calls_on(nodes: &[SocketAddr], name: &str) -> u64 {
    nodes.iter().map(|n| calls(*n, name)).sum()
}

/// GET `keys` in one pipeline; every reply must be `expect(key)`.
fn get_all(c: &mut Client, keys: &[String], expect: impl Fn(&str) -> String) {
    for k in keys {
        c.send(&[b"GET", k.as_bytes()]);
    }
    for k in keys {
        assert_eq!(text(&c.read().unwrap()), expect(k), "GET {k}");
    }
}

/// Written through `c`, then on every replica (WAIT through the proxy asks every master).
fn write_keys(c: &mut Client, n: usize, tag: &str) -> Vec<String> {
    let keys: Vec<String> = (0..n).map(|i| format!("{tag}:{i}")).collect();
    for k in &keys {
        c.send(&[b"SET", k.as_bytes(), k.as_bytes()]);
    }
    for _ in &keys {
        assert_eq!(text(&c.read().unwrap()), "OK");
    }
    assert_eq!(c.call(&["WAIT", "1", "0"]), Value::Integer(1));
    keys
}

#[test]
fn prefer_replica_reads_from_replicas_and_writes_on_masters_and_readonly_opts_in() {
    let h = cluster_with_replicas();
    let proxy = proxy_with(&h, ReadPolicy::PreferReplica, 1024 * 1024, 3);
    let (masters, replicas) = (h.cluster.masters(), replicas(&h));
    let mut c = Client::connect(proxy.local_addr());
    let sets_before = calls_on(&masters, "set");
    let keys = write_keys(&mut c, 300, "pr");
    // Every write ran on a master (a replica's count is the replication of them).
    assert_eq!(calls_on(&masters, "set") - sets_before, 300);
    let (on_replicas, on_masters) = (calls_on(&replicas, "get"), calls_on(&masters, "get"));
    for _ in 0..4 {
        get_all(&mut c, &keys, |k| k.to_string());
    }
    let replica_gets = calls_on(&replicas, "get") - on_replicas;
    let master_gets = calls_on(&masters, "get") - on_masters;
    assert_eq!(replica_gets + master_gets, 1200);
    assert!(
        replica_gets * 100 >= 1200 * 80,
        "{replica_gets} of 1200 GETs on replicas"
    );
    // Every replica took a share.
    assert!(replicas.iter().all(|r| calls(*r, "get") > 0));
    let info = text(&c.call(&["INFO", "stats"]));
    assert!(info.contains("read_policy:prefer-replica"), "{info}");
    assert!(
        info.contains(&format!("reads_prefer_replica_replica:{replica_gets}")),
        "{info}"
    );

    // A pipeline mixing writes and reads of one key keeps its order: no deadlock, each
    // reply where its request was (read-your-writes is not promised, so any value goes).
    for i in 0..50 {
        let v = i.to_string();
        c.send(&[b"SET", b"pr:mixed", v.as_bytes()]);
        c.send(&[b"GET", b"pr:mixed"]);
    }
    for _ in 0..50 {
        assert_eq!(text(&c.read().unwrap()), "OK");
        assert!(matches!(
            c.read().unwrap(),
            Value::BulkString(_) | Value::Null
        ));
    }
    // A WATCH holds the client's reads on the masters.
    let before = calls_on(&replicas, "get");
    assert_eq!(text(&c.call(&["WATCH", "pr:1"])), "OK");
    assert_eq!(text(&c.call(&["GET", "pr:1"])), "pr:1");
    assert_eq!(text(&c.call(&["UNWATCH"])), "OK");
    assert_eq!(calls_on(&replicas, "get"), before);

    // Under the default policy, READONLY opts one client in and READWRITE out; others stay.
    let master_proxy = proxy_with(&h, ReadPolicy::Master, 1024 * 1024, 3);
    let (mut opted, mut plain) = (
        Client::connect(master_proxy.local_addr()),
        Client::connect(master_proxy.local_addr()),
    );
    let before = calls_on(&replicas, "get");
    get_all(&mut plain, &keys, |k| k.to_string());
    assert_eq!(
        calls_on(&replicas, "get"),
        before,
        "no READONLY: masters only"
    );
    assert_eq!(text(&opted.call(&["READONLY"])), "OK");
    get_all(&mut opted, &keys, |k| k.to_string());
    assert!(
        calls_on(&replicas, "get") - before >= 240,
        "READONLY reads from replicas"
    );
    assert_eq!(text(&opted.call(&["READWRITE"])), "OK");
    let before = calls_on(&replicas, "get");
    get_all(&mut opted, &keys, |k| k.to_string());
    assert_eq!(
        calls_on(&replicas, "get"),
        before,
        "READWRITE: masters again"
    );
    // The policy is live: a reload sends the plain client's reads to the replicas too.
    let mut config = proxy::Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 2;
    config.cluster.seeds = masters.iter().map(|a| a.to_string()).collect();
    config.cluster.read_policy = ReadPolicy::PreferReplica;
    let report = master_proxy.reload_with(config).unwrap();
    assert!(report.needs_restart.is_empty(), "{report:?}");
    let before = calls_on(&replicas, "get");
    get_all(&mut plain, &keys, |k| k.to_string());
    assert!(
        calls_on(&replicas, "get") - before >= 240,
        "reloaded policy in force"
    );

    // nearest: each read to the fastest node of its shard, master or replica.
    let nearest = proxy_with(&h, ReadPolicy::Nearest, 1024 * 1024, 3);
    let mut c = Client::connect(nearest.local_addr());
    get_all(&mut c, &keys, |k| k.to_string());
    let info = text(&c.call(&["INFO", "stats"]));
    let field = |name: &str| -> u64 {
        let prefix = format!("{name}:");
        info.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(
        field("reads_nearest_replica") + field("reads_nearest_master"),
        300
    );
}

#[test]
fn replica_policy_without_replicas_answers_clusterdown() {
    let h = Harness::start(3, 0);
    let proxy = proxy_with(&h, ReadPolicy::Replica, 1024 * 1024, 0);
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(
        text(&c.call(&["SET", "k", "v"])),
        "OK",
        "writes are unaffected"
    );
    let slot = cluster::key_slot(b"k");
    assert_eq!(
        text(&c.call(&["GET", "k"])),
        format!("-CLUSTERDOWN No usable replica for hash slot {slot} (read_policy replica)")
    );
    let info = text(&c.call(&["INFO", "stats"]));
    assert!(info.contains("reads_replica_refused:1"), "{info}");
}

#[test]
fn a_replica_killed_under_read_load_costs_no_client_an_error() {
    let mut h = cluster_with_replicas();
    let proxy = proxy_with(&h, ReadPolicy::PreferReplica, 1024 * 1024, 3);
    let addr = proxy.local_addr();
    let keys = write_keys(&mut Client::connect(addr), 200, "kill");
    let (replica, master) = replica_of_key(&h, &keys[0]);
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (keys, stop, rounds) = (keys.clone(), stop.clone(), rounds.clone());
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                while !stop.load(Ordering::Relaxed) {
                    // Panics (fails the test) on any error reply.
                    get_all(&mut c, &keys, |k| k.to_string());
                    rounds.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    wait_until(CEILING, || rounds.load(Ordering::Relaxed) >= 20);
    h.cluster.kill(replica).unwrap();
    let at_kill = rounds.load(Ordering::Relaxed);
    wait_until(CEILING, || usable_replicas(addr) == 2);
    // Reads of the dead replica's slots are back on its master, under load.
    let master_gets = calls(master, "get");
    wait_until(CEILING, || rounds.load(Ordering::Relaxed) >= at_kill + 40);
    assert!(calls(master, "get") > master_gets);
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("no reader saw an error");
    }
    // Shown down, or gone: once the cluster marks it failed, CLUSTER SLOTS leaves it out.
    let lines = replica_lines(addr);
    let dead = lines
        .iter()
        .find(|l| l.contains(&format!("addr={replica},")));
    assert!(dead.is_none_or(|l| l.contains("state=down")), "{lines:?}");
}

#[test]
fn a_lagging_replica_is_skipped_until_it_catches_up() {
    let h = cluster_with_replicas();
    let proxy = proxy_with(&h, ReadPolicy::PreferReplica, 1000, 3);
    let addr = proxy.local_addr();
    let mut c = Client::connect(addr);
    let key = "{lag}k";
    let (replica, master) = replica_of_key(&h, key);
    assert_eq!(text(&c.call(&["SET", key, "old"])), "OK");
    assert_eq!(c.call(&["WAIT", "1", "0"]), Value::Integer(1));
    // The replica stops applying its master's writes (they are postponed, INFO answers).
    let mut admin = Client::connect(replica);
    assert_eq!(
        text(&admin.call(&["CLIENT", "PAUSE", "60000", "WRITE"])),
        "OK"
    );
    let big = "x".repeat(4096);
    assert_eq!(text(&c.call(&["SET", "{lag}filler", &big])), "OK");
    assert_eq!(text(&c.call(&["SET", key, "new"])), "OK");
    let state = |want: &str| {
        let lines = replica_lines(addr);
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("addr={replica},")));
        line.is_some_and(|l| l.contains(want))
    };
    wait_until(CEILING, || state("state=lagging"));
    let (on_replica, on_master) = (calls(replica, "get"), calls(master, "get"));
    for _ in 0..100 {
        assert_eq!(text(&c.call(&["GET", key])), "new", "served by the master");
    }
    assert_eq!(
        calls(replica, "get"),
        on_replica,
        "the lagging replica is skipped"
    );
    assert_eq!(calls(master, "get") - on_master, 100);
    // Caught up, it serves reads again.
    assert_eq!(text(&admin.call(&["CLIENT", "UNPAUSE"])), "OK");
    wait_until(CEILING, || state("state=up"));
    assert_eq!(text(&c.call(&["GET", key])), "new");
    assert_eq!(calls(replica, "get"), on_replica + 1);
}
