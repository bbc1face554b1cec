//! The near cache (`[near_cache]`, docs/hotkeys.md) on a real cluster: GETs of hot keys
//! answered by the proxy, and never a value older than a write acknowledged before the read
//! (through this proxy, on any worker), nor one older than a direct writer's once its
//! invalidation arrived; TTLs, a lost tracking connection and the size bound.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{text, Client};
use resp::Value;

fn stat(c: &mut Client, name: &str) -> u64 {
    let info = text(&c.call(&["INFO", "stats"]));
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO stats:\n{info}"))
}

fn get(c: &mut Client, key: &str) -> Option<String> {
    match c.call(&["GET", key]) {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Value::Null => None,
        other => panic!("GET {key}: {other:?}"),
    }
}

/// Wait for `done` with a ceiling.
fn wait_for(what: &str, ceiling: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + ceiling;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {ceiling:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn master_of(cluster: &devcluster::Cluster, key: &str) -> SocketAddr {
    cluster.owner_of(key.as_bytes()).expect("owner")
}

/// 200 writes of `hot:b` (`{prefix}0`, `{prefix}1`…) by `writer`, each after a few reads
/// through the proxy (`reader`) that keep it cached: how long after each write's
/// acknowledgement the proxy first returned the new value (reads back to back, a 1 s
/// ceiling), and that every read in between returned the value before it. `first_previous`:
/// the key's value before the first write. The median and the longest.
fn delay_after_writes(
    writer: &mut Client,
    reader: &mut Client,
    prefix: &str,
    first_previous: Option<&str>,
) -> (Duration, Duration) {
    let mut delays = Vec::new();
    let mut previous = first_previous.map(str::to_string);
    for i in 0..200 {
        let v = format!("{prefix}{i}");
        for _ in 0..3 {
            get(reader, "hot:b");
        }
        writer.call(&["SET", "hot:b", &v]);
        let acked = Instant::now();
        loop {
            let got = get(reader, "hot:b");
            if got.as_deref() == Some(v.as_str()) {
                break;
            }
            assert_eq!(got, previous, "neither the old value nor the new one");
            assert!(
                acked.elapsed() < Duration::from_secs(1),
                "invalidation never came"
            );
        }
        delays.push(acked.elapsed());
        previous = Some(v);
    }
    delays.sort();
    (delays[delays.len() / 2], delays[delays.len() - 1])
}

#[test]
fn hot_gets_are_answered_and_never_outlive_an_acknowledged_write() {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        dir: common::tempdir("near-cache"),
        ..Default::default()
    };
    let cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
    let proxy = common::start_proxy(&cluster, |c| {
        c.near_cache.enabled = true;
        c.near_cache.patterns = vec!["hot:*".into()];
        c.near_cache.max_bytes = 64 * 1024;
        c.admin.listen = "127.0.0.1:0".into();
    });
    let addr = proxy.local_addr();
    let mut admin = Client::connect(addr);

    // Served from the cache once filled.
    let mut w = Client::connect(addr);
    w.call(&["SET", "hot:a", "v0"]);
    wait_for(
        "a GET answered by the cache",
        Duration::from_secs(5),
        || {
            assert_eq!(get(&mut w, "hot:a").as_deref(), Some("v0"));
            stat(&mut admin, "near_cache_hits") > 0
        },
    );

    // Writes through the proxy on one connection, reads on four others (both workers):
    // every read after the write's +OK sees it.
    let mut readers: Vec<Client> = (0..4).map(|_| Client::connect(addr)).collect();
    let hits_before = stat(&mut admin, "near_cache_hits");
    for i in 0..1500 {
        let v = format!("v{i}");
        w.call(&["SET", "hot:a", &v]);
        for r in readers.iter_mut() {
            for _ in 0..2 {
                assert_eq!(get(r, "hot:a").as_deref(), Some(v.as_str()), "stale read");
            }
        }
    }
    let hits = stat(&mut admin, "near_cache_hits") - hits_before;
    assert!(
        hits > 1000,
        "the cache answered only {hits} of 12,000 reads"
    );
    eprintln!("through the proxy: 1,500 writes, 12,000 reads, {hits} from the cache, 0 stale");

    // A writer straight to the master: the proxy serves its value once the master's
    // invalidation arrived; measured, with a ceiling.
    let mut direct = Client::connect(master_of(&cluster, "hot:b"));
    let mut r = Client::connect(addr);
    let (median, max) = delay_after_writes(&mut direct, &mut r, "d", None);
    eprintln!("direct writer: new value through the proxy after median {median:?}, max {max:?} (200 writes)");

    // A writer on another proxy over the same cluster: the same, with its trip through
    // that proxy before the master.
    let other = common::start_proxy(&cluster, |_| {});
    let mut via_other = Client::connect(other.local_addr());
    let (median, max) = delay_after_writes(&mut via_other, &mut r, "o", Some("d199"));
    eprintln!("writer on another proxy: new value through this one after median {median:?}, max {max:?} (200 writes)");
    other.shutdown();

    // A TTL: never served past it.
    w.call(&["SET", "hot:t", "x", "PX", "300"]);
    let mut master = Client::connect(master_of(&cluster, "hot:t"));
    let mut served = 0;
    loop {
        let through = get(&mut w, "hot:t");
        let on_node = master.call(&["PTTL", "hot:t"]);
        if through.is_none() {
            assert_eq!(on_node, Value::Integer(-2), "nil while the key lives");
            break;
        }
        // The proxy answered a value: the key must have been alive when the read arrived.
        served += 1;
        assert!(served < 100_000, "the key never expired");
    }

    // The tracking connections killed: everything cached is dropped, and a direct write
    // made after the kill is read at once.
    for _ in 0..3 {
        get(&mut r, "hot:b");
    }
    let node = master_of(&cluster, "hot:b");
    let mut m = Client::connect(node);
    let list = text(&m.call(&["CLIENT", "LIST"]));
    let tracking: Vec<&str> = list
        .lines()
        .filter(|l| {
            l.split(' ')
                .any(|f| f.starts_with("flags=") && f.contains('t'))
        })
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .collect();
    assert!(!tracking.is_empty(), "no tracking connection:\n{list}");
    for id in &tracking {
        m.call(&["CLIENT", "KILL", "ID", id]);
    }
    m.call(&["SET", "hot:b", "after-kill"]);
    wait_for(
        "the lost connection noticed",
        Duration::from_secs(5),
        || get(&mut r, "hot:b").as_deref() == Some("after-kill"),
    );

    // A value over max_value_bytes (64 KiB) is never cached, and read whole.
    let huge = "h".repeat(100_000);
    w.call(&["SET", "hot:huge", &huge]);
    let kept = stat(&mut admin, "near_cache_filled");
    let fills = stat(&mut admin, "near_cache_fills");
    for _ in 0..20 {
        assert_eq!(get(&mut w, "hot:huge").as_deref(), Some(huge.as_str()));
    }
    wait_for(
        "the huge value's fills answered",
        Duration::from_secs(5),
        || stat(&mut admin, "near_cache_fills") > fills,
    );
    let hits = stat(&mut admin, "near_cache_hits");
    for _ in 0..20 {
        assert_eq!(get(&mut w, "hot:huge").as_deref(), Some(huge.as_str()));
    }
    assert_eq!(
        stat(&mut admin, "near_cache_hits"),
        hits,
        "a 100 kB value was served"
    );
    assert_eq!(
        stat(&mut admin, "near_cache_filled"),
        kept,
        "a 100 kB value was kept"
    );

    // Bounded: 64 KiB for the proxy, 32 KiB a worker.
    let big = "x".repeat(4000);
    for i in 0..40 {
        let key = format!("hot:big{i}");
        w.call(&["SET", &key, &big]);
        for _ in 0..3 {
            get(&mut w, &key);
        }
    }
    wait_for("entries evicted", Duration::from_secs(5), || {
        stat(&mut admin, "near_cache_evicted") > 0
    });
    let bytes = stat(&mut admin, "near_cache_bytes");
    assert!(bytes <= 64 * 1024, "{bytes} bytes held");

    // The same counters in /status.json (the status page's near-cache card) and /metrics.
    let status = common::scrape_path(proxy.admin_addr().unwrap(), "/status.json");
    let body = status.split("\r\n\r\n").nth(1).expect("a body");
    let doc: serde_json::Value = serde_json::from_str(body).expect("JSON");
    assert!(
        doc["near_cache"]["hits"].as_u64().unwrap() > 1000,
        "{}",
        doc["near_cache"]
    );
    let metrics = common::scrape(proxy.admin_addr().unwrap());
    assert!(
        metrics.contains("slotgate_near_cache_total{event=\"hit\"}"),
        "{metrics}"
    );
    proxy.shutdown();
}
