//! PUBLISH's reply through the proxy counts every subscriber the proxy serves: channel and
//! pattern subscribers, RESP2 and RESP3, on every worker, also when a subscribed RESP3 client
//! publishes itself (its PUBLISH goes down its own subscription connection). Subscribers
//! connected directly to a node other than the home are not counted (docs/commands.md).

mod common;

use common::{text, Client, Harness};
use resp::Value;

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Push(items) => items.iter().map(text).collect(),
        other => panic!("expected an array or push, got {other:?}"),
    }
}

#[test]
fn publish_counts_every_subscriber_of_the_proxy() {
    let h = Harness::start(3, 0);
    // k = 6 subscribers over both workers: channel and pattern, RESP2 and RESP3.
    let mut subs: Vec<Client> = Vec::new();
    for i in 0..6 {
        let mut c = h.client();
        if i % 2 == 1 {
            assert!(matches!(c.call(&["HELLO", "3"]), Value::Map(_)));
        }
        let (cmd, name) = if i < 3 {
            ("SUBSCRIBE", "room")
        } else {
            ("PSUBSCRIBE", "ro*")
        };
        assert_eq!(strings(&c.call(&[cmd, name]))[2], ":1");
        subs.push(c);
    }
    // A subscriber on a node directly (not the home): Redis Cluster does not count it in
    // the home's reply. Every master gets one; only the home's is counted.
    let mut direct: Vec<Client> = Vec::new();
    for node in h.cluster.masters() {
        let mut c = Client::connect(node);
        assert_eq!(strings(&c.call(&["SUBSCRIBE", "room"]))[2], ":1");
        direct.push(c);
    }
    let mut publisher = h.client();
    for _ in 0..3 {
        assert_eq!(text(&publisher.call(&["PUBLISH", "room", "m"])), ":7");
    }
    // A subscribed RESP3 client's own PUBLISH: the same count, after its own message.
    let own = &mut subs[1];
    own.send(&[b"PUBLISH", b"room", b"mine"]);
    let mut frames = Vec::new();
    while frames
        .last()
        .is_none_or(|v| !matches!(v, Value::Integer(_)))
    {
        frames.push(own.read().expect("a frame"));
    }
    assert_eq!(frames.last(), Some(&Value::Integer(7)), "{frames:?}");
    assert!(
        frames
            .iter()
            .any(|f| strings(f) == ["message", "room", "mine"]),
        "its own message first: {frames:?}"
    );
    // Fewer subscribers, smaller count.
    for c in subs.iter_mut().take(3) {
        c.send(&[b"UNSUBSCRIBE"]);
    }
    let mut publisher2 = h.client();
    common::wait_until(std::time::Duration::from_secs(20), || {
        text(&publisher2.call(&["PUBLISH", "room", "n"])) == ":4"
    });
}
