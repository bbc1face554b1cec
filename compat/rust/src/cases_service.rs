//! redis-rs cases for the service side: pub/sub, blocking pops, SCAN, concurrency, big values,
//! health checks, replica reads, and the pending WAIT / INFO cases (main.rs runs them).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use base64::Engine;
use futures_util::StreamExt;
use redis::cmd;

use crate::{e, eq, Check, Conn, Mode, TIMEOUT};

pub(crate) fn pubsub(_c: &mut Conn, m: &Mode) -> Check {
    let ch = m.key("chan");
    let client = e("client", redis::Client::open(m.url.as_str()))?;
    let mut publisher = e("connect", client.get_connection())?;
    match m.name {
        "sync" => {
            let mut sub_con = e("connect", client.get_connection())?;
            let mut sub = sub_con.as_pubsub();
            e("SUBSCRIBE", sub.subscribe(&ch))?;
            e("timeout", sub.set_read_timeout(Some(TIMEOUT)))?;
            eq(
                "receivers",
                e(
                    "PUBLISH",
                    cmd("PUBLISH")
                        .arg(&ch)
                        .arg("hello")
                        .query::<i64>(&mut publisher),
                )?,
                1,
            )?;
            let msg = e("get_message", sub.get_message())?;
            eq(
                "message",
                (
                    msg.get_channel_name().to_string(),
                    e("payload", msg.get_payload::<String>())?,
                ),
                (ch, "hello".into()),
            )
        }
        "async" => m.rt.block_on(async {
            let mut sub = e("get_async_pubsub", client.get_async_pubsub().await)?;
            e("SUBSCRIBE", sub.subscribe(&ch).await)?;
            eq(
                "receivers",
                e(
                    "PUBLISH",
                    cmd("PUBLISH")
                        .arg(&ch)
                        .arg("hello")
                        .query::<i64>(&mut publisher),
                )?,
                1,
            )?;
            let mut stream = sub.on_message();
            let msg = tokio::time::timeout(TIMEOUT, stream.next())
                .await
                .map_err(|_| "no message".to_string())?;
            let msg = msg.ok_or("stream ended")?;
            eq(
                "message",
                (
                    msg.get_channel_name().to_string(),
                    e("payload", msg.get_payload::<String>())?,
                ),
                (ch, "hello".into()),
            )
        }),
        _ => Err("SKIP: the sync ClusterConnection has no pub/sub".into()),
    }
}

pub(crate) fn blocking(c: &mut Conn, m: &Mode) -> Check {
    let k = m.key("blk");
    let none: Option<(String, String)> = e("BLPOP", c.q(cmd("BLPOP").arg(&k).arg(0.2)))?;
    eq("BLPOP on empty", none, None)?;
    let mut pusher = e("connect", m.connect(false))?;
    let k2 = k.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let _ = pusher.q::<i64>(cmd("RPUSH").arg(&k2).arg("late"));
    });
    let got: Result<Option<(String, String)>, String> =
        e("BLPOP", c.q(cmd("BLPOP").arg(&k).arg(10)));
    let _ = t.join();
    eq("BLPOP woken", got?, Some((k, "late".into())))
}

pub(crate) fn scan(c: &mut Conn, m: &Mode) -> Check {
    let want: HashSet<String> = (0..60).map(|i| m.key(&format!("scan:{i}"))).collect();
    for k in &want {
        e("SET", c.q::<()>(cmd("SET").arg(k).arg(1)))?;
    }
    let mut got = HashSet::new();
    let mut cursor = 0u64;
    loop {
        let scan = cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(m.key("scan:*"))
            .arg("COUNT")
            .arg(25)
            .clone();
        let (next, keys): (u64, Vec<String>) = match c {
            // SCAN has no key to route by: a cluster application names the node.
            Conn::Cluster(con) => {
                let (host, port) = m.addr();
                let to = redis::cluster_routing::SingleNodeRoutingInfo::ByAddress { host, port };
                let v = e(
                    "SCAN",
                    con.route_command(&scan, redis::cluster_routing::RoutingInfo::SingleNode(to)),
                )?;
                e(
                    "SCAN reply",
                    redis::from_redis_value(v).map_err(redis::RedisError::from),
                )?
            }
            _ => e("SCAN", c.q(&scan))?,
        };
        got.extend(keys);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    eq("SCAN", got, want)
}

pub(crate) fn concurrent(c: &mut Conn, m: &Mode) -> Check {
    let work = |t: usize, i: usize| (m.key(&format!("conc:{t}:{i}")), format!("{t}-{i}"));
    if let Conn::Async(con, rt) = c {
        let tasks: Vec<_> = (0..20)
            .map(|t| {
                let mut con = con.clone();
                let kvs: Vec<_> = (0..40).map(|i| work(t, i)).collect();
                rt.spawn(async move {
                    for (k, v) in kvs {
                        cmd("SET")
                            .arg(&k)
                            .arg(&v)
                            .query_async::<()>(&mut con)
                            .await
                            .map_err(|e| e.to_string())?;
                        let got: String = cmd("GET")
                            .arg(&k)
                            .query_async(&mut con)
                            .await
                            .map_err(|e| e.to_string())?;
                        eq("GET", got, v)?;
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        for t in tasks {
            rt.block_on(t).map_err(|e| e.to_string())??;
        }
        return Ok(());
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..20)
            .map(|t| {
                s.spawn(move || -> Check {
                    let mut con = e("connect", m.connect(false))?;
                    for i in 0..40 {
                        let (k, v) = work(t, i);
                        e("SET", con.q::<()>(cmd("SET").arg(&k).arg(&v)))?;
                        eq("GET", e("GET", con.q::<String>(cmd("GET").arg(&k)))?, v)?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| "thread panicked".to_string())?)
    })
}

pub(crate) fn big_value(c: &mut Conn, m: &Mode) -> Check {
    let raw: Vec<u8> = (0..3 * 512 * 1024).map(|_| rand::random::<u8>()).collect();
    let v = base64::engine::general_purpose::STANDARD.encode(raw); // 2 MiB
    e("SET", c.q::<()>(cmd("SET").arg(m.key("big")).arg(&v)))?;
    eq(
        "GET 2MB equal",
        e("GET", c.q::<String>(cmd("GET").arg(m.key("big"))))? == v,
        true,
    )
}

/// INFO as text: the cluster connection sends it to every node and answers node -> text.
fn info(c: &mut Conn, section: Option<&str>) -> Result<String, String> {
    let mut q = cmd("INFO");
    if let Some(s) = section {
        q.arg(s);
    }
    if let Conn::Cluster(_) = c {
        let per_node: HashMap<String, String> = e("INFO", c.q(&q))?;
        return Ok(per_node.into_values().collect::<Vec<_>>().join("\n"));
    }
    e("INFO", c.q(&q))
}

pub(crate) fn health(c: &mut Conn, m: &Mode) -> Check {
    e("SET", c.q::<()>(cmd("SET").arg(m.key("health")).arg(1)))?;
    eq(
        "PING",
        e("PING", c.q::<String>(&cmd("PING")))?,
        "PONG".into(),
    )?;
    eq(
        "INFO redis_version",
        info(c, None)?.contains("redis_version:"),
        true,
    )?;
    let ks = info(c, Some("keyspace"))?;
    eq("INFO keyspace", ks.contains("db0:keys="), true)
}

pub(crate) fn replica_read(c: &mut Conn, m: &Mode) -> Check {
    e("SET", c.q::<()>(cmd("SET").arg(m.key("ro")).arg("seen")))?;
    let mut r = e("connect", m.connect(true))?;
    if !m.cluster() {
        e("READONLY", r.q::<()>(&cmd("READONLY")))?;
    }
    eq(
        "read",
        e("GET", r.q::<String>(cmd("GET").arg(m.key("ro"))))?,
        "seen".into(),
    )
}

pub(crate) fn info_role(c: &mut Conn, _m: &Mode) -> Check {
    eq(
        "INFO replication role:master",
        info(c, Some("replication"))?.contains("role:master"),
        true,
    )
}

pub(crate) fn wait_replica(c: &mut Conn, m: &Mode) -> Check {
    if m.cluster() {
        return Err("SKIP: checked with the plain connections".into());
    }
    if std::env::var("COMPAT_REPLICAS").as_deref() == Ok("0") {
        return Err("SKIP: the servers have no replica".into());
    }
    e("SET", c.q::<()>(cmd("SET").arg(m.key("wait")).arg(1)))?;
    let n: i64 = e("WAIT", c.q(cmd("WAIT").arg(1).arg(0)))?;
    if n < 1 {
        return Err(format!("WAIT 1 0 answered {n}"));
    }
    Ok(())
}
