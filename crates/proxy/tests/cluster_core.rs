//! The core acceptance tests on a real Redis Cluster: every key reaches its owner, replies
//! never cross between pipelining clients, and a slot migration under load is invisible.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{text, Client, Harness};

/// Ceiling for waits that normally end within a second (slow, loaded CI machines).
const CEILING: Duration = Duration::from_secs(20);

fn key(i: usize) -> String {
    format!("key:{i}")
}

fn value(i: usize) -> String {
    format!("value-{i}-{}", i * 7919)
}

#[test]
fn ten_thousand_keys_round_trip_and_live_on_their_owner() {
    let h = Harness::start(3, 1);
    let mut c = h.client();
    let n = 10_000;
    let ids: Vec<usize> = (0..n).collect();
    for chunk in ids.chunks(500) {
        for &i in chunk {
            c.send(&[b"SET", key(i).as_bytes(), value(i).as_bytes()]);
        }
        for &i in chunk {
            assert_eq!(text(&c.read().unwrap()), "OK", "SET {}", key(i));
        }
        for &i in chunk {
            c.send(&[b"GET", key(i).as_bytes()]);
        }
        for &i in chunk {
            assert_eq!(text(&c.read().unwrap()), value(i), "GET {}", key(i));
        }
    }
    // Each key is on the master that owns its slot, readable there without a redirect.
    let mut by_owner: HashMap<std::net::SocketAddr, Vec<usize>> = HashMap::new();
    for i in 0..n {
        let owner = h.cluster.owner_of(key(i).as_bytes()).expect("owner");
        by_owner.entry(owner).or_default().push(i);
    }
    assert_eq!(by_owner.len(), 3, "keys spread over all masters");
    for (owner, keys) in by_owner {
        let mut direct = Client::connect(owner);
        for chunk in keys.chunks(500) {
            for &i in chunk {
                direct.send(&[b"GET", key(i).as_bytes()]);
            }
            for &i in chunk {
                assert_eq!(
                    text(&direct.read().unwrap()),
                    value(i),
                    "{} on {owner}",
                    key(i)
                );
            }
        }
    }
}

#[test]
fn fifty_pipelining_clients_never_get_each_others_replies() {
    let h = Harness::start(3, 0);
    let addr = h.addr();
    let threads: Vec<_> = (0..50)
        .map(|client| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                let k = |i: usize| format!("c{client}:k{i}");
                let v = |i: usize| format!("c{client}:v{i}:{}", i * 31 + client);
                // 1000 SETs then 1000 GETs, all pipelined: 2000 commands, 4 writes.
                for round in 0..2 {
                    for batch in (0..1000).collect::<Vec<_>>().chunks(500) {
                        for &i in batch {
                            match round {
                                0 => c.send(&[b"SET", k(i).as_bytes(), v(i).as_bytes()]),
                                _ => c.send(&[b"GET", k(i).as_bytes()]),
                            }
                        }
                        for &i in batch {
                            let got = text(&c.read().expect("reply"));
                            let want = if round == 0 { "OK".to_string() } else { v(i) };
                            assert_eq!(
                                got, want,
                                "client {client} request {i}: crossed or wrong reply"
                            );
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no crossed replies");
    }
}

/// Clients run SET+GET on keys of the migrating slot and elsewhere while the slot moves with
/// CLUSTER SETSLOT MIGRATING/IMPORTING + MIGRATE + SETSLOT NODE. Zero errors allowed.
#[test]
fn a_slot_migrated_under_load_is_invisible_to_clients() {
    let h = Harness::start(3, 0);
    let addr = h.addr();
    let slot = cluster::key_slot(b"mig");
    let src = h.cluster.owner_of(b"{mig}").expect("owner");
    let dst = *h
        .cluster
        .masters()
        .iter()
        .find(|m| **m != src)
        .expect("another master");
    let id_of = |a: std::net::SocketAddr| {
        h.cluster
            .nodes()
            .iter()
            .find(|n| n.addr == a)
            .expect("node")
            .id
            .clone()
    };
    let (src_id, dst_id) = (id_of(src), id_of(dst));

    let mut c = h.client();
    for i in 0..300 {
        assert_eq!(
            text(&c.call(&["SET", &format!("{{mig}}:{i}"), &format!("v{i}")])),
            "OK"
        );
    }
    assert_eq!(text(&c.call(&["SET", "fixed:key", "F"])), "OK");
    assert_ne!(cluster::key_slot(b"fixed:key"), slot);
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let ops = Arc::new(AtomicU64::new(0));
    let load: Vec<_> = (0..8)
        .map(|t| {
            let (stop, errors, ops) = (stop.clone(), errors.clone(), ops.clone());
            std::thread::spawn(move || load_loop(addr, t, &stop, &errors, &ops))
        })
        .collect();
    // Migrate once the load is flowing (a few SET+GET pairs per thread done).
    common::wait_until(CEILING, || ops.load(Ordering::Relaxed) >= 100);

    let cmd = |node, args: &[&str]| {
        h.cluster
            .command(node, args)
            .expect("admin command")
            .ok()
            .expect("ok reply")
    };
    let s = slot.to_string();
    cmd(dst, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &src_id]);
    cmd(src, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &dst_id]);
    loop {
        let keys = cmd(src, &["CLUSTER", "GETKEYSINSLOT", &s, "20"]).lines();
        if keys.is_empty() {
            break;
        }
        let port = dst.port().to_string();
        let mut args = vec![
            "MIGRATE",
            "127.0.0.1",
            port.as_str(),
            "",
            "0",
            "5000",
            "KEYS",
        ];
        args.extend(keys.iter().map(String::as_str));
        cmd(src, &args);
        // Pacing, not waiting: the load meets the slot half migrated (ASK) between batches.
        std::thread::sleep(Duration::from_millis(20));
    }
    for node in h.cluster.masters() {
        cmd(node, &["CLUSTER", "SETSLOT", &s, "NODE", &dst_id]);
    }
    // Keep the load on until it has followed a MOVED from the slot's new owner and done 1000
    // more requests since the migration ended (on the map that MOVED corrected).
    let ops_then = ops.load(Ordering::Relaxed);
    common::wait_until(CEILING, || {
        stat(&mut c, "redirects_moved:") > 0 && ops.load(Ordering::Relaxed) >= ops_then + 1000
    });
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().expect("load thread");
    }
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "client-visible errors during migration"
    );
    assert!(ops.load(Ordering::Relaxed) > 1000, "load actually ran");
    for i in 0..300 {
        assert_eq!(
            text(&c.call(&["GET", &format!("{{mig}}:{i}")])),
            format!("v{i}")
        );
    }
    assert_eq!(h.cluster.owner_of(b"{mig}").expect("owner"), dst);
    // The load really went through both redirect paths.
    let info = text(&c.call(&["INFO", "stats"]));
    let counter = |name: &str| -> u64 {
        let line = info
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {info}"));
        line.split(':')
            .nth(1)
            .and_then(|v| v.trim().parse().ok())
            .expect("a number")
    };
    assert!(counter("redirects_ask:") > 0, "no ASK followed: {info}");
    assert!(counter("redirects_moved:") > 0, "no MOVED followed: {info}");
    // The source node gave them: INFO backends counts redirects per node.
    let backends = text(&c.call(&["INFO", "backends"]));
    let from_src = format!("addr={src},");
    let line = backends.lines().find(|l| l.contains(&from_src));
    let line = line.unwrap_or_else(|| panic!("{src} in {backends}"));
    assert!(!line.contains(",redirects=0,"), "{line}");
}

/// A counter of the proxy's INFO stats (`name` with its colon).
fn stat(c: &mut Client, name: &str) -> u64 {
    let info = text(&c.call(&["INFO", "stats"]));
    let line = info.lines().find_map(|l| l.strip_prefix(name));
    line.and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in {info}"))
}

fn load_loop(
    addr: std::net::SocketAddr,
    t: usize,
    stop: &AtomicBool,
    errors: &AtomicU64,
    ops: &AtomicU64,
) {
    let mut c = Client::connect(addr);
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        // Half the keys in the migrating slot (new and existing), half anywhere.
        let k = match i % 3 {
            0 => format!("{{mig}}:t{t}:{i}"),
            1 => format!("{{mig}}:{}", i % 300),
            _ => format!("other:t{t}:{i}"),
        };
        let v = if i % 3 == 1 {
            format!("v{}", i % 300)
        } else {
            format!("t{t}-{i}")
        };
        c.send(&[b"SET", k.as_bytes(), v.as_bytes()]);
        c.send(&[b"GET", k.as_bytes()]);
        let (set, get) = (
            text(&c.read().expect("reply")),
            text(&c.read().expect("reply")),
        );
        if set != "OK" || get != v {
            eprintln!("error on {k}: SET -> {set}, GET -> {get} (wanted {v})");
            errors.fetch_add(1, Ordering::Relaxed);
        }
        ops.fetch_add(2, Ordering::Relaxed);
        if i.is_multiple_of(10) {
            // A split MGET: one part in the migrating slot, one elsewhere.
            let (a, b) = (i % 300, (i * 7) % 300);
            let (ka, kb) = (format!("{{mig}}:{a}"), format!("{{mig}}:{b}"));
            let got = c.call(&["MGET", &ka, "fixed:key", &kb]);
            let got: Vec<String> = got
                .as_array()
                .map(|v| v.iter().map(text).collect())
                .unwrap_or_default();
            if got != [format!("v{a}"), "F".to_string(), format!("v{b}")] {
                eprintln!("error on MGET {ka} fixed:key {kb}: {got:?}");
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        i += 1;
    }
}
