//! Client limits on a real cluster: maxclients, idle timeout, the slowloris deadline.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{start_proxy, text, Client, Harness};

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
    std::thread::sleep(Duration::from_millis(100));
    let mut again = Client::connect(proxy.local_addr());
    assert_eq!(
        text(&again.call(&["PING"])),
        "PONG",
        "a freed place can be taken"
    );
    proxy.shutdown();
}

#[test]
fn idle_clients_are_closed_silently_and_busy_ones_are_not() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.limits.idle_timeout_ms = 300);
    let mut idle = Client::connect(proxy.local_addr());
    assert_eq!(text(&idle.call(&["PING"])), "PONG");
    let mut busy = Client::connect(proxy.local_addr());
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(900) {
        assert_eq!(text(&busy.call(&["PING"])), "PONG");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (got, closed) = idle.read_raw(Duration::from_secs(2));
    assert!(got.is_empty() && closed, "closed without a reply");
    // A client blocked in BLPOP is not idle.
    let mut blocked = Client::connect(proxy.local_addr());
    blocked.send(&[b"BLPOP", b"idle:list", b"1"]);
    assert_eq!(text(&blocked.read().unwrap()), "(nil)");
    proxy.shutdown();
}

#[test]
fn a_request_trickling_in_past_the_deadline_is_cut() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.limits.request_deadline_ms = 300);
    let mut slow = Client::connect(proxy.local_addr());
    slow.stream
        .write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nab")
        .unwrap();
    let started = Instant::now();
    let (got, closed) = slow.read_raw(Duration::from_secs(3));
    assert!(closed && got.is_empty(), "cut without a reply");
    assert!(started.elapsed() < Duration::from_secs(2));
    // A big request that keeps arriving in time is fine.
    let mut ok = Client::connect(proxy.local_addr());
    ok.stream
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nab")
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
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
    std::thread::sleep(Duration::from_millis(1500));
    // Drain what the kernel holds: the connection must end (closed by the proxy).
    let (_, closed) = hog.read_raw(Duration::from_secs(3));
    assert!(closed, "the hog was disconnected");
    assert_eq!(text(&setter.call(&["PING"])), "PONG", "others unaffected");
    let info = text(&setter.call(&["INFO", "stats"]));
    assert!(
        info.contains("client_output_buffer_limit_disconnections:1"),
        "{info}"
    );
    proxy.shutdown();
}
