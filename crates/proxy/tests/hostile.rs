//! What one client that means harm can do to the others, on a real cluster: sizes and counts
//! it chooses (megabyte glob patterns, 100k channels or ids in one command) must not stop the
//! process or stall its worker, and a client that stops sending still gets every reply it is
//! owed. Each case runs beside a bystander that PINGs the same worker (review S1, S7, S9, S10).

mod common;

use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{text, Client, Harness};
use resp::Value;

/// How long the bystander's PING may take while a case runs. Tests run the debug build,
/// which is many times slower than release; the release figure is the fuzzer's.
const BYSTANDER_CEILING: Duration = Duration::from_secs(3);

/// A client of the same worker that PINGs until stopped, keeping its slowest round trip.
struct Bystander {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Duration>,
}

impl Bystander {
    fn start(addr: SocketAddr) -> Bystander {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            let mut worst = Duration::ZERO;
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                assert_eq!(text(&c.call(&["PING"])), "PONG");
                worst = worst.max(t.elapsed());
                std::thread::sleep(Duration::from_millis(2)); // pacing the bystander's PINGs
            }
            worst
        });
        Bystander { stop, thread }
    }

    fn finish(self) -> Duration {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("bystander")
    }
}

fn one_worker() -> Harness {
    let mut h = Harness::start(3, 0);
    h.proxy = Some(common::start_proxy(&h.cluster, |cfg| cfg.proxy.threads = 1));
    h
}

/// Run `case` on its own connection beside a bystander; the proxy must still serve after.
fn survive(h: &Harness, name: &str, case: impl FnOnce(&mut Client)) {
    let bystander = Bystander::start(h.addr());
    let mut c = Client::connect(h.addr());
    c.stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    case(&mut c);
    let worst = bystander.finish();
    assert!(
        worst < BYSTANDER_CEILING,
        "{name}: the bystander's PING took {worst:?}"
    );
    assert_eq!(text(&h.client().call(&["PING"])), "PONG", "{name}");
}

fn command(args: Vec<Vec<u8>>) -> Vec<u8> {
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let mut out = bytes::BytesMut::new();
    resp::encode_command(&mut out, &refs);
    out.to_vec()
}

/// S1: a pattern of a megabyte of `*` overflowed the worker's stack and aborted the process.
#[test]
fn megabyte_patterns_leave_the_proxy_serving() {
    let h = one_worker();
    let patterns: [(&str, Vec<u8>); 3] = [
        ("stars", vec![b'*'; 1 << 20]),
        ("brackets", vec![b'['; 1 << 20]),
        ("star-a", b"*a".repeat(1 << 19)),
    ];
    for (name, pattern) in patterns {
        survive(&h, name, |c| {
            c.send_raw(&command(vec![b"PSUBSCRIBE".to_vec(), pattern.clone()]));
            let Some(Value::Array(confirm)) = c.read() else {
                panic!("{name}: no confirmation");
            };
            assert_eq!(confirm.len(), 3, "{name}");
            c.send_raw(&command(vec![b"PUNSUBSCRIBE".to_vec(), pattern.clone()]));
            assert!(matches!(c.read(), Some(Value::Array(_))), "{name}");
        });
    }
}

/// S9, S10: one command naming 100k channels or ids, and the same shard channel subscribed
/// again and again, cost the others nothing noticeable and do not grow without bound.
#[test]
fn commands_naming_100k_channels_or_ids() {
    let h = one_worker();
    const N: usize = 100_000;
    let channels = |prefix: &str| -> Vec<Vec<u8>> {
        (0..N)
            .map(|i| format!("{prefix}{i}").into_bytes())
            .collect()
    };
    survive(&h, "pubsub numsub", |c| {
        let mut args = vec![b"PUBSUB".to_vec(), b"NUMSUB".to_vec()];
        args.extend(channels("ch:"));
        c.send_raw(&command(args));
        let Some(Value::Array(counts)) = c.read() else {
            panic!("NUMSUB");
        };
        assert_eq!(counts.len(), 2 * N);
    });
    survive(&h, "client list id", |c| {
        let mut args = vec![b"CLIENT".to_vec(), b"LIST".to_vec(), b"ID".to_vec()];
        args.extend((1..=N as u64).map(|i| i.to_string().into_bytes()));
        c.send_raw(&command(args));
        assert!(matches!(c.read(), Some(Value::BulkString(_))));
    });
    survive(&h, "keyspace subscribe", |c| {
        let mut args = vec![b"SUBSCRIBE".to_vec()];
        args.extend(channels("__keyspace@0__:k"));
        c.send_raw(&command(args));
        for _ in 0..N {
            assert!(matches!(c.read(), Some(Value::Array(_))));
        }
    });
    survive(&h, "ssubscribe one slot", |c| {
        let mut args = vec![b"SSUBSCRIBE".to_vec()];
        args.extend(channels("{t}"));
        c.send_raw(&command(args));
        for _ in 0..N {
            assert!(matches!(c.read(), Some(Value::Array(_))));
        }
        // The same channel again and again: confirmed each time, kept once.
        for _ in 0..1000 {
            c.send_raw(&command(vec![b"SSUBSCRIBE".to_vec(), b"{t}0".to_vec()]));
        }
        for _ in 0..1000 {
            let Some(Value::Array(confirm)) = c.read() else {
                panic!("SSUBSCRIBE");
            };
            assert_eq!(confirm[2], Value::Integer(N as i64));
        }
    });
}

/// S7: a client that sends a transaction and then closes its write side gets the
/// transaction's reply before the proxy closes, as from Redis (which runs what it read and
/// writes the replies before it sees the end of input).
#[test]
fn a_half_closed_client_gets_its_transaction_reply() {
    let h = Harness::start(1, 0);
    let mut c = h.client();
    c.send_raw(b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$2\r\nhx\r\n*1\r\n$4\r\nEXEC\r\n");
    c.stream.shutdown(Shutdown::Write).unwrap();
    let (got, closed) = c.read_raw(Duration::from_secs(10));
    assert_eq!(
        String::from_utf8_lossy(&got),
        "+OK\r\n+QUEUED\r\n*1\r\n:1\r\n",
        "every reply, EXEC's included"
    );
    assert!(closed);
    assert_eq!(text(&h.client().call(&["GET", "hx"])), "1");
}
