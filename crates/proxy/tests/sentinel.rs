//! A Sentinel-managed master behind the proxy (issue 26), on real servers: a master, its
//! replica and a sentinel. The master is killed with SIGKILL under INCR load; the proxy must
//! follow the promotion within a second of the sentinel announcing it, and no acknowledged
//! increment may be lost or doubled.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::sentinel::Server;
use common::{text, wait_until, Client};
use proxy::{Config, Proxy};
use resp::Value;

fn info_field(c: &mut Client, section: &str, field: &str) -> String {
    let info = text(&c.call(&["INFO", section]));
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// What the load saw: increments acknowledged, requests whose outcome is unknown (written
/// before the master died), and when the first one after the switch was acknowledged.
#[derive(Default)]
struct Load {
    acked: u64,
    unknown: u64,
    other_errors: Vec<String>,
    acks_at: Vec<Instant>,
}

#[test]
fn a_killed_master_is_followed_within_a_second_and_no_acknowledged_increment_is_lost() {
    let dir = common::tempdir("sentinel");
    std::fs::create_dir_all(&dir).unwrap();
    let mut master = Server::start(&[]);
    let master_addr = master.addr;
    let replica = Server::start(&["--replicaof", "127.0.0.1", &master_addr.port().to_string()]);
    let mut r = replica.client();
    wait_until(Duration::from_secs(20), || {
        info_field(&mut r, "replication", "master_link_status") == "up"
    });
    let sentinel = Server::sentinel(&dir, master_addr);
    // The sentinel must know the replica before it can promote it.
    let mut s = sentinel.client();
    wait_until(
        Duration::from_secs(30),
        || matches!(s.call(&["SENTINEL", "REPLICAS", "mymaster"]), Value::Array(v) if !v.is_empty()),
    );

    let mut config = Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 1;
    config.sentinel.sentinels = vec![sentinel.addr.to_string()];
    config.sentinel.master_name = "mymaster".into();
    // Reads by policy: a client that sends READONLY reads from the replica the sentinel
    // lists (a standalone replica, which serves reads without READONLY of its own).
    config.cluster.read_policy = proxy::config::ReadPolicy::Master;
    let proxy = Proxy::start(config).expect("proxy starts");
    let addr = proxy.local_addr();
    assert_eq!(
        text(&Client::connect(addr).call(&["SET", "counter", "0"])),
        "OK"
    );
    // The replica must hold the SET before the master dies.
    wait_until(Duration::from_secs(10), || {
        text(&replica.client().call(&["GET", "counter"])) == "0"
    });

    let gets_on = |server: &Server| {
        let stats = text(&server.client().call(&["INFO", "commandstats"]));
        stats
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
            .and_then(|rest| rest.split(',').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = gets_on(&replica);
    let mut reader = Client::connect(addr);
    assert_eq!(text(&reader.call(&["READONLY"])), "OK");
    // The replica view is sampled each second: wait until reads reach the replica.
    wait_until(Duration::from_secs(10), || {
        assert_eq!(text(&reader.call(&["GET", "counter"])), "0");
        gets_on(&replica) > before
    });
    drop(reader);

    // The announcement, as a client of the sentinel sees it.
    let mut watch = sentinel.client();
    watch.send(&[b"SUBSCRIBE", b"+switch-master"]);
    watch.read().expect("subscribed");

    let stop = Arc::new(AtomicBool::new(false));
    let load = Arc::new(Mutex::new(Load::default()));
    let worker = {
        let (stop, load) = (stop.clone(), load.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            c.stream
                .set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            while !stop.load(Ordering::Relaxed) {
                let reply = c.call(&["INCR", "counter"]);
                let mut l = load.lock().unwrap();
                match reply {
                    Value::Integer(_) => {
                        l.acked += 1;
                        l.acks_at.push(Instant::now());
                    }
                    Value::Error(e) if e.windows(6).any(|w| w == b"may or") => l.unknown += 1,
                    other => l.other_errors.push(format!("{other:?}")),
                }
            }
        })
    };
    wait_until(Duration::from_secs(10), || load.lock().unwrap().acked > 200);
    let _ = master.child.kill();
    let _ = master.child.wait();
    let killed = Instant::now();
    let announcement = watch.read().expect("+switch-master");
    let announced = Instant::now();
    let payload = match &announcement {
        Value::Array(parts) => text(&parts[2]),
        other => panic!("{other:?}"),
    };
    assert!(
        payload.ends_with(&replica.addr.port().to_string()),
        "{payload}"
    );
    // The first acknowledgement after the announcement, within a second of it.
    wait_until(Duration::from_secs(10), || {
        load.lock()
            .unwrap()
            .acks_at
            .last()
            .is_some_and(|t| *t > announced)
    });
    let first = *load
        .lock()
        .unwrap()
        .acks_at
        .iter()
        .find(|t| **t > announced)
        .unwrap();
    let follow = first - announced;
    eprintln!(
        "sentinel announced the switch {:?} after the kill; the proxy's first acknowledged INCR on the new master {follow:?} after the announcement",
        announced - killed
    );
    assert!(follow < Duration::from_secs(1), "followed after {follow:?}");
    // More load on the new master, then the count.
    let before = load.lock().unwrap().acked;
    wait_until(Duration::from_secs(10), || {
        load.lock().unwrap().acked > before + 200
    });
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    let l = load.lock().unwrap();
    let final_value: u64 = text(&Client::connect(addr).call(&["GET", "counter"]))
        .parse()
        .unwrap();
    eprintln!(
        "acknowledged {} unknown {} final {final_value} other errors {:?}",
        l.acked, l.unknown, l.other_errors
    );
    assert!(l.other_errors.is_empty(), "{:?}", l.other_errors);
    assert!(
        final_value >= l.acked && final_value <= l.acked + l.unknown,
        "acknowledged {} (unknown {}), final {final_value}",
        l.acked,
        l.unknown
    );
    proxy.shutdown();
    drop(sentinel);
    let _ = std::fs::remove_dir_all(&dir);
}
