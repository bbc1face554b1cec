//! SCAN across masters, INFO's keyspace, and RESP3 clients, on a real 3-master cluster.

mod common;

use std::collections::HashSet;

use common::{text, Client, Harness};
use resp::Value;

#[test]
fn scan_returns_every_key_exactly_once() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    let n = 50_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        for i in chunk {
            c.send(&[b"SET", format!("scan:{i}").as_bytes(), b"v"]);
        }
        for _ in chunk {
            assert_eq!(text(&c.read().unwrap()), "OK");
        }
    }
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let page = c.call(&["SCAN", &cursor, "COUNT", "1000"]);
        let parts = page
            .as_array()
            .unwrap_or_else(|| panic!("SCAN page: {page:?}"));
        cursor = text(&parts[0]);
        for key in parts[1].as_array().unwrap() {
            assert!(seen.insert(text(key)), "{} returned twice", text(key));
        }
        calls += 1;
        if cursor == "0" {
            break;
        }
        assert!(calls < 10_000, "SCAN never ends");
    }
    assert_eq!(seen.len(), n, "every key exactly once");
    // MATCH and TYPE pass through.
    assert_eq!(text(&c.call(&["LPUSH", "scan:list", "x"])), ":1");
    let mut found = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let page = c.call(&[
            "SCAN", &cursor, "MATCH", "scan:l*", "TYPE", "list", "COUNT", "5000",
        ]);
        let parts = page.as_array().unwrap().to_vec();
        cursor = text(&parts[0]);
        found.extend(parts[1].as_array().unwrap().iter().map(text));
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(found, vec!["scan:list".to_string()]);
    assert_eq!(
        text(&c.call(&["SCAN", "notanumber"])),
        "-ERR invalid cursor"
    );
    let info = text(&c.call(&["INFO", "keyspace"]));
    assert!(info.contains(&format!("db0:keys={},", n + 1)), "{info}");
    let all = text(&c.call(&["INFO"]));
    assert!(
        all.contains("# Server") && all.contains("# Keyspace"),
        "{all}"
    );
}

#[test]
fn resp3_clients_get_resp3_replies_from_the_nodes_themselves() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    assert!(matches!(c.call(&["HELLO", "3"]), Value::Map(_)));
    let setup: &[&[&str]] = &[
        &["HSET", "h", "f", "v"],
        &["SADD", "s", "m"],
        &["ZADD", "z", "1.5", "a"],
    ];
    for cmd in setup {
        assert_eq!(c.call(cmd), Value::Integer(1));
    }
    let checks: &[&[&str]] = &[
        &["HGETALL", "h"],
        &["SMEMBERS", "s"],
        &["ZSCORE", "z", "a"],
        &["GET", "missing"],
    ];
    for cmd in checks {
        let key = cmd[1].as_bytes();
        let mut direct = Client::connect(h.cluster.owner_of(key).unwrap());
        assert!(matches!(direct.call(&["HELLO", "3"]), Value::Map(_)));
        assert_eq!(
            c.call(cmd),
            direct.call(cmd),
            "{cmd:?} as the owning node answers a RESP3 client"
        );
    }
    assert!(matches!(c.call(&["HGETALL", "h"]), Value::Map(_)));
    assert_eq!(c.call(&["GET", "missing"]), Value::Null);
    // A RESP2 client on the same proxy still gets RESP2.
    let mut old = h.client();
    assert!(matches!(old.call(&["HGETALL", "h"]), Value::Array(_)));
}

/// KEYS during a migration names a key once, as one Redis does, even while the key is on
/// both masters (MIGRATE restores it on the target before deleting it on the source).
#[test]
fn keys_names_a_key_on_two_masters_once() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    assert_eq!(text(&c.call(&["SET", "{kw}a", "1"])), "OK");
    let moving = common::migrate::Move::begin(&h.cluster, "{kw}");
    let mut target = Client::connect(moving.dst);
    assert_eq!(text(&target.call(&["ASKING"])), "OK");
    assert_eq!(text(&target.call(&["SET", "{kw}a", "1"])), "OK");
    let keys = c.call(&["KEYS", "{kw}*"]);
    assert_eq!(keys, Value::Array(vec![Value::BulkString("{kw}a".into())]));
    // The source's copy goes, as MIGRATE would have taken it: a node refuses to give up a
    // slot it holds keys of (unless the target's announcement reached it first, a race
    // that CI lost once).
    common::migrate::admin(&h.cluster, moving.src, &["DEL", "{kw}a"]);
    moving.finish();
}

/// KEYS runs in the client's order: after the writes pipelined before it, before the ones
/// pipelined after it (its two rounds must not let a later write in between).
#[test]
fn keys_runs_between_the_writes_around_it() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    for round in 0..20 {
        let (a, b) = (format!("ko{round}:a"), format!("ko{round}:b"));
        let pattern = format!("ko{round}:*");
        let script: [&[&str]; 4] = [
            &["SET", &a, "v"],
            &["KEYS", &pattern],
            &["SET", &b, "v"],
            &["DEL", &a],
        ];
        for cmd in script {
            let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            c.send(&args);
        }
        let replies: Vec<Value> = (0..4).map(|_| c.read().unwrap()).collect();
        let keys = Value::Array(vec![Value::BulkString(a.clone().into())]);
        assert_eq!(replies[1], keys, "round {round}");
    }
}
