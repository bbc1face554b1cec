//! A user-space TCP relay in front of one real node, for the faults a real server cannot
//! stage by itself on loopback without root (reliability.md §C, F4 and F11): a network
//! partition and a blackholed node. Each accepted connection is forwarded byte for byte to
//! the target until the relay is told to hold traffic from its source address (a partition
//! between address groups: bytes are neither delivered nor refused, no RST, exactly what a
//! dropped route looks like to both ends) or to cut every connection. A held connection
//! resumes where it stopped once healed, as TCP would after retransmitting.
//!
//! Sources are told apart by IP: every address in 127.0.0.0/8 is loopback on Linux, so a
//! redis-server given `bind-source-addr 127.0.0.2` is one group and the rest another.

use std::collections::HashSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

/// How often a held pump looks again whether it may move on, and the read timeout that
/// lets a pump notice a hold while its source is quiet.
const POLL: Duration = Duration::from_millis(20);

#[derive(Default)]
struct State {
    /// Hold everything, whatever the source (a blackholed node).
    all: bool,
    /// Hold traffic from these source addresses (one side of a partition).
    sources: HashSet<IpAddr>,
    /// Both sockets of every live connection, to cut them.
    conns: Vec<(TcpStream, TcpStream)>,
    /// Connections accepted so far, by source address.
    accepted: Vec<IpAddr>,
    stopped: bool,
}

/// A relay listening on a free loopback port; stops (and cuts its connections) when dropped.
pub struct Relay {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl Relay {
    /// Listens on `127.0.0.1:0` and forwards every connection to `target`.
    pub fn start(target: SocketAddr) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        thread::spawn(move || accept_loop(listener, target, shared));
        Ok(Relay { addr, state })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Holds (true) or releases (false) the traffic of every connection.
    pub fn blackhole(&self, on: bool) {
        lock(&self.state).all = on;
    }

    /// Holds the traffic, both ways, of connections from these sources; empty heals.
    pub fn hold_sources(&self, sources: &[IpAddr]) {
        lock(&self.state).sources = sources.iter().copied().collect();
    }

    /// Closes every connection now (both ends see a clean close); new ones are accepted.
    pub fn cut(&self) {
        let conns = std::mem::take(&mut lock(&self.state).conns);
        for (a, b) in conns {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }

    /// Source addresses of the connections accepted so far, in order.
    pub fn accepted(&self) -> Vec<IpAddr> {
        lock(&self.state).accepted.clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        lock(&self.state).stopped = true;
        self.cut();
        // Wake the accept loop so it sees `stopped`.
        let _ = TcpStream::connect(self.addr);
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(listener: TcpListener, target: SocketAddr, state: Arc<Mutex<State>>) {
    for client in listener.incoming() {
        if lock(&state).stopped {
            return;
        }
        let Ok(client) = client else { continue };
        let Ok(source) = client.peer_addr().map(|a| a.ip()) else {
            continue;
        };
        // The target refusing means the node is down: the client sees the same.
        let Ok(server) = TcpStream::connect(target) else {
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let pair = (client.try_clone(), server.try_clone());
        let (Ok(c2), Ok(s2)) = pair else { continue };
        {
            let mut s = lock(&state);
            s.accepted.push(source);
            if let (Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone()) {
                s.conns.push((c3, s3));
            }
        }
        let st = state.clone();
        thread::spawn(move || pump(client, s2, source, &st));
        let st = state.clone();
        thread::spawn(move || pump(server, c2, source, &st));
    }
}

/// Moves bytes from `from` to `to` until either side closes, stopping while `source` is held.
fn pump(mut from: TcpStream, mut to: TcpStream, source: IpAddr, state: &Mutex<State>) {
    let _ = from.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if !wait_released(source, state) {
            break;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        // Bytes read just before a hold began are held too, not delivered.
        if !wait_released(source, state) || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// Sleeps while traffic from `source` is held; false once the relay stopped.
fn wait_released(source: IpAddr, state: &Mutex<State>) -> bool {
    loop {
        {
            let s = lock(state);
            if s.stopped {
                return false;
            }
            if !s.all && !s.sources.contains(&source) {
                return true;
            }
        }
        thread::sleep(POLL);
    }
}
