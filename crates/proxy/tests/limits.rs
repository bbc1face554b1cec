//! Client limits on a real cluster: maxclients, idle timeout, the slowloris deadline.
//! Timing-robust (slow, noisy CI VMs): the tests wait for conditions under generous
//! ceilings, and the configured timeouts leave wide margins around what the client does.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{start_proxy, text, wait_until, Client, Harness};

const CEILING: Duration = Duration::from_secs(30);

#[test]
fn maxclients_refuses_one_more_with_redis_text() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.limits.maxclients = 3);
    let mut held: Vec<Client> = (0..3)
        .map(|_| Client::connect(proxy.local_addr()))
        .collect();
    for c in &mut held {
        assert_eq!(text(&c.call(&["PING"])), "PONG");
    }
    let mut extra = Client::connect(proxy.local_addr());
    let (got, closed) = extra.read_raw(Duration::from_secs(2));
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR max number of clients reached\r\n"
    );
    assert!(closed);
    drop(held.pop());
    // A freed place can be taken, once the proxy has seen the departure.
    wait_until(CEILING, || {
        let mut again = Client::connect(proxy.local_addr());
        // The write may meet a refused (closed) connection: then try again.
        let _ = again.stream.write_all(b"*1\r\n$4\r\nPING\r\n");
        again.try_read().map(|v| text(&v)).as_deref() == Some("PONG")
    });
    proxy.shutdown();
}

#[test]
fn idle_clients_are_closed_silently_and_busy_ones_are_not() {
    let h = Harness::start(1, 0);
    // 1.5 s: the busy client (a PING every ~50 ms) is closed only if a stall outlasts it.
    let proxy = start_proxy(&h.cluster, |cfg| cfg.limits.idle_timeout_ms = 1500);
    // Before the idle client's last activity: the timeout cannot end before `started` + 1.5 s.
    let started = Instant::now();
    let mut idle = Client::connect(proxy.local_addr());
    assert_eq!(text(&idle.call(&["PING"])), "PONG");
    let mut busy = Client::connect(proxy.local_addr());
    // The busy client is served all along, until the idle one is closed (silently).
    loop {
        assert_eq!(text(&busy.call(&["PING"])), "PONG");
        let (got, closed) = idle.read_raw(Duration::from_millis(50));
        assert!(got.is_empty(), "closed without a reply: {got:?}");
        if closed {
            break;
        }
        assert!(
            started.elapsed() < CEILING,
            "the idle client was never closed"
        );
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1000),
        "closed after {waited:?}, before its idle timeout"
    );
    assert_eq!(
        text(&busy.call(&["PING"])),
        "PONG",
        "the busy one is still open"
    );
    // A client blocked in BLPOP (for twice the idle timeout) is not idle.
    let mut blocked = Client::connect(proxy.local_addr());
    blocked.send(&[b"BLPOP", b"idle:list", b"3"]);
    assert_eq!(text(&blocked.read().unwrap()), "(nil)");
    proxy.shutdown();
}

#[test]
fn a_request_trickling_in_past_the_deadline_is_cut() {
    let h = Harness::start(1, 0);
    // 2 s: the well-behaved request below (in two halves, the second sent once the proxy
    // holds the first) has wide margin.
    let proxy = start_proxy(&h.cluster, |cfg| cfg.limits.request_deadline_ms = 2000);
    let mut slow = Client::connect(proxy.local_addr());
    slow.stream
        .write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nab")
        .unwrap();
    // The read waits up to the ceiling: only the proxy's cut ends it early.
    let (got, closed) = slow.read_raw(CEILING);
    assert!(closed && got.is_empty(), "cut without a reply");
    // A big request that keeps arriving in time is fine.
    let mut ok = Client::connect(proxy.local_addr());
    ok.stream
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nab")
        .unwrap();
    // The second half goes once the proxy holds the first (CLIENT LIST: a query buffer).
    let me = format!(" addr={} ", ok.stream.local_addr().unwrap());
    let mut probe = Client::connect(proxy.local_addr());
    wait_until(CEILING, || {
        let list = text(&probe.call(&["CLIENT", "LIST"]));
        let line = list.lines().find(|l| l.contains(&me)).unwrap_or_default();
        let qbuf = line.split(' ').find_map(|f| f.strip_prefix("qbuf="));
        qbuf.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0) > 0
    });
    ok.stream.write_all(b"c\r\n").unwrap();
    assert_eq!(text(&ok.read().unwrap()), "OK");
    proxy.shutdown();
}

/// A client that pipelines big GETs and never reads is cut once its queued replies pass the
/// hard output limit; the proxy's memory stays bounded and other clients are served.
#[test]
fn a_client_that_never_reads_is_cut_at_the_hard_output_limit() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.limits.output_hard_limit_bytes = 4 * 1024 * 1024;
        cfg.limits.output_soft_limit_bytes = 1024 * 1024;
    });
    let mut setter = Client::connect(proxy.local_addr());
    let big = "x".repeat(512 * 1024);
    assert_eq!(text(&setter.call(&["SET", "big", &big])), "OK");
    let mut hog = Client::connect(proxy.local_addr());
    let mut burst = Vec::new();
    for _ in 0..64 {
        burst.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    }
    hog.stream.write_all(&burst).unwrap();
    // The hog must not read before the proxy has cut it (reading drains its queue): wait
    // until the proxy counts the disconnection.
    wait_until(CEILING, || {
        text(&setter.call(&["INFO", "stats"]))
            .contains("client_output_buffer_limit_disconnections:1")
    });
    // Drain what the kernel holds: the connection must end (closed by the proxy).
    let (_, closed) = hog.read_raw(CEILING);
    assert!(closed, "the hog was disconnected");
    assert_eq!(text(&setter.call(&["PING"])), "PONG", "others unaffected");
    let info = text(&setter.call(&["INFO", "stats"]));
    assert!(
        info.contains("client_output_buffer_limit_disconnections:1"),
        "{info}"
    );
    proxy.shutdown();
}
