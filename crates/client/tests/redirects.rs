//! Cluster behaviour on a real cluster: a pipeline across all masters keeps
//! its order through MOVED (a slot migrated after the client loaded its map),
//! ASK redirects inside a pipeline get one ASKING each, and a write whose
//! connection died after sending is reported, never resent.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use slotgate_client::{Client, Cmd, Error, Pipeline, Value};

/// `blocked_clients` in the node's INFO clients (a client held by CLIENT PAUSE counts).
fn blocked_clients(cluster: &devcluster::Cluster, node: std::net::SocketAddr) -> u64 {
    let info = cluster.command(node, &["INFO", "clients"]).expect("INFO");
    info.lines()
        .iter()
        .find_map(|l| l.strip_prefix("blocked_clients:")?.trim().parse().ok())
        .expect("blocked_clients in INFO clients")
}

fn bulk(s: &str) -> Value {
    Value::BulkString(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn pipeline_across_masters_keeps_order_through_moved() {
    let cluster = common::cluster();
    let src = cluster.owner_of(b"mig").expect("owner");
    let dst = *cluster.masters().iter().find(|m| **m != src).expect("dst");
    let slot = cluster::key_slot(b"mig");
    let rt = common::runtime();
    rt.block_on(async {
        let client = common::connect(&cluster).await;
        // Every 3rd key is in the migrating slot; the rest spread everywhere.
        let keys: Vec<String> = (0..60)
            .map(|i| {
                if i % 3 == 0 {
                    format!("{{mig}}:{i}")
                } else {
                    format!("k:{i}")
                }
            })
            .collect();
        let owners: HashSet<_> = keys
            .iter()
            .map(|k| cluster.owner_of(k.as_bytes()).expect("owner"))
            .collect();
        assert_eq!(owners.len(), 3, "the pipeline spans all masters");
        let mut set = Pipeline::with_capacity(keys.len());
        for k in &keys {
            set.cmd(["SET", k.as_str(), &format!("v-{k}")]);
        }
        assert!(client.execute(&set).await.into_iter().all(|r| r.is_ok()));

        common::migrate_slot(&cluster, slot, src, dst);
        let mut get = Pipeline::with_capacity(keys.len());
        for k in &keys {
            get.cmd(["GET", k.as_str()]);
        }
        let got: Vec<Value> = client
            .execute(&get)
            .await
            .into_iter()
            .map(|r| r.expect("reply"))
            .collect();
        let want: Vec<Value> = keys.iter().map(|k| bulk(&format!("v-{k}"))).collect();
        assert_eq!(got, want);
        let s = client.stats();
        assert!(s.moved >= 1, "{s:?}");
        assert!(s.refresh_requested >= 1, "{s:?}");

        // A burst of MOVED-prone requests costs at most one refresh per interval: wait for
        // the refresh the burst asked for (5 s at most), then count.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while client.stats().refresh_performed == 0 {
            assert!(tokio::time::Instant::now() < deadline, "no refresh ran");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let s = client.stats();
        // 20 MOVED in one round asked 20 times; one refresh ran (the patch had
        // already made the map right, so nothing new needed installing).
        assert!((1..=2).contains(&s.refresh_performed), "{s:?}");
        let before = s.moved;
        let again = client.execute(&get).await;
        assert!(again.iter().all(|r| r.is_ok()));
        assert_eq!(
            client.stats().moved,
            before,
            "the refreshed map routes directly"
        );
    });
}

#[test]
fn ask_redirects_inside_a_pipeline_are_followed() {
    let cluster = common::cluster();
    let src = cluster.owner_of(b"ask").expect("owner");
    let dst = *cluster.masters().iter().find(|m| **m != src).expect("dst");
    let s = cluster::key_slot(b"ask").to_string();
    let (src_id, dst_id) = (
        common::node_id(&cluster, src),
        common::node_id(&cluster, dst),
    );
    let rt = common::runtime();
    rt.block_on(async {
        let client = common::connect(&cluster).await;
        common::admin(
            &cluster,
            dst,
            &["CLUSTER", "SETSLOT", &s, "IMPORTING", &src_id],
        );
        common::admin(
            &cluster,
            src,
            &["CLUSTER", "SETSLOT", &s, "MIGRATING", &dst_id],
        );
        // New keys in a migrating slot: the source answers ASK for each.
        let mut p = Pipeline::new();
        for i in 0..10 {
            p.cmd(["SET", &format!("{{ask}}:{i}"), &format!("a{i}")])
                .cmd(["GET", "other"]);
        }
        let replies = client.execute(&p).await;
        assert!(replies.iter().all(|r| r.is_ok()), "{replies:?}");
        let stats = client.stats();
        assert!(stats.ask >= 10, "{stats:?}");
        assert_eq!(stats.moved, 0, "ASK must not repoint the slot: {stats:?}");
        let n = common::admin(&cluster, dst, &["CLUSTER", "COUNTKEYSINSLOT", &s]);
        assert_eq!(
            n.as_text().as_deref(),
            Some("10"),
            "the keys landed on the importing node"
        );
        assert_eq!(
            client.get("{ask}:3").await.expect("get"),
            Some(Bytes::from("a3"))
        );
    });
}

#[test]
fn a_write_whose_connection_died_is_reported_not_resent() {
    let cluster = common::cluster();
    let node = cluster.owner_of(b"q").expect("owner");
    let rt = common::runtime();
    rt.block_on(async {
        let client = common::connect(&cluster).await;
        client.set("{q}:g", "gv").await.expect("set");
        // Blocking commands no longer ride the shared connection, so a write
        // pause holds the INCR (and the GET behind it) instead of a BLPOP.
        common::admin(&cluster, node, &["CLIENT", "PAUSE", "5000", "WRITE"]);
        let mut p = Pipeline::new();
        p.cmd(["INCR", "{q}:n"]).cmd(["GET", "{q}:g"]);
        let c2 = client.clone();
        let run = tokio::spawn(async move { c2.execute(&p).await });
        // Kill once the INCR is on the node, held by the pause (a blocked client there).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while blocked_clients(&cluster, node) == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the INCR never reached the node"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        common::admin(&cluster, node, &["CLIENT", "KILL", "TYPE", "normal"]);
        let replies = run.await.expect("task");
        common::admin(&cluster, node, &["CLIENT", "UNPAUSE"]);
        assert!(
            matches!(replies[0], Err(Error::OutcomeUnknown(_))),
            "{replies:?}"
        );
        assert_eq!(replies[1], Ok(bulk("gv")), "a read is resent");
        assert_eq!(
            client.get("{q}:n").await.expect("get"),
            None,
            "INCR never ran"
        );
        assert!(client.stats().reconnects >= 1);
    });
}

/// A multi-key command whose keys are split by a migration gets TRYAGAIN; it
/// is retried with backoff and succeeds once the migration ends.
#[test]
fn tryagain_is_retried_until_the_migration_ends() {
    let cluster = common::cluster();
    let src = cluster.owner_of(b"t").expect("owner");
    let dst = *cluster.masters().iter().find(|m| **m != src).expect("dst");
    let slot = cluster::key_slot(b"t");
    let s = slot.to_string();
    let rt = common::runtime();
    let client = rt
        .block_on(Client::cluster([common::seed(&cluster)]))
        .expect("connect");
    rt.block_on(client.mset(&[("{t}a", "1"), ("{t}b", "2")]))
        .expect("mset");
    let (src_id, dst_id) = (
        common::node_id(&cluster, src),
        common::node_id(&cluster, dst),
    );
    common::admin(
        &cluster,
        dst,
        &["CLUSTER", "SETSLOT", &s, "IMPORTING", &src_id],
    );
    common::admin(
        &cluster,
        src,
        &["CLUSTER", "SETSLOT", &s, "MIGRATING", &dst_id],
    );
    let port = dst.port().to_string();
    let migrate = [
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "KEYS",
        "{t}b",
    ];
    common::admin(&cluster, src, &migrate);

    let c2 = client.clone();
    let mget = rt.spawn(async move { c2.mget(&["{t}a", "{t}b"]).await });
    // End the migration once the MGET has met TRYAGAIN (and is being retried).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while client.stats().tryagain == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no TRYAGAIN: {:?}",
            client.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    common::migrate_slot(&cluster, slot, src, dst);
    let got = rt.block_on(mget).expect("task").expect("mget");
    assert_eq!(got, vec![Some(Bytes::from("1")), Some(Bytes::from("2"))]);
    assert!(client.stats().tryagain >= 1, "{:?}", client.stats());
}

/// CLUSTER SHARDS as the topology query: the client bootstraps from it and a
/// refresh after a slot migration reads it too (no failed refresh).
#[test]
fn cluster_shards_is_an_alternative_topology_source() {
    let cluster = common::cluster();
    let src = cluster.owner_of(b"shr").expect("owner");
    let dst = *cluster.masters().iter().find(|m| **m != src).expect("dst");
    let rt = common::runtime();
    rt.block_on(async {
        let cfg = slotgate_client::Config::default()
            .with_topology_command(slotgate_client::TopologyCommand::Shards);
        let client = Client::cluster_with([common::seed(&cluster)], cfg)
            .await
            .expect("connect over CLUSTER SHARDS");
        let mut set = Pipeline::with_capacity(30);
        for i in 0..30 {
            set.cmd(["SET", &format!("k:{i}"), "v"]);
        }
        assert!(client.execute(&set).await.into_iter().all(|r| r.is_ok()));
        common::migrate_slot(&cluster, cluster::key_slot(b"shr"), src, dst);
        client
            .cmd(Cmd::new("SET").arg("shr").arg("1"))
            .await
            .expect("set");
        // Wait for the refresh the MOVED asked for (a condition, under a generous ceiling).
        let ceiling = std::time::Instant::now() + Duration::from_secs(30);
        while client.stats().refresh_performed < 1 {
            assert!(std::time::Instant::now() < ceiling, "{:?}", client.stats());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let s = client.stats();
        assert_eq!(s.refresh_failed, 0, "{s:?}");
    });
}
