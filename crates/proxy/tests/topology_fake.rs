//! Topology cases a real redis-server cannot produce on cue (topology.md (d) T4d, T4e, T6,
//! T7, T10, T11), played by scripted fake nodes (`testkit::FakeNode`) that the proxy
//! bootstraps from: MOVED to itself, ASK to a node outside the map, an ASK target that
//! answers MOVED, odd CLUSTER SLOTS endpoints, empty, foreign and holed maps, and a lagging
//! node that serves an old map after sending MOVED.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::{text, Client};
use proxy::{Config, Proxy};
use testkit::reply::{self, slot_of};
use testkit::{FakeNode, Range, Reply};

/// A proxy seeded with `seeds`, one worker (so per-node counts are per request), fast
/// refreshes so the tests need not wait seconds for one.
fn proxy_for(seeds: &[&FakeNode]) -> Proxy {
    let mut config = Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 1;
    config.cluster.seeds = seeds.iter().map(|n| n.addr().to_string()).collect();
    config.cluster.min_refresh_interval_ms = 100;
    Proxy::start(config).expect("proxy starts")
}

/// A node owning every slot.
fn sole_owner(node: &FakeNode) {
    node.set_slots(vec![Range::new(0, 16383, node.addr(), &node.id)]);
}

/// Two nodes splitting the slots in halves; both answer CLUSTER SLOTS with that map.
fn halves(a: &FakeNode, b: &FakeNode) -> Vec<Range> {
    let map = vec![
        Range::new(0, 8191, a.addr(), &a.id),
        Range::new(8192, 16383, b.addr(), &b.id),
    ];
    a.set_slots(map.clone());
    b.set_slots(map.clone());
    map
}

/// The first send, `max_redirects` (5) hops, then `MAX_RETRIES` (9) paced ones.
const MAX_GETS: usize = 1 + 5 + 9;

/// A key whose slot is below 8192 (node a's half) and one above (node b's half).
const LOW_KEY: &str = "foo{3}"; // slot of "3"
const HIGH_KEY: &str = "foo"; // slot 12182

#[test]
fn keys_are_in_the_expected_halves() {
    assert!(slot_of(LOW_KEY.as_bytes()) < 8192);
    assert!(slot_of(HIGH_KEY.as_bytes()) >= 8192);
}

/// T6: a node that answers `MOVED <slot> <itself>` forever. The proxy follows
/// `max_redirects` (5) hops, then at most `MAX_RETRIES` (9) more, paced like retries (2-3 s
/// in all), then passes the MOVED through; no hot loop, and it keeps serving.
#[test]
fn moved_to_itself_ends_after_the_hop_budget() {
    let node = FakeNode::start(|args, st| match args[0].as_slice() {
        b"GET" => Reply::Bytes(reply::moved(slot_of(&args[1]), st.addr)),
        _ => Reply::Default,
    });
    sole_owner(&node);
    let proxy = proxy_for(&[&node]);
    let mut c = Client::connect(proxy.local_addr());
    let got = text(&c.call(&["GET", "k"]));
    assert!(got.starts_with("-MOVED "), "client gets the MOVED: {got}");
    // Every hop came before the MOVED was passed on: the count is final now.
    let gets = node.count("GET");
    assert!(gets <= MAX_GETS, "GETs seen: {gets}");
    // Paced hops ask for a refresh, which the topology service throttles.
    let refreshes = node.count("CLUSTER SLOTS");
    assert!(refreshes <= 8, "no refresh storm: {refreshes}");
    assert_eq!(
        text(&c.call(&["SET", "k", "v"])),
        "OK",
        "proxy still serves"
    );
    // No hop went on behind the reply: nothing more reached the node meanwhile.
    assert_eq!(
        node.count("GET"),
        gets,
        "no GET after the MOVED was passed on"
    );
    proxy.shutdown();
}

/// T4d + T4e: the owner answers ASK to a node the map does not know; that node (reached on
/// demand, after ASKING) answers MOVED to a third node, which serves the key.
#[test]
fn ask_to_a_new_node_then_moved_is_followed() {
    let c_node = FakeNode::start(|args, _| match args[0].as_slice() {
        b"GET" => Reply::Bytes(reply::bulk(b"from-c")),
        _ => Reply::Default,
    });
    let c_addr = c_node.addr();
    let b_node = FakeNode::start(move |args, _| match args[0].as_slice() {
        b"GET" => Reply::Bytes(reply::moved(slot_of(&args[1]), c_addr)),
        _ => Reply::Default,
    });
    let b_addr = b_node.addr();
    let a_node = FakeNode::start(move |args, _| match args[0].as_slice() {
        b"GET" => Reply::Bytes(reply::ask(slot_of(&args[1]), b_addr)),
        _ => Reply::Default,
    });
    halves(&a_node, &c_node);
    let proxy = proxy_for(&[&a_node]);
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["GET", LOW_KEY])), "from-c");
    let b_log = b_node.log();
    assert_eq!(b_log, vec!["ASKING".to_string(), format!("GET {LOW_KEY}")]);
    assert_eq!((a_node.count("GET"), c_node.count("GET")), (1, 1));
    proxy.shutdown();
}

/// T7: an empty host means "the node that answered"; `?` means unknown, so its range is a
/// hole (never dialled). Requests to the hole get Redis's CLUSTERDOWN text.
#[test]
fn empty_and_unknown_hosts_in_cluster_slots() {
    let node = FakeNode::plain();
    let port = node.addr().port();
    let mut map = vec![
        Range::new(0, 8191, node.addr(), &node.id),
        Range::new(8192, 16383, node.addr(), "b".repeat(40).as_str()),
    ];
    map[0].host = String::new();
    map[1].host = "?".into();
    node.set_slots(map);
    let proxy = proxy_for(&[&node]);
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["SET", LOW_KEY, "v"])), "OK");
    assert_eq!(text(&c.call(&["GET", LOW_KEY])), "v");
    let hole = text(&c.call(&["GET", HIGH_KEY]));
    assert_eq!(hole, "-CLUSTERDOWN Hash slot not served");
    assert_eq!(node.count("GET"), 1, "node {port} saw only the served GET");
    proxy.shutdown();
}

/// T10: a map with holes. Hole slots fail with CLUSTERDOWN; every other slot works.
#[test]
fn holes_are_marked_not_fatal() {
    let node = FakeNode::plain();
    node.set_slots(vec![
        Range::new(0, 8191, node.addr(), &node.id),
        Range::new(16000, 16383, node.addr(), &node.id),
    ]);
    let proxy = proxy_for(&[&node]);
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(
        text(&c.call(&["GET", HIGH_KEY])),
        "-CLUSTERDOWN Hash slot not served"
    );
    assert_eq!(text(&c.call(&["SET", LOW_KEY, "v"])), "OK");
    assert_eq!(text(&c.call(&["GET", LOW_KEY])), "v");
    assert_eq!(proxy.topology().current().assigned(), 8192 + 384);
    proxy.shutdown();
}

/// T10: after bootstrap, every node answers an empty map, then a map of another cluster
/// (no common node id). Both are refused: the old map stays and requests keep working.
#[test]
fn empty_and_foreign_maps_are_refused() {
    let a = FakeNode::plain();
    let b = FakeNode::plain();
    let good = halves(&a, &b);
    let mut config = Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 1;
    config.cluster.seeds = vec![a.addr().to_string()];
    config.cluster.min_refresh_interval_ms = 50;
    config.cluster.periodic_refresh_ms = 100;
    let proxy = Proxy::start(config).expect("proxy starts");
    let mut c = Client::connect(proxy.local_addr());
    for bad in [Vec::new(), foreign(&good)] {
        let before = a.count("CLUSTER SLOTS") + b.count("CLUSTER SLOTS");
        a.set_slots(bad.clone());
        b.set_slots(bad);
        // The refresher asks again, and keeps the map it had.
        let asked = || a.count("CLUSTER SLOTS") + b.count("CLUSTER SLOTS");
        testkit::wait_until(Duration::from_secs(20), || asked() > before + 1);
        assert_eq!(proxy.topology().current().assigned(), 16384);
        assert_eq!(text(&c.call(&["SET", LOW_KEY, "1"])), "OK");
        assert_eq!(text(&c.call(&["SET", HIGH_KEY, "2"])), "OK");
    }
    assert_eq!((a.count("SET"), b.count("SET")), (2, 2), "old routes kept");
    proxy.shutdown();
}

/// The same ranges, reassigned to node ids the cluster never had (another cluster).
fn foreign(good: &[Range]) -> Vec<Range> {
    let mut map = good.to_vec();
    for (i, r) in map.iter_mut().enumerate() {
        r.id = format!("{i}").repeat(40);
    }
    map
}

/// T11: slot S moves from a to b; a answers MOVED for it but both nodes still serve the old
/// map (lagging gossip). The MOVED patch must win: after the first MOVED, requests for S go
/// to b even across refreshes, with no flip-flop back to a.
#[test]
fn lagging_map_does_not_undo_a_moved_patch() {
    let slot = slot_of(LOW_KEY.as_bytes());
    let b = FakeNode::plain();
    let b_addr = b.addr();
    let a = FakeNode::start(move |args, _| match args[0].as_slice() {
        b"GET" if slot_of(&args[1]) == slot => Reply::Bytes(reply::moved(slot, b_addr)),
        _ => Reply::Default,
    });
    halves(&a, &b);
    let proxy = proxy_for(&[&a]);
    let mut c = Client::connect(proxy.local_addr());
    let asked = || a.count("CLUSTER SLOTS") + b.count("CLUSTER SLOTS");
    let bootstrap = asked();
    // GETs (15 at least) until a lagging refresh after the MOVED has been installed, and one
    // more after that. Installing a lagging map (the patch re-applied) asks for another
    // refresh, so a second query since the bootstrap proves the first one was installed.
    let started = std::time::Instant::now();
    let mut gets = 0;
    loop {
        let refreshed = asked() >= bootstrap + 2;
        let got = text(&c.call(&["GET", LOW_KEY]));
        assert_eq!(got, "(nil)", "each GET is answered by b");
        gets += 1;
        if gets >= 15 && refreshed {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no refresh after the MOVED ({} queries)",
            asked()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let refreshes = asked();
    assert!(refreshes >= 2, "at least one refresh ran ({refreshes})");
    assert_eq!(a.count("GET"), 1, "MOVED once, then no flip-flop back to a");
    assert_eq!(b.count("GET"), gets);
    proxy.shutdown();
}

/// T7: `MOVED <slot> :<port>` (empty host) means the host of the node that answered; a
/// `?` host (hostname preferred, none set) is the one node of the map on that port; a `?`
/// no node of the map listens on is never dialled: retried by slot, paced and bounded,
/// then the client gets the MOVED.
#[test]
fn moved_with_empty_or_unknown_host() {
    let b = FakeNode::start(|args, _| match args[0].as_slice() {
        b"GET" => Reply::Bytes(reply::bulk(b"from-b")),
        _ => Reply::Default,
    });
    let b_port = b.addr().port();
    let a = FakeNode::start(move |args, _| match (args[0].as_slice(), args.get(1)) {
        (b"GET", Some(k)) if k.starts_with(b"q") => {
            Reply::Bytes(reply::error(&format!("MOVED {} ?:{b_port}", slot_of(k))))
        }
        (b"GET", Some(k)) if k.starts_with(b"z") => {
            Reply::Bytes(reply::error(&format!("MOVED {} ?:1", slot_of(k))))
        }
        (b"GET", Some(k)) => Reply::Bytes(reply::error(&format!("MOVED {} :{b_port}", slot_of(k)))),
        _ => Reply::Default,
    });
    halves(&a, &b);
    let proxy = proxy_for(&[&a]);
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(
        text(&c.call(&["GET", LOW_KEY])),
        "from-b",
        "empty host = a's host"
    );
    let key = "q{6}"; // another slot of a's half, never patched
    assert_eq!(
        text(&c.call(&["GET", key])),
        "from-b",
        "`?` = b, on that port"
    );
    assert_eq!(b.count("GET"), 2);
    let nowhere = "z{7}"; // a third slot of a's half
    let got = text(&c.call(&["GET", nowhere]));
    assert_eq!(got, format!("-MOVED {} ?:1", slot_of(nowhere.as_bytes())));
    assert_eq!(b.count("GET"), 2, "a `?` on no known port is never dialled");
    assert!(a.count("GET") > 3, "retried by slot before giving up");
    proxy.shutdown();
}

/// Two nodes bouncing a slot between them (A: MOVED to B, B: MOVED to A): the hop budget
/// ends it (with the paced hops after it); the client gets a MOVED error, never a hot loop.
#[test]
fn moved_ping_pong_ends_after_the_hop_budget() {
    // B learns A's address once A is listening.
    let a_addr: Arc<OnceLock<SocketAddr>> = Arc::default();
    let to_a = a_addr.clone();
    let b = FakeNode::start(move |args, _| match (args[0].as_slice(), to_a.get()) {
        (b"GET", Some(a)) => Reply::Bytes(reply::moved(slot_of(&args[1]), a)),
        _ => Reply::Default,
    });
    let b_addr = b.addr();
    let a = FakeNode::start(move |args, _| match args[0].as_slice() {
        b"GET" => Reply::Bytes(reply::moved(slot_of(&args[1]), b_addr)),
        _ => Reply::Default,
    });
    a_addr.set(a.addr()).expect("set once");
    halves(&a, &b);
    let proxy = proxy_for(&[&a]);
    let mut c = Client::connect(proxy.local_addr());
    let got = text(&c.call(&["GET", LOW_KEY]));
    assert!(
        got.starts_with("-MOVED "),
        "the last MOVED, not a hang: {got}"
    );
    // Every hop came before the MOVED was passed on: the count is final now.
    let gets = a.count("GET") + b.count("GET");
    assert!(gets <= MAX_GETS, "bounded by the hop budget: {gets}");
    assert_eq!(
        text(&c.call(&["SET", LOW_KEY, "v"])),
        "OK",
        "proxy still serves"
    );
    // No hop went on behind the reply: nothing more reached either node meanwhile.
    assert_eq!(
        a.count("GET") + b.count("GET"),
        gets,
        "no GET after the MOVED was passed on"
    );
    proxy.shutdown();
}

/// T8 in miniature: after a failover the MOVED names the promoted replica, a node the map
/// has no master entry for, and the nodes asked for CLUSTER SLOTS still lag. The first
/// MOVED must still route the slot there (patch), so later requests skip the old owner.
#[test]
fn moved_to_a_node_outside_the_map_is_remembered() {
    let slot = slot_of(LOW_KEY.as_bytes());
    let promoted = FakeNode::plain();
    let to = promoted.addr();
    let a = FakeNode::start(move |args, _| match args[0].as_slice() {
        b"GET" if slot_of(&args[1]) == slot => Reply::Bytes(reply::moved(slot, to)),
        _ => Reply::Default,
    });
    let b = FakeNode::plain();
    halves(&a, &b);
    let proxy = proxy_for(&[&a]);
    let mut c = Client::connect(proxy.local_addr());
    for _ in 0..10 {
        assert_eq!(
            text(&c.call(&["GET", LOW_KEY])),
            "(nil)",
            "served by the new master"
        );
    }
    assert_eq!(promoted.count("GET"), 10);
    assert_eq!(
        a.count("GET"),
        1,
        "one MOVED, then straight to the new master"
    );
    proxy.shutdown();
}

/// The first client after `Proxy::start` already sees the nodes' identity: the start waits
/// for the identity sampler's first round, so a HELLO sent at once does not get the
/// default (`redis 7.0.15`). Before, a client that came within the first round (the
/// server matrix's differential test on Valkey 9.1, once) was told the wrong server.
#[test]
fn the_first_client_sees_the_nodes_identity() {
    let node = FakeNode::start(|args, _| {
        match testkit::command_name(args).as_str() {
        "INFO" => Reply::Bytes(reply::bulk(
            b"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.4\r\nrun_id:0123456789012345678901234567890123456789\r\n",
        )),
        _ => Reply::Default,
    }
    });
    sole_owner(&node);
    let proxy = proxy_for(&[&node]);
    let hello = text(&Client::connect(proxy.local_addr()).call(&["HELLO", "3"]));
    assert!(
        hello.contains("valkey") && hello.contains("8.1.4"),
        "{hello}"
    );
    proxy.shutdown();
}
