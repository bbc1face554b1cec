//! Pub/sub through the proxy on a real 3-master cluster: channels, patterns and shard
//! channels, for RESP2 and RESP3 clients. Before publishing, the tests wait (under a
//! generous ceiling) until the nodes show the subscription, never for a fixed time.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{text, wait_until, Client, Harness};
use resp::Value;

const CEILING: Duration = Duration::from_secs(30);

/// `PUBSUB <sub> [args]` on each master, the integers of the replies summed: subscribers
/// of each channel for NUMSUB/SHARDNUMSUB, pattern subscriptions for NUMPAT.
fn counted_on(nodes: &[SocketAddr], sub: &str, args: &[&str]) -> Vec<i64> {
    let mut total: Vec<i64> = Vec::new();
    for &node in nodes {
        let mut cmd = vec!["PUBSUB", sub];
        cmd.extend_from_slice(args);
        let counts: Vec<i64> = match Client::connect(node).call(&cmd) {
            Value::Integer(n) => vec![n],
            reply => reply
                .as_array()
                .unwrap_or_else(|| panic!("PUBSUB {sub}: {reply:?}"))
                .iter()
                .filter_map(Value::as_int)
                .collect(),
        };
        total.resize(counts.len(), 0);
        total.iter_mut().zip(counts).for_each(|(t, n)| *t += n);
    }
    total
}

/// Wait until every channel in `channels` has a subscriber on the masters.
fn wait_subscribed(h: &Harness, sub: &str, channels: &[&str]) {
    let masters = h.cluster.masters();
    wait_until(CEILING, || {
        counted_on(&masters, sub, channels).iter().all(|n| *n >= 1)
    });
}

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
    wait_subscribed(&h, "NUMSUB", &["news", "sport"]);
    wait_subscribed(&h, "NUMPAT", &[]);
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
    wait_subscribed(&h, "NUMSUB", &["chat"]);
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
    wait_subscribed(&h, "SHARDNUMSUB", &["{s}a", "{s}b"]);
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
    wait_subscribed(&h, "SHARDNUMSUB", &["{fo}ch"]);
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
    wait_until(CEILING, || {
        h.cluster.owner_of(b"{fo}").ok() == Some(replica)
    });
    // Publish until a message gets through: the proxy resubscribes on the new master once it
    // learns of the failover (a publish's MOVED may be what tells it). The ceiling is
    // generous; each try waits up to a second for the delivery.
    sub.stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut i = 0;
    wait_until(CEILING, || {
        i += 1;
        publisher.call(&["SPUBLISH", "{fo}ch", &format!("after{i}")]);
        let Some(frame) = sub.try_read() else {
            return false;
        };
        let got = strings(&frame);
        assert_eq!(
            got[0], "smessage",
            "the client never sees the node's sunsubscribe: {got:?}"
        );
        true
    });
}

/// RESET leaves subscribed mode at once, as on one Redis: a PUBLISH another client sends
/// after the `+RESET` neither counts nor reaches the reset subscriber (closing the
/// subscription connection would leave the node to drop it whenever it gets to it).
#[test]
fn reset_drops_subscriptions_before_it_is_answered() {
    let h = Harness::start(3, 0);
    let mut publisher = h.client();
    for round in 0..100 {
        let mut sub = h.client();
        let proto = if round % 2 == 0 { "2" } else { "3" };
        sub.call(&["HELLO", proto]);
        sub.send_raw(b"SUBSCRIBE rs:a rs:b\r\nPSUBSCRIBE rs:*\r\nSSUBSCRIBE {rs}s\r\nRESET\r\n");
        let frames: Vec<String> = (0..5).map(|_| text(&sub.read().unwrap())).collect();
        assert_eq!(frames[4], "RESET", "round {round}: {frames:?}");
        for channel in ["rs:a", "rs:b", "rs:c"] {
            let n = publisher.call(&["PUBLISH", channel, "x"]);
            assert_eq!(n, Value::Integer(0), "round {round}: {channel}");
        }
        assert_eq!(
            text(&sub.call(&["PING"])),
            "PONG",
            "round {round}: nothing after RESET"
        );
    }
}

/// Two shard channels of one slot, the slot moved behind the proxy's back: the node drops
/// both, the proxy resubscribes them silently, and its stale map sends each SSUBSCRIBE to
/// the old owner, which answers MOVED twice. The client sees none of it: no confirmation it
/// did not ask for, and the next frame is the next message.
#[test]
fn a_moved_slot_resubscribes_its_shard_channels_once() {
    let h = Harness::start(3, 0);
    let mut publisher = h.client();
    for round in 0..3 {
        let mut sub = h.client();
        let (a, b) = (format!("{{sm{round}}}a"), format!("{{sm{round}}}b"));
        sub.call(&["SSUBSCRIBE", &a, &b]);
        sub.read().unwrap();
        wait_subscribed(&h, "SHARDNUMSUB", &[&a, &b]);
        common::slots::move_slot_of(&h.cluster, &a);
        // Resubscribed where the slot is now (SHARDNUMSUB counts on the owner only).
        wait_subscribed(&h, "SHARDNUMSUB", &[&a, &b]);
        // A subscriber's PING is answered once every subscription connection's sync marker
        // is back, after what they sent before it: a stray confirmation would come first.
        let pong = sub.call(&["PING"]);
        assert_eq!(strings(&pong), s(&["pong", ""]), "round {round}");
        assert_eq!(text(&publisher.call(&["SPUBLISH", &b, "m"])), ":1");
        let next = strings(&sub.read().unwrap());
        assert_eq!(next, s(&["smessage", &b, "m"]), "round {round}");
    }
}

/// A message published before a subscriber's PING or QUIT reaches it first, as from one
/// Redis, where it is in the subscriber's output buffer before PING is even read. The
/// PUBLISH's reply comes back on another connection, so the proxy may hear it before the
/// message: a PING (RESP2, answered by the proxy) or QUIT sent right after must wait for the
/// subscription connections (1 chaos script in 1,000 lost a message to a QUIT).
#[test]
fn messages_published_before_ping_or_quit_arrive_first() {
    let h = Harness::start(3, 0);
    // Published at the home node directly: its reply says the message is on its way.
    let zero = (0..)
        .map(|i| format!("z{i}"))
        .find(|k| cluster::slot::key_slot(k.as_bytes()) == 0)
        .expect("a key of slot 0");
    let home = h.cluster.owner_of(zero.as_bytes()).expect("slot 0 served");
    let mut publisher = Client::connect(home);
    for round in 0..200 {
        let mut sub = h.client();
        let channel = format!("pq{round}");
        sub.call(&["SUBSCRIBE", &channel]);
        assert_eq!(text(&publisher.call(&["PUBLISH", &channel, "m"])), ":1");
        let last = if round % 2 == 0 { "PING" } else { "QUIT" };
        sub.send(&[last.as_bytes()]);
        let first = strings(&sub.read().expect("a frame"));
        assert_eq!(
            first,
            s(&["message", &channel, "m"]),
            "round {round} ({last})"
        );
    }
}

/// A RESP3 subscriber that publishes to itself inside MULTI or a script gets the reply
/// first and the messages after it, as from one Redis, though the messages come on the
/// subscription connection and the reply on another.
#[test]
fn publishing_to_itself_in_a_transaction_or_script_gets_the_reply_first() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    assert!(matches!(c.call(&["HELLO", "3"]), Value::Map(_)));
    assert!(matches!(c.call(&["SUBSCRIBE", "self"]), Value::Push(_)));
    let message = |c: &mut Client, m: &str| {
        let frame = c.read().expect("a message");
        assert_eq!(
            format!("{frame:?}"),
            format!(
                "{:?}",
                Value::Push(vec![
                    Value::BulkString("message".into()),
                    Value::BulkString("self".into()),
                    Value::BulkString(m.to_string().into()),
                ])
            )
        );
    };
    for _ in 0..20 {
        assert_eq!(text(&c.call(&["MULTI"])), "OK");
        assert_eq!(text(&c.call(&["PUBLISH", "self", "a"])), "QUEUED");
        assert_eq!(text(&c.call(&["PING", "x"])), "QUEUED");
        assert!(matches!(c.call(&["EXEC"]), Value::Array(_)));
        message(&mut c, "a");
        let script = "redis.call('publish', 'self', 'b'); return 'done'";
        assert_eq!(text(&c.call(&["EVAL", script, "0"])), "done");
        message(&mut c, "b");
    }
}

/// CLIENT REPLY OFF silences replies, not pushes (Redis delivers pushes whatever the reply
/// mode): a message that waits behind a silenced reply still comes.
#[test]
fn client_reply_off_does_not_silence_messages() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    assert!(matches!(c.call(&["HELLO", "3"]), Value::Map(_)));
    let id = text(&c.call(&["CLIENT", "ID"]));
    let id = id.trim_start_matches(':').to_string();
    assert!(matches!(c.call(&["SUBSCRIBE", "quiet"]), Value::Push(_)));
    // A key away from the subscription's node (the master of slot 0): its script runs
    // while the message comes.
    let home = h.cluster.owner_of(b"").unwrap();
    let key = (0..)
        .map(|i| format!("busy{i}"))
        .find(|k| h.cluster.owner_of(k.as_bytes()).unwrap() != home)
        .unwrap();
    c.send(&[b"CLIENT", b"REPLY", b"OFF"]);
    let busy: &[u8] = b"local t0 = redis.call('time') repeat local t = redis.call('time') \
        until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 300000 return 1";
    c.send(&[b"EVAL", busy, b"1", key.as_bytes()]);
    let mut other = h.client();
    wait_until(CEILING, || {
        let list = text(&other.call(&["CLIENT", "LIST", "ID", &id]));
        list.contains("cmd=eval")
    });
    assert_eq!(other.call(&["PUBLISH", "quiet", "m"]), Value::Integer(1));
    let frame = c.read().expect("the message");
    assert!(format!("{frame:?}").contains("quiet"), "{frame:?}");
    c.send(&[b"CLIENT", b"REPLY", b"ON"]);
    assert_eq!(text(&c.read().expect("+OK")), "OK");
}

/// The client unsubscribes while the proxy is silently resubscribing its shard channels
/// (their slot just moved, and the proxy's map may still name the old owner): one Redis
/// would leave subscribed mode at count 0, so the proxy must not keep a resubscription
/// alive on the new owner. The next PING is a plain `PONG`, and no node keeps a subscriber.
/// Rounds alternate naming the channels and SUNSUBSCRIBE without arguments; the last four
/// are RESP3 (confirmations as pushes, the proxy's own included).
#[test]
fn unsubscribing_while_a_moved_slot_is_resubscribed_leaves_subscribed_mode() {
    let h = Harness::start(3, 0);
    for round in 0..8 {
        let mut sub = h.client();
        if round >= 4 {
            assert!(matches!(sub.call(&["HELLO", "3"]), Value::Map(_)));
        }
        let chans: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|x| format!("{{su{round}}}{x}"))
            .collect();
        let names: Vec<&str> = chans.iter().map(String::as_str).collect();
        let mut cmd = vec!["SSUBSCRIBE"];
        cmd.extend_from_slice(&names);
        sub.call(&cmd);
        sub.read().unwrap();
        sub.read().unwrap();
        wait_subscribed(&h, "SHARDNUMSUB", &names);
        common::slots::move_slot_of(&h.cluster, &chans[0]);
        let mut cmd = vec!["SUNSUBSCRIBE"];
        if round % 2 == 0 {
            cmd.extend_from_slice(&names);
        }
        let mut counts = vec![sub.call(&cmd)];
        while counts.last().map(strings).and_then(|v| v.last().cloned()) != Some(":0".into()) {
            counts.push(sub.read().expect("a confirmation"));
        }
        assert_eq!(counts.len(), 3, "round {round}: {counts:?}");
        assert_eq!(text(&sub.call(&["PING"])), "PONG", "round {round}");
        let masters = h.cluster.masters();
        wait_until(CEILING, || {
            counted_on(&masters, "SHARDNUMSUB", &names)
                .iter()
                .all(|n| *n == 0)
        });
    }
}
