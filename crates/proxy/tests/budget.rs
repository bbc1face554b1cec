//! The global memory budget on a real cluster: many clients that pipeline big GETs and never
//! read must not grow the proxy past its budget; the largest are evicted (metric, and the
//! connection closes) while a well-behaved client on the same proxy keeps its correct replies,
//! and a client that said CLIENT NO-EVICT is never chosen.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{start_proxy, text, Client, Harness};

const BUDGET: usize = 8 * 1024 * 1024;

fn metric(body: &str, name: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{body}"))
}

/// Resident memory of this test process (the proxy runs in it).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[test]
fn clients_that_never_read_stay_within_the_budget_and_the_largest_are_evicted() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.limits.memory_budget_bytes = BUDGET;
        cfg.admin.listen = "127.0.0.1:0".into();
    });
    let admin = proxy.admin_addr().expect("admin endpoint");
    let mut good = Client::connect(proxy.local_addr());
    assert_eq!(
        text(&good.call(&["SET", "big", &"x".repeat(64 * 1024)])),
        "OK"
    );
    assert_eq!(text(&good.call(&["SET", "small", "fine"])), "OK");
    let base = rss();
    // 24 clients that never read, asking 4 × 8 MiB each: 96× the budget.
    let mut hogs: Vec<Client> = (0..24)
        .map(|_| Client::connect(proxy.local_addr()))
        .collect();
    // CLIENT NO-EVICT exempts one of them, as Redis's maxmemory-clients does.
    assert_eq!(text(&hogs[0].call(&["CLIENT", "NO-EVICT", "on"])), "OK");
    let (peak_rss, peak_counted) = flood(&mut hogs, &mut good, admin);
    let body = common::scrape(admin);
    let evicted = metric(&body, "slotgate_clients_evicted_total");
    assert!(evicted >= 1, "the largest were evicted:\n{body}");
    // At rest: within a read turn of the budget, like the peak. The NO-EVICT client is
    // exempt and keeps what it was sent (as Redis's maxmemory-clients exempts it), and how
    // much that is depends on how the load fell on a busy machine: twice failed an exact
    // bound with other tests running beside this one.
    let counted = metric(&body, "slotgate_client_buffer_bytes");
    assert!(counted <= 4 * BUDGET as u64, "{counted} counted at rest");
    // Bursts land between two checks (one backend read turn), so the peak may pass the
    // budget by a read turn; nothing like the 768 MiB asked for.
    assert!(peak_counted <= 4 * BUDGET as u64, "peak {peak_counted}");
    let grown = peak_rss.saturating_sub(base);
    assert!(grown <= 64 << 20, "RSS grew {} MiB", grown >> 20);
    assert!(
        !closes(&hogs[0].stream),
        "the NO-EVICT client is never evicted"
    );
    let closed = hogs[1..].iter().filter(|hog| closes(&hog.stream)).count();
    assert!(closed >= 1, "evicted clients see their connection close");
    assert_eq!(text(&good.call(&["GET", "small"])), "fine");
    proxy.shutdown();
}

/// Drains what the kernel buffered for a client that never read, and asks a PING after what
/// it sent: true when the proxy closed it (evicted), false once the PING is answered (served
/// to the end: replies come in order, so nothing sent before it is pending any more). Inside
/// MULTI the PING is only queued: there only a close ends the wait.
fn closes(stream: &std::net::TcpStream) -> bool {
    use std::io::ErrorKind::WouldBlock;
    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
    stream.set_nonblocking(true).unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let (mut written, mut tail) = (0, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // The proxy may read this client's input only as it drains: keep trying.
        if written < PING.len() {
            match (&*stream).write(&PING[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == WouldBlock => {}
                Err(_) => return true,
            }
        }
        match (&*stream).read(&mut sink) {
            Ok(0) => return true,
            Ok(n) => {
                tail.extend_from_slice(&sink[..n]);
                tail.drain(..tail.len().saturating_sub(7));
                if written == PING.len() && tail == b"+PONG\r\n" {
                    return false;
                }
            }
            Err(e) if e.kind() == WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "neither closed nor answering a PING"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return true,
        }
    }
}

/// Four bursts from every hog while the good client keeps checking its replies, for 3 s;
/// returns the peak RSS and the peak counted bytes seen.
fn flood(hogs: &mut [Client], good: &mut Client, admin: SocketAddr) -> (u64, u64) {
    // 128 GETs of 64 KiB per burst: 8 MiB of replies nobody reads, per hog and burst.
    let burst = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(128);
    let (mut peak_rss, mut peak_counted) = (0, 0);
    let started = Instant::now();
    for round in 0.. {
        if round < 4 {
            for hog in hogs.iter_mut() {
                let _ = hog.stream.write_all(&burst); // an evicted one is reset
            }
        }
        assert_eq!(text(&good.call(&["GET", "small"])), "fine", "round {round}");
        let body = common::scrape(admin);
        peak_counted = peak_counted.max(metric(&body, "slotgate_client_buffer_bytes"));
        peak_rss = peak_rss.max(rss());
        if started.elapsed() > Duration::from_secs(3) {
            break;
        }
        // Pacing, not waiting: one check and one sample per 20 ms while the bursts land.
        std::thread::sleep(Duration::from_millis(20));
    }
    (peak_rss, peak_counted)
}

/// A transaction's queued commands are the client's memory too, as in Redis: a client that
/// queues more than the budget inside MULTI is evicted, and what it held is released.
#[test]
fn a_transaction_queue_counts_toward_the_budget() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.limits.memory_budget_bytes = BUDGET;
        cfg.admin.listen = "127.0.0.1:0".into();
    });
    let admin = proxy.admin_addr().expect("admin endpoint");
    let mut tx = Client::connect(proxy.local_addr());
    assert_eq!(text(&tx.call(&["MULTI"])), "OK");
    let value = "x".repeat(2 * 1024 * 1024);
    for i in 0..8 {
        // 16 MiB in all; an evicted client's later writes may fail.
        let key = format!("{{q}}{i}");
        let mut frame = bytes::BytesMut::new();
        resp::encode_command(&mut frame, &[b"SET", key.as_bytes(), value.as_bytes()]);
        if tx.stream.write_all(&frame).is_err() {
            break;
        }
    }
    assert!(closes(&tx.stream), "the transaction's client is evicted");
    let body = common::scrape(admin);
    assert!(
        metric(&body, "slotgate_clients_evicted_total") >= 1,
        "{body}"
    );
    common::wait_until(Duration::from_secs(20), || {
        let body = common::scrape(admin);
        metric(&body, "slotgate_client_buffer_bytes") < 1024 * 1024
    });
    let mut good = Client::connect(proxy.local_addr());
    assert_eq!(good.call(&["EXISTS", "{q}0"]), resp::Value::Integer(0));
    proxy.shutdown();
}

/// Review S9: a request that is not streamed (a restricted user's, or an MSET) is held
/// whole in the query buffer, which is the client's memory: charged to the budget, so
/// clients sending such requests are evicted past it rather than growing the proxy.
#[test]
fn big_query_buffers_are_charged_and_their_clients_evicted() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.limits.memory_budget_bytes = BUDGET;
        cfg.proxy.threads = 1;
        cfg.admin.listen = "127.0.0.1:0".into();
        cfg.auth.users = vec![toml::from_str(
            "name = 'app'\npassword = 'pw'\ncommands = ['+@all', '-@dangerous']\nkeys = ['app:*']",
        )
        .unwrap()];
    });
    let admin = proxy.admin_addr().expect("admin endpoint");
    // Four clients each send most of a 64 MiB MSET and stop: 24x the budget, buffered.
    let mut hogs: Vec<std::net::TcpStream> = Vec::new();
    for _ in 0..4 {
        let mut s = std::net::TcpStream::connect(proxy.local_addr()).unwrap();
        // A proxy that stops reading must not hang the test.
        s.set_write_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        s.write_all(b"*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$2\r\npw\r\n")
            .unwrap();
        s.write_all(b"*3\r\n$4\r\nMSET\r\n$5\r\napp:1\r\n$67108864\r\n")
            .unwrap();
        hogs.push(s);
    }
    let chunk = vec![b'v'; 1 << 20];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut evicted = 0;
    'send: for _ in 0..48 {
        for s in hogs.iter_mut() {
            // A write fails once the proxy closed the client.
            let _ = s.write_all(&chunk);
        }
        evicted = metric(&common::scrape(admin), "slotgate_clients_evicted_total");
        if evicted >= 1 || Instant::now() > deadline {
            break 'send;
        }
    }
    assert!(evicted >= 1, "no client was evicted for its query buffer");
    let counted = metric(&common::scrape(admin), "slotgate_client_buffer_bytes");
    assert!(counted <= 4 * BUDGET as u64, "{counted} counted");
    proxy.shutdown();
}
