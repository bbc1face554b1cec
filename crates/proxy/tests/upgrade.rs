//! Zero-downtime upgrade: a new proxy starts on the same port (SO_REUSEPORT) while the old
//! one drains (`shutdown_gracefully`). 50 clients pipeline INCRs across the swap; every
//! request gets exactly one reply, in order, with no error. A client whose connection the
//! old proxy closed between requests reconnects and resends what it had not been answered
//! (never executed, which the strictly increasing INCR values prove).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use common::{start_proxy, text, wait_until};

const CLIENTS: usize = 50;
const BATCH: usize = 10;

#[derive(Default)]
struct Counts {
    replies: AtomicU64,
    errors: AtomicU64,
    reconnects: AtomicU64,
}

/// One client: batches of INCR on its own key; a closed connection means reconnect and
/// resend the unanswered rest. Returns the last value it saw.
fn client(addr: SocketAddr, id: usize, stop: Arc<AtomicBool>, counts: Arc<Counts>) -> u64 {
    let key = format!("upgrade:{id}");
    let mut frame = BytesMut::new();
    resp::encode_command(&mut frame, &[b"INCR", key.as_bytes()]);
    let mut last = 0u64;
    let mut conn = Conn::open(addr);
    while !stop.load(Ordering::Relaxed) {
        let mut owed = BATCH;
        while owed > 0 {
            let sent = conn.send(&frame.repeat(owed));
            let mut answered = 0;
            while sent && answered < owed {
                match conn.read_reply() {
                    Some(reply) => {
                        answered += 1;
                        counts.replies.fetch_add(1, Ordering::Relaxed);
                        if reply != format!(":{}\r\n", last + 1).into_bytes() {
                            eprintln!(
                                "client {id}: after {last} got {:?}",
                                String::from_utf8_lossy(&reply)
                            );
                            counts.errors.fetch_add(1, Ordering::Relaxed);
                        }
                        last += 1;
                    }
                    None => break,
                }
            }
            owed -= answered;
            if owed > 0 {
                counts.reconnects.fetch_add(1, Ordering::Relaxed);
                conn = Conn::open(addr);
            }
        }
    }
    last
}

/// A raw connection that reports a close instead of panicking.
struct Conn {
    stream: TcpStream,
    buf: BytesMut,
}

impl Conn {
    /// Connect, retrying a refusal: a connection still in the old listener's SYN queue
    /// when it closes is refused (unless `net.ipv4.tcp_migrate_req` moves it), and a real
    /// client retries it; nothing was sent on it.
    fn open(addr: SocketAddr) -> Conn {
        let mut tries = 0;
        let stream = loop {
            match TcpStream::connect(addr) {
                Ok(stream) => break stream,
                Err(e) if tries < 100 => {
                    tries += 1;
                    eprintln!("connect: {e}, retrying");
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("nobody listens on {addr}: {e}"),
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            stream,
            buf: BytesMut::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).is_ok()
    }

    /// One reply's bytes; None when the connection closed (or was reset).
    fn read_reply(&mut self) -> Option<Vec<u8>> {
        let mut framer = resp::ReplyFramer::new();
        loop {
            if let Some(len) = framer.next_frame(&self.buf).expect("valid reply") {
                return Some(self.buf.split_to(len).to_vec());
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => panic!("no reply in 20 s"),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => panic!("no reply in 20 s"),
                Err(_) => return None,
            }
        }
    }
}

#[test]
fn fifty_pipelining_clients_cross_an_upgrade_with_no_error_and_no_lost_reply() {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        dir: common::tempdir("upgrade"),
        ..Default::default()
    };
    let cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
    let old = start_proxy(&cluster, |_| {});
    let addr = old.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let (stop, counts) = (stop.clone(), counts.clone());
            std::thread::spawn(move || client(addr, id, stop, counts))
        })
        .collect();
    let progress = |n: u64| counts.replies.load(Ordering::Relaxed) >= n;
    wait_until(Duration::from_secs(30), || {
        progress((CLIENTS * BATCH * 5) as u64)
    });

    let new = start_proxy(&cluster, |c| c.proxy.listen = addr.to_string());
    assert_eq!(new.local_addr(), addr, "the new proxy shares the port");
    old.shutdown_gracefully(Duration::from_secs(10));
    let after = counts.replies.load(Ordering::Relaxed);
    wait_until(Duration::from_secs(30), || {
        progress(after + (CLIENTS * BATCH * 5) as u64)
    });
    stop.store(true, Ordering::Relaxed);
    let lasts: Vec<u64> = clients.into_iter().map(|c| c.join().unwrap()).collect();

    assert_eq!(
        counts.errors.load(Ordering::Relaxed),
        0,
        "no error, no lost or doubled reply"
    );
    let reconnects = counts.reconnects.load(Ordering::Relaxed);
    assert!(
        reconnects >= CLIENTS as u64,
        "every client moved: {reconnects} reconnects"
    );
    let mut c = common::Client::connect(new.local_addr());
    for (id, last) in lasts.iter().enumerate() {
        let got = text(&c.call(&["GET", &format!("upgrade:{id}")]));
        assert_eq!(
            got,
            last.to_string(),
            "client {id}: each INCR ran exactly once"
        );
    }
    new.shutdown();
}
