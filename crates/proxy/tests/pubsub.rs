//! Pub/sub through the proxy on a real 3-master cluster: channels, patterns and shard
//! channels, for RESP2 and RESP3 clients.

mod common;

use std::time::Duration;

use common::{text, Harness};
use resp::Value;

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Push(items) => items.iter().map(text).collect(),
        other => panic!("expected an array or push, got {other:?}"),
    }
}

fn s(items: &[&str]) -> Vec<String> {
    items.iter().map(|x| x.to_string()).collect()
}

#[test]
fn resp2_subscribers_get_messages_and_redis_subscribed_mode_rules() {
    let h = Harness::start(3, 0);
    let mut sub = h.client();
    let mut publisher = h.client();
    assert_eq!(
        strings(&sub.call(&["SUBSCRIBE", "news", "sport"])),
        s(&["subscribe", "news", ":1"])
    );
    assert_eq!(
        strings(&sub.read().unwrap()),
        s(&["subscribe", "sport", ":2"])
    );
    assert_eq!(
        strings(&sub.call(&["PSUBSCRIBE", "w*"])),
        s(&["psubscribe", "w*", ":3"])
    );
    std::thread::sleep(Duration::from_millis(100));
    // Published through any node: the cluster bus delivers it.
    for _ in 0..3 {
        publisher.call(&["PUBLISH", "news", "hello"]);
    }
    for _ in 0..3 {
        assert_eq!(
            strings(&sub.read().unwrap()),
            s(&["message", "news", "hello"])
        );
    }
    publisher.call(&["PUBLISH", "weather", "rain"]);
    assert_eq!(
        strings(&sub.read().unwrap()),
        s(&["pmessage", "w*", "weather", "rain"])
    );
    // Redis's own subscribed-mode rules, in order with the confirmations.
    let refused = text(&sub.call(&["GET", "x"]));
    assert!(refused.starts_with("-ERR Can't execute 'get'"), "{refused}");
    assert_eq!(strings(&sub.call(&["PING"])), s(&["pong", ""]));
    assert_eq!(strings(&sub.call(&["UNSUBSCRIBE"])).len(), 3);
    sub.read().unwrap();
    assert_eq!(
        strings(&sub.call(&["PUNSUBSCRIBE"])),
        s(&["punsubscribe", "w*", ":0"])
    );
    // Out of subscribed mode: normal commands again.
    assert_eq!(text(&sub.call(&["SET", "after", "1"])), "OK");
    assert_eq!(text(&sub.call(&["GET", "after"])), "1");
}

#[test]
fn resp3_subscribers_get_pushes_between_normal_replies() {
    let h = Harness::start(3, 0);
    let mut sub = h.client();
    let mut publisher = h.client();
    assert!(matches!(sub.call(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(
        strings(&sub.call(&["SUBSCRIBE", "chat"])),
        s(&["subscribe", "chat", ":1"])
    );
    assert_eq!(
        text(&sub.call(&["SET", "k", "v"])),
        "OK",
        "normal commands while subscribed"
    );
    std::thread::sleep(Duration::from_millis(100));
    publisher.call(&["PUBLISH", "chat", "hi"]);
    let push = sub.read().unwrap();
    assert!(matches!(push, Value::Push(_)), "a RESP3 push: {push:?}");
    assert_eq!(strings(&push), s(&["message", "chat", "hi"]));
}

#[test]
fn shard_channels_follow_their_slot() {
    let h = Harness::start(3, 0);
    let mut sub = h.client();
    let mut publisher = h.client();
    assert_eq!(
        strings(&sub.call(&["SSUBSCRIBE", "{s}a", "{s}b"])),
        s(&["ssubscribe", "{s}a", ":1"])
    );
    assert_eq!(
        strings(&sub.read().unwrap()),
        s(&["ssubscribe", "{s}b", ":2"])
    );
    let cross = text(&publisher.call(&["SSUBSCRIBE", "{s}a", "{t}b"]));
    assert_eq!(
        cross,
        "-CROSSSLOT Keys in request don't hash to the same slot"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(text(&publisher.call(&["SPUBLISH", "{s}b", "m"])), ":1");
    assert_eq!(strings(&sub.read().unwrap()), s(&["smessage", "{s}b", "m"]));
}

/// SSUBSCRIBE survives a manual CLUSTER FAILOVER of the shard's master: the proxy
/// resubscribes on the new master without the client noticing, and later messages arrive.
#[test]
fn shard_subscriptions_survive_a_manual_failover() {
    let h = Harness::start(3, 1);
    let mut sub = h.client();
    let mut publisher = h.client();
    assert_eq!(
        strings(&sub.call(&["SSUBSCRIBE", "{fo}ch"])),
        s(&["ssubscribe", "{fo}ch", ":1"])
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        text(&publisher.call(&["SPUBLISH", "{fo}ch", "before"])),
        ":1"
    );
    assert_eq!(
        strings(&sub.read().unwrap()),
        s(&["smessage", "{fo}ch", "before"])
    );

    let master = h.cluster.owner_of(b"{fo}").unwrap();
    let master_id = h
        .cluster
        .nodes()
        .iter()
        .find(|n| n.addr == master)
        .unwrap()
        .id
        .clone();
    let replica = h
        .cluster
        .nodes()
        .iter()
        .find(|n| n.master_of.as_deref() == Some(master_id.as_str()))
        .unwrap()
        .addr;
    h.cluster
        .command(replica, &["CLUSTER", "FAILOVER"])
        .unwrap()
        .ok()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while h.cluster.owner_of(b"{fo}").unwrap() != replica {
        assert!(
            std::time::Instant::now() < deadline,
            "failover did not happen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Publish until a message gets through (the resubscription takes a moment).
    let mut delivered = false;
    sub.stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    for i in 0..30 {
        publisher.call(&["SPUBLISH", "{fo}ch", &format!("after{i}")]);
        if let Some(frame) = sub.try_read() {
            let got = strings(&frame);
            assert_eq!(
                got[0], "smessage",
                "the client never sees the node's sunsubscribe: {got:?}"
            );
            delivered = true;
            break;
        }
    }
    assert!(
        delivered,
        "a message published after the failover was delivered"
    );
}
