//! A representative command of each data-type family, scripts, PUBSUB introspection and the
//! admin-command switch, on a real cluster: the proxy answers as the owning node does.

mod common;

use common::{start_proxy, text, Client, Harness};
use resp::Value;

/// Run `cmd` (with `KEY` replaced) through the proxy on `{fam}p` and directly on the owner on
/// `{fam}d` (same slot): the replies must be identical, errors included.
fn same_as_owner(proxy: &mut Client, direct: &mut Client, cmd: &[&str]) {
    let via = |c: &mut Client, key: &str| -> Value {
        let args: Vec<String> = cmd.iter().map(|a| a.replace("KEY", key)).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        c.call(&args)
    };
    assert_eq!(via(proxy, "{fam}p"), via(direct, "{fam}d"), "{cmd:?}");
}

#[test]
fn every_family_answers_as_the_owning_node() {
    let h = Harness::start(3, 0);
    let mut proxy = h.client();
    let mut direct = Client::connect(h.cluster.owner_of(b"{fam}").unwrap());
    let script: &[&[&str]] = &[
        &["SET", "KEY:s", "10"],
        &["INCRBY", "KEY:s", "5"],
        &["APPEND", "KEY:s", "x"],
        &["GETRANGE", "KEY:s", "0", "1"],
        &["INCR", "KEY:s"],
        &["HSET", "KEY:h", "a", "1", "b", "2"],
        &["HGETALL", "KEY:h"],
        &["HINCRBYFLOAT", "KEY:h", "a", "+inf"],
        &["RPUSH", "KEY:l", "a", "b", "c"],
        &["LRANGE", "KEY:l", "0", "-1"],
        &["LPOS", "KEY:l", "b"],
        &["SADD", "KEY:set", "x", "y"],
        &["SISMEMBER", "KEY:set", "y"],
        &["SCARD", "KEY:set"],
        &["ZADD", "KEY:z", "1", "a", "2", "b"],
        &["ZRANGE", "KEY:z", "0", "-1", "WITHSCORES"],
        &["ZINCRBY", "KEY:z", "1.5", "a"],
        &["XADD", "KEY:x", "1-1", "f", "v"],
        &["XRANGE", "KEY:x", "-", "+"],
        &["XLEN", "KEY:x"],
        &["GEOADD", "KEY:g", "13.361389", "38.115556", "Palermo"],
        &["GEOPOS", "KEY:g", "Palermo"],
        &["PFADD", "KEY:hll", "a", "b", "c"],
        &["PFCOUNT", "KEY:hll"],
        &["SETBIT", "KEY:bits", "7", "1"],
        &["BITCOUNT", "KEY:bits"],
        &["BITOP", "NOT", "KEY:dest", "KEY:bits"],
        &["EXPIRE", "KEY:s", "100"],
        &["TTL", "KEY:s"],
        &["TYPE", "KEY:z"],
        &["OBJECT", "ENCODING", "KEY:l"],
        &["LPUSH", "KEY:s", "wrongtype"],
        &["GET", "KEY:h"],
        &["SINTERSTORE", "KEY:dst", "KEY:set", "KEY:set"],
    ];
    for cmd in script {
        same_as_owner(&mut proxy, &mut direct, cmd);
    }
}

#[test]
fn scripts_are_routed_by_their_keys_and_loaded_everywhere() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    let set = "return redis.call('SET', KEYS[1], ARGV[1])";
    assert_eq!(text(&c.call(&["EVAL", set, "1", "script:a", "1"])), "OK");
    assert_eq!(text(&c.call(&["GET", "script:a"])), "1");
    let cross = text(&c.call(&["EVAL", set, "2", "script:a", "script:b", "1"]));
    assert_eq!(
        cross,
        "-CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(text(&c.call(&["EVAL", "return 7", "0"])), ":7");
    let sha = text(&c.call(&["SCRIPT", "LOAD", set]));
    assert_eq!(sha.len(), 40, "{sha}");
    // Loaded on every master: EVALSHA works whatever slot the key lives in.
    for key in ["{a}k", "{b}k", "{c}k", "{d}k", "{e}k"] {
        assert_eq!(
            text(&c.call(&["EVALSHA", &sha, "1", key, "v"])),
            "OK",
            "{key}"
        );
    }
    let exists = c.call(&[
        "SCRIPT",
        "EXISTS",
        &sha,
        "0000000000000000000000000000000000000000",
    ]);
    assert_eq!(
        exists,
        Value::Array(vec![Value::Integer(1), Value::Integer(0)])
    );
    for master in h.cluster.masters() {
        let mut direct = Client::connect(master);
        let on_node = direct.call(&["SCRIPT", "EXISTS", &sha]);
        assert_eq!(on_node, Value::Array(vec![Value::Integer(1)]), "{master}");
    }
}

#[test]
fn pubsub_introspection_and_admin_commands() {
    let h = Harness::start(3, 0);
    let mut sub = h.client();
    let mut c = h.client();
    sub.call(&["SUBSCRIBE", "intro"]);
    // The confirmation is the node's; still, wait (asking the masters directly) until the
    // subscription is in force on one of them before asking the proxy.
    common::wait_until(std::time::Duration::from_secs(10), || {
        let on_masters = h.cluster.masters().into_iter().map(|node| {
            let got = Client::connect(node).call(&["PUBSUB", "NUMSUB", "intro"]);
            got.as_array().and_then(|a| a.get(1)?.as_int()).unwrap_or(0)
        });
        on_masters.sum::<i64>() == 1
    });
    let numsub = c.call(&["PUBSUB", "NUMSUB", "intro", "nobody"]);
    let numsub: Vec<String> = numsub.as_array().unwrap().iter().map(text).collect();
    assert_eq!(numsub, vec!["intro", ":1", "nobody", ":0"]);
    let channels: Vec<String> = c
        .call(&["PUBSUB", "CHANNELS"])
        .as_array()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert_eq!(channels, vec!["intro".to_string()]);

    let refused = text(&c.call(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]));
    assert!(
        refused.starts_with("-ERR slotgate: 'config|set' is an administrative command"),
        "{refused}"
    );
    let admin = start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut a = Client::connect(admin.local_addr());
    assert_eq!(
        text(&a.call(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])),
        "OK"
    );
    let got = a.call(&["CONFIG", "GET", "maxmemory-policy"]);
    assert_eq!(
        got.as_array().unwrap().iter().map(text).collect::<Vec<_>>(),
        vec!["maxmemory-policy", "noeviction"]
    );
    admin.shutdown();
}
