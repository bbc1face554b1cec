//! redis-rs cases for the data side: handshake, every data type, multi-key commands across
//! slots, pipelines, transactions and scripts (main.rs runs them).

use std::collections::{HashMap, HashSet};

use redis::{cmd, Value};

use crate::{e, eq, Check, Conn, Mode};

pub(crate) fn handshake(c: &mut Conn, m: &Mode) -> Check {
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

pub(crate) fn types(c: &mut Conn, m: &Mode) -> Check {
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
    scored_and_more(c, m)
}

/// The second half of `types`: sorted sets, streams, HyperLogLog, geo, bitmaps.
fn scored_and_more(c: &mut Conn, m: &Mode) -> Check {
    let k = |n: &str| m.key(n);
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

pub(crate) fn crossslot(c: &mut Conn, m: &Mode) -> Check {
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

pub(crate) fn pipeline(c: &mut Conn, m: &Mode) -> Check {
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

pub(crate) fn multi_watch(c: &mut Conn, m: &Mode) -> Check {
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

pub(crate) fn script(c: &mut Conn, m: &Mode) -> Check {
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
