//! redis-rs against slotgate, as applications use it: the sync `Connection`, the async
//! `MultiplexedConnection` (tokio) and the sync `ClusterConnection`, each in RESP2 and RESP3.
//! Run by compat/run.py (COMPAT_PROXY=host:port); prints one
//! `PASS|FAIL|SKIP redis-rs/<mode>/<resp>/<case>` line per case (see compat/run.py).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures_util::StreamExt;
use redis::{cmd, Cmd, FromRedisValue, Pipeline, RedisResult, Value};

const TIMEOUT: Duration = Duration::from_secs(10);

type Check = Result<(), String>;

/// One mode's connection; cases send commands through it whatever the mode.
enum Conn {
    Sync(redis::Connection),
    Async(
        redis::aio::MultiplexedConnection,
        Arc<tokio::runtime::Runtime>,
    ),
    Cluster(redis::cluster::ClusterConnection),
}

impl Conn {
    fn q<T: FromRedisValue>(&mut self, c: &Cmd) -> RedisResult<T> {
        match self {
            Conn::Sync(con) => c.query(con),
            Conn::Cluster(con) => c.query(con),
            Conn::Async(con, rt) => rt.block_on(c.query_async(con)),
        }
    }

    fn p<T: FromRedisValue>(&mut self, p: &Pipeline) -> RedisResult<T> {
        match self {
            Conn::Sync(con) => p.query(con),
            Conn::Cluster(con) => p.query(con),
            Conn::Async(con, rt) => rt.block_on(p.query_async(con)),
        }
    }
}

struct Mode {
    name: &'static str,
    proto: u8,
    url: String,
    prefix: String,
    rt: Arc<tokio::runtime::Runtime>,
}

impl Mode {
    fn key(&self, n: &str) -> String {
        format!("{}:{}:{}", self.prefix, self.name, n)
    }

    fn addr(&self) -> (String, u16) {
        let hp = self
            .url
            .trim_start_matches("redis://")
            .split('/')
            .next()
            .unwrap_or_default();
        let (h, p) = hp.rsplit_once(':').unwrap_or((hp, "6379"));
        (h.to_string(), p.parse().unwrap_or(6379))
    }

    fn cluster(&self) -> bool {
        self.name == "cluster"
    }

    fn connect(&self, replicas: bool) -> RedisResult<Conn> {
        match self.name {
            "sync" => {
                let con = redis::Client::open(self.url.as_str())?.get_connection()?;
                con.set_read_timeout(Some(TIMEOUT + TIMEOUT))?;
                Ok(Conn::Sync(con))
            }
            "async" => {
                let client = redis::Client::open(self.url.as_str())?;
                let cfg = redis::AsyncConnectionConfig::new()
                    .set_response_timeout(Some(TIMEOUT + TIMEOUT));
                let con = self
                    .rt
                    .block_on(client.get_multiplexed_async_connection_with_config(&cfg))?;
                Ok(Conn::Async(con, self.rt.clone()))
            }
            _ => {
                let proto = if self.proto == 3 {
                    redis::ProtocolVersion::RESP3
                } else {
                    redis::ProtocolVersion::RESP2
                };
                let mut b = redis::cluster::ClusterClient::builder(vec![self.url.clone()])
                    .use_protocol(proto)
                    .response_timeout(TIMEOUT + TIMEOUT);
                if replicas {
                    #[allow(deprecated)]
                    // its replacement names a strategy type; this reads as users write it
                    {
                        b = b.read_from_replicas();
                    }
                }
                Ok(Conn::Cluster(b.build()?.get_connection()?))
            }
        }
    }
}

fn eq<T: PartialEq + std::fmt::Debug>(label: &str, got: T, want: T) -> Check {
    if got == want {
        return Ok(());
    }
    let g = format!("{got:?}");
    Err(format!(
        "{label}: got {}, want {want:?}",
        &g[..g.len().min(200)]
    ))
}

fn e<T>(label: &str, r: RedisResult<T>) -> Result<T, String> {
    r.map_err(|err| format!("{label}: {err}"))
}

fn handshake(c: &mut Conn, m: &Mode) -> Check {
    eq(
        "PING",
        e("PING", c.q::<String>(&cmd("PING")))?,
        "PONG".into(),
    )?;
    eq(
        "ECHO",
        e("ECHO", c.q::<String>(cmd("ECHO").arg("hi")))?,
        "hi".into(),
    )?;
    let hello: HashMap<String, Value> = e("HELLO", c.q(cmd("HELLO").arg(m.proto)))?;
    eq(
        "HELLO proto",
        hello.get("proto").cloned(),
        Some(Value::Int(m.proto as i64)),
    )
}

fn types(c: &mut Conn, m: &Mode) -> Check {
    let k = |n: &str| m.key(n);
    e("SET", c.q::<()>(cmd("SET").arg(k("s")).arg("v1")))?;
    eq(
        "GET",
        e("GET", c.q::<String>(cmd("GET").arg(k("s"))))?,
        "v1".into(),
    )?;
    e(
        "HSET",
        c.q::<i64>(cmd("HSET").arg(k("h")).arg(&["a", "1", "b", "2"])),
    )?;
    let h: HashMap<String, String> = e("HGETALL", c.q(cmd("HGETALL").arg(k("h"))))?;
    eq(
        "HGETALL",
        h,
        HashMap::from([("a".into(), "1".into()), ("b".into(), "2".into())]),
    )?;
    e(
        "RPUSH",
        c.q::<i64>(cmd("RPUSH").arg(k("l")).arg(&["a", "b", "c"])),
    )?;
    eq(
        "LRANGE",
        e(
            "LRANGE",
            c.q::<Vec<String>>(cmd("LRANGE").arg(k("l")).arg(0).arg(-1)),
        )?,
        vec!["a".into(), "b".into(), "c".into()],
    )?;
    e(
        "SADD",
        c.q::<i64>(cmd("SADD").arg(k("set")).arg(&["a", "b"])),
    )?;
    let s: HashSet<String> = e("SMEMBERS", c.q(cmd("SMEMBERS").arg(k("set"))))?;
    eq("SMEMBERS", s, HashSet::from(["a".into(), "b".into()]))?;
    e(
        "ZADD",
        c.q::<i64>(cmd("ZADD").arg(k("z")).arg(1).arg("a").arg(2.5).arg("b")),
    )?;
    let z: Vec<(String, f64)> = e(
        "ZRANGE",
        c.q(cmd("ZRANGE").arg(k("z")).arg(0).arg(-1).arg("WITHSCORES")),
    )?;
    eq(
        "ZRANGE WITHSCORES",
        z,
        vec![("a".into(), 1.0), ("b".into(), 2.5)],
    )?;
    e(
        "XADD",
        c.q::<String>(cmd("XADD").arg(k("x")).arg("*").arg("f").arg("1")),
    )?;
    eq("XLEN", e("XLEN", c.q::<i64>(cmd("XLEN").arg(k("x"))))?, 1)?;
    e(
        "PFADD",
        c.q::<i64>(cmd("PFADD").arg(k("hll")).arg(&["a", "b", "c", "a"])),
    )?;
    eq(
        "PFCOUNT",
        e("PFCOUNT", c.q::<i64>(cmd("PFCOUNT").arg(k("hll"))))?,
        3,
    )?;
    let geo = cmd("GEOADD")
        .arg(k("g"))
        .arg(&[
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ])
        .clone();
    e("GEOADD", c.q::<i64>(&geo))?;
    let d: f64 = e(
        "GEODIST",
        c.q(cmd("GEODIST")
            .arg(k("g"))
            .arg("Palermo")
            .arg("Catania")
            .arg("km")),
    )?;
    eq("GEODIST", d.round() as i64, 166)?;
    e(
        "SETBIT",
        c.q::<i64>(cmd("SETBIT").arg(k("b")).arg(100).arg(1)),
    )?;
    eq(
        "BITCOUNT",
        e("BITCOUNT", c.q::<i64>(cmd("BITCOUNT").arg(k("b"))))?,
        1,
    )
}

fn crossslot(c: &mut Conn, m: &Mode) -> Check {
    let keys: Vec<String> = (0..12).map(|i| m.key(&format!("mk{i}"))).collect();
    let mut mset = cmd("MSET");
    for (i, k) in keys.iter().enumerate() {
        mset.arg(k).arg(format!("v{i}"));
    }
    e("MSET", c.q::<()>(&mset))?;
    let got: Vec<String> = e("MGET", c.q(cmd("MGET").arg(&keys)))?;
    eq("MGET", got, (0..12).map(|i| format!("v{i}")).collect())?;
    eq("DEL", e("DEL", c.q::<i64>(cmd("DEL").arg(&keys)))?, 12)
}

fn pipeline(c: &mut Conn, m: &Mode) -> Check {
    let mut p = redis::pipe();
    for i in 0..160 {
        p.cmd("SET").arg(m.key(&format!("p{i}"))).arg(i).ignore();
    }
    for i in 0..160 {
        p.cmd("INCR").arg(m.key(&format!("p{i}")));
    }
    let got: Vec<i64> = match c {
        // The sync cluster connection takes its own pipeline type.
        Conn::Cluster(con) => {
            let mut cp = redis::cluster::cluster_pipe();
            for i in 0..160 {
                cp.cmd("SET").arg(m.key(&format!("p{i}"))).arg(i).ignore();
            }
            for i in 0..160 {
                cp.cmd("INCR").arg(m.key(&format!("p{i}")));
            }
            e("cluster pipeline", cp.query(con))?
        }
        _ => e("pipeline", c.p(&p))?,
    };
    eq("INCRs", got, (1..=160).collect())
}

fn multi_watch(c: &mut Conn, m: &Mode) -> Check {
    if m.cluster() {
        return Err("SKIP: ClusterConnection refuses atomic pipelines".into());
    }
    let k = format!("{{{}}}a", m.key("tx"));
    let mut p = redis::pipe();
    p.atomic()
        .cmd("SET")
        .arg(&k)
        .arg(1)
        .ignore()
        .cmd("INCR")
        .arg(&k)
        .cmd("GET")
        .arg(&k);
    let got: (i64, String) = e("MULTI/EXEC", c.p(&p))?;
    eq("EXEC", got, (2, "2".into()))?;
    let w = m.key("watched");
    let mut other = e("connect", m.connect(false))?;
    e("WATCH", c.q::<()>(cmd("WATCH").arg(&w)))?;
    e(
        "SET other",
        other.q::<()>(cmd("SET").arg(&w).arg("changed")),
    )?;
    let mut p = redis::pipe();
    p.atomic().cmd("SET").arg(&w).arg("mine");
    let got: Option<Vec<String>> = e("EXEC", c.p(&p))?;
    eq("EXEC after a change", got, None)?;
    eq(
        "value",
        e("GET", c.q::<String>(cmd("GET").arg(&w)))?,
        "changed".into(),
    )
}

fn script(c: &mut Conn, m: &Mode) -> Check {
    let k = m.key("script");
    let s = redis::Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    let mut inv = s.key(&k);
    inv.arg(3);
    let got: i64 = match c {
        Conn::Sync(con) => e("invoke", inv.invoke(con))?,
        Conn::Cluster(con) => e("invoke", inv.invoke(con))?,
        Conn::Async(con, rt) => e("invoke", rt.block_on(inv.invoke_async(con)))?,
    };
    eq("Script (EVALSHA, then EVAL)", got, 3)
}

fn pubsub(_c: &mut Conn, m: &Mode) -> Check {
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

fn blocking(c: &mut Conn, m: &Mode) -> Check {
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

fn scan(c: &mut Conn, m: &Mode) -> Check {
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

fn concurrent(c: &mut Conn, m: &Mode) -> Check {
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

fn big_value(c: &mut Conn, m: &Mode) -> Check {
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

fn health(c: &mut Conn, m: &Mode) -> Check {
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

fn replica_read(c: &mut Conn, m: &Mode) -> Check {
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

fn info_role(c: &mut Conn, _m: &Mode) -> Check {
    eq(
        "INFO replication role:master",
        info(c, Some("replication"))?.contains("role:master"),
        true,
    )
}

fn wait_replica(c: &mut Conn, m: &Mode) -> Check {
    if m.cluster() {
        return Err("SKIP: checked with the plain connections".into());
    }
    e("SET", c.q::<()>(cmd("SET").arg(m.key("wait")).arg(1)))?;
    let n: i64 = e("WAIT", c.q(cmd("WAIT").arg(1).arg(0)))?;
    if n < 1 {
        return Err(format!("WAIT 1 0 answered {n}"));
    }
    Ok(())
}

type CaseFn = fn(&mut Conn, &Mode) -> Check;

const CASES: &[(&str, CaseFn)] = &[
    ("handshake", handshake),
    ("types", types),
    ("crossslot-multikey", crossslot),
    ("pipeline-160", pipeline),
    ("multi-exec-watch", multi_watch),
    ("script", script),
    ("pubsub", pubsub),
    ("blocking-pop", blocking),
    ("scan", scan),
    ("concurrent-20", concurrent),
    ("big-value-2mb", big_value),
    ("health", health),
    ("replica-read", replica_read),
    ("info-role-master", info_role),
    ("wait-replica", wait_replica),
];

fn main() {
    let addr = std::env::var("COMPAT_PROXY").unwrap_or_else(|_| "127.0.0.1:7000".into());
    let prefix = std::env::var("COMPAT_PREFIX").unwrap_or_else(|_| "crust".into());
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime"),
    );
    for name in ["sync", "async", "cluster"] {
        for proto in [2u8, 3] {
            let q = if proto == 3 { "?protocol=resp3" } else { "" };
            let m = Mode {
                name,
                proto,
                url: format!("redis://{addr}/{q}"),
                prefix: format!("{prefix}:r{proto}"),
                rt: rt.clone(),
            };
            let label = format!("redis-rs/{name}/resp{proto}");
            let mut c = match m.connect(false) {
                Ok(c) => c,
                Err(err) => {
                    println!("FAIL {label}/connect: {err}");
                    continue;
                }
            };
            for (case, f) in CASES {
                match f(&mut c, &m) {
                    Ok(()) => println!("PASS {label}/{case}"),
                    Err(s) if s.starts_with("SKIP: ") => {
                        println!("SKIP {label}/{case}: {}", &s[6..])
                    }
                    Err(s) => println!("FAIL {label}/{case}: {}", s.replace('\n', " ")),
                }
            }
        }
    }
}
