//! Typed helpers, the blocking facade, single-node mode and large values on a
//! real cluster: multi-key helpers split by slot and answer in key order, and
//! big values pipelined both ways on one connection never stall it (T13).

mod common;

use bytes::Bytes;
use slotgate_client::{blocking, Cmd, Error, Pipeline, Value};

#[test]
fn typed_helpers_work_across_slots() {
    let cluster = common::cluster();
    let rt = common::runtime();
    rt.block_on(async {
        let c = common::connect(&cluster).await;
        let pairs: Vec<(String, String)> = (0..20)
            .map(|i| (format!("h:{i}"), format!("v{i}")))
            .collect();
        c.mset(&pairs).await.expect("mset");
        let keys: Vec<&str> = pairs
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(["h:none"])
            .collect();
        let got = c.mget(&keys).await.expect("mget");
        assert_eq!(got.len(), 21);
        for (i, v) in got.iter().take(20).enumerate() {
            assert_eq!(v.as_deref(), Some(format!("v{i}").as_bytes()));
        }
        assert_eq!(got[20], None);
        assert_eq!(c.exists(&keys).await.expect("exists"), 20);
        assert_eq!(c.incr("h:n").await.expect("incr"), 1);
        assert!(c.expire("h:n", 100).await.expect("expire"));
        assert_eq!(c.hset("h:hash", "f", "x").await.expect("hset"), 1);
        assert_eq!(
            c.hget("h:hash", "f").await.expect("hget"),
            Some(Bytes::from("x"))
        );
        assert_eq!(c.del(&keys).await.expect("del"), 20);
        let empty = c.cmd(Cmd::default()).await;
        assert!(matches!(empty, Err(Error::Invalid(_))), "{empty:?}");
        let wrong = c.cmd(Cmd::new("INCR").arg("h:hash")).await;
        assert!(
            matches!(wrong, Err(Error::Server(ref t)) if t.starts_with("WRONGTYPE")),
            "{wrong:?}"
        );
    });
}

#[test]
fn blocking_facade_and_single_node_mode() {
    let cluster = common::cluster();
    let b = blocking::Client::cluster([common::seed(&cluster)]).expect("connect");
    b.set("b:k", "v").expect("set");
    assert_eq!(b.get("b:k").expect("get"), Some(Bytes::from("v")));
    assert_eq!(
        b.mget(&["b:k", "b:none"]).expect("mget"),
        vec![Some(Bytes::from("v")), None]
    );

    // Single mode talks to one node only: its own keys work, others say MOVED.
    let node = cluster.owner_of(b"b:k").expect("owner");
    let s = blocking::Client::single(node.to_string()).expect("single");
    assert_eq!(s.get("b:k").expect("get"), Some(Bytes::from("v")));
    let other = (0..100)
        .map(|i| format!("o:{i}"))
        .find(|k| cluster.owner_of(k.as_bytes()).ok() != Some(node));
    let moved = s.get(other.expect("a key elsewhere"));
    assert!(
        matches!(moved, Err(Error::Server(ref t)) if t.starts_with("MOVED")),
        "{moved:?}"
    );
}

/// Several tasks each pipeline SET(8 MiB) + GET(8 MiB) + GET(small) to one
/// node: the connection must read replies while it writes requests.
#[test]
fn large_values_both_ways_do_not_deadlock() {
    let cluster = common::cluster();
    let rt = common::runtime();
    rt.block_on(async {
        let c = common::connect(&cluster).await;
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let c = c.clone();
                tokio::spawn(async move {
                    let big = Bytes::from(vec![b'a' + t as u8; 8 << 20]);
                    let mut p = Pipeline::new();
                    p.add(Cmd::new("SET").arg(format!("{{big}}:{t}")).arg(big.clone()))
                        .cmd(["GET", &format!("{{big}}:{t}")])
                        .cmd(["GET", "{big}:none"]);
                    let r = c.execute(&p).await;
                    assert_eq!(r[1], Ok(Value::BulkString(big)), "task {t}");
                    assert_eq!(r[2], Ok(Value::Null));
                })
            })
            .collect();
        for h in handles {
            h.await.expect("task");
        }
    });
}
