//! CLIENT TRACKING through the proxy on a real 3-master cluster: BCAST mode for RESP3
//! clients gets the invalidations of every master, for its prefixes only, and none after
//! OFF; the modes the proxy cannot serve are refused with a clear error, and the nodes'
//! own errors (overlapping prefixes) reach the client.

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
fn tracking_modes_the_proxy_cannot_serve_are_refused() {
    let h = Harness::start(3, 0);
    let mut plain = h.client();
    let refused = text(&plain.call(&["CLIENT", "TRACKING", "ON", "BCAST"]));
    assert!(
        refused.starts_with("-ERR slotgate: CLIENT TRACKING supports only"),
        "{refused}"
    );
    let mut c = resp3(&h);
    for args in [
        &["CLIENT", "TRACKING", "ON"][..],
        &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"],
        &["CLIENT", "TRACKING", "ON", "OPTIN"],
        &["CLIENT", "TRACKING", "ON", "REDIRECT", "5"],
    ] {
        let refused = text(&c.call(args));
        assert!(
            refused.starts_with("-ERR slotgate: CLIENT TRACKING"),
            "{args:?}: {refused}"
        );
    }
    assert_eq!(
        text(&c.call(&["CLIENT", "TRACKING", "ON", "PREFIX", "a"])),
        "-ERR PREFIX option requires BCAST mode to be enabled"
    );
    assert_eq!(
        text(&c.call(&["CLIENT", "TRACKING", "maybe"])),
        "-ERR syntax error"
    );
    // The nodes' own refusal, as one of them gives it directly.
    let overlap = [
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "ab",
    ];
    let mut node = Client::connect(h.cluster.masters()[0]);
    assert!(matches!(node.call(&["HELLO", "3"]), Value::Map(_)));
    let direct = text(&node.call(&overlap));
    assert!(direct.starts_with("-ERR Prefix"), "{direct}");
    assert_eq!(text(&c.call(&overlap)), direct);
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
