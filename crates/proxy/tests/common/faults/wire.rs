//! The fault harness's connections: one to the proxy, or a small cluster client straight to
//! the nodes (follows MOVED and ASK, tries the next node when one cannot be reached) for the
//! "same clients, directly against the cluster" column. Unlike `common::Client` they never
//! panic on a dead peer: a lost connection is an outcome the harness counts.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use resp::Value;

/// What became of one request.
pub enum Outcome {
    Reply(Value),
    /// Written, then the connection died or timed out: it may or may not have run.
    Lost,
    /// Never written anywhere (no node could be reached): it did not run.
    NotSent,
}

/// Where requests go.
pub enum Target {
    Proxy(SocketAddr),
    /// The cluster's nodes (any of them; MOVED says which).
    Direct(Vec<SocketAddr>),
}

pub struct Wire {
    target: Target,
    conn: Option<(SocketAddr, TcpStream, BytesMut)>,
    next: usize,
    /// MOVED followed by the direct client (not errors: a cluster client retries them).
    pub redirects: u64,
}

const READ_TIMEOUT: Duration = Duration::from_secs(30);

impl Wire {
    pub fn new(target: Target) -> Wire {
        Wire {
            target,
            conn: None,
            next: 0,
            redirects: 0,
        }
    }

    /// Sends one command and reads its reply; the direct client follows MOVED itself.
    pub fn call(&mut self, args: &[&[u8]]) -> Outcome {
        for _ in 0..5 {
            let out = self.once(args);
            if let Outcome::Reply(Value::Error(e)) = &out {
                if let (Target::Direct(_), Some(addr)) = (&self.target, redirect(e, "MOVED ")) {
                    self.redirects += 1;
                    self.conn = connect(addr).map(|s| (addr, s, BytesMut::new()));
                    continue;
                }
                if let (Target::Direct(_), Some(addr)) = (&self.target, redirect(e, "ASK ")) {
                    self.redirects += 1;
                    return asking(addr, args);
                }
            }
            return out;
        }
        Outcome::NotSent
    }

    fn once(&mut self, args: &[&[u8]]) -> Outcome {
        if self.conn.is_none() && !self.reconnect() {
            return Outcome::NotSent;
        }
        let Some((_, stream, buf)) = self.conn.as_mut() else {
            return Outcome::NotSent;
        };
        let mut out = BytesMut::new();
        resp::encode_command(&mut out, args);
        if stream.write_all(&out).is_err() {
            // A write can land in the socket buffer of a connection already dead; unknown.
            self.conn = None;
            return Outcome::Lost;
        }
        match read_reply(stream, buf) {
            Some(v) => Outcome::Reply(v),
            None => {
                self.conn = None;
                Outcome::Lost
            }
        }
    }

    /// Connects to the proxy, or to the next node that accepts (direct).
    fn reconnect(&mut self) -> bool {
        let addr = match &self.target {
            Target::Proxy(a) => *a,
            Target::Direct(nodes) => {
                self.next = (self.next + 1) % nodes.len();
                nodes[self.next]
            }
        };
        self.conn = connect(addr).map(|s| (addr, s, BytesMut::new()));
        self.conn.is_some()
    }
}

fn connect(addr: SocketAddr) -> Option<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
    s.set_nodelay(true).ok()?;
    Some(s)
}

/// `MOVED <slot> <host:port>` or `ASK <slot> <host:port>` → the address.
fn redirect(e: &[u8], kind: &str) -> Option<SocketAddr> {
    let text = std::str::from_utf8(e).ok()?;
    let rest = text.strip_prefix(kind)?;
    rest.split(' ').nth(1)?.parse().ok()
}

/// One command sent after ASKING to the node an ASK named, on a connection of its own.
fn asking(addr: SocketAddr, args: &[&[u8]]) -> Outcome {
    let Some(mut stream) = connect(addr) else {
        return Outcome::NotSent;
    };
    let mut out = BytesMut::new();
    resp::encode_command(&mut out, &[b"ASKING"]);
    resp::encode_command(&mut out, args);
    if stream.write_all(&out).is_err() {
        return Outcome::Lost;
    }
    let mut buf = BytesMut::new();
    match (
        read_reply(&mut stream, &mut buf),
        read_reply(&mut stream, &mut buf),
    ) {
        (Some(_), Some(v)) => Outcome::Reply(v),
        _ => Outcome::Lost,
    }
}

/// One reply, or None when the connection closed, broke or stayed silent for READ_TIMEOUT.
fn read_reply(stream: &mut TcpStream, buf: &mut BytesMut) -> Option<Value> {
    let started = Instant::now();
    let mut framer = resp::ReplyFramer::new();
    loop {
        if let Some(len) = framer.next_frame(buf).ok()? {
            let frame = buf.split_to(len).freeze();
            return resp::decode(&frame).ok()?.map(|(v, _)| v);
        }
        let mut chunk = [0u8; 16 * 1024];
        match stream.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if retry(e.kind()) && started.elapsed() < READ_TIMEOUT => continue,
            Err(_) => return None,
        }
    }
}

fn retry(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Interrupted | ErrorKind::WouldBlock | ErrorKind::TimedOut
    )
}
