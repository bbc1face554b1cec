//! End-to-end checks against real redis-server processes: forming clusters,
//! talking to nodes, failover after a kill, stopping, and the state-file path
//! used by `slotgate cluster down/status`. Every cluster uses free ports.

use std::net::SocketAddr;
use std::thread::sleep;
use std::time::{Duration, Instant};

use devcluster::{down, free_port_pair, key_slot, status, Cluster, Options, Reply};

fn opts(masters: usize, replicas: usize) -> Options {
    Options {
        masters,
        replicas,
        ..Options::default()
    }
}

/// Alive and not a zombie (nodes detached by `down` are reparented to an
/// init that may never reap them).
fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

fn text(cluster: &Cluster, addr: SocketAddr, args: &[&str]) -> String {
    let reply = cluster.command(addr, args).unwrap();
    reply
        .as_text()
        .unwrap_or_else(|| panic!("{args:?} on {addr}: {reply}"))
}

fn info_field(cluster: &Cluster, addr: SocketAddr, key: &str) -> String {
    let info = text(cluster, addr, &["CLUSTER", "INFO"]);
    let prefix = format!("{key}:");
    let line = info.lines().find(|l| l.starts_with(&prefix));
    line.map(|l| l[prefix.len()..].trim().to_string())
        .unwrap_or_default()
}

fn role(cluster: &Cluster, addr: SocketAddr) -> Option<String> {
    let reply = cluster.command(addr, &["ROLE"]).ok()?;
    reply.lines().first().cloned()
}

fn assert_all_ok(cluster: &Cluster) {
    for n in cluster.nodes() {
        assert_eq!(
            info_field(cluster, n.addr, "cluster_state"),
            "ok",
            "node {}",
            n.addr
        );
        assert_eq!(
            info_field(cluster, n.addr, "cluster_slots_assigned"),
            "16384"
        );
    }
}

#[test]
fn three_by_one_forms_serves_fails_over_and_stops() {
    let mut cluster = Cluster::start(&opts(3, 1)).unwrap();
    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.masters().len(), 3);
    assert_eq!(cluster.seed(), cluster.masters()[0]);
    assert_all_ok(&cluster);

    let owner = cluster.owner_of(b"hello").unwrap();
    assert!(cluster.masters().contains(&owner));
    assert_eq!(text(&cluster, owner, &["SET", "hello", "world"]), "OK");
    let other = *cluster.masters().iter().find(|a| **a != owner).unwrap();
    let moved = cluster.command(other, &["GET", "hello"]).unwrap();
    assert!(
        matches!(&moved, Reply::Error(e) if e.starts_with("MOVED")),
        "{moved}"
    );
    // Make sure the replica has the key before its master dies.
    assert_eq!(
        cluster.command(owner, &["WAIT", "1", "2000"]).unwrap(),
        Reply::Int(1)
    );

    let master = cluster
        .nodes()
        .iter()
        .find(|n| n.addr == owner)
        .unwrap()
        .clone();
    let replica = cluster
        .nodes()
        .iter()
        .find(|n| n.master_of.as_ref() == Some(&master.id))
        .unwrap()
        .clone();
    assert_eq!(role(&cluster, replica.addr).as_deref(), Some("slave"));
    cluster.kill(owner).unwrap();
    assert!(!pid_alive(master.pid));

    let started = Instant::now();
    while role(&cluster, replica.addr).as_deref() != Some("master") {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "replica {} not promoted",
            replica.addr
        );
        sleep(Duration::from_millis(100));
    }
    eprintln!("failover took {:?}", started.elapsed());
    cluster.wait_healthy(Duration::from_secs(10)).unwrap();
    assert_eq!(cluster.owner_of(b"hello").unwrap(), replica.addr);
    let got = cluster.command(replica.addr, &["GET", "hello"]).unwrap();
    assert_eq!(got, Reply::Bulk(Some(b"world".to_vec())));

    let pids: Vec<u32> = cluster.nodes().iter().map(|n| n.pid).collect();
    let dir = cluster.dir().to_path_buf();
    cluster.stop().unwrap();
    cluster.stop().unwrap();
    assert!(
        pids.iter().all(|&p| !pid_alive(p)),
        "some of {pids:?} survived"
    );
    assert!(
        !dir.exists(),
        "auto temp dir {} was left behind",
        dir.display()
    );
}

#[test]
fn parallel_clusters_get_distinct_ports() {
    let handles: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(|| Cluster::start(&opts(2, 1)).unwrap()))
        .collect();
    let clusters: Vec<Cluster> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut ports = std::collections::HashSet::new();
    for c in &clusters {
        assert_all_ok(c);
        for n in c.nodes() {
            assert!(
                ports.insert(n.addr.port()),
                "port {} used twice",
                n.addr.port()
            );
            assert!(ports.insert(n.addr.port() + 10000));
        }
    }
    // Each cluster only knows its own nodes.
    for c in &clusters {
        assert_eq!(info_field(c, c.seed(), "cluster_known_nodes"), "4");
    }
}

#[test]
fn single_master_without_replicas() {
    let cluster = Cluster::start(&opts(1, 0)).unwrap();
    assert_eq!(cluster.nodes().len(), 1);
    assert_all_ok(&cluster);
    let seed = cluster.seed();
    let slots = cluster.command(seed, &["CLUSTER", "SLOTS"]).unwrap();
    assert_eq!(slots.lines()[..2], ["0".to_string(), "16383".to_string()]);
    for key in ["foo", "bar", "{user1000}.following", "a{}b", ""] {
        let theirs = text(&cluster, seed, &["CLUSTER", "KEYSLOT", key]);
        assert_eq!(theirs, key_slot(key.as_bytes()).to_string(), "key {key:?}");
    }
    assert_eq!(text(&cluster, seed, &["SET", "k", "v"]), "OK");
    assert_eq!(text(&cluster, seed, &["GET", "k"]), "v");
    // DEBUG is enabled for local connections.
    assert_eq!(text(&cluster, seed, &["DEBUG", "SLEEP", "0"]), "OK");
}

#[test]
fn detached_cluster_is_managed_through_its_dir() {
    let dir = std::env::temp_dir().join(format!(
        "devcluster-it-{}-{:x}",
        std::process::id(),
        rand_suffix()
    ));
    let base = free_port_pair().unwrap();
    let o = Options {
        base_port: Some(base),
        dir: dir.clone(),
        ..opts(1, 1)
    };
    let cluster = Cluster::start(&o).unwrap();
    let ports: Vec<u16> = cluster.nodes().iter().map(|n| n.addr.port()).collect();
    let pids: Vec<u32> = cluster.nodes().iter().map(|n| n.pid).collect();
    assert_eq!(ports[0], base);
    cluster.detach();
    assert!(pids.iter().all(|&p| pid_alive(p)));

    let report = status(&dir).unwrap();
    assert_eq!(report.matches("alive").count(), 2, "{report}");
    assert_eq!(report.matches("cluster_state:ok").count(), 2, "{report}");
    let again = Cluster::start(&o).map(|_| ()).unwrap_err();
    assert!(format!("{again:#}").contains("still running"), "{again:#}");

    down(&dir).unwrap();
    assert!(pids.iter().all(|&p| !pid_alive(p)));
    assert_eq!(status(&dir).unwrap().matches("dead").count(), 2);
    down(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_options_fail_cleanly() {
    assert!(Cluster::start(&opts(0, 0)).is_err());
    let high = Options {
        base_port: Some(60000),
        ..opts(1, 0)
    };
    assert!(Cluster::start(&high).is_err());
    let missing = Options {
        redis_server: "/nonexistent/redis-server".into(),
        ..opts(1, 0)
    };
    let err = Cluster::start(&missing).map(|_| ()).unwrap_err();
    assert!(format!("{err:#}").contains("spawn"), "{err:#}");
    // A failed start keeps its dir for the logs; this one has none worth keeping.
    let _ = std::fs::remove_dir_all(&missing.dir);
    assert!(down(&std::env::temp_dir().join("devcluster-no-such-dir")).is_err());
}

fn rand_suffix() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::from(t.subsec_nanos()) ^ t.as_secs()
}
