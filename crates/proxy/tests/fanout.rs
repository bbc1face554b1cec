//! Multi-key and cluster-wide commands on a real 3-master cluster: split by slot, sent to all
//! owners, merged as one Redis would answer; atomic cross-slot commands get CROSSSLOT.

mod common;

use common::{text, Client, Harness};
use resp::Value;

fn strings(v: &Value) -> Vec<String> {
    v.as_array().expect("array").iter().map(text).collect()
}

#[test]
fn multi_key_commands_are_split_and_merged_in_order() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    let keys: Vec<String> = (0..100).map(|i| format!("fan:{i}")).collect();
    let owners: std::collections::HashSet<_> = keys
        .iter()
        .map(|k| h.cluster.owner_of(k.as_bytes()).unwrap())
        .collect();
    assert_eq!(owners.len(), 3, "the keys span all masters");

    let mut mset = vec!["MSET".to_string()];
    for (i, k) in keys.iter().enumerate() {
        mset.extend([k.clone(), format!("v{i}")]);
    }
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    assert_eq!(text(&c.call(&mset)), "OK");

    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    mget.push("fan:missing");
    let got = strings(&c.call(&mget));
    let mut want: Vec<String> = (0..100).map(|i| format!("v{i}")).collect();
    want.push("(nil)".into());
    assert_eq!(got, want, "MGET values in key order");

    // The reference answer: each key read directly on its owner.
    for k in keys.iter().step_by(17) {
        let mut direct = Client::connect(h.cluster.owner_of(k.as_bytes()).unwrap());
        assert_eq!(text(&direct.call(&["GET", k])), text(&c.call(&["GET", k])));
    }

    let exists = ["EXISTS", "fan:1", "fan:2", "fan:1", "nope"];
    assert_eq!(
        text(&c.call(&exists)),
        ":3",
        "EXISTS counts repeats like Redis"
    );
    assert_eq!(text(&c.call(&["TOUCH", "fan:3", "fan:4", "nope"])), ":2");
    assert_eq!(text(&c.call(&["UNLINK", "fan:5", "fan:6"])), ":2");
    assert_eq!(
        text(&c.call(&["DEL", "fan:7", "fan:8", "fan:9", "nope"])),
        ":3"
    );
    assert_eq!(text(&c.call(&["DBSIZE"])), ":95");
    let mut all_keys = strings(&c.call(&["KEYS", "fan:*"]));
    all_keys.sort();
    assert_eq!(all_keys.len(), 95);

    let cross = c.call(&["MSETNX", "fan:a", "1", "fan:b", "2"]);
    assert_eq!(
        text(&cross),
        "-CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(text(&c.call(&["FLUSHALL"])), "OK");
    assert_eq!(text(&c.call(&["DBSIZE"])), ":0");
}

#[test]
fn a_wrong_type_inside_a_split_is_reported_like_redis() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    assert_eq!(text(&c.call(&["LPUSH", "list:x", "a"])), ":1");
    assert_eq!(text(&c.call(&["SET", "str:y", "b"])), "OK");
    // MGET never fails on type: a list reads as nil.
    let got = strings(&c.call(&["MGET", "list:x", "str:y"]));
    assert_eq!(got, vec!["(nil)".to_string(), "b".to_string()]);
}
