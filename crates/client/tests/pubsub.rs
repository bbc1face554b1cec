//! Pub/sub and RESP3 on a real cluster: subscriptions live on their own
//! connections (messages in publish order, patterns, shard channels with
//! SPUBLISH) while the shared connection keeps serving, and `with_resp3`
//! switches every connection to RESP3 types and `>` pushes.

mod common;

use std::time::Duration;

use bytes::Bytes;
use slotgate_client::{Client, Cmd, Config, Error, Subscription, Value};

/// Publishes `n` numbered messages with `cmd` (PUBLISH or SPUBLISH) from
/// another task, then checks they all arrive in order on `sub`.
async fn publish_and_receive(c: &Client, sub: &mut Subscription, cmd: &'static str, ch: &str) {
    let publisher = c.clone();
    let channel = ch.to_string();
    let task = tokio::spawn(async move {
        for i in 0..100 {
            let cmd = Cmd::new(cmd).arg(channel.as_str()).arg(format!("m{i}"));
            publisher.cmd(cmd).await.expect("publish");
        }
    });
    for i in 0..100 {
        let got = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
        let msg = got.expect("in time").expect("open").expect("message");
        assert_eq!(msg.channel, Bytes::from(ch.to_string()));
        assert_eq!(msg.payload, Bytes::from(format!("m{i}")));
    }
    task.await.expect("join");
}

#[test]
fn subscriptions_receive_in_order_beside_shared_traffic() {
    let cluster = common::cluster();
    let rt = common::runtime();
    rt.block_on(async {
        let c = common::connect(&cluster).await;
        let mut sub = c.subscribe(&["news"]).await.expect("subscribe");
        publish_and_receive(&c, &mut sub, "PUBLISH", "news").await;
        // The shared connections still serve while subscriptions are open.
        c.set("ps:k", "v").await.expect("set");
        assert_eq!(c.get("ps:k").await.expect("get"), Some(Bytes::from("v")));

        let mut pat = c.psubscribe(&["sport.*"]).await.expect("psubscribe");
        c.cmd(Cmd::new("PUBLISH").arg("sport.ski").arg("fast"))
            .await
            .expect("publish");
        let msg = pat.next().await.expect("open").expect("message");
        assert_eq!(msg.pattern, Some(Bytes::from("sport.*")));
        assert_eq!(
            (&msg.channel[..], &msg.payload[..]),
            (&b"sport.ski"[..], &b"fast"[..])
        );

        let mut shard = c
            .ssubscribe(&["{room}a", "{room}b"])
            .await
            .expect("ssubscribe");
        publish_and_receive(&c, &mut shard, "SPUBLISH", "{room}b").await;
        let cross = c.ssubscribe(&["a", "b"]).await;
        assert!(matches!(cross, Err(Error::Invalid(_))), "{cross:?}");

        sub.unsubscribe::<&str>(&[]).await.expect("unsubscribe");
        let end = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
        assert!(end.expect("in time").is_none());
    });
}

#[test]
fn resp3_maps_and_pushes() {
    let cluster = common::cluster();
    let rt = common::runtime();
    rt.block_on(async {
        let seed = common::seed(&cluster);
        let v2 = Client::cluster([seed.as_str()]).await.expect("connect");
        let cfg = Config::default().with_resp3(true);
        let v3 = Client::cluster_with([seed.as_str()], cfg)
            .await
            .expect("connect");
        v2.hset("r3:h", "f", "x").await.expect("hset");
        let hgetall = || Cmd::new("HGETALL").arg("r3:h");
        let (a, m) = (v2.cmd(hgetall()).await, v3.cmd(hgetall()).await);
        assert!(
            matches!(a, Ok(Value::Array(ref v)) if v.len() == 2),
            "{a:?}"
        );
        assert!(matches!(m, Ok(Value::Map(ref v)) if v.len() == 1), "{m:?}");
        let missing = v3.cmd(Cmd::new("BLPOP").arg("r3:l").arg("0.1")).await;
        assert_eq!(missing, Ok(Value::Null));

        let mut sub = v3.subscribe(&["r3:news"]).await.expect("subscribe");
        publish_and_receive(&v3, &mut sub, "PUBLISH", "r3:news").await;
        assert_eq!(v3.get("r3:none").await.expect("get"), None);
    });
}
