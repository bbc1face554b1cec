//! CLIENT TRACKING through the proxy on a real 3-master cluster: BCAST mode for RESP3
//! clients gets the invalidations of every master, for its prefixes only, and none after
//! OFF; the default mode gets the invalidations of the keys it read and no others, OPTIN
//! and OPTOUT as CLIENT CACHING says; REDIRECT hands them to another client (how RESP2
//! tracks), on any worker; option errors are Redis's own (overlapping prefixes included);
//! every tracking client of a worker shares that worker's connections to the masters.

mod common;

use std::collections::BTreeSet;

use common::{text, Client, Harness};
use resp::Value;

fn resp3(h: &Harness) -> Client {
    let mut c = h.client();
    assert!(matches!(c.call(&["HELLO", "3"]), Value::Map(_)));
    c
}

/// The keys of an `invalidate` push (None for any other frame).
fn invalidated(v: &Value) -> Option<Vec<String>> {
    let Value::Push(items) = v else {
        return None;
    };
    if items.first().map(text).as_deref() != Some("invalidate") {
        return None;
    }
    Some(match items.get(1) {
        Some(Value::Array(keys)) => keys.iter().map(text).collect(),
        _ => vec!["(flush)".into()],
    })
}

#[test]
fn bcast_tracking_gets_every_masters_invalidations_for_its_prefixes() {
    let h = Harness::start(3, 0);
    let mut c = resp3(&h);
    assert_eq!(
        text(&c.call(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "tr:"])),
        "OK"
    );
    let keys: Vec<String> = (0..30).map(|i| format!("tr:{i}")).collect();
    let owners: BTreeSet<_> = keys
        .iter()
        .map(|k| h.cluster.owner_of(k.as_bytes()).unwrap())
        .collect();
    assert_eq!(owners.len(), 3, "keys on every master");
    let mut writer = h.client();
    assert_eq!(text(&writer.call(&["SET", "other", "v"])), "OK");
    for k in &keys {
        assert_eq!(text(&writer.call(&["SET", k, "v"])), "OK");
    }
    let mut seen = BTreeSet::new();
    while seen.len() < keys.len() {
        let frame = c.read().expect("an invalidation");
        let got = invalidated(&frame).unwrap_or_else(|| panic!("not an invalidation: {frame:?}"));
        assert!(got.iter().all(|k| k.starts_with("tr:")), "{got:?}");
        seen.extend(got);
    }
    // OFF: the connections are gone, later writes invalidate nothing for this client.
    assert_eq!(text(&c.call(&["CLIENT", "TRACKING", "OFF"])), "OK");
    for k in &keys {
        assert_eq!(text(&writer.call(&["SET", k, "w"])), "OK");
    }
    assert_eq!(text(&c.call(&["GET", "tr:1"])), "w");
    assert_eq!(text(&c.call(&["PING"])), "PONG");
}

#[test]
fn tracking_options_are_checked_as_redis_checks_them() {
    let h = Harness::start(3, 0);
    let mut c = resp3(&h);
    // Redis's own errors, in its order (checked against a node below).
    let mut node = Client::connect(h.cluster.masters()[0]);
    assert!(matches!(node.call(&["HELLO", "3"]), Value::Map(_)));
    for args in [
        &["CLIENT", "CACHING", "yes"][..],
        &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"],
        &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"],
        &["CLIENT", "TRACKING", "ON", "OPTIN"],
        &["CLIENT", "CACHING", "no"],
        &["CLIENT", "CACHING", "maybe"],
        &["CLIENT", "TRACKING", "ON", "OPTOUT"],
        &["CLIENT", "TRACKING", "ON", "BCAST"],
        &["CLIENT", "TRACKING", "ON", "NOLOOP"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "TRACKING", "OFF"],
        &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"],
        &["CLIENT", "TRACKING", "OFF"],
        &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"],
        &["CLIENT", "TRACKING", "ON", "REDIRECT", "x"],
    ] {
        assert_eq!(text(&c.call(args)), text(&node.call(args)), "{args:?}");
    }
    // Each side's own id exists there.
    let twice = |c: &mut Client| {
        let id = text(&c.call(&["CLIENT", "ID"]));
        let id = id.trim_start_matches(':');
        text(&c.call(&["CLIENT", "TRACKING", "ON", "REDIRECT", id, "REDIRECT", id]))
    };
    assert_eq!(twice(&mut c), twice(&mut node));
    assert_eq!(
        text(&c.call(&["CLIENT", "TRACKING", "ON", "PREFIX", "a"])),
        "-ERR PREFIX option requires BCAST mode to be enabled"
    );
    assert_eq!(
        text(&c.call(&["CLIENT", "TRACKING", "maybe"])),
        "-ERR syntax error"
    );
    // Overlapping prefixes, as a node refuses them: within one call, and with a prefix
    // already given (then tracking stays as it was).
    let overlap = [
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab", "PREFIX", "a",
    ];
    let direct = text(&node.call(&overlap));
    assert!(direct.starts_with("-ERR Prefix"), "{direct}");
    assert_eq!(text(&c.call(&overlap)), direct);
    for args in [
        // A PREFIX "" given is checked like any other (BCAST without PREFIX is not).
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "", "PREFIX", "foo",
        ][..],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab"],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a"],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "abc"],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b"],
        &["CLIENT", "TRACKING", "ON", "BCAST"],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "c"],
        &["CLIENT", "TRACKING", "OFF"],
    ] {
        assert_eq!(text(&c.call(args)), text(&node.call(args)), "{args:?}");
    }
    assert_eq!(text(&c.call(&["PING"])), "PONG");
}

/// A master dies: the client is told to flush its cache (its invalidations may be lost),
/// and once its replica took over, that master's writes are invalidated again.
#[test]
fn a_lost_master_flushes_the_cache_and_its_successor_is_tracked() {
    let mut h = Harness::start(3, 1);
    let mut c = resp3(&h);
    assert_eq!(text(&c.call(&["CLIENT", "TRACKING", "ON", "BCAST"])), "OK");
    let key = "{fo}k";
    let master = h.cluster.owner_of(key.as_bytes()).unwrap();
    h.cluster.kill(master).unwrap();
    c.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .unwrap();
    let ceiling = std::time::Duration::from_secs(60);
    common::wait_until(ceiling, || {
        c.try_read()
            .is_some_and(|f| invalidated(&f) == Some(vec!["(flush)".into()]))
    });
    let mut writer = h.client();
    common::wait_until(ceiling, || {
        if text(&writer.call(&["SET", key, "v"])) != "OK" {
            return false;
        }
        // Flushes may come first (the new master's connection, once tracking).
        while let Some(frame) = c.try_read() {
            if invalidated(&frame) == Some(vec![key.to_string()]) {
                return true;
            }
        }
        false
    });
}

/// Invalidations read until none comes for `quiet`: key → how many times.
fn drain_invalidations(c: &mut Client, want: usize) -> std::collections::BTreeMap<String, usize> {
    let mut seen = std::collections::BTreeMap::new();
    c.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    while seen.values().sum::<usize>() < want {
        let frame = c.try_read().expect("an invalidation within 20 s");
        let got = invalidated(&frame).unwrap_or_else(|| panic!("not an invalidation: {frame:?}"));
        got.into_iter()
            .for_each(|k| *seen.entry(k).or_default() += 1);
    }
    // Anything more (a key not read, or one invalidated twice) would come by now.
    c.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .unwrap();
    while let Some(frame) = c.try_read() {
        let got = invalidated(&frame).unwrap_or_else(|| panic!("not an invalidation: {frame:?}"));
        got.into_iter()
            .for_each(|k| *seen.entry(k).or_default() += 1);
    }
    seen
}

/// The default mode: the keys the client read, on every master, are invalidated once each
/// when written; keys it did not read are not, and a key invalidated is forgotten until
/// read again. An invalidation never overtakes the reply of a read still on its way.
#[test]
fn default_mode_invalidates_the_keys_read_once() {
    let h = Harness::start(3, 0);
    let mut c = resp3(&h);
    assert_eq!(text(&c.call(&["CLIENT", "TRACKING", "ON"])), "OK");
    let keys: Vec<String> = (0..30).map(|i| format!("dm:{i}")).collect();
    let owners: BTreeSet<_> = keys[..20]
        .iter()
        .map(|k| h.cluster.owner_of(k.as_bytes()).unwrap())
        .collect();
    assert_eq!(owners.len(), 3, "keys read on every master");
    for k in &keys[..20] {
        assert_eq!(c.call(&["GET", k]), Value::Null);
    }
    let mut writer = h.client();
    for _ in 0..2 {
        for k in &keys {
            assert_eq!(text(&writer.call(&["SET", k, "v"])), "OK");
        }
    }
    let seen = drain_invalidations(&mut c, 20);
    let want: std::collections::BTreeMap<String, usize> =
        keys[..20].iter().map(|k| (k.clone(), 1)).collect();
    assert_eq!(seen, want);
    // Read again: tracked again.
    assert_eq!(text(&c.call(&["GET", "dm:3"])), "v");
    assert_eq!(writer.call(&["DEL", "dm:3"]), Value::Integer(1));
    assert_eq!(
        drain_invalidations(&mut c, 1).keys().collect::<Vec<_>>(),
        ["dm:3"]
    );
}

/// OPTIN: only the read right after CLIENT CACHING yes is tracked. OPTOUT: every read but
/// the one right after CLIENT CACHING no.
#[test]
fn optin_and_optout_track_what_client_caching_says() {
    let h = Harness::start(3, 0);
    let mut writer = h.client();
    for (mode, caching, want) in [("OPTIN", "yes", "oi:b"), ("OPTOUT", "no", "oi:a")] {
        let mut c = resp3(&h);
        assert_eq!(text(&c.call(&["CLIENT", "TRACKING", "ON", mode])), "OK");
        assert_eq!(c.call(&["GET", "oi:a"]), Value::Null);
        assert_eq!(text(&c.call(&["CLIENT", "CACHING", caching])), "OK");
        assert_eq!(c.call(&["GET", "oi:b"]), Value::Null);
        for k in ["oi:a", "oi:b"] {
            assert_eq!(text(&writer.call(&["SET", k, "v"])), "OK");
            assert_eq!(writer.call(&["DEL", k]), Value::Integer(1));
        }
        let seen = drain_invalidations(&mut c, 1);
        assert_eq!(
            seen.into_iter().collect::<Vec<_>>(),
            [(want.to_string(), 1)],
            "{mode}"
        );
    }
}

/// REDIRECT: a RESP2 client's invalidations reach the client it names, subscribed to
/// `__redis__:invalidate`, as `message` frames (whichever worker serves it); in BCAST mode
/// too. Once the target left, a RESP3 tracking client gets `tracking-redir-broken`.
#[test]
fn redirect_hands_invalidations_to_a_subscribed_client() {
    let h = Harness::start(3, 0);
    let mut target = h.client();
    let id = text(&target.call(&["CLIENT", "ID"]));
    let id = id.trim_start_matches(':').to_string();
    let confirmed = target.call(&["SUBSCRIBE", "__redis__:invalidate"]);
    assert_eq!(text(&confirmed.as_array().unwrap()[0]), "subscribe");
    let mut writer = h.client();
    for (mode, key) in [(None, "rd:a"), (Some("BCAST"), "rd:b")] {
        let mut c = h.client(); // RESP2
        let mut on = vec!["CLIENT", "TRACKING", "ON", "REDIRECT", &id];
        on.extend(mode);
        assert_eq!(text(&c.call(&on)), "OK", "{mode:?}");
        assert_eq!(c.call(&["GET", key]), Value::Null);
        assert_eq!(text(&writer.call(&["SET", key, "v"])), "OK");
        let got = target.read().expect("a message");
        let items = got.as_array().unwrap_or_else(|| panic!("{got:?}"));
        assert_eq!(text(&items[0]), "message");
        assert_eq!(text(&items[1]), "__redis__:invalidate");
        let keys: Vec<String> = items[2].as_array().unwrap().iter().map(text).collect();
        assert_eq!(keys, [key], "{mode:?}");
        assert_eq!(text(&c.call(&["CLIENT", "TRACKING", "OFF"])), "OK");
    }
    let mut c = resp3(&h);
    assert_eq!(
        text(&c.call(&["CLIENT", "TRACKING", "ON", "REDIRECT", &id])),
        "OK"
    );
    drop(target);
    // The target's close reaches the proxy soon after; until then its mail is dropped.
    let broken = |f: &Value| matches!(f, Value::Push(p) if text(&p[0]) == "tracking-redir-broken");
    common::wait_until(std::time::Duration::from_secs(20), || {
        c.send(&[b"GET", b"rd:c"]);
        let mut seen = false;
        loop {
            let frame = c.read().expect("a reply");
            seen |= broken(&frame);
            if !matches!(frame, Value::Push(_)) {
                break;
            }
        }
        assert_eq!(text(&writer.call(&["SET", "rd:c", "v"])), "OK");
        c.stream
            .set_read_timeout(Some(std::time::Duration::from_millis(200)))
            .unwrap();
        while let Some(frame) = c.try_read() {
            seen |= broken(&frame);
        }
        c.stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        seen
    });
}

/// CLIENT TRACKING ON again in BCAST mode adds prefixes, as in Redis: both are invalidated.
#[test]
fn bcast_prefixes_add_up() {
    let h = Harness::start(3, 0);
    let mut c = resp3(&h);
    for p in ["pa:", "pb:"] {
        let on = ["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", p];
        assert_eq!(text(&c.call(&on)), "OK");
    }
    let mut writer = h.client();
    for k in ["pa:1", "pb:1"] {
        assert_eq!(text(&writer.call(&["SET", k, "v"])), "OK");
    }
    let seen = drain_invalidations(&mut c, 2);
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["pa:1", "pb:1"]);
}

/// Review S11: a client with tracking on costs the nodes no connection of its own. Every
/// tracking client of a worker listens to that worker's one connection per master, so
/// 40 of them (default mode and BCAST) leave each master with at most one tracking
/// connection per worker, and each still gets exactly its own invalidations.
#[test]
fn tracking_clients_share_the_workers_connections_to_the_masters() {
    let h = Harness::start(3, 0);
    let mut clients: Vec<Client> = (0..40)
        .map(|i| {
            let mut c = resp3(&h);
            let prefix = format!("s11:{i}:");
            let on: Vec<&str> = match i % 2 {
                0 => vec!["CLIENT", "TRACKING", "ON"],
                _ => vec!["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", &prefix],
            };
            assert_eq!(text(&c.call(&on)), "OK");
            c
        })
        .collect();
    for master in h.cluster.masters() {
        let mut node = Client::connect(master);
        let list = text(&node.call(&["CLIENT", "LIST"]));
        let tracking = list
            .lines()
            .filter(|l| {
                l.split(' ')
                    .any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('t')))
            })
            .count();
        assert!(
            tracking <= 2,
            "{master}: {tracking} tracking connections for 2 workers"
        );
    }
    // Client 0 (default mode) read s11:a; client 1 (BCAST) has prefix s11:1:.
    assert!(matches!(clients[0].call(&["GET", "s11:a"]), Value::Null));
    let mut writer = h.client();
    for k in ["s11:a", "s11:1:x", "s11:3:x"] {
        assert_eq!(text(&writer.call(&["SET", k, "v"])), "OK");
    }
    let zero = drain_invalidations(&mut clients[0], 1);
    assert_eq!(zero.keys().collect::<Vec<_>>(), ["s11:a"]);
    let one = drain_invalidations(&mut clients[1], 1);
    assert_eq!(one.keys().collect::<Vec<_>>(), ["s11:1:x"]);
    // Nothing else came: the next reply is PING's.
    for c in clients.iter_mut().take(2) {
        assert_eq!(text(&c.call(&["PING"])), "PONG");
    }
}

/// Three keys on each master, one for the client's own writes, one for another client's
/// and one for a marker the other client writes last (a hash tag per master).
fn keys_per_master(h: &Harness, prefix: &str) -> Vec<[String; 3]> {
    let mut tags: Vec<(std::net::SocketAddr, String)> = Vec::new();
    for i in 0.. {
        let tag = format!("{{{prefix}{i}}}");
        let owner = h.cluster.owner_of(tag.as_bytes()).unwrap();
        if !tags.iter().any(|(o, _)| *o == owner) {
            tags.push((owner, tag));
        }
        if tags.len() == 3 {
            break;
        }
    }
    tags.into_iter()
        .map(|(_, t)| {
            [
                format!("{prefix}own{t}"),
                format!("{prefix}other{t}"),
                format!("{prefix}mark{t}"),
            ]
        })
        .collect()
}

/// `args`' reply; the invalidations that come before it are added to `seen`.
fn call_noting(c: &mut Client, args: &[&str], seen: &mut BTreeSet<String>) -> Value {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&args);
    loop {
        let frame = c.read().expect("a reply");
        match invalidated(&frame) {
            Some(keys) => seen.extend(keys),
            None => return frame,
        }
    }
}

/// Invalidations read until every marker came: the keys named (each master's own
/// invalidations, had there been any, would have come before its marker's).
fn read_until_marks(c: &mut Client, marks: &[&str], seen: &mut BTreeSet<String>) {
    c.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    while !marks.iter().all(|m| seen.contains(*m)) {
        let frame = c.try_read().expect("an invalidation within 20 s");
        let got = invalidated(&frame).unwrap_or_else(|| panic!("not an invalidation: {frame:?}"));
        seen.extend(got);
    }
}

/// NOLOOP, as Redis: the client hears of every other client's writes, on every master, and
/// never of its own, whether a plain command, a transaction's or a script's (the node
/// tells, on connections of the client's own); TRACKINGINFO says so; OFF closes them.
#[test]
fn noloop_leaves_out_the_clients_own_writes() {
    let h = Harness::start(3, 0);
    let mut writer = h.client();
    let count_clients = |h: &Harness| -> usize {
        h.cluster
            .masters()
            .iter()
            .map(|m| {
                let mut node = Client::connect(*m);
                text(&node.call(&["CLIENT", "LIST"])).lines().count()
            })
            .sum()
    };
    let before = count_clients(&h);

    // BCAST: every key under the prefix, but the client's own writes.
    let mut c = resp3(&h);
    let on = [
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "nb:", "NOLOOP",
    ];
    assert_eq!(text(&c.call(&on)), "OK");
    let info = c.call(&["CLIENT", "TRACKINGINFO"]);
    assert!(format!("{info:?}").contains("noloop"), "{info:?}");
    let sets = keys_per_master(&h, "nb:");
    let mut seen = BTreeSet::new();
    for [own, other, mark] in &sets {
        assert_eq!(text(&writer.call(&["SET", other, "1"])), "OK");
        let mut call = |args: &[&str]| text(&call_noting(&mut c, args, &mut seen));
        assert_eq!(call(&["SET", own, "1"]), "OK");
        assert_eq!(call(&["MULTI"]), "OK");
        assert_eq!(call(&["INCR", own]), "QUEUED");
        assert!(call(&["EXEC"]).starts_with("Array"));
        assert_eq!(text(&writer.call(&["SET", mark, "1"])), "OK");
    }
    let marks: Vec<&str> = sets.iter().map(|s| s[2].as_str()).collect();
    read_until_marks(&mut c, &marks, &mut seen);
    for [own, other, _] in &sets {
        assert!(seen.contains(other) && !seen.contains(own), "{seen:?}");
    }
    assert_eq!(text(&c.call(&["CLIENT", "TRACKING", "OFF"])), "OK");

    // The default mode: the keys it read, but not when it wrote them itself, in a script
    // too.
    let mut d = resp3(&h);
    assert_eq!(text(&d.call(&["CLIENT", "TRACKING", "ON", "NOLOOP"])), "OK");
    let sets = keys_per_master(&h, "nd:");
    let mut seen = BTreeSet::new();
    for [own, other, mark] in &sets {
        let mut call = |args: &[&str]| text(&call_noting(&mut d, args, &mut seen));
        for k in [own, other, mark] {
            assert_eq!(call(&["GET", k]), "(nil)");
        }
        assert_eq!(call(&["SET", own, "1"]), "OK");
        let script = "return redis.call('set', KEYS[1], '2')";
        assert_eq!(call(&["EVAL", script, "1", own]), "OK");
        assert_eq!(text(&writer.call(&["SET", other, "1"])), "OK");
        assert_eq!(text(&writer.call(&["SET", mark, "1"])), "OK");
    }
    let marks: Vec<&str> = sets.iter().map(|s| s[2].as_str()).collect();
    read_until_marks(&mut d, &marks, &mut seen);
    for [own, other, _] in &sets {
        assert!(seen.contains(other) && !seen.contains(own), "{seen:?}");
    }
    assert_eq!(
        text(&call_noting(&mut d, &["GET", &sets[0][0]], &mut seen)),
        "2"
    );

    // OFF and the clients' end: their connections to the nodes close.
    assert_eq!(text(&d.call(&["CLIENT", "TRACKING", "OFF"])), "OK");
    assert_eq!(d.call(&["CLIENT", "GETREDIR"]), Value::Integer(-1));
    drop((c, d));
    let ceiling = std::time::Duration::from_secs(20);
    common::wait_until(ceiling, || count_clients(&h) <= before + 3);
}

/// The default mode, as Redis tracks it: the nodes track what the client read on the
/// worker's tracked connections, so what a script or a transaction read is told as a node
/// tells its own client (Redis 7.0 tracks every key a script declares, later versions only
/// those its code read), and a transaction's own writes before its read are not told.
#[test]
fn the_nodes_track_what_scripts_and_transactions_read() {
    let h = Harness::start(3, 0);
    let owner = h.cluster.owner_of(b"{t}").unwrap();
    let told = |c: &mut Client, p: &str| -> BTreeSet<String> {
        let mut writer = Client::connect(owner);
        let k = |n: &str| format!("{p}{n}{{t}}");
        let (a, b, cc) = (k("a"), k("b"), k("c"));
        let mut seen = BTreeSet::new();
        let mut call =
            |args: &[&str], seen: &mut BTreeSet<String>| text(&call_noting(c, args, seen));
        assert_eq!(call(&["CLIENT", "TRACKING", "ON"], &mut seen), "OK");
        // A script that reads nothing, then one that reads one of its keys.
        let set = "redis.call('set', KEYS[1], 'bar')";
        assert_eq!(call(&["EVAL", set, "2", &a, &b], &mut seen), "(nil)");
        assert_eq!(text(&writer.call(&["MSET", &a, "1", &b, "1"])), "OK");
        let get = "redis.call('get', KEYS[2])";
        assert_eq!(call(&["EVAL", get, "2", &a, &b], &mut seen), "(nil)");
        // A transaction that writes a key and then reads it: tracked after its own write.
        assert_eq!(call(&["MULTI"], &mut seen), "OK");
        assert_eq!(call(&["SET", &cc, "1"], &mut seen), "QUEUED");
        assert_eq!(call(&["GET", &cc], &mut seen), "QUEUED");
        assert!(call(&["EXEC"], &mut seen).starts_with("Array"));
        assert_eq!(call(&["PING"], &mut seen), "PONG");
        for key in [&a, &b, &cc] {
            assert_eq!(text(&writer.call(&["SET", key, "2"])), "OK");
        }
        read_until_marks(c, &[&b, &cc], &mut seen);
        // Anything more would come before this PING's reply.
        assert_eq!(text(&call_noting(c, &["PING"], &mut seen)), "PONG");
        seen.iter()
            .map(|k| k.trim_start_matches(p).to_string())
            .collect()
    };
    let mut direct = Client::connect(owner);
    assert!(matches!(direct.call(&["HELLO", "3"]), Value::Map(_)));
    let want = told(&mut direct, "sd:");
    let got = told(&mut resp3(&h), "sp:");
    assert_eq!(got, want);
}

/// NOLOOP connections are bounded: each NOLOOP client costs every master two connections
/// and a client chooses how many it opens, so past 128 per worker a NOLOOP client is
/// tracked on the shared feed and hears of its own writes too (safe); a place freed is
/// taken by the next one.
#[test]
fn noloop_clients_with_connections_of_their_own_are_bounded_per_worker() {
    let cluster = devcluster::Cluster::start(&devcluster::Options {
        masters: 1,
        replicas: 0,
        dir: common::tempdir("noloop-bound"),
        ..Default::default()
    })
    .expect("cluster starts");
    let proxy = common::start_proxy(&cluster, |c| c.proxy.threads = 1);
    let on = [
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "nl:", "NOLOOP",
    ];
    let start = || {
        let mut c = Client::connect(proxy.local_addr());
        assert!(matches!(c.call(&["HELLO", "3"]), Value::Map(_)));
        assert_eq!(text(&c.call(&on)), "OK");
        c
    };
    // Whether the client hears of its own write (the node would tell it before its marker).
    let hears_itself = |c: &mut Client, n: usize| {
        let (own, mark) = (format!("nl:own{n}"), format!("nl:mark{n}"));
        let mut seen = BTreeSet::new();
        assert_eq!(text(&call_noting(c, &["SET", &own, "1"], &mut seen)), "OK");
        let mut other = Client::connect(proxy.local_addr());
        assert_eq!(text(&other.call(&["SET", &mark, "1"])), "OK");
        read_until_marks(c, &[&mark], &mut seen);
        seen.contains(&own)
    };
    let mut clients: Vec<Client> = (0..128).map(|_| start()).collect();
    assert!(!hears_itself(&mut clients[0], 0));
    let mut extra = start();
    assert!(
        hears_itself(&mut extra, 1),
        "past the bound: the shared feed"
    );
    let info = format!("{:?}", extra.call(&["CLIENT", "TRACKINGINFO"]));
    assert!(info.contains("noloop"), "NOLOOP still asked for: {info}");
    drop(clients.pop());
    // The freed place goes to the next client once the proxy saw the close.
    let ceiling = std::time::Duration::from_secs(20);
    let mut n = 2;
    common::wait_until(ceiling, || {
        let mut next = start();
        n += 1;
        !hears_itself(&mut next, n)
    });
    proxy.shutdown();
}

/// A worker's receiver lost (the node closed it): every connection naming it closes, the
/// client's own ones (a transaction's) too, and the client is flushed; the next
/// transaction's read is tracked again, through the receiver that replaces it.
#[test]
fn a_lost_receiver_closes_every_connection_that_names_it() {
    let h = Harness::start(3, 0);
    let mut c = resp3(&h);
    let mut writer = h.client();
    let owner = h.cluster.owner_of(b"lr:k").unwrap();
    let mut node = Client::connect(owner);
    let mut seen = BTreeSet::new();
    assert_eq!(text(&c.call(&["CLIENT", "TRACKING", "ON"])), "OK");
    let read_in_transaction = |c: &mut Client, seen: &mut BTreeSet<String>| {
        let mut call = |args: &[&str]| text(&call_noting(c, args, seen));
        if call(&["MULTI"]) != "OK" {
            return false;
        }
        call(&["GET", "lr:k"]);
        call(&["EXEC"]).starts_with("Array")
    };
    assert!(read_in_transaction(&mut c, &mut seen));
    // The receivers are the connections the others name in `redir=`.
    let list = text(&node.call(&["CLIENT", "LIST"]));
    let redirs: BTreeSet<String> = list
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("redir="))
        .filter(|r| *r != "-1")
        .map(str::to_string)
        .collect();
    assert!(!redirs.is_empty(), "{list}");
    for id in &redirs {
        node.call(&["CLIENT", "KILL", "ID", id]);
    }
    // The flush comes; then, once a new receiver answers, a transaction's read is tracked.
    let ceiling = std::time::Duration::from_secs(20);
    common::wait_until(ceiling, || {
        call_noting(&mut c, &["PING"], &mut seen);
        seen.contains("(flush)")
    });
    common::wait_until(ceiling, || read_in_transaction(&mut c, &mut seen));
    seen.clear();
    assert_eq!(text(&writer.call(&["SET", "lr:k", "1"])), "OK");
    read_until_marks(&mut c, &["lr:k"], &mut seen);
}

/// Invalidations come around replies where a node puts them for its own client: a key the
/// node evicts to make room for the client's command is told before that command's reply,
/// a key the command itself changes after it (`session/tracking/owed.rs`). Here the reply
/// and the invalidation travel the same connection (`IN_BAND`), so the order is the node's
/// every time. INFO counts the BCAST prefixes as a node counts them.
#[test]
fn invalidations_come_before_or_after_a_reply_as_from_a_node() {
    let h = Harness::start(1, 0);
    let master = h.cluster.masters()[0];
    let order = |c: &mut Client, p: &str| -> Vec<String> {
        let mut admin = Client::connect(master);
        let (hash, volatile, big) = (format!("{p}h"), format!("{p}v"), format!("{p}big"));
        let mut seen = Vec::new();
        let mut two = |c: &mut Client, args: &[&str]| {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            c.send(&args);
            for _ in 0..2 {
                let frame = c.read().expect("a frame");
                seen.push(match invalidated(&frame) {
                    Some(keys) => format!("invalidate {}", keys.join(" ")),
                    None => text(&frame),
                });
            }
        };
        assert_eq!(text(&c.call(&["CLIENT", "TRACKING", "ON"])), "OK");
        assert_eq!(text(&c.call(&["HSET", &hash, "f", "1"])), ":1");
        assert_eq!(text(&c.call(&["HGET", &hash, "f"])), "1");
        two(c, &["HDEL", &hash, "f"]);
        let info = text(&admin.call(&["INFO", "memory"]));
        let field = |name: &str| -> u64 {
            let line = info.lines().find(|l| l.starts_with(&format!("{name}:")));
            line.and_then(|l| l.split(':').nth(1)?.trim().parse().ok())
                .unwrap_or_else(|| panic!("{name} in {info}"))
        };
        let limit = field("used_memory") - field("mem_not_counted_for_evict") + 100 * 1024;
        let limit = limit.to_string();
        assert_eq!(
            text(&admin.call(&["CONFIG", "SET", "maxmemory", &limit])),
            "OK"
        );
        let policy = ["CONFIG", "SET", "maxmemory-policy", "volatile-random"];
        assert_eq!(text(&admin.call(&policy)), "OK");
        assert_eq!(text(&c.call(&["SETEX", &volatile, "10000", "x"])), "OK");
        assert_eq!(text(&c.call(&["GET", &volatile])), "x");
        assert_eq!(text(&c.call(&["SETBIT", &big, "1600000", "0"])), ":0");
        two(c, &["GETBIT", &big, "0"]);
        assert_eq!(
            text(&admin.call(&["CONFIG", "SET", "maxmemory", "0"])),
            "OK"
        );
        let policy = ["CONFIG", "SET", "maxmemory-policy", "noeviction"];
        assert_eq!(text(&admin.call(&policy)), "OK");
        assert_eq!(text(&c.call(&["CLIENT", "TRACKING", "OFF"])), "OK");
        assert_eq!(text(&c.call(&["DEL", &big])), ":1");
        seen.iter().map(|s| s.replace(p, "")).collect()
    };
    let mut direct = Client::connect(master);
    assert!(matches!(direct.call(&["HELLO", "3"]), Value::Map(_)));
    let want = order(&mut direct, "od:");
    assert_eq!(want, [":1", "invalidate h", "invalidate v", ":0"]);
    for round in 0..5 {
        assert_eq!(
            order(&mut resp3(&h), &format!("op{round}:")),
            want,
            "round {round}"
        );
    }
    // Distinct prefixes, whichever client holds them; the empty prefix given counts as any.
    let prefixes = |c: &mut Client| {
        let info = text(&c.call(&["INFO", "stats"]));
        let line = info
            .lines()
            .find(|l| l.starts_with("tracking_total_prefixes:"));
        line.map(|l| l.trim().to_string())
            .expect("tracking_total_prefixes")
    };
    let (mut a, mut b) = (resp3(&h), resp3(&h));
    for c in [&mut a, &mut b] {
        let args = [
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "pa:", "PREFIX", "pb:",
        ];
        assert_eq!(text(&c.call(&args)), "OK");
    }
    assert_eq!(prefixes(&mut a), "tracking_total_prefixes:2");
    drop(b);
    assert_eq!(text(&a.call(&["CLIENT", "TRACKING", "OFF"])), "OK");
    let mut c = resp3(&h);
    common::wait_until(std::time::Duration::from_secs(10), || {
        prefixes(&mut c) == "tracking_total_prefixes:0"
    });
}
