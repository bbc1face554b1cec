//! T8 of topology.md (d): a manual `CLUSTER FAILOVER` under load on a real 3×1 cluster.
//! The replica takes over without data loss, so clients should see no failure (or only
//! clear errors), never a crossed reply, and no A↔B redirect loop: once the proxy knows the
//! new master, each request needs at most one redirect, so the MOVED count stays small.
//! Nothing here bounds how fast things happen (slow, noisy CI VMs): the test waits for
//! conditions under generous ceilings.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{text, wait_until, Client, Harness};
use devcluster::Cluster;

const LOAD_THREADS: usize = 4;
const MASTERS: usize = 3;
/// Hash tags the load uses: few slots, so each is patched once by its first MOVED.
const TAGS: usize = 12;
/// Ceiling for waits that normally end within a few seconds.
const CEILING: Duration = Duration::from_secs(30);

fn info(c: &mut Client, key: &str) -> u64 {
    info_in(c, "stats", key)
}

fn info_topology(c: &mut Client, key: &str) -> u64 {
    info_in(c, "topology", key)
}

fn info_in(c: &mut Client, section: &str, key: &str) -> u64 {
    let all = text(&c.call(&["INFO", section]));
    let line = all.lines().find_map(|l| l.strip_prefix(&format!("{key}:")));
    line.and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO has no {key}"))
}

/// Milliseconds since the Unix epoch (the clock of `last_refresh_unix_ms`).
fn unix_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.expect("after 1970").as_millis() as u64
}

/// The replica of the master serving `tag`.
fn replica_of(cluster: &Cluster, tag: &str) -> SocketAddr {
    let master = cluster.owner_of(tag.as_bytes()).expect("owner");
    let id = &cluster
        .nodes()
        .iter()
        .find(|n| n.addr == master)
        .unwrap()
        .id;
    let replica = cluster
        .nodes()
        .iter()
        .find(|n| n.master_of.as_ref() == Some(id));
    replica.expect("a replica").addr
}

fn role(cluster: &Cluster, addr: SocketAddr) -> String {
    let reply = cluster.command(addr, &["ROLE"]).expect("ROLE");
    reply.lines().first().cloned().unwrap_or_default()
}

/// SET then GET a unique value per request, until stopped. Returns the clear errors seen;
/// panics on a crossed reply or a hang (a SET + GET past the 30 s ceiling; each request is
/// bounded by the proxy's 5 s request timeout).
fn load(addr: SocketAddr, t: usize, stop: &AtomicBool) -> Vec<String> {
    let mut c = Client::connect(addr);
    let mut errors = Vec::new();
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("{{t{}}}:{t}", i % TAGS);
        let value = format!("v-{t}-{i}");
        let began = Instant::now();
        let set = text(&c.call(&["SET", &key, &value]));
        let get = text(&c.call(&["GET", &key]));
        assert!(began.elapsed() < CEILING, "request hung");
        for r in [&set, &get] {
            if r.starts_with('-') {
                errors.push(r.clone());
            }
        }
        if !get.starts_with('-') && !set.starts_with('-') {
            assert_eq!(get, value, "crossed reply or lost write on {key}");
        }
        i += 1;
    }
    errors
}

#[test]
fn manual_failover_under_load() {
    let h = Harness::start(MASTERS, 1);
    // The proxy's refresher started before this instant.
    let started_ms = unix_ms();
    let addr = h.addr();
    let mut c = h.client();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..LOAD_THREADS)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || load(addr, t, &stop))
        })
        .collect();
    // Past the refresher's throttle window (its minimum interval plus the jitter, from its
    // start or its latest refresh), so the refresh asked for by the first MOVED can run at
    // once: that window is a time, so this waits on the proxy's own clock readings.
    let proxy = h.proxy.as_ref().expect("proxy running");
    let pacing = proxy.topology().pacing();
    let window = (pacing.min_interval + pacing.max_extra).as_millis() as u64;
    let stats = &proxy.topology().stats;
    wait_until(CEILING, || {
        let latest = stats.last_refresh_unix_ms.load(Ordering::Relaxed);
        unix_ms() >= started_ms.max(latest) + window
    });
    let moved0 = info(&mut c, "redirects_moved");
    let replica = replica_of(&h.cluster, "{t0}");
    let reply = h
        .cluster
        .command(replica, &["CLUSTER", "FAILOVER"])
        .unwrap();
    assert!(!reply.is_error(), "{reply:?}");
    let refreshes0 = info_topology(&mut c, "topology_refresh_performed");
    wait_until(CEILING, || role(&h.cluster, replica) == "master");
    // Under load until the proxy has refreshed since the failover (a lagging answer would
    // undo the MOVED patches: more MOVED) and its map routes every tag to its real owner.
    wait_until(CEILING, || {
        info_topology(&mut c, "topology_refresh_performed") > refreshes0
            && (0..TAGS).all(|i| {
                let tag = format!("{{t{i}}}");
                let owner = h.cluster.owner_of(tag.as_bytes()).expect("owner");
                let slot = cluster::slot::key_slot(tag.as_bytes());
                let map = proxy.topology().current();
                map.node_of(slot).map(|n| n.addr.clone()) == Some(owner.to_string())
            })
    });
    stop.store(true, Ordering::Relaxed);
    let errors: Vec<String> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("no crossed reply, no hang"))
        .collect();
    let moved = info(&mut c, "redirects_moved") - moved0;
    let refreshes = info_topology(&mut c, "topology_refresh_performed");
    let installed = info_topology(&mut c, "topology_maps_installed");
    eprintln!(
        "MOVED followed: {moved}; refreshes {refreshes}, installed {installed}; errors: {} {:?}",
        errors.len(),
        errors.first()
    );
    assert!(
        errors.is_empty(),
        "a manual failover loses nothing: {errors:?}"
    );
    let bound = (LOAD_THREADS * MASTERS) as u64;
    assert!(
        moved <= bound,
        "{moved} MOVED > {bound}: redirect loop or flip-flop"
    );
}

/// A 1-master cluster whose other slots keep working while one is given up
/// (`cluster-require-full-coverage no`), its node, and a 1-worker proxy that refreshes
/// its map quickly.
fn one_node_that_may_lose_a_slot(name: &str) -> (Cluster, SocketAddr, proxy::Proxy) {
    let opts = devcluster::Options {
        masters: 1,
        replicas: 0,
        dir: common::tempdir(name),
        extra_config: vec![("cluster-require-full-coverage".into(), "no".into())],
        ..Default::default()
    };
    let cluster = Cluster::start(&opts).expect("cluster starts");
    let node = cluster.masters()[0];
    let proxy = common::start_proxy(&cluster, |c| {
        c.proxy.threads = 1;
        c.cluster.min_refresh_interval_ms = 50;
    });
    (cluster, node, proxy)
}

/// A slot with no owner in the proxy's map (a hole: a refresh taken mid-failover can show
/// one) is what a node's CLUSTERDOWN is: the request waits for a fresh map and is routed
/// again, paced, instead of failing at once. Here a real node gives its slot up (CLUSTER
/// DELSLOTS, with `cluster-require-full-coverage no` so its other slots keep working), the
/// proxy's map gets the hole, a GET for the slot is sent, and the slot comes back (ADDSLOTS)
/// while the GET waits: it is answered with the value, not CLUSTERDOWN.
#[test]
fn a_request_for_a_slot_with_no_owner_waits_for_one() {
    let (cluster, node, proxy) = one_node_that_may_lose_a_slot("hole");
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["SET", "hole", "v"])), "OK");
    let slot = cluster::key_slot(b"hole").to_string();
    let delslots = cluster
        .command(node, &["CLUSTER", "DELSLOTS", &slot])
        .unwrap();
    assert_eq!(format!("{delslots:?}"), "Status(\"OK\")");
    // The node's CLUSTERDOWN makes the proxy refresh; the map it installs has the hole.
    // Meanwhile (and after, until ADDSLOTS) the client's GETs are held, then answered.
    c.send(&[b"GET", b"hole"]);
    let slot_n: u16 = slot.parse().unwrap();
    wait_until(CEILING, || {
        proxy.topology().current().node_of(slot_n).is_none()
    });
    c.send(&[b"GET", b"hole"]);
    let addslots = cluster
        .command(node, &["CLUSTER", "ADDSLOTS", &slot])
        .unwrap();
    assert_eq!(format!("{addslots:?}"), "Status(\"OK\")");
    for _ in 0..2 {
        assert_eq!(text(&c.read().expect("a reply")), "v");
    }
    assert!(info(&mut c, "cluster_error_retries") >= 1);
    proxy.shutdown();
}

/// The same hole for a request on the session's own connection: a BLPOP for a slot with no
/// owner waits for one, then blocks on its node as with one Redis, and the LPUSH that
/// follows the slot's return wakes it (before: CLUSTERDOWN at once).
#[test]
fn a_blocking_command_for_a_slot_with_no_owner_waits_for_one() {
    let (cluster, node, proxy) = one_node_that_may_lose_a_slot("hole-block");
    let mut c = Client::connect(proxy.local_addr());
    let mut pusher = Client::connect(proxy.local_addr());
    let slot = cluster::key_slot(b"hole").to_string();
    let slot_n: u16 = slot.parse().unwrap();
    let delslots = cluster
        .command(node, &["CLUSTER", "DELSLOTS", &slot])
        .unwrap();
    assert_eq!(format!("{delslots:?}"), "Status(\"OK\")");
    // A GET for the slot meets the node's CLUSTERDOWN; the refresh that follows puts the
    // hole in the proxy's map.
    pusher.send(&[b"GET", b"hole"]);
    wait_until(CEILING, || {
        proxy.topology().current().node_of(slot_n).is_none()
    });
    c.send(&[b"BLPOP", b"hole", b"0"]);
    let addslots = cluster
        .command(node, &["CLUSTER", "ADDSLOTS", &slot])
        .unwrap();
    assert_eq!(format!("{addslots:?}"), "Status(\"OK\")");
    assert_eq!(format!("{:?}", pusher.read().expect("GET's reply")), "Null");
    // The BLPOP reaches the node and blocks there (`blocked_clients` on the node), then
    // the push wakes it.
    wait_until(CEILING, || {
        let info = cluster.command(node, &["INFO", "clients"]).unwrap();
        info.as_text()
            .unwrap_or_default()
            .contains("blocked_clients:1")
    });
    assert_eq!(text(&pusher.call(&["LPUSH", "hole", "v"])), ":1");
    let popped = c.read().expect("BLPOP's reply");
    assert_eq!(
        format!("{popped:?}"),
        format!(
            "{:?}",
            resp::Value::Array(vec![
                resp::Value::BulkString("hole".into()),
                resp::Value::BulkString("v".into()),
            ])
        )
    );
    proxy.shutdown();
}
