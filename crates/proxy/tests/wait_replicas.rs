//! WAIT through the proxy on a real 3x1 cluster (one replica per master): the count of
//! replicas that acknowledged the client's own writes, on every master it wrote to; a
//! timeout when a replica is paused; Redis's answers and errors; and other clients on the
//! same worker (sharing its backend connections) are never held by a WAIT.

mod common;

use std::time::Duration;

use common::paused::Paused;
use common::{text, wait_until, Client, Harness};
use resp::Value;

/// The replica of the master serving `key`, stopped with SIGSTOP until the guard is dropped.
fn pause_replica_of(h: &Harness, key: &str) -> Paused {
    Paused::stop(h.replica_of(key).pid)
}

fn harness() -> (Harness, proxy::Proxy) {
    let h = Harness::start(3, 1);
    // Every master has its replica online before WAIT is asked anything.
    wait_until(Duration::from_secs(30), || {
        h.cluster.masters().iter().all(|m| {
            let info = text(&Client::connect(*m).call(&["INFO", "replication"]));
            info.contains("connected_slaves:1") && info.contains("state=online")
        })
    });
    // One worker: every client shares its backend connections.
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.threads = 1);
    (h, proxy)
}

#[test]
fn wait_counts_the_replicas_that_have_the_clients_writes() {
    let (h, proxy) = harness();
    let mut c = Client::connect(proxy.local_addr());
    // Nothing written yet: every master's online replica counts, as Redis counts them.
    assert_eq!(c.call(&["WAIT", "1", "0"]), Value::Integer(1));
    assert_eq!(text(&c.call(&["SET", "w:a", "1"])), "OK");
    assert_eq!(c.call(&["WAIT", "1", "0"]), Value::Integer(1));
    // Writes on every master, then one WAIT for all of them.
    for i in 0..20 {
        assert_eq!(text(&c.call(&["SET", &format!("w:{i}"), "x"])), "OK");
    }
    assert_eq!(c.call(&["WAIT", "1", "0"]), Value::Integer(1));
    assert_eq!(c.call(&["WAIT", "0", "0"]), Value::Integer(1));
    // Asking for more replicas than exist: the count once the timeout passes.
    assert_eq!(text(&c.call(&["SET", "w:b", "2"])), "OK");
    assert_eq!(c.call(&["WAIT", "2", "50"]), Value::Integer(1));
    // Redis's argument errors, checked in its order.
    let err = |c: &mut Client, args: &[&str]| text(&c.call(args));
    assert_eq!(
        err(&mut c, &["WAIT", "x", "-1"]),
        "-ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["WAIT", "1", "1.5"]),
        "-ERR timeout is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["WAIT", "1", "-1"]),
        "-ERR timeout is negative"
    );
    assert_eq!(
        err(&mut c, &["WAIT", "1"]),
        "-ERR wrong number of arguments for 'wait' command"
    );
    // WAITAOF is Redis 7.2's: the 7.0 servers behind the proxy do not know it.
    assert_eq!(
        err(&mut c, &["WAITAOF", "0", "0", "0"]),
        "-ERR unknown command 'WAITAOF', with args beginning with: '0' '0' '0' "
    );
    // RESP3: the same integer.
    assert!(matches!(c.call(&["HELLO", "3"]), Value::Map(_)));
    assert_eq!(text(&c.call(&["SET", "w:c", "3"])), "OK");
    assert_eq!(c.call(&["WAIT", "1", "0"]), Value::Integer(1));
    drop(h);
}

#[test]
fn a_paused_replica_times_wait_out_without_holding_other_clients() {
    let (h, proxy) = harness();
    let mut a = Client::connect(proxy.local_addr());
    let mut b = Client::connect(proxy.local_addr());
    let paused = pause_replica_of(&h, "{p}a");
    assert_eq!(text(&a.call(&["SET", "{p}a", "1"])), "OK");
    // With a timeout: the count of replicas that acknowledged, none.
    assert_eq!(a.call(&["WAIT", "1", "200"]), Value::Integer(0));
    // Without one: WAIT blocks this client only. Another client of the same worker, on the
    // same master, is served meanwhile.
    assert_eq!(text(&a.call(&["SET", "{p}a", "2"])), "OK");
    a.send(&[b"WAIT", b"1", b"0"]);
    for i in 0..10 {
        let v = i.to_string();
        assert_eq!(text(&b.call(&["SET", "{p}b", &v])), "OK");
        assert_eq!(text(&b.call(&["GET", "{p}b"])), v);
    }
    a.stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert_eq!(
        a.try_read(),
        None,
        "WAIT answered while its replica is paused"
    );
    drop(paused);
    a.stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(a.read(), Some(Value::Integer(1)));
    // The client is served again after its WAIT.
    assert_eq!(text(&a.call(&["GET", "{p}a"])), "2");
}

/// The replica of the master at `master`, stopped with SIGSTOP until the guard is dropped.
fn pause_replica_of_master(h: &Harness, master: std::net::SocketAddr) -> Paused {
    let nodes = h.cluster.nodes();
    let id = &nodes.iter().find(|n| n.addr == master).unwrap().id;
    let replica = nodes
        .iter()
        .find(|n| n.master_of.as_deref() == Some(id.as_str()))
        .unwrap();
    Paused::stop(replica.pid)
}

/// Review S6: a write made by a script, a function, a streamed upload or after an ASK is
/// counted by WAIT as redis-server counts it: 0 while the replica that must have it is
/// paused, 1 once it is resumed.
#[test]
fn wait_counts_writes_of_scripts_functions_uploads_and_ask() {
    let (h, proxy) = harness();
    let mut c = Client::connect(proxy.local_addr());
    let lib = "#!lua name=waitlib\nredis.register_function('setit', function(keys, args) return redis.call('SET', keys[1], args[1]) end)";
    assert_eq!(text(&c.call(&["FUNCTION", "LOAD", lib])), "waitlib");
    let sha = text(&c.call(&["SCRIPT", "LOAD", "return redis.call('SET', KEYS[1], 'e')"]));
    // Everything the scripts write is on its replica before the replica is paused.
    assert_eq!(c.call(&["WAIT", "1", "0"]), Value::Integer(1));
    let big = "v".repeat(5 << 20);
    let writes: [(&str, Vec<&str>); 4] = [
        (
            "eval",
            vec![
                "EVAL",
                "return redis.call('SET', KEYS[1], 'e')",
                "1",
                "{s}k",
            ],
        ),
        ("evalsha", vec!["EVALSHA", &sha, "1", "{s}k"]),
        ("fcall", vec!["FCALL", "setit", "1", "{s}k", "f"]),
        ("upload", vec!["SET", "{s}k", &big]),
    ];
    for (what, args) in writes {
        let paused = pause_replica_of(&h, "{s}k");
        let reply = text(&c.call(&args));
        assert!(reply == "OK" || reply == "e", "{what}: {reply}");
        assert_eq!(
            c.call(&["WAIT", "1", "300"]),
            Value::Integer(0),
            "{what}: WAIT counted a paused replica"
        );
        drop(paused);
        assert_eq!(c.call(&["WAIT", "1", "0"]), Value::Integer(1), "{what}");
    }

    // A write the source master answers with ASK runs on the importing master.
    let mv = common::migrate::Move::begin(&h.cluster, "{ask}");
    let paused = pause_replica_of_master(&h, mv.dst);
    assert_eq!(text(&c.call(&["SET", "{ask}new", "1"])), "OK");
    assert_eq!(
        c.call(&["WAIT", "1", "300"]),
        Value::Integer(0),
        "ask: WAIT counted the source's replica"
    );
    drop(paused);
    assert_eq!(c.call(&["WAIT", "1", "0"]), Value::Integer(1));
    proxy.shutdown();
}
