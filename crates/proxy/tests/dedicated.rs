//! Blocking commands and transactions, which run on a session's dedicated connection, on a
//! real cluster: blocked clients never stall others, disconnects release the node, and
//! MULTI/EXEC/WATCH behave as on a Redis Cluster node.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{text, wait_until, Client, Harness};
use resp::Value;

/// A ceiling for conditions that normally hold within milliseconds (slow, noisy CI VMs).
const CEILING: Duration = Duration::from_secs(30);

/// `blocked_clients` of INFO clients, summed over `nodes`.
fn blocked_on(nodes: &[SocketAddr]) -> u64 {
    nodes
        .iter()
        .map(|&node| {
            let info = text(&Client::connect(node).call(&["INFO", "clients"]));
            info.lines()
                .find_map(|l| l.strip_prefix("blocked_clients:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
                .expect("blocked_clients in INFO clients")
        })
        .sum()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("array expected, got {v:?}"))
        .iter()
        .map(text)
        .collect()
}

#[test]
fn a_hundred_blocked_clients_stall_no_one() {
    let h = Harness::start(3, 0);
    let addr = h.addr();
    let blocked: Vec<Client> = (0..100)
        .map(|i| {
            let mut c = Client::connect(addr);
            c.send(&[b"BLPOP", format!("queue:{i}").as_bytes(), b"0"]);
            c
        })
        .collect();
    // Every BLPOP has reached its node and blocks there.
    let masters = h.cluster.masters();
    wait_until(CEILING, || blocked_on(&masters) == 100);
    // 50 other clients get all their replies, on the same workers, while the 100 stay
    // blocked (BLPOP 0 never ends by itself: a stalled proxy would never answer them).
    let busy: Vec<_> = (0..50)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                for j in 0..50 {
                    assert_eq!(text(&c.call(&["SET", &format!("busy:{i}:{j}"), "x"])), "OK");
                }
            })
        })
        .collect();
    for t in busy {
        t.join().expect("busy client");
    }
    assert_eq!(
        blocked_on(&masters),
        100,
        "the blocked clients were still blocked while the others were served"
    );
    let mut pusher = h.client();
    for i in 0..100 {
        assert_eq!(
            text(&pusher.call(&["LPUSH", &format!("queue:{i}"), &format!("job{i}")])),
            ":1"
        );
    }
    for (i, mut c) in blocked.into_iter().enumerate() {
        let got = strings(&c.read().expect("BLPOP reply"));
        assert_eq!(got, vec![format!("queue:{i}"), format!("job{i}")]);
        // The session goes on normally afterwards.
        assert_eq!(text(&c.call(&["PING"])), "PONG");
    }
}

#[test]
fn blocking_timeouts_and_disconnects_behave() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    let started = Instant::now();
    assert_eq!(text(&c.call(&["BLPOP", "never", "0.2"])), "(nil)");
    assert!(started.elapsed() >= Duration::from_millis(150));

    // Pipelined before the BLPOP: executed (and answered) first.
    c.send(&[b"RPUSH", b"pipe", b"a"]);
    c.send(&[b"BLPOP", b"pipe", b"1"]);
    c.send(&[b"GET", b"after"]);
    assert_eq!(text(&c.read().unwrap()), ":1");
    assert_eq!(
        strings(&c.read().unwrap()),
        vec!["pipe".to_string(), "a".to_string()]
    );
    assert_eq!(text(&c.read().unwrap()), "(nil)");

    // A client that leaves while blocked no longer consumes pushes.
    let node = [h.cluster.owner_of(b"gone").unwrap()];
    let mut leaver = h.client();
    leaver.send(&[b"BLPOP", b"gone", b"0"]);
    wait_until(CEILING, || blocked_on(&node) == 1);
    drop(leaver);
    // The proxy releases the node: nobody is blocked there any more.
    wait_until(CEILING, || blocked_on(&node) == 0);
    assert_eq!(text(&c.call(&["LPUSH", "gone", "x"])), ":1");
    assert_eq!(
        text(&c.call(&["LLEN", "gone"])),
        ":1",
        "the departed client's BLPOP was released"
    );
}

#[test]
fn transactions_behave_as_on_a_cluster_node() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    let owner = h.cluster.owner_of(b"{t}").unwrap();
    let mut direct = Client::connect(owner);

    let script: &[&[&str]] = &[
        &["MULTI"],
        &["SET", "{t}a", "1"],
        &["INCR", "{t}a"],
        &["GET", "{t}a"],
        &["EXEC"],
    ];
    let via_proxy: Vec<Value> = script.iter().map(|cmd| c.call(cmd)).collect();
    let reference: Vec<Value> = script.iter().map(|cmd| direct.call(cmd)).collect();
    assert_eq!(via_proxy, reference, "same replies as the owning node");
    assert_eq!(strings(&via_proxy[4]), vec!["OK", ":2", "2"]);

    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(
        text(&c.call(&["MULTI"])),
        "-ERR MULTI calls can not be nested"
    );
    assert_eq!(text(&c.call(&["SET", "{t}b", "1"])), "QUEUED");
    assert_eq!(
        text(&c.call(&["SET", "{u}c", "2"])),
        "-CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(
        text(&c.call(&["EXEC"])),
        "-EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(
        text(&c.call(&["GET", "{t}b"])),
        "(nil)",
        "nothing of an aborted transaction applied"
    );

    assert_eq!(text(&c.call(&["EXEC"])), "-ERR EXEC without MULTI");
    assert_eq!(text(&c.call(&["DISCARD"])), "-ERR DISCARD without MULTI");
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(
        text(&c.call(&["GET"])),
        "-ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(text(&c.call(&["DISCARD"])), "OK");
}

#[test]
fn watch_detects_a_concurrent_change() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    let mut other = h.client();
    assert_eq!(text(&c.call(&["SET", "{w}k", "0"])), "OK");

    assert_eq!(text(&c.call(&["WATCH", "{w}k"])), "OK");
    assert_eq!(text(&other.call(&["SET", "{w}k", "changed"])), "OK");
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["SET", "{w}k", "mine"])), "QUEUED");
    assert_eq!(
        c.call(&["EXEC"]),
        Value::NullArray,
        "EXEC fails after the watched key changed"
    );
    assert_eq!(text(&c.call(&["GET", "{w}k"])), "changed");

    assert_eq!(text(&c.call(&["WATCH", "{w}k"])), "OK");
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["SET", "{w}k", "mine"])), "QUEUED");
    assert_eq!(strings(&c.call(&["EXEC"])), vec!["OK"]);
    assert_eq!(text(&c.call(&["GET", "{w}k"])), "mine");
    assert_eq!(
        text(&c.call(&["WATCH", "{w}a", "{x}b"])),
        "-CROSSSLOT Keys in request don't hash to the same slot"
    );
}

/// A client blocked in BLPOP when its master is demoted by a manual failover: the node
/// releases it with `-UNBLOCKED … (master -> replica?)`, having popped nothing. One Redis
/// never says that, so the proxy blocks it again on the new master, and the push that
/// follows reaches it (one chaos script in 1,000 of the differential test saw the error).
#[test]
fn a_blocked_pop_survives_its_masters_demotion() {
    let h = Harness::start(3, 1);
    let master = h.cluster.owner_of(b"{b}").expect("owner");
    let id = &h
        .cluster
        .nodes()
        .iter()
        .find(|n| n.addr == master)
        .unwrap()
        .id;
    let replica = h
        .cluster
        .nodes()
        .iter()
        .find(|n| n.master_of.as_ref() == Some(id))
        .expect("a replica")
        .addr;
    let mut blocked = h.client();
    blocked.send(&[b"BLPOP", b"{b}:list", b"60"]);
    wait_until(CEILING, || blocked_on(&[master]) == 1);
    let reply = h.cluster.command(replica, &["CLUSTER", "FAILOVER"]);
    assert!(!reply.expect("CLUSTER FAILOVER").is_error());
    // Blocked again on the new master before the push, so the push is what it pops.
    wait_until(CEILING, || blocked_on(&[replica]) == 1);
    let pushed = h.client().call(&["LPUSH", "{b}:list", "v"]);
    assert_eq!(pushed, Value::Integer(1), "{pushed:?}");
    let got = blocked.read().expect("a reply");
    assert_eq!(strings(&got), ["{b}:list", "v"]);
}
