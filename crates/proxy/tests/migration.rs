//! `[migration]` (issue 26, docs/migration.md): the keys of a three-server ketama pool move
//! into a three-master cluster while clients write through two proxies, checked as the
//! issue's acceptance asks, at a smaller scale: every acknowledged increment counted once,
//! every key's last acknowledged write read after cut-over, every type's content and TTLs
//! kept, nothing left on the source, no client error.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::reference::Reference;
use common::{start_proxy, tempdir, text, wait_until, Client};
use proxy::config::ShardedConfig;
use resp::Value;

/// Keys of each family on the source before the move.
const PER_FAMILY: usize = 300;
/// Counters the load increments.
const COUNTERS: usize = 50;
/// The TTL the `t:` keys are written with, in ms.
const TTL_MS: i64 = 600_000;

/// A nutcracker-style pool over `refs`, weight 1 each. murmur, not nutcracker's default fnv1a_64: fnv1a_64 spreads keys that differ only in
/// their last digits (`s:0`..`s:299`) so unevenly that for some ports it places none of
/// them on one server of three (nutcracker too), and a test would then move nothing there.
fn pool(refs: &[Reference]) -> ShardedConfig {
    ShardedConfig {
        servers: refs.iter().map(|r| format!("{}:1", r.addr)).collect(),
        hash: "murmur".into(),
        ..Default::default()
    }
}

/// Each key written on the server the pool places it on, pipelined.
fn fill(refs: &[Reference], pool: &ShardedConfig, commands: &[Vec<Vec<u8>>]) {
    let sharding = pool.sharding().unwrap();
    let mut clients: Vec<Client> = refs.iter().map(Reference::client).collect();
    let mut sent = vec![0usize; refs.len()];
    for cmd in commands {
        let addr = &sharding.servers()[usize::from(sharding.server_of(&cmd[1]))].addr;
        let i = refs
            .iter()
            .position(|r| r.addr.to_string() == *addr)
            .unwrap();
        let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
        clients[i].send(&args);
        sent[i] += 1;
    }
    for (c, n) in clients.iter_mut().zip(sent) {
        for _ in 0..n {
            let reply = c.read().unwrap();
            assert!(!matches!(reply, Value::Error(_)), "{reply:?}");
        }
    }
}

fn cmd(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// The strings `s:` ("v0") and counters `c:` (1000) the load writes, for `fill`.
fn strings_and_counters() -> Vec<Vec<Vec<u8>>> {
    let strings = (0..PER_FAMILY).map(|i| cmd(&["SET", &format!("s:{i}"), "v0"]));
    let counters = (0..COUNTERS).map(|i| cmd(&["SET", &format!("c:{i}"), "1000"]));
    strings.chain(counters).collect()
}

/// A cluster of `masters` masters without replicas, its files under a `tag` directory.
fn start_cluster(masters: usize, tag: &str) -> devcluster::Cluster {
    let opts = devcluster::Options {
        masters,
        replicas: 0,
        dir: tempdir(tag),
        ..Default::default()
    };
    devcluster::Cluster::start(&opts).expect("cluster starts")
}

/// Every key of every server is on the server `placement` names for it; the keys counted.
fn assert_placed(servers: &[Reference], placement: &cluster::sharding::Sharding) -> usize {
    let mut total = 0;
    for server in servers {
        let Value::Array(keys) = server.client().call(&["KEYS", "*"]) else {
            panic!("KEYS")
        };
        assert!(!keys.is_empty(), "{}", server.addr);
        for key in &keys {
            let key = text(key);
            let at = &placement.servers()[usize::from(placement.server_of(key.as_bytes()))];
            assert_eq!(at.addr, server.addr.to_string(), "{key}");
        }
        total += keys.len();
    }
    total
}

/// `POST path` on the admin endpoint: the status and the body.
fn post(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer[9..12].parse().unwrap();
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

fn info_field(c: &mut Client, name: &str) -> String {
    let info = text(&c.call(&["INFO", "migration"]));
    let prefix = format!("{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{name} in {info}"))
        .trim()
        .to_string()
}

/// What one load thread had acknowledged.
#[derive(Default)]
struct Acked {
    incrs: HashMap<usize, i64>,
    last_set: HashMap<usize, String>,
    pushes: HashMap<usize, i64>,
    errors: Vec<String>,
}

/// Writes through `addr` until `stop`: INCR on the counters, SET on the strings (each
/// thread its own share of them, so "last acknowledged" is one thread's), LPUSH on lists.
fn load(addr: SocketAddr, id: usize, threads: usize, stop: Arc<AtomicBool>) -> Acked {
    let mut c = Client::connect(addr);
    let mut acked = Acked::default();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let counter = (n * 7 + id) % COUNTERS;
        let string = ((n * 13) % (PER_FAMILY / threads)) * threads + id;
        let list = ((n * 11) % (PER_FAMILY / threads)) * threads + id;
        let value = format!("w{id}-{n}");
        let (ck, sk, lk) = (
            format!("c:{counter}"),
            format!("s:{string}"),
            format!("l:{list}"),
        );
        c.send(&[b"INCR", ck.as_bytes()]);
        c.send(&[b"SET", sk.as_bytes(), value.as_bytes()]);
        c.send(&[b"LPUSH", lk.as_bytes(), value.as_bytes()]);
        match c.read() {
            Some(Value::Integer(_)) => *acked.incrs.entry(counter).or_default() += 1,
            other => acked.errors.push(format!("INCR {ck}: {other:?}")),
        }
        match c.read() {
            Some(Value::SimpleString(_)) => drop(acked.last_set.insert(string, value)),
            other => acked.errors.push(format!("SET {sk}: {other:?}")),
        }
        match c.read() {
            Some(Value::Integer(_)) => *acked.pushes.entry(list).or_default() += 1,
            other => acked.errors.push(format!("LPUSH {lk}: {other:?}")),
        }
    }
    acked
}

/// `threads` load clients spread over `proxies` until the first proxy's copier has found
/// the source empty; what they had acknowledged, none having seen an error.
fn load_until_moved(proxies: &[SocketAddr], threads: usize) -> Vec<Acked> {
    let mut watch = Client::connect(proxies[0]);
    load_until(proxies, threads, || {
        info_field(&mut watch, "migration_left_keys") == "0"
    })
}

/// `threads` load clients spread over `proxies` until `done`; what they had acknowledged,
/// none having seen an error.
fn load_until(proxies: &[SocketAddr], threads: usize, done: impl FnMut() -> bool) -> Vec<Acked> {
    let stop = Arc::new(AtomicBool::new(false));
    let loads: Vec<_> = (0..threads)
        .map(|id| {
            let (addr, stop) = (proxies[id % proxies.len()], stop.clone());
            std::thread::spawn(move || load(addr, id, threads, stop))
        })
        .collect();
    wait_until(Duration::from_secs(120), done);
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<Acked> = loads.into_iter().map(|t| t.join().unwrap()).collect();
    let errors: Vec<&String> = acked.iter().flat_map(|a| &a.errors).collect();
    assert!(errors.is_empty(), "client errors: {errors:?}");
    acked
}

/// Every counter (from 1000) at its acknowledged INCRs, every string (from "v0") at its last
/// acknowledged SET.
fn check_acked(c: &mut Client, acked: &[Acked]) {
    for i in 0..COUNTERS {
        let incrs: i64 = acked.iter().filter_map(|a| a.incrs.get(&i)).sum();
        let got = text(&c.call(&["GET", &format!("c:{i}")]));
        assert_eq!(got, (1000 + incrs).to_string(), "c:{i}");
    }
    for i in 0..PER_FAMILY {
        let last = acked.iter().find_map(|a| a.last_set.get(&i));
        let want = last.map_or("v0", String::as_str);
        assert_eq!(text(&c.call(&["GET", &format!("s:{i}")])), want, "s:{i}");
    }
}

#[test]
fn a_pool_moves_into_a_cluster_under_load_through_two_proxies_with_nothing_lost() {
    moves_through_two_proxies(proxy::config::MigrationConfig::default().dump_max_bytes);
}

#[test]
fn a_pool_moves_with_every_key_copied_by_slices_through_two_proxies_with_nothing_lost() {
    // dump_max_bytes 0: every string, hash, list, set and sorted set moves by slices
    // (typed_copy.rs) under the same load and checks; streams still by DUMP.
    moves_through_two_proxies(0);
}

/// 2,150 keys of every type on a three-server pool moved into a cluster through two
/// proxies, each with a copier, under load; every acknowledged write read back.
fn moves_through_two_proxies(dump_max_bytes: u64) {
    let refs = [Reference::start(), Reference::start(), Reference::start()];
    let source = pool(&refs);
    let mut commands = strings_and_counters();
    for i in 0..PER_FAMILY {
        let i = i.to_string();
        commands.push(cmd(&["HSET", &format!("h:{i}"), "a", &i, "b", "2"]));
        commands.push(cmd(&["RPUSH", &format!("l:{i}"), "x", "y"]));
        commands.push(cmd(&["SADD", &format!("S:{i}"), "m1", "m2", &i]));
        commands.push(cmd(&["ZADD", &format!("z:{i}"), "1", "a", "2.5", &i]));
        commands.push(cmd(&["XADD", &format!("x:{i}"), "*", "f", &i]));
        let ttl = TTL_MS.to_string();
        commands.push(cmd(&["SET", &format!("t:{i}"), &i, "PX", &ttl]));
    }
    fill(&refs, &source, &commands);
    let written = Instant::now();
    let cluster = start_cluster(3, "migration");
    let start = |rate: u32| {
        start_proxy(&cluster, |c| {
            c.migration.source = source.clone();
            c.migration.copy_keys_per_second = rate;
            c.migration.dump_max_bytes = dump_max_bytes;
            c.admin.listen = "127.0.0.1:0".into();
        })
    };
    let (a, b) = (start(2000), start(2000));
    // Four clients, two per proxy, until the copiers find the source empty.
    let acked = load_until_moved(&[a.local_addr(), b.local_addr()], 4);
    assert!(
        acked
            .iter()
            .map(|a| a.incrs.values().sum::<i64>())
            .sum::<i64>()
            > 0
    );

    // Cut over: refused by a proxy whose copier has not found the source empty is not
    // tested here (both have); accepted by one, adopted by the other from the target.
    let (status, body) = post(a.admin_addr().unwrap(), "/migration/cutover");
    assert_eq!((status, body.trim()), (200, "migration default: done"));
    let mut on_b = Client::connect(b.local_addr());
    wait_until(Duration::from_secs(10), || {
        info_field(&mut on_b, "migration_phase") == "done"
    });
    for r in &refs {
        assert_eq!(
            r.client().call(&["DBSIZE"]),
            Value::Integer(0),
            "source {}",
            r.addr
        );
    }

    // Every acknowledged write, once.
    let mut c = Client::connect(b.local_addr());
    check_acked(&mut c, &acked);
    for i in 0..PER_FAMILY {
        let pushes: i64 = acked.iter().filter_map(|a| a.pushes.get(&i)).sum();
        let len = c.call(&["LLEN", &format!("l:{i}")]);
        assert_eq!(len, Value::Integer(2 + pushes), "l:{i}");
    }
    // Every type's content, and TTLs within a second of the source's.
    let elapsed = written.elapsed().as_millis() as i64;
    for i in 0..PER_FAMILY {
        let s = i.to_string();
        let h = c.call(&["HGET", &format!("h:{i}"), "a"]);
        assert_eq!(text(&h), s, "h:{i}");
        assert_eq!(c.call(&["SCARD", &format!("S:{i}")]), Value::Integer(3));
        assert_eq!(text(&c.call(&["ZSCORE", &format!("z:{i}"), &s])), "2.5");
        assert_eq!(c.call(&["XLEN", &format!("x:{i}")]), Value::Integer(1));
        assert_eq!(text(&c.call(&["GET", &format!("t:{i}")])), s);
        let Value::Integer(pttl) = c.call(&["PTTL", &format!("t:{i}")]) else {
            panic!("PTTL t:{i}")
        };
        let elapsed_now = written.elapsed().as_millis() as i64;
        assert!(
            pttl <= TTL_MS - elapsed + 1000 && pttl >= TTL_MS - elapsed_now - 1000,
            "t:{i} PTTL {pttl}"
        );
    }
    // A counter of INFO migration, summed over both proxies.
    let summed = |name: &str| -> usize {
        [&a, &b]
            .iter()
            .map(|p| {
                let mut c = Client::connect(p.local_addr());
                info_field(&mut c, name).parse::<usize>().unwrap()
            })
            .sum()
    };
    assert_eq!(summed("migration_keys_moved"), 7 * PER_FAMILY + COUNTERS);
    // Every key but the streams by slices, or none.
    let expected = if dump_max_bytes == 0 {
        6 * PER_FAMILY + COUNTERS
    } else {
        0
    };
    assert_eq!(summed("migration_keys_sliced"), expected);
    // The load met keys still on the source: the gate moved some of them.
    let gated = summed("migration_requests_gated");
    assert!(gated > 0);
    a.shutdown();
    b.shutdown();
}

#[test]
fn keys_too_big_to_dump_move_by_slices_with_their_content_and_ttl() {
    // dump_max_bytes 1024: each big key below is read from the source in slices (a 3 MiB
    // string in four, collections 128 elements at a time) into a temporary key beside it
    // on the target, renamed into place. A small key still moves by DUMP; a key the target
    // has already keeps the target's value.
    let source = Reference::start();
    let mut s = source.client();
    let big: String = (0..(3 << 20) + 5)
        .map(|i| match i % 97 {
            0 => '\r',
            1 => '\n',
            2 => '\0',
            n => char::from(b'a' + (n % 26) as u8),
        })
        .collect();
    assert_eq!(text(&s.call(&["SET", "bigs", &big, "PX", "600000"])), "OK");
    let written = Instant::now();
    let items: Vec<String> = (0..1000).map(|i| format!("e{i}")).collect();
    let with = |cmd: &str, key: &str, args: Vec<String>| {
        let mut all = vec![cmd.to_string(), key.to_string()];
        all.extend(args);
        all
    };
    let fills = [
        with("RPUSH", "bigl", items.clone()),
        // 2.5 MiB that LZF cannot shrink, for DUMP's payload.
        with(
            "RPUSH",
            "bigr",
            (0..600u64)
                .map(|i| {
                    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    (0..4096)
                        .map(|_| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            char::from(b'!' + (x % 90) as u8)
                        })
                        .collect()
                })
                .collect(),
        ),
        with("RPUSH", "both", items.clone()),
        with(
            "HSET",
            "bigh",
            items
                .iter()
                .flat_map(|e| [e.clone(), format!("v{e}")])
                .collect(),
        ),
        with("SADD", "bigS", items.clone()),
        with(
            "ZADD",
            "bigz",
            items
                .iter()
                .enumerate()
                .flat_map(|(i, e)| [format!("{}", i as f64 * 0.1), e.clone()])
                .chain(["inf", "top", "-inf", "bottom", "1e-300", "tiny"].map(String::from))
                .collect(),
        ),
        with("SET", "small", vec!["v".into()]),
    ];
    for f in &fills {
        let args: Vec<&str> = f.iter().map(String::as_str).collect();
        assert!(!matches!(s.call(&args), Value::Error(_)), "{}", f[0]);
    }
    let reads: [&[&str]; 7] = [
        &["GET", "bigs"],
        &["LRANGE", "bigl", "0", "-1"],
        &["LRANGE", "bigr", "0", "-1"],
        &["HGETALL", "bigh"],
        &["SMEMBERS", "bigS"],
        &["ZRANGE", "bigz", "0", "-1", "WITHSCORES"],
        &["GET", "small"],
    ];
    // Hash and set replies sorted: their order is the encoding's, not the data's.
    let sorted = |v: Value| match v {
        Value::Array(mut items) => {
            let mut texts: Vec<String> = items.drain(..).map(|i| text(&i)).collect();
            texts.sort();
            texts.join(",")
        }
        other => text(&other),
    };
    let before: Vec<String> = reads.iter().map(|r| sorted(s.call(r))).collect();

    let cluster = start_cluster(3, "migration-slices");
    // "both" is on the target already: the target's copy wins.
    let plain = start_proxy(&cluster, |_| {});
    assert_eq!(
        Client::connect(plain.local_addr()).call(&["RPUSH", "both", "target"]),
        Value::Integer(1)
    );
    let proxy = start_proxy(&cluster, |c| {
        c.migration.source = pool(std::slice::from_ref(&source));
        c.migration.copy_keys_per_second = 0;
        c.migration.dump_max_bytes = 1024;
    });
    let mut c = Client::connect(proxy.local_addr());
    let mut after = vec![sorted(c.call(reads[0]))];
    // Then the masters refuse bulks over 1 MiB: the 2.5 MiB list's DUMP could not be
    // RESTOREd, its slices can. (A string is refused there over the limit whole, APPEND
    // included, hence the string first.)
    for master in cluster.masters() {
        let mut m = Client::connect(master);
        let set = m.call(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
        assert_eq!(text(&set), "OK");
    }
    after.extend(reads[1..].iter().map(|r| sorted(c.call(r))));
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        assert!(
            b == a,
            "{:?}: {} bytes before, {} after: {}",
            reads[i],
            b.len(),
            a.len(),
            &a[..a.len().min(300)]
        );
    }
    assert_eq!(
        c.call(&["LRANGE", "both", "0", "-1"]),
        Value::Array(vec![Value::BulkString("target".into())])
    );
    let Value::Integer(pttl) = c.call(&["PTTL", "bigs"]) else {
        panic!("PTTL")
    };
    let elapsed = written.elapsed().as_millis() as i64;
    assert!(
        pttl > 600_000 - elapsed - 1000 && pttl <= 600_000,
        "PTTL {pttl}"
    );
    assert_eq!(c.call(&["PTTL", "bigl"]), Value::Integer(-1));
    // Every key left the source (the releases run after the replies); no temporary key is
    // left on the target.
    wait_until(Duration::from_secs(10), || {
        s.call(&["DBSIZE"]) == Value::Integer(0)
    });
    for master in cluster.masters() {
        let keys = Client::connect(master).call(&["KEYS", "__slotgate:copy:*"]);
        assert_eq!(keys, Value::Array(vec![]), "{master}");
    }
    assert_eq!(info_field(&mut c, "migration_keys_moved"), "7");
    assert_eq!(info_field(&mut c, "migration_keys_kept"), "1");
    // All but the small one by slices.
    assert_eq!(info_field(&mut c, "migration_keys_sliced"), "6");
    let bytes: u64 = info_field(&mut c, "migration_bytes").parse().unwrap();
    assert!(bytes > 3 << 20, "{bytes}");
    proxy.shutdown();
    plain.shutdown();
}

#[test]
fn a_failed_move_answers_tryagain_and_runs_nothing() {
    // The source is down: a key not known moved cannot be looked for, so the request is
    // not run (a retry is safe) rather than run on a target that may lack the key.
    let dead = common::reference::free_port();
    let cluster = start_cluster(1, "migration-down");
    let proxy = start_proxy(&cluster, |c| {
        c.migration.source.servers = vec![format!("127.0.0.1:{dead}:1")];
        c.migration.copy_keys_per_second = 0;
        c.admin.listen = "127.0.0.1:0".into();
    });
    let mut c = Client::connect(proxy.local_addr());
    c.call(&["MULTI"]);
    let err = text(&c.call(&["INCR", "k"]));
    assert!(err.starts_with("-TRYAGAIN slotgate: migration:"), "{err}");
    assert!(text(&c.call(&["EXEC"])).starts_with("-EXECABORT"));
    let err = text(&c.call(&["FLUSHALL"]));
    assert!(err.contains("cut the migration over first"), "{err}");
    // Nothing reached the target.
    let node = cluster.masters()[0];
    assert_eq!(
        Client::connect(node).call(&["EXISTS", "k"]),
        Value::Integer(0)
    );
    // Keyless commands and shard channels pass.
    assert_eq!(text(&c.call(&["PING"])), "PONG");
    assert_eq!(c.call(&["SPUBLISH", "ch", "m"]), Value::Integer(0));
    // Cut-over waits for a copier pass that found the source empty; this proxy has none.
    let admin = proxy.admin_addr().unwrap();
    let (status, body) = post(admin, "/migration/cutover");
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("no copier pass has ended"), "{body}");
    let (status, _) = post(admin, "/migration/pause");
    assert_eq!(status, 200);
    assert_eq!(info_field(&mut c, "migration_phase"), "paused");
    proxy.shutdown();
}

#[test]
fn a_sentinel_master_moves_into_a_cluster_across_its_own_failover() {
    use common::sentinel::Server;
    let dir = tempdir("migration-sentinel");
    std::fs::create_dir_all(&dir).unwrap();
    let mut master = Server::start(&[]);
    let port = master.addr.port().to_string();
    let replica = Server::start(&["--replicaof", "127.0.0.1", &port]);
    let link = |c: &mut Client| {
        let info = text(&c.call(&["INFO", "replication"]));
        info.contains("master_link_status:up")
    };
    let mut r = replica.client();
    wait_until(Duration::from_secs(20), || link(&mut r));
    let sentinel = Server::sentinel(&dir, master.addr);
    let mut s = sentinel.client();
    wait_until(
        Duration::from_secs(30),
        || matches!(s.call(&["SENTINEL", "REPLICAS", "mymaster"]), Value::Array(v) if !v.is_empty()),
    );
    let keys = 400;
    let mut m = master.client();
    for i in 0..COUNTERS {
        m.send(&[b"SET", format!("c:{i}").as_bytes(), b"0"]);
    }
    for i in 0..keys {
        m.send(&[b"SET", format!("k:{i}").as_bytes(), b"v"]);
    }
    for _ in 0..COUNTERS + keys {
        assert_eq!(text(&m.read().unwrap()), "OK");
    }
    let total = Value::Integer((COUNTERS + keys) as i64);
    wait_until(Duration::from_secs(10), || r.call(&["DBSIZE"]) == total);

    let cluster = start_cluster(3, "migration-sentinel-target");
    let proxy = start_proxy(&cluster, |c| {
        c.migration.source_sentinel.sentinels = vec![sentinel.addr.to_string()];
        c.migration.source_sentinel.master_name = "mymaster".into();
        // Slow enough that the failover comes mid-way.
        c.migration.copy_keys_per_second = 60;
        c.admin.listen = "127.0.0.1:0".into();
    });
    let addr = proxy.local_addr();
    let mut watch = Client::connect(addr);
    assert_eq!(
        info_field(&mut watch, "migration_source"),
        master.addr.to_string()
    );

    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            let (mut acked, mut retry, mut other) = (HashMap::new(), 0u64, Vec::new());
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let i = (n * 7) % COUNTERS;
                match c.call(&["INCR", &format!("c:{i}")]) {
                    Value::Integer(_) => *acked.entry(i).or_insert(0i64) += 1,
                    Value::Error(e) if e.starts_with(b"TRYAGAIN") => retry += 1,
                    reply => other.push(format!("{reply:?}")),
                }
                // Reads of keys the copier has not reached: some meet the failover.
                match c.call(&["GET", &format!("k:{}", n % keys)]) {
                    Value::BulkString(v) if &v[..] == b"v" => {}
                    Value::Error(e) if e.starts_with(b"TRYAGAIN") => retry += 1,
                    reply => other.push(format!("{reply:?}")),
                }
            }
            (acked, retry, other)
        })
    };
    wait_until(Duration::from_secs(30), || {
        info_field(&mut watch, "migration_keys_moved")
            .parse::<u64>()
            .unwrap()
            >= 100
    });
    let _ = master.child.kill();
    let _ = master.child.wait();
    // The moves follow the promotion.
    wait_until(Duration::from_secs(30), || {
        info_field(&mut watch, "migration_source") == replica.addr.to_string()
    });
    wait_until(Duration::from_secs(60), || {
        info_field(&mut watch, "migration_left_keys") == "0"
    });
    stop.store(true, Ordering::Relaxed);
    let (acked, retry, other) = load.join().unwrap();
    assert!(other.is_empty(), "{other:?}");
    eprintln!("TRYAGAIN answers during the source's failover: {retry}");
    let mut c = Client::connect(addr);
    for i in 0..COUNTERS {
        let want = acked.get(&i).copied().unwrap_or(0);
        assert_eq!(
            text(&c.call(&["GET", &format!("c:{i}")])),
            want.to_string(),
            "c:{i}"
        );
    }
    for i in 0..keys {
        assert_eq!(text(&c.call(&["GET", &format!("k:{i}")])), "v", "k:{i}");
    }
    assert_eq!(replica.client().call(&["DBSIZE"]), Value::Integer(0));
    let (status, body) = post(proxy.admin_addr().unwrap(), "/migration/cutover");
    assert_eq!(status, 200, "{body}");
    proxy.shutdown();
}

#[test]
fn the_verifier_finds_a_key_written_on_both_sides_and_the_target_copy_wins() {
    // A writer that bypassed the proxies: "dup" on the source and on the target.
    let source = Reference::start();
    assert_eq!(text(&source.client().call(&["SET", "dup", "old"])), "OK");
    let cluster = start_cluster(1, "migration-verify");
    let node = cluster.masters()[0];
    assert_eq!(
        text(&Client::connect(node).call(&["SET", "dup", "new"])),
        "OK"
    );
    let proxy = start_proxy(&cluster, |c| {
        c.migration.source.servers = vec![format!("{}:1", source.addr)];
        c.migration.copy_keys_per_second = 0;
        c.migration.verify_samples_per_second = 50;
    });
    let mut c = Client::connect(proxy.local_addr());
    wait_until(Duration::from_secs(20), || {
        info_field(&mut c, "migration_verify_conflicts") != "0"
    });
    assert_eq!(info_field(&mut c, "migration_last_conflict"), "dup");
    // Touched, it moves: the target's copy is kept, the source's dropped.
    assert_eq!(text(&c.call(&["GET", "dup"])), "new");
    assert_eq!(info_field(&mut c, "migration_keys_kept"), "1");
    let mut s = source.client();
    wait_until(Duration::from_secs(10), || {
        s.call(&["EXISTS", "dup"]) == Value::Integer(0)
    });
    proxy.shutdown();
}

#[test]
fn a_sharded_pool_is_resharded_onto_one_more_server_under_load() {
    // nutcracker cannot add a server without moving keys under its clients' feet: with the
    // new pool as `[sharded]` and the old one as the source, slotgate moves them online.
    // The old servers are in the new pool too: keys that stay are left alone.
    let servers = [Reference::start(), Reference::start(), Reference::start()];
    let source = pool(&servers[..2]);
    fill(&servers[..2], &source, &strings_and_counters());
    let mut config = proxy::Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 2;
    config.sharded = pool(&servers);
    config.migration.source = source;
    config.migration.copy_keys_per_second = 1000;
    config.admin.listen = "127.0.0.1:0".into();
    let placement = config.sharded.sharding().unwrap();
    let proxy = proxy::Proxy::start(config).expect("proxy starts");
    let acked = load_until_moved(&[proxy.local_addr()], 2);
    let (status, body) = post(proxy.admin_addr().unwrap(), "/migration/cutover");
    assert_eq!(status, 200, "{body}");
    check_acked(&mut Client::connect(proxy.local_addr()), &acked);
    // Every key on the server the new pool's placement names, and nowhere else: some
    // moved to the new server, the others stayed.
    let total = assert_placed(&servers, &placement);
    let lists = acked
        .iter()
        .flat_map(|a| a.pushes.keys())
        .collect::<std::collections::HashSet<_>>();
    // The keys, the lists the load made, and the migration's state hash.
    assert_eq!(total, PER_FAMILY + COUNTERS + lists.len() + 1);
    proxy.shutdown();
}

#[test]
fn a_migration_into_a_cluster_is_rolled_back_into_its_pool_under_load() {
    // Roll-back is a migration the other way: the old pool served again (`[sharded]`), the
    // cluster as the source. First half a migration into the cluster (no copier: only the
    // keys the load touches move), then a proxy serving the pool drains the cluster back
    // into it under load. Every acknowledged write of both halves is read back.
    let refs = [Reference::start(), Reference::start(), Reference::start()];
    let source = pool(&refs);
    let mut commands = strings_and_counters();
    for i in 0..PER_FAMILY {
        // Keys with hash tags of their own: a lease on a cluster source shares their slot.
        commands.push(cmd(&["HSET", &format!("{{u{i}}}:h"), "a", &i.to_string()]));
    }
    fill(&refs, &source, &commands);
    let cluster = start_cluster(3, "rollback");
    let forward = start_proxy(&cluster, |c| {
        c.migration.source = source.clone();
        c.migration.copy_keys_per_second = 0;
    });
    let mut watch = Client::connect(forward.local_addr());
    let first = load_until(&[forward.local_addr()], 2, || {
        info_field(&mut watch, "migration_keys_moved")
            .parse::<u64>()
            .unwrap()
            >= 40
    });
    let mut c = Client::connect(forward.local_addr());
    for i in 0..PER_FAMILY / 2 {
        // Some tagged keys into the cluster too.
        assert_eq!(
            text(&c.call(&["HGET", &format!("{{u{i}}}:h"), "a"])),
            i.to_string()
        );
    }
    forward.shutdown();
    let masters: Vec<String> = cluster.masters().iter().map(|a| a.to_string()).collect();

    let mut config = proxy::Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 2;
    config.sharded = source.clone();
    config.migration.name = "back".into();
    config.migration.source_cluster = masters.clone();
    config.migration.copy_keys_per_second = 1000;
    config.admin.listen = "127.0.0.1:0".into();
    let back = proxy::Proxy::start(config).expect("proxy starts");
    let second = load_until_moved(&[back.local_addr()], 2);
    let (status, body) = post(back.admin_addr().unwrap(), "/migration/cutover");
    assert_eq!((status, body.trim()), (200, "migration back: done"));

    // The second half's writes first: `check_acked` takes a string's first value found as
    // its last acknowledged write.
    let acked: Vec<Acked> = second.into_iter().chain(first).collect();
    let mut c = Client::connect(back.local_addr());
    check_acked(&mut c, &acked);
    for i in 0..PER_FAMILY {
        let pushes: i64 = acked.iter().filter_map(|a| a.pushes.get(&i)).sum();
        assert_eq!(
            c.call(&["LLEN", &format!("l:{i}")]),
            Value::Integer(pushes),
            "l:{i}"
        );
        assert_eq!(
            text(&c.call(&["HGET", &format!("{{u{i}}}:h"), "a"])),
            i.to_string()
        );
    }
    // The cluster keeps only the first migration's state; every key is back on the
    // server the pool's placement names.
    for master in &masters {
        let mut m = Client::connect(master.parse().unwrap());
        let Value::Array(keys) = m.call(&["KEYS", "*"]) else {
            panic!("KEYS")
        };
        for key in keys {
            assert!(
                text(&key).starts_with("__slotgate:migration:"),
                "{master}: {key:?}"
            );
        }
    }
    assert_placed(&refs, &source.sharding().unwrap());
    back.shutdown();
}
