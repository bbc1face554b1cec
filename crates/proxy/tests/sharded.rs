//! A sharded pool of standalone servers (issue 26): slotgate in nutcracker's place, with
//! nutcracker itself as the oracle. Keys written through a real nutcracker must be where
//! slotgate's placement says, for every hash and distribution, and slotgate started from the
//! same YAML file must serve them.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::reference::{free_port, Reference};
use common::{text, wait_until, Client};
use proxy::config::nutcracker;
use proxy::Proxy;
use resp::Value;

/// The nutcracker binary: Debian's package puts it in /usr/sbin. A test that cannot run
/// fails (`make test` installs it).
fn nutcracker_bin() -> PathBuf {
    let found = ["/usr/sbin/nutcracker", "/usr/bin/nutcracker"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    found.expect("nutcracker is installed (scripts/install-deps)")
}

/// A running nutcracker over `servers`; killed when dropped.
struct Nutcracker {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Nutcracker {
    fn start(yaml: &str) -> Nutcracker {
        let dir = common::tempdir("nutcracker");
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("nc.yml");
        std::fs::write(&conf, yaml).unwrap();
        let addr: SocketAddr = listen_of(yaml).parse().unwrap();
        let child = Command::new(nutcracker_bin())
            .arg("-c")
            .arg(&conf)
            .args(["-s", &free_port().to_string(), "-a", "127.0.0.1"])
            .arg("-o")
            .arg(dir.join("nc.log"))
            .arg("-p")
            .arg(dir.join("nc.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nutcracker runs");
        wait_until(Duration::from_secs(10), || {
            std::net::TcpStream::connect(addr).is_ok()
        });
        Nutcracker { child, addr, dir }
    }
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn listen_of(yaml: &str) -> String {
    let line = yaml
        .lines()
        .find(|l| l.trim().starts_with("listen:"))
        .unwrap();
    line.trim().trim_start_matches("listen:").trim().to_string()
}

/// A one-pool nutcracker file over `servers` with these settings.
fn yaml(listen: u16, servers: &[(&Reference, u32)], extra: &str) -> String {
    let mut y = format!("pool:\n  listen: 127.0.0.1:{listen}\n  redis: true\n{extra}  servers:\n");
    for (r, weight) in servers {
        y += &format!("   - {}:{weight}\n", r.addr);
    }
    y
}

/// `keys` SET through `addr` (value = the key's index), pipelined in batches.
fn set_all(addr: SocketAddr, keys: &[Vec<u8>]) {
    let mut c = Client::connect(addr);
    for batch in keys.chunks(1000) {
        let mut out = bytes::BytesMut::new();
        for (i, k) in batch.iter().enumerate() {
            resp::encode_command(&mut out, &[b"SET", k, i.to_string().as_bytes()]);
        }
        c.stream.write_all(&out).unwrap();
        for _ in batch {
            assert_eq!(
                c.read(),
                Some(Value::SimpleString(bytes::Bytes::from_static(b"OK")))
            );
        }
    }
}

/// Every key on `server`, by SCAN.
fn keys_on(server: &Reference) -> Vec<Vec<u8>> {
    let mut c = server.client();
    let mut cursor = "0".to_string();
    let mut all = Vec::new();
    loop {
        let reply = c.call(&["SCAN", &cursor, "COUNT", "1000"]);
        let Value::Array(parts) = reply else {
            panic!("SCAN: {reply:?}")
        };
        cursor = text(&parts[0]);
        if let Value::Array(keys) = &parts[1] {
            all.extend(keys.iter().map(|k| match k {
                Value::BulkString(b) => b.to_vec(),
                other => panic!("{other:?}"),
            }));
        }
        if cursor == "0" {
            return all;
        }
    }
}

/// Keys of every shape a placement must get right: plain, tagged, binary with high bytes
/// (nutcracker sign-extends them), empty tags, long ones.
fn test_keys(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match i % 5 {
            0 => format!("key:{i}").into_bytes(),
            1 => format!("user:{{{}}}:field{i}", i % 97).into_bytes(),
            2 => {
                let mut k = format!("bin{i}").into_bytes();
                k.extend([0x80, 0xff, (i % 256) as u8, 0xc3, 0xa9]);
                k
            }
            3 => format!("{{}}empty-tag:{i}").into_bytes(),
            _ => format!("{}:{i}", "long".repeat(i % 40)).into_bytes(),
        })
        .collect()
}

/// The servers' key sets under the placement of `yaml`'s pool: every key must be on the
/// server slotgate computes. Returns how many keys were checked.
fn check_placement(yaml: &str, servers: &[&Reference]) -> usize {
    let pools = nutcracker::read(yaml).expect("slotgate reads the file");
    let sharding = pools[0].config.sharded.sharding().unwrap();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for server in servers {
        for key in keys_on(server) {
            let ours = &sharding.servers()[usize::from(sharding.server_of(&key))].addr;
            if *ours != server.addr.to_string() {
                let key = String::from_utf8_lossy(&key);
                wrong.push(format!("{key:?} on {}, ours {ours}", server.addr));
            }
            checked += 1;
        }
    }
    assert!(
        wrong.is_empty(),
        "{} {}: {} of {checked} keys elsewhere, such as {:?}",
        sharding.hash(),
        sharding.distribution(),
        wrong.len(),
        &wrong[..wrong.len().min(6)]
    );
    checked
}

fn flush(servers: &[&Reference]) {
    for s in servers {
        assert_eq!(text(&s.client().call(&["FLUSHALL"])), "OK");
    }
}

#[test]
fn every_hash_and_distribution_places_keys_where_nutcracker_does() {
    let refs = [Reference::start(), Reference::start(), Reference::start()];
    let servers: Vec<&Reference> = refs.iter().collect();
    let keys = test_keys(1500);
    for hash in cluster::sharding::HashFn::all() {
        for distribution in ["ketama", "modula"] {
            flush(&servers);
            let weights = [(servers[0], 1), (servers[1], 2), (servers[2], 1)];
            let extra =
                format!("  hash: {hash}\n  distribution: {distribution}\n  hash_tag: \"{{}}\"\n");
            let y = yaml(free_port(), &weights, &extra);
            let nc = Nutcracker::start(&y);
            set_all(nc.addr, &keys);
            assert_eq!(
                check_placement(&y, &servers),
                keys.len(),
                "{hash} {distribution}"
            );
        }
    }
}

#[test]
fn slotgate_from_a_nutcracker_file_serves_100000_keys_where_nutcracker_put_them() {
    let refs = [Reference::start(), Reference::start(), Reference::start()];
    let servers: Vec<&Reference> = refs.iter().collect();
    let weights: Vec<(&Reference, u32)> = servers.iter().map(|s| (*s, 1)).collect();
    // nutcracker's defaults: fnv1a_64, ketama, no tag.
    let y = yaml(free_port(), &weights, "");
    let nc = Nutcracker::start(&y);
    let keys: Vec<Vec<u8>> = (0..100_000)
        .map(|i| format!("key:{i}").into_bytes())
        .collect();
    set_all(nc.addr, &keys);
    assert_eq!(check_placement(&y, &servers), keys.len());
    for s in &servers {
        let n = keys_on(s).len();
        assert!(n > 20_000, "ketama spreads the keys: {n} on one server");
    }
    // slotgate from the same file (its own port), every key read back with its value.
    let pool = nutcracker::read(&y.replace(&listen_of(&y), "127.0.0.1:0")).unwrap();
    let proxy = Proxy::start(pool[0].config.clone()).expect("slotgate starts");
    let mut c = Client::connect(proxy.local_addr());
    for batch in keys.chunks(1000) {
        let mut out = bytes::BytesMut::new();
        for k in batch {
            resp::encode_command(&mut out, &[b"GET", k]);
        }
        c.stream.write_all(&out).unwrap();
        for (i, _) in batch.iter().enumerate() {
            assert_eq!(c.read().map(|v| text(&v)), Some(i.to_string()));
        }
    }
    proxy.shutdown();
}

#[test]
fn a_sharded_pool_answers_as_one_redis_across_its_servers() {
    let refs = [Reference::start(), Reference::start(), Reference::start()];
    let weights: Vec<(&Reference, u32)> = refs.iter().map(|s| (s, 1)).collect();
    // md5: nutcracker's default fnv1a_64 spreads thirty short keys unevenly.
    let y = yaml(0, &weights, "  hash: md5\n  hash_tag: \"{}\"\n");
    let pool = nutcracker::read(&y).unwrap();
    let proxy = Proxy::start(pool[0].config.clone()).expect("slotgate starts");
    let mut c = Client::connect(proxy.local_addr());
    let keys: Vec<String> = (0..30).map(|i| format!("k{i}")).collect();
    let mut mset = vec!["MSET"];
    for k in &keys {
        mset.extend([k.as_str(), k.as_str()]);
    }
    assert_eq!(text(&c.call(&mset)), "OK");
    // Split across servers, merged in key order.
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    let Value::Array(values) = c.call(&mget) else {
        panic!("MGET")
    };
    let values: Vec<String> = values.iter().map(text).collect();
    assert_eq!(values, keys);
    // Every server holds some; DBSIZE and KEYS sum over them.
    assert!(refs.iter().all(|r| !keys_on(r).is_empty()));
    assert_eq!(c.call(&["DBSIZE"]), Value::Integer(30));
    let Value::Array(all) = c.call(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    assert_eq!(all.len(), 30);
    // Atomic commands over two servers are refused; a tag keeps them together.
    let (a, b) = two_keys_apart(&pool[0].config);
    let err = text(&c.call(&["RENAME", &a, &b]));
    assert!(err.contains("CROSSSLOT"), "{err}");
    assert_eq!(text(&c.call(&["SET", "{t}a", "1"])), "OK");
    assert_eq!(text(&c.call(&["RENAME", "{t}a", "{t}b"])), "OK");
    // A transaction on one server.
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["INCR", "{t}n"])), "QUEUED");
    assert_eq!(text(&c.call(&["INCR", "{t}n"])), "QUEUED");
    assert_eq!(
        c.call(&["EXEC"]),
        Value::Array(vec![Value::Integer(1), Value::Integer(2)])
    );
    assert_eq!(
        c.call(&["DEL", "k1", "k2", "k3", "{t}b"]),
        Value::Integer(4)
    );
    proxy.shutdown();
}

/// Two keys that the pool places on different servers.
fn two_keys_apart(config: &proxy::Config) -> (String, String) {
    let sharding = config.sharded.sharding().unwrap();
    let first = sharding.server_of(b"a0");
    let other = (1..).map(|i| format!("a{i}"));
    let b = other
        .into_iter()
        .find(|k| sharding.server_of(k.as_bytes()) != first)
        .unwrap();
    ("a0".into(), b)
}

/// `name:value` from the proxy's INFO section `section`.
fn info_u64(c: &mut Client, section: &str, name: &str) -> u64 {
    let info = text(&c.call(&["INFO", section]));
    let prefix = format!("{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in INFO {section}: {info}"))
}

#[test]
fn writes_are_mirrored_to_a_second_pool_without_the_client_seeing_it() {
    let primary = Reference::start();
    let mirrors = [Reference::start(), Reference::start()];
    let start = |percent: u32| {
        let mut config = proxy::Config::default();
        config.proxy.listen = "127.0.0.1:0".into();
        config.proxy.threads = 1;
        config.sharded.servers = vec![format!("{}:1", primary.addr)];
        config.mirror.pool.servers = mirrors.iter().map(|m| format!("{}:1", m.addr)).collect();
        config.mirror.percent = percent;
        let sharding = config.mirror.pool.sharding().unwrap();
        (Proxy::start(config).expect("slotgate starts"), sharding)
    };
    // Every write copied, no read.
    let (proxy, sharding) = start(100);
    let mut c = Client::connect(proxy.local_addr());
    for i in 0..1000 {
        assert_eq!(text(&c.call(&["SET", &format!("m:{i}"), "v"])), "OK");
        assert_eq!(text(&c.call(&["GET", &format!("m:{i}")])), "v");
    }
    wait_until(Duration::from_secs(10), || {
        info_u64(&mut c, "stats", "mirror_answered") == 1000
    });
    assert_eq!(info_u64(&mut c, "stats", "mirror_sent"), 1000);
    assert_eq!(info_u64(&mut c, "stats", "mirror_failed"), 0);
    assert_eq!(info_u64(&mut c, "stats", "mirror_dropped"), 0);
    let mut arrived = 0;
    for m in &mirrors {
        for key in keys_on(m) {
            let at = &sharding.servers()[usize::from(sharding.server_of(&key))].addr;
            assert_eq!(*at, m.addr.to_string(), "placed by the mirror pool's hash");
            arrived += 1;
        }
        let stats = text(&m.client().call(&["INFO", "commandstats"]));
        assert!(
            !stats.contains("cmdstat_get:"),
            "reads are not mirrored: {stats}"
        );
    }
    assert_eq!(arrived, 1000);
    // A mirror server gone: the client's writes still succeed; the copies fail, counted.
    flush(&mirrors.iter().collect::<Vec<_>>());
    let dead = mirrors[0].addr;
    drop(proxy);
    let (proxy, _) = start(10);
    let mut c = Client::connect(proxy.local_addr());
    for i in 0..3000 {
        assert_eq!(text(&c.call(&["SET", &format!("p:{i}"), "v"])), "OK");
    }
    wait_until(Duration::from_secs(10), || {
        let sent = info_u64(&mut c, "stats", "mirror_sent");
        sent == info_u64(&mut c, "stats", "mirror_answered")
    });
    let sent = info_u64(&mut c, "stats", "mirror_sent");
    assert!((150..=450).contains(&sent), "about 10% of 3000: {sent}");
    let arrived: usize = mirrors.iter().map(|m| keys_on(m).len()).sum();
    assert_eq!(arrived as u64, sent, "what arrived is what was counted");
    mirrors[0].client().send(&[b"SHUTDOWN", b"NOSAVE"]);
    wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(dead).is_err()
    });
    for i in 0..1000 {
        assert_eq!(text(&c.call(&["SET", &format!("q:{i}"), "v"])), "OK");
    }
    wait_until(Duration::from_secs(10), || {
        info_u64(&mut c, "stats", "mirror_failed") > 0
    });
    proxy.shutdown();
}

#[test]
fn a_mirror_copies_no_request_over_16_kib() {
    let primary = Reference::start();
    let mirror = Reference::start();
    let mut config = proxy::Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 1;
    config.sharded.servers = vec![format!("{}:1", primary.addr)];
    config.mirror.pool.servers = vec![format!("{}:1", mirror.addr)];
    let proxy = Proxy::start(config).expect("slotgate starts");
    let mut c = Client::connect(proxy.local_addr());
    let big = "x".repeat(20 * 1024);
    assert_eq!(text(&c.call(&["SET", "big", &big])), "OK");
    assert_eq!(text(&c.call(&["SET", "small", "v"])), "OK");
    wait_until(Duration::from_secs(10), || {
        info_u64(&mut c, "stats", "mirror_answered") == 1
    });
    assert_eq!(info_u64(&mut c, "stats", "mirror_dropped"), 1);
    assert_eq!(keys_on(&mirror), vec![b"small".to_vec()]);
    assert_eq!(c.call(&["STRLEN", "big"]), Value::Integer(big.len() as i64));
    proxy.shutdown();
}

#[test]
fn routes_send_each_key_prefix_to_its_own_pool() {
    let refs = [
        Reference::start(),
        Reference::start(),
        Reference::start(),
        Reference::start(),
    ];
    let line = |r: &Reference| format!("{}:1", r.addr);
    let mut config = proxy::Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 1;
    config.sharded.servers = vec![line(&refs[0])];
    let route = |prefix: &str, servers: &[&Reference], hash: &str| proxy::config::RouteConfig {
        prefix: prefix.into(),
        pool: proxy::config::ShardedConfig {
            servers: servers.iter().map(|r| line(r)).collect(),
            hash: hash.into(),
            hash_tag: "{}".into(),
            ..Default::default()
        },
    };
    config.routes = vec![
        route("user:", &[&refs[1], &refs[2]], "md5"),
        route("user:session:", &[&refs[3]], ""),
    ];
    let users = config.routes[0].pool.sharding().unwrap();
    let proxy = Proxy::start(config).expect("slotgate starts");
    let mut c = Client::connect(proxy.local_addr());
    let family =
        |prefix: &str| -> Vec<String> { (0..200).map(|i| format!("{prefix}{i}")).collect() };
    let (others, user, session) = (family("k"), family("user:"), family("user:session:"));
    let mut mset = vec!["MSET"];
    for k in others.iter().chain(&user).chain(&session) {
        mset.extend([k.as_str(), k.as_str()]);
    }
    assert_eq!(text(&c.call(&mset)), "OK");
    // Each key on its pool's server, the longest prefix winning.
    let on = |r: &Reference| -> std::collections::BTreeSet<String> {
        keys_on(r)
            .into_iter()
            .map(|k| String::from_utf8(k).unwrap())
            .collect()
    };
    assert_eq!(on(&refs[0]), others.iter().cloned().collect());
    assert_eq!(on(&refs[3]), session.iter().cloned().collect());
    let expected = |i: u16| -> std::collections::BTreeSet<String> {
        let wanted = &users.servers()[usize::from(i)].addr;
        user.iter()
            .filter(|k| &users.servers()[usize::from(users.server_of(k.as_bytes()))].addr == wanted)
            .cloned()
            .collect()
    };
    let (b, c_keys) = (on(&refs[1]), on(&refs[2]));
    assert!(!b.is_empty() && !c_keys.is_empty());
    let by_addr = |r: &Reference| {
        let i = users
            .servers()
            .iter()
            .position(|s| s.addr == r.addr.to_string());
        expected(i.unwrap() as u16)
    };
    assert_eq!(b, by_addr(&refs[1]));
    assert_eq!(c_keys, by_addr(&refs[2]));
    // Multi-key commands over pools are split and merged in key order.
    let mget = ["MGET", "k1", "user:1", "user:session:1", "user:2", "nokey"];
    let Value::Array(values) = c.call(&mget) else {
        panic!("MGET")
    };
    assert_eq!(
        values[..4].iter().map(text).collect::<Vec<_>>(),
        &mget[1..5]
    );
    assert_eq!(values[4], Value::Null);
    assert_eq!(c.call(&["DBSIZE"]), Value::Integer(600));
    // Atomic commands over two pools are refused; within one server they run.
    let err = text(&c.call(&["RENAME", "k1", "user:{k1}"]));
    assert!(err.contains("CROSSSLOT"), "{err}");
    assert_eq!(
        text(&c.call(&["RENAME", "user:{a}1", "user:{a}2"])),
        "-ERR no such key"
    );
    assert_eq!(text(&c.call(&["SET", "user:{a}1", "v"])), "OK");
    assert_eq!(text(&c.call(&["RENAME", "user:{a}1", "user:{a}2"])), "OK");
    // Commands without keys go to the catch-all (its own statistics count them), those
    // over the keyspace to every pool.
    for _ in 0..20 {
        assert!(matches!(c.call(&["LASTSAVE"]), Value::Integer(_)));
    }
    let calls = |r: &Reference| {
        let info = text(&r.client().call(&["INFO", "commandstats"]));
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_lastsave:calls="))
            .map_or(0, |v| v.split(',').next().unwrap().parse::<u64>().unwrap())
    };
    assert_eq!(refs.iter().map(calls).collect::<Vec<_>>(), [20, 0, 0, 0]);
    let Value::Array(all) = c.call(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    assert_eq!(all.len(), 601);
    assert_eq!(
        c.call(&["DEL", "k1", "user:1", "user:session:1", "user:{a}2"]),
        Value::Integer(4)
    );
    proxy.shutdown();
}
