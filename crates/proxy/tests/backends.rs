//! Per-node observability on a real cluster: INFO `backends` and the `slotgate_backend_*`
//! metrics list every master with its state and in-flight requests, and a killed master
//! shows as down with its failures counted.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{start_proxy, text, Client, Harness};

/// `nodeN:` lines of INFO backends, by address: field → value.
fn nodes(c: &mut Client) -> HashMap<String, HashMap<String, String>> {
    let info = text(&c.call(&["INFO", "backends"]));
    assert!(info.starts_with("# Backends\r\n"), "{info}");
    info.lines()
        .filter(|l| l.starts_with("node"))
        .map(|l| {
            let (_, fields) = l.split_once(':').unwrap();
            let fields: HashMap<String, String> = fields
                .split(',')
                .map(|f| f.split_once('=').unwrap())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (fields["addr"].clone(), fields)
        })
        .collect()
}

/// Poll INFO backends until `pred` holds for `addr`'s line (or panic after 5 s).
fn wait_for(c: &mut Client, addr: &str, pred: impl Fn(&HashMap<String, String>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let all = nodes(c);
        if all.get(addr).is_some_and(&pred) {
            return;
        }
        assert!(Instant::now() < deadline, "{addr}: {all:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_master_is_listed_with_its_state_and_in_flight_requests() {
    let h = Harness::start(3, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.admin.listen = "127.0.0.1:0".into());
    let mut c = Client::connect(proxy.local_addr());
    for i in 0..100 {
        c.call(&["SET", &format!("b:{i}"), "v"]);
    }
    let all = nodes(&mut c);
    let masters: Vec<String> = h.cluster.masters().iter().map(|a| a.to_string()).collect();
    assert_eq!(all.len(), 3, "{all:?}");
    let mut slots = 0;
    for m in &masters {
        let n = &all[m];
        assert_eq!((n["state"].as_str(), n["role"].as_str()), ("up", "master"));
        assert_eq!(n["inflight"], "0");
        assert_eq!(
            (n["connect_failures"].as_str(), n["last_error_s"].as_str()),
            ("0", "-1")
        );
        slots += n["slots"].parse::<usize>().unwrap();
    }
    assert_eq!(slots, 16384);
    assert!(
        !text(&c.call(&["INFO"])).contains("# Backends"),
        "not by default"
    );
    let everything = text(&c.call(&["INFO", "all"]));
    assert!(everything.contains("# Backends\r\nbackend_nodes:3\r\nbackend_nodes_down:0\r\n"));

    // A blocked BLPOP is a request in flight on its node (on a dedicated connection).
    let owner = h.cluster.owner_of(b"blocked").unwrap().to_string();
    let mut blocked = Client::connect(proxy.local_addr());
    blocked.send(&[b"BLPOP", b"blocked", b"2"]);
    wait_for(&mut c, &owner, |n| n["inflight"] == "1");
    let body = common::scrape(proxy.admin_addr().unwrap());
    assert!(body.contains(&format!(
        "slotgate_backend_inflight{{node=\"{owner}\"}} 1\n"
    )));
    for m in &masters {
        assert!(
            body.contains(&format!("slotgate_backend_up{{node=\"{m}\"}} 1\n")),
            "{body}"
        );
        assert!(body.contains(&format!(
            "slotgate_backend_connect_failures_total{{node=\"{m}\"}} 0\n"
        )));
    }
    assert!(body.contains("# TYPE slotgate_backend_last_error_age_seconds gauge"));
    assert_eq!(text(&c.call(&["LPUSH", "blocked", "x"])), ":1");
    assert!(matches!(blocked.read(), Some(resp::Value::Array(v)) if v.len() == 2));
    wait_for(&mut c, &owner, |n| n["inflight"] == "0");
    proxy.shutdown();
}

#[test]
fn a_killed_master_shows_as_down_with_failures_counted() {
    let mut h = Harness::start(3, 0);
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.admin.listen = "127.0.0.1:0".into();
        // No replica will take over: fail at once instead of holding for one.
        cfg.cluster.failover_hold_ms = 0;
    });
    let mut c = Client::connect(proxy.local_addr());
    let victim = h.cluster.owner_of(b"victim").unwrap();
    let addr = victim.to_string();
    assert_eq!(text(&c.call(&["SET", "victim", "1"])), "OK");
    wait_for(&mut c, &addr, |n| n["state"] == "up");
    h.cluster.kill(victim).unwrap();
    // The first request finds the connection broken, later ones find the node refusing: ask
    // (5 times at least) until a dial has failed. A request within the 100 ms backoff after
    // a failed dial fails fast without dialling, hence the poll step between requests.
    let deadline = Instant::now() + Duration::from_secs(10);
    for asked in 1.. {
        let reply = text(&c.call(&["GET", "victim"]));
        assert!(reply.starts_with("-ERR slotgate: node"), "{reply}");
        let all = nodes(&mut c);
        let dial_failed = all.get(&addr).is_some_and(|n| n["connect_failures"] != "0");
        if asked >= 5 && dial_failed {
            break;
        }
        assert!(Instant::now() < deadline, "{addr}: {all:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_for(&mut c, &addr, |n| {
        n["state"] == "down"
            && n["conn_lost"] != "0"
            && n["connect_failures"].parse::<u64>().unwrap() >= 1
            && n["last_error_s"] != "-1"
    });
    let info = text(&c.call(&["INFO", "backends"]));
    assert!(info.contains("backend_nodes_down:1\r\n"), "{info}");
    let body = common::scrape(proxy.admin_addr().unwrap());
    assert!(
        body.contains(&format!("slotgate_backend_up{{node=\"{addr}\"}} 0\n")),
        "{body}"
    );
    let lost = format!("slotgate_backend_connections_lost_total{{node=\"{addr}\"}} 0\n");
    assert!(!body.contains(&lost), "{body}");
    proxy.shutdown();
}
