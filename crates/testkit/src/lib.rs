//! A scripted fake Redis Cluster node for the proxy's integration tests.
//!
//! Real redis-servers cannot be made to misbehave on cue: answer MOVED to themselves, send
//! a stale CLUSTER SLOTS, cut a reply in half or never answer. A [`FakeNode`] can. It listens
//! on a free loopback port, parses requests with the workspace's own `RequestParser`, and
//! answers each one from a script; what the script leaves to it ([`Reply::Default`]) gets a
//! plain answer: `CLUSTER SLOTS` from a configurable map, `ASKING`/`PING`, and a tiny
//! key-value store for `GET`/`SET`. Every request is counted and logged so tests can assert
//! how often the proxy asked for what.

pub mod relay;
pub mod reply;
mod wait;

pub use wait::wait_until;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::BytesMut;
use resp::{Limits, Parsed, Progress, RequestParser};

pub use reply::Reply;

/// The script: given one request's arguments and the node's state, what to answer.
pub type Script = dyn Fn(&[Vec<u8>], &State) -> Reply + Send + Sync;

/// One `CLUSTER SLOTS` range: `start..=end` served by the master at `host:port` with `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub start: u16,
    pub end: u16,
    pub host: String,
    pub port: u16,
    pub id: String,
}

impl Range {
    /// A range served by `addr` (a fake or real node) with node id `id`.
    pub fn new(start: u16, end: u16, addr: SocketAddr, id: &str) -> Range {
        Range {
            start,
            end,
            host: addr.ip().to_string(),
            port: addr.port(),
            id: id.to_string(),
        }
    }
}

/// What a node knows and has seen; shared by its connection threads and the test.
pub struct State {
    /// The node's own address.
    pub addr: SocketAddr,
    /// A 40-character node id derived from the port (stable for the node's life).
    pub id: String,
    slots: Mutex<Vec<Range>>,
    counts: Mutex<HashMap<String, usize>>,
    log: Mutex<Vec<String>>,
    store: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    delayed_sent: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking script must not hide the counts from the test that reads them.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// Replace the map this node answers `CLUSTER SLOTS` with (may be empty).
    pub fn set_slots(&self, ranges: Vec<Range>) {
        *lock(&self.slots) = ranges;
    }

    /// How many requests named `command` arrived (upper case; `CLUSTER SLOTS` has two words).
    pub fn count(&self, command: &str) -> usize {
        lock(&self.counts).get(command).copied().unwrap_or(0)
    }

    /// How many [`Reply::Delayed`] answers went out: their pause over and their bytes
    /// written (or their connection found closed by then). A test that must see what
    /// follows a late reply waits for this instead of for a time.
    pub fn delayed_sent(&self) -> usize {
        self.delayed_sent.load(Ordering::SeqCst)
    }

    /// Every request so far, as its arguments joined by spaces, in arrival order.
    pub fn log(&self) -> Vec<String> {
        lock(&self.log).clone()
    }

    /// The `CLUSTER SLOTS` reply for the current map.
    pub fn cluster_slots(&self) -> Vec<u8> {
        reply::cluster_slots(&lock(&self.slots))
    }

    /// The built-in answers: CLUSTER SLOTS, PING, ASKING, GET, SET; an error otherwise.
    pub fn default_reply(&self, args: &[Vec<u8>]) -> Vec<u8> {
        let name = command_name(args);
        match (name.as_str(), args) {
            ("CLUSTER SLOTS", _) => self.cluster_slots(),
            ("PING", _) => reply::simple("PONG"),
            ("ASKING", _) => reply::ok(),
            ("GET", [_, key]) => match lock(&self.store).get(key) {
                Some(v) => reply::bulk(v),
                None => reply::null(),
            },
            ("SET", [_, key, value, ..]) => {
                lock(&self.store).insert(key.clone(), value.clone());
                reply::ok()
            }
            _ => reply::error(&format!("ERR fake node: unknown command '{name}'")),
        }
    }

    fn record(&self, args: &[Vec<u8>]) {
        *lock(&self.counts).entry(command_name(args)).or_default() += 1;
        let line: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        lock(&self.log).push(line.join(" "));
    }
}

/// `GET`, `CLUSTER SLOTS`, …: the command's name in upper case (two words for CLUSTER).
pub fn command_name(args: &[Vec<u8>]) -> String {
    let word = |i: usize| {
        args.get(i)
            .map(|a| String::from_utf8_lossy(a).to_ascii_uppercase())
    };
    match (word(0), word(1)) {
        (Some(c), Some(sub)) if c == "CLUSTER" => format!("{c} {sub}"),
        (Some(c), _) => c,
        (None, _) => String::new(),
    }
}

/// A fake node listening on 127.0.0.1; it stops (and closes every connection) when dropped.
pub struct FakeNode {
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl FakeNode {
    /// Start a node that answers every request with `script`.
    pub fn start(script: impl Fn(&[Vec<u8>], &State) -> Reply + Send + Sync + 'static) -> FakeNode {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State {
            addr,
            id: format!("{:040x}", addr.port()),
            slots: Mutex::default(),
            counts: Mutex::default(),
            log: Mutex::default(),
            store: Mutex::default(),
            delayed_sent: AtomicUsize::new(0),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let (st, sp) = (state.clone(), stop.clone());
        let acceptor = std::thread::spawn(move || accept_loop(&listener, &st, &sp, &script));
        FakeNode {
            state,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// A node that answers everything with the built-in replies.
    pub fn plain() -> FakeNode {
        FakeNode::start(|_, _| Reply::Default)
    }

    pub fn addr(&self) -> SocketAddr {
        self.state.addr
    }

    pub fn state(&self) -> &State {
        &self.state
    }
}

impl std::ops::Deref for FakeNode {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(20);

fn accept_loop(
    listener: &TcpListener,
    state: &Arc<State>,
    stop: &AtomicBool,
    script: &Arc<Script>,
) {
    let stop_flag = Arc::new(AtomicBool::new(false));
    let mut conns = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let (st, sc, sp) = (state.clone(), script.clone(), stop_flag.clone());
                conns.push(std::thread::spawn(move || serve(stream, &st, &*sc, &sp)));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
    stop_flag.store(true, Ordering::Relaxed);
    for c in conns {
        let _ = c.join();
    }
}

/// One connection: read, answer in order, until closed or stopped.
fn serve(mut stream: TcpStream, state: &State, script: &Script, stop: &AtomicBool) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(POLL));
    let _ = stream.set_nodelay(true);
    let mut conn = Conn {
        parser: RequestParser::new(Limits::default()),
        buf: BytesMut::with_capacity(16 * 1024),
        hung: false,
    };
    let mut chunk = [0u8; 16 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => conn.buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        let (out, close, delayed) = conn.answer(state, script);
        let written = out.is_empty() || stream.write_all(&out).is_ok();
        state.delayed_sent.fetch_add(delayed, Ordering::SeqCst);
        if !written {
            return;
        }
        if close {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// A connection's parsing state.
struct Conn {
    parser: RequestParser,
    buf: BytesMut,
    /// Once a script hangs, this connection never answers again (a stuck node).
    hung: bool,
}

impl Conn {
    /// Answer every complete request buffered: the bytes to write, whether to close after,
    /// and how many of the answers were delayed ones.
    fn answer(&mut self, state: &State, script: &Script) -> (Vec<u8>, bool, usize) {
        let (mut out, mut delayed) = (Vec::new(), 0);
        while let Ok(Progress::Done(parsed)) = self.parser.parse(&mut self.buf) {
            let Parsed::Request(req) = parsed else {
                continue;
            };
            let args: Vec<Vec<u8>> = req.args().map(<[u8]>::to_vec).collect();
            state.record(&args);
            if self.hung {
                continue;
            }
            match script(&args, state) {
                Reply::Default => out.extend(state.default_reply(&args)),
                Reply::Bytes(b) => out.extend(b),
                Reply::Hang => self.hung = true,
                Reply::Delayed(pause, b) => {
                    std::thread::sleep(pause);
                    out.extend(b);
                    delayed += 1;
                }
                Reply::CloseAfter(b) => {
                    out.extend(b);
                    return (out, true, delayed);
                }
            }
        }
        (out, false, delayed)
    }
}
