//! Field report 004's accuracy experiments against a real cluster: batch and
//! immediate commands mixed on one client, and several threads pipelining on
//! one shared client, must each get exactly their own replies.

mod common;

use std::sync::{Arc, Barrier};

use bytes::Bytes;
use slotgate_client::{blocking, Pipeline, Value};

const PAIRS: [(&str, &str); 6] = [
    ("K1", "Kv1"),
    ("K2", "Kv2"),
    ("K3", "Kv3"),
    ("K4", "Kv4"),
    ("T1", "Tv1"),
    ("T2", "Tv2"),
];

/// The value stored under `key` (K1 → Kv1).
fn value_of(key: &str) -> Value {
    let (_, v) = PAIRS.iter().find(|(k, _)| *k == key).expect("known key");
    bulk(v)
}

fn bulk(s: &str) -> Value {
    Value::BulkString(Bytes::copy_from_slice(s.as_bytes()))
}

/// Batch GET K1..K4 with immediate GET T1 (while the batch is being built) and
/// GET T2 (while it executes): Kv1..Kv4 in order, Tv1 and Tv2 to their callers.
#[test]
fn batch_and_immediate_commands_do_not_cross() {
    let cluster = common::cluster();
    let rt = common::runtime();
    rt.block_on(async {
        let client = common::connect(&cluster).await;
        client.mset(&PAIRS).await.expect("mset");
        for _ in 0..50 {
            let mut p = Pipeline::new();
            p.cmd(["GET", "K1"]).cmd(["GET", "K2"]);
            let t1 = client.get("T1").await.expect("T1");
            p.cmd(["GET", "K3"]).cmd(["GET", "K4"]);
            let (batch, t2) = tokio::join!(client.execute(&p), client.get("T2"));
            let batch: Vec<Value> = batch.into_iter().map(|r| r.expect("reply")).collect();
            assert_eq!(batch, ["Kv1", "Kv2", "Kv3", "Kv4"].map(bulk));
            assert_eq!(t1.as_deref(), Some(&b"Tv1"[..]));
            assert_eq!(t2.expect("T2").as_deref(), Some(&b"Tv2"[..]));
        }
    });
}

/// Three threads share one blocking client; each pipelines two GETs, many
/// times, released together by a barrier.
#[test]
fn threads_pipelining_on_one_client_get_their_own_replies() {
    let cluster = common::cluster();
    let client = blocking::Client::cluster([common::seed(&cluster)]).expect("connect");
    client.mset(&PAIRS).expect("mset");
    let plans = [["T1", "T2"], ["K1", "K2"], ["K3", "K4"]];
    let barrier = Arc::new(Barrier::new(plans.len()));
    let threads: Vec<_> = plans
        .into_iter()
        .map(|keys| {
            let (client, barrier) = (client.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..300 {
                    let mut p = Pipeline::with_capacity(2);
                    p.cmd(["GET", keys[0]]).cmd(["GET", keys[1]]);
                    let got: Vec<Value> = client
                        .execute(&p)
                        .into_iter()
                        .map(|r| r.expect("reply"))
                        .collect();
                    let want = keys.map(value_of);
                    assert_eq!(got, want, "thread with {keys:?}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread passed");
    }
}
