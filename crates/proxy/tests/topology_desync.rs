//! T15 of topology.md (d): reply/request desync. Several clients pipeline random batches of
//! GETs whose replies name their own key, so a reply delivered to the wrong request is seen
//! at once. A scripted node injects faults on chosen keys: a connection reset mid-reply, a
//! reply never sent (the proxy's `request_timeout_ms` must fail it), a reply sent only after
//! that timeout, and an error reply in the middle of a pipeline. Pass: zero crossed replies, faulted requests get clean errors, and
//! the proxy keeps serving afterwards.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{text, Client};
use proxy::{Config, Proxy};
use rand::Rng;
use testkit::reply;
use testkit::{FakeNode, Range, Reply};

/// The value the node gives for `key`: unique per request, so a crossed reply cannot hide.
fn value_of(key: &[u8]) -> Vec<u8> {
    [b"val:".as_slice(), key].concat()
}

/// GET answers `val:<key>`, except for keys that ask for a fault.
fn faulty_node() -> FakeNode {
    let node = FakeNode::start(|args, _| {
        let (Some(cmd), Some(key)) = (args.first(), args.get(1)) else {
            return Reply::Default;
        };
        if cmd.as_slice() != b"GET" {
            return Reply::Default;
        }
        if key.starts_with(b"reset:") {
            // Half a bulk reply, then the connection drops.
            Reply::CloseAfter(b"$40\r\nval:res".to_vec())
        } else if key.starts_with(b"hang:") {
            Reply::Hang
        } else if key.starts_with(b"slow:") {
            Reply::Delayed(Duration::from_millis(700), reply::bulk(&value_of(key)))
        } else if key.starts_with(b"err:") {
            Reply::Bytes(reply::error("ERR injected"))
        } else {
            Reply::Bytes(reply::bulk(&value_of(key)))
        }
    });
    node.set_slots(vec![Range::new(0, 16383, node.addr(), &node.id)]);
    node
}

fn start_proxy(node: &FakeNode) -> Proxy {
    let mut config = Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 2;
    config.cluster.seeds = vec![node.addr().to_string()];
    config.cluster.request_timeout_ms = 300;
    Proxy::start(config).expect("proxy starts")
}

const FAULTS: [&str; 4] = ["reset:", "hang:", "err:", "slow:"];

/// What one client saw.
#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    /// Plain requests that got an error (they shared a connection with a fault).
    collateral: usize,
    faults: usize,
}

/// One client: `rounds` pipelines of 1..=8 GETs, about one round in four carrying a fault.
fn client_run(addr: SocketAddr, id: usize, rounds: usize) -> Tally {
    let mut rng = rand::thread_rng();
    let mut c = Client::connect(addr);
    let mut tally = Tally::default();
    for round in 0..rounds {
        let n = rng.gen_range(1..=8);
        let fault_at = (rng.gen_range(0..4) == 0).then(|| rng.gen_range(0..n));
        let keys: Vec<String> = (0..n)
            .map(|i| match fault_at {
                Some(f) if f == i => {
                    format!("{}c{id}r{round}", FAULTS[rng.gen_range(0..FAULTS.len())])
                }
                _ => format!("c{id}:r{round}:i{i}"),
            })
            .collect();
        for k in &keys {
            c.send(&[b"GET", k.as_bytes()]);
        }
        let started = Instant::now();
        for k in &keys {
            let got = c.read().expect("the proxy answers every request");
            check(k, &text(&got), &mut tally);
        }
        // A ceiling against hangs only (each fault costs about the 300 ms timeout).
        let took = started.elapsed();
        assert!(took < Duration::from_secs(30), "round took {took:?}");
    }
    tally
}

/// A fault key must get an error; a plain key its own value or (collateral) an error.
fn check(key: &str, got: &str, tally: &mut Tally) {
    let faulted = FAULTS.iter().any(|f| key.starts_with(f));
    let own = String::from_utf8(value_of(key.as_bytes())).expect("utf8");
    if faulted {
        assert!(got.starts_with('-'), "fault {key} answered {got:?}");
        tally.faults += 1;
    } else if got.starts_with('-') {
        tally.collateral += 1;
    } else {
        assert_eq!(got, own, "crossed reply for {key}");
        tally.ok += 1;
    }
}

#[test]
fn no_crossed_replies_under_injected_faults() {
    let node = faulty_node();
    let proxy = start_proxy(&node);
    let addr = proxy.local_addr();
    let clients: Vec<_> = (0..4)
        .map(|id| std::thread::spawn(move || client_run(addr, id, 25)))
        .collect();
    let tallies: Vec<Tally> = clients
        .into_iter()
        .map(|t| t.join().expect("no crossed reply, no hang"))
        .collect();
    eprintln!("{tallies:?}");
    let faults: usize = tallies.iter().map(|t| t.faults).sum();
    assert!(faults > 0, "some faults were injected");
    // After the storm, every plain request succeeds again on fresh connections.
    let mut c = Client::connect(addr);
    for i in 0..20 {
        let key = format!("after:{i}");
        assert_eq!(text(&c.call(&["GET", &key])), format!("val:{key}"));
    }
    proxy.shutdown();
}

/// A reply never sent: the request fails once `request_timeout_ms` has passed (not before),
/// with an error that names that timeout, and the next request on the same client is served
/// by a fresh connection. No tight upper bound (slow CI VMs): the error text proves that the
/// timeout, not something else, ended the wait; the ceiling only catches a hang.
#[test]
fn a_silent_node_fails_the_request_then_recovers() {
    let node = faulty_node();
    let proxy = start_proxy(&node);
    let mut c = Client::connect(proxy.local_addr());
    let started = Instant::now();
    let got = text(&c.call(&["GET", "hang:x"]));
    let took = started.elapsed();
    assert!(
        got.starts_with('-') && got.contains("no reply within 300 ms"),
        "clean timeout error: {got}"
    );
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(20),
        "failed after {took:?}"
    );
    assert_eq!(text(&c.call(&["GET", "k"])), "val:k");
    // A pipeline with an error reply in the middle keeps every other reply in place.
    for k in ["a", "err:b", "c"] {
        c.send(&[b"GET", k.as_bytes()]);
    }
    let got: Vec<String> = (0..3).map(|_| text(&c.read().expect("reply"))).collect();
    assert_eq!(got, ["val:a", "-ERR injected", "val:c"]);
    proxy.shutdown();
}

/// Timeout then reuse: a reply that comes after `request_timeout_ms` must never be taken as
/// the reply of a later request (the timed-out connection is dropped, not reused).
#[test]
fn a_late_reply_never_reaches_a_later_request() {
    let node = faulty_node();
    let proxy = start_proxy(&node);
    let mut c = Client::connect(proxy.local_addr());
    let late = text(&c.call(&["GET", "slow:x"]));
    assert!(late.starts_with('-'), "timed out with an error: {late}");
    // Requests before, around and after the moment the node sends the late reply (at least
    // 10, and 5 once it is out): each gets its own value.
    let started = Instant::now();
    let mut after_late = 0;
    for i in 0.. {
        let late_out = node.delayed_sent() > 0;
        let key = format!("next:{i}");
        assert_eq!(text(&c.call(&["GET", &key])), format!("val:{key}"));
        after_late += usize::from(late_out);
        if i >= 9 && after_late >= 5 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the late reply never went out"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    proxy.shutdown();
}
