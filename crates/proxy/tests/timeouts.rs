//! Deadlines that fit the command (watchdog.rs), with `request_timeout_ms` = 300 and one
//! worker, so two clients share the worker's connection to a node:
//! - a slow command (a script busy for 1 s) does not fail the other client's requests
//!   queued behind it on the shared connection;
//! - a paused node (SIGSTOP) still fails its shared connection after the normal timeout
//!   once no slow command is owed;
//! - a blocking command on a paused node fails after its own timeout plus the request
//!   timeout instead of waiting for ever; on a live node it keeps its own timeout.
//!
//! - a slow command keeps its longer deadline when it is resent after MOVED.
//!
//! Time bounds are generous ceilings (seconds), far from the deadlines under test.

mod common;

use std::time::{Duration, Instant};

use common::paused::Paused;
use common::{text, Client, Harness};
use proxy::Proxy;
use resp::Value;
use testkit::reply::{self, slot_of};
use testkit::{FakeNode, Range, Reply};

/// A script that keeps its node busy for about a second.
const BUSY_1S: &str = "local function now() local t = redis.call('TIME') \
    return t[1] * 1000000 + t[2] end \
    local s = now() while now() - s < 1000000 do end return 1";

fn proxy(h: &Harness) -> Proxy {
    common::start_proxy(&h.cluster, |cfg| {
        cfg.cluster.request_timeout_ms = 300;
        cfg.proxy.threads = 1;
    })
}

/// The node serving `key`, stopped with SIGSTOP until the guard is dropped.
fn pause_owner_of(h: &Harness, key: &str) -> Paused {
    let owner = h.cluster.owner_of(key.as_bytes()).unwrap();
    let node = h.cluster.nodes().iter().find(|n| n.addr == owner).unwrap();
    Paused::stop(node.pid)
}

#[test]
fn a_slow_command_does_not_fail_other_clients_on_its_connection() {
    let h = Harness::start(3, 0);
    let proxy = proxy(&h);
    let mut a = Client::connect(proxy.local_addr());
    let mut b = Client::connect(proxy.local_addr());
    assert_eq!(text(&b.call(&["SET", "{t}b", "v"])), "OK");
    a.send(&[b"EVAL", BUSY_1S.as_bytes(), b"1", b"{t}a"]);
    // The proxy has read the EVAL (and sent it in the same turn) before b's GETs come.
    let mut watcher = Client::connect(proxy.local_addr());
    common::wait_until(Duration::from_secs(20), || {
        text(&watcher.call(&["CLIENT", "LIST"])).contains("cmd=eval")
    });
    for _ in 0..20 {
        b.send(&[b"GET", b"{t}b"]);
    }
    let replies: Vec<String> = (0..20).map(|_| text(&b.read().unwrap())).collect();
    assert!(replies.iter().all(|r| r == "v"), "{replies:?}");
    assert_eq!(a.read(), Some(Value::Integer(1)));
    proxy.shutdown();
}

#[test]
fn a_paused_node_still_fails_after_the_request_timeout() {
    let h = Harness::start(3, 0);
    let proxy = proxy(&h);
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["SET", "{p}k", "v"])), "OK");
    // A slow command answered: its longer deadline no longer applies.
    let quick = c.call(&["EVAL", "return 1", "1", "{p}k"]);
    assert_eq!(quick, Value::Integer(1));
    let paused = pause_owner_of(&h, "{p}");
    let started = Instant::now();
    let reply = text(&c.call(&["GET", "{p}k"]));
    let waited = started.elapsed();
    drop(paused);
    assert!(reply.contains("no reply within 300 ms"), "{reply}");
    // Far below the 60 s slow-command deadline.
    assert!(waited < Duration::from_secs(20), "failed after {waited:?}");
    // Served once resumed (a fresh connection replaces the one that timed out).
    common::wait_until(Duration::from_secs(20), || {
        text(&c.call(&["GET", "{p}k"])) == "v"
    });
    proxy.shutdown();
}

#[test]
fn a_blocking_command_on_a_paused_node_fails_after_its_own_timeout() {
    let h = Harness::start(3, 0);
    let proxy = proxy(&h);
    let mut c = Client::connect(proxy.local_addr());
    c.stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(text(&c.call(&["SET", "{p}k", "v"])), "OK");
    let paused = pause_owner_of(&h, "{p}");
    let started = Instant::now();
    c.send(&[b"BLPOP", b"{p}list", b"1"]);
    let reply = c.try_read().map(|v| text(&v));
    let waited = started.elapsed();
    drop(paused);
    let reply = reply.expect("an answer, not a wait for ever");
    assert!(reply.contains("no reply within"), "{reply}");
    assert!(
        waited >= Duration::from_secs(1),
        "its own 1 s first: {waited:?}"
    );
    proxy.shutdown();
}

#[test]
fn dedicated_requests_on_live_nodes_keep_their_own_time() {
    let h = Harness::start(3, 0);
    let proxy = proxy(&h);
    let mut c = Client::connect(proxy.local_addr());
    // BLPOP times out by itself after 1 s, within its deadline of 1 s + 300 ms.
    assert_eq!(c.call(&["BLPOP", "{d}list", "1"]), Value::NullArray);
    // A slow command inside a transaction, on the dedicated connection.
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["EVAL", BUSY_1S, "1", "{d}k"])), "QUEUED");
    let exec = c.call(&["EXEC"]);
    assert_eq!(exec, Value::Array(vec![Value::Integer(1)]), "{exec:?}");
    proxy.shutdown();
}

/// Node a owns every slot but answers EVAL with MOVED to node b, which takes 1 s to run it.
#[test]
fn a_slow_command_keeps_its_deadline_when_redirected() {
    let b = FakeNode::start(|args, _| match args[0].to_ascii_uppercase().as_slice() {
        b"EVAL" => Reply::Delayed(Duration::from_secs(1), reply::simple("done")),
        _ => Reply::Default,
    });
    let b_addr = b.addr();
    let a = FakeNode::start(
        move |args, _| match args[0].to_ascii_uppercase().as_slice() {
            b"EVAL" => Reply::Bytes(reply::moved(slot_of(&args[3]), b_addr)),
            _ => Reply::Default,
        },
    );
    let map = vec![Range::new(0, 16383, a.addr(), &a.id)];
    a.set_slots(map.clone());
    b.set_slots(map);
    let mut config = proxy::Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 1;
    config.cluster.seeds = vec![a.addr().to_string()];
    config.cluster.request_timeout_ms = 300;
    let proxy = Proxy::start(config).expect("proxy starts");
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["EVAL", "busy", "1", "k"])), "done");
    proxy.shutdown();
}
