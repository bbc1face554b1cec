//! One worker's connection to one Redis node, shared by all of that worker's clients.
//!
//! ```text
//!  sessions ──send()──▶ queue ──(one writev per loop turn)──▶ socket ──▶ redis node
//!                                  │ in_flight FIFO (client, seq)        │
//!  ReplySink::deliver  ◀── frame ◀─┴──────────── replies ◀───────────────┘
//! ```
//!
//! Requests from every client of the worker are appended to `queue` during a loop turn; the
//! connection task wakes once, moves them all to the socket in one vectored write, and records
//! who is owed each reply in the `in_flight` FIFO. Redis answers a connection in order, so the
//! n-th reply framed belongs to the n-th entry: replies are framed, never decoded, and handed
//! to their client as the very bytes Redis sent.
//!
//! Invariants:
//! - `in_flight` holds exactly one entry per request whose bytes were handed to the socket,
//!   in write order (ASKING counts as a request whose reply is discarded).
//! - Any I/O error or unexpected reply poisons the connection: every in-flight request fails
//!   with an error (its outcome is unknown, so it is never resent), queued ones fail too, and
//!   the next `send` dials a fresh connection. A replica connection carries only read-only
//!   commands: what it owed is handed back as never sent, and its session reruns it on the
//!   master (`replies.rs`).
//! - The socket is always read while writing, so a large request can never deadlock against
//!   a large reply.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use resp::ReplyFramer;
use tokio::io::AsyncWrite;
use tokio::time::Instant;

use crate::backend::stats::NodeStats;
use crate::backend::watchdog::Watchdog;
use crate::patience::Patience;
use crate::tls::Stream;
use crate::topology::Topology;

pub(crate) mod bigbuf;
mod refusal;
mod replies;
mod requests;
mod settings;
pub(crate) mod sink;
pub(crate) mod stats;
mod task;
pub(crate) mod watchdog;
mod window;
mod writev;

pub(crate) use refusal::is_redirect;
use requests::{InFlight, Owed};
pub(crate) use requests::{Outgoing, Owes};
pub(crate) use settings::Settings;
pub(crate) use sink::ReplySink;
use task::run;
pub(crate) use writev::{advance, fill_slices, room};

/// How long a node that refused a connection is failed fast before the next dial.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(100);
/// Reads go into at least this much spare room: a short read then proves the socket drained,
/// and tokio skips the extra `read` that would only return EAGAIN.
const READ_CHUNK: usize = 64 * 1024;
/// Frames longer than this are not parsed for their patience: blocking commands and
/// transactions are small, and a streamed upload's last piece is payload.
const PARSE_MAX: usize = 64 * 1024;
/// At most this many buffers per `writev`.
const MAX_IOVECS: usize = 64;

static ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";
static HELLO3: &[u8] = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n";
static READONLY: &[u8] = b"*1\r\n$8\r\nREADONLY\r\n";

/// What a connection speaks: its protocol and its database. Requests of a client go to
/// connections of its own `Wire`, so the node encodes replies in the client's protocol and
/// runs commands in the client's database; no request ever changes a shared connection's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Wire {
    pub resp3: bool,
    pub db: u16,
}

impl Wire {
    /// Protocol `resp3`, database 0 (pub/sub streams: channels have no database).
    pub(crate) fn protocol(resp3: bool) -> Wire {
        Wire { resp3, db: 0 }
    }
}

/// The handle sessions hold; the connection task owns the socket.
pub(crate) struct Backend {
    pub addr: Rc<str>,
    queue: RefCell<VecDeque<(Outgoing, Patience)>>,
    waker: RefCell<Option<Waker>>,
    running: Cell<bool>,
    /// Set by `close`: the connection task ends and drops the socket.
    closed: Cell<bool>,
    /// Until when to fail requests without dialling, after a failed connect.
    down_until: Cell<Option<Instant>>,
    connect_timeout: Duration,
    /// No reply for this long while requests are owed poisons the connection (0: never).
    request_timeout: Duration,
    slow_timeout: Duration,
    /// Told when this node cannot be reached, so a dead master is noticed without a MOVED.
    topology: Arc<Topology>,
    /// The protocol (HELLO 3 first on every new connection, for RESP3 clients) and the
    /// database (`SELECT` at set-up when not 0: Valkey 9's numbered databases in cluster
    /// mode). Changed only by a session that switched its own connection in band
    /// (`Backend::switched`).
    wire: Cell<Wire>,
    /// `AUTH [user] password` sent first on every new connection, when configured.
    auth: Option<Bytes>,
    /// The mirror user's set-up (`Settings::acting`): requests wait until it succeeded.
    acting: Option<Bytes>,
    /// TLS towards the node (`backend_tls`), when enabled.
    tls: Option<Arc<crate::tls::Connector>>,
    /// Stream mode (a session's pub/sub connection): every frame the node sends is handed to
    /// this client as it comes, with no request/reply pairing.
    sink: RefCell<Option<Rc<dyn ReplySink>>>,
    /// This worker's counters for the node.
    pub node: Arc<NodeStats>,
    /// Bytes one connection moves in one poll before yielding: as much as a client's
    /// (`proxy.turn_quantum_bytes` for both), so a client can drain a streamed reply as fast
    /// as it arrives.
    quantum: usize,
    /// A replica connection (`Settings::replica`): only reads ride it, so what it owed when
    /// it broke may go to the master instead of failing (`replies.rs`).
    pub(crate) replica: Option<Arc<crate::topology::ReplicaHealth>>,
    /// Connections lost or failed so far: state the node kept per connection (a WATCH)
    /// is gone once this changes.
    breaks: Cell<u32>,
    /// The node keeps state for this connection (a WATCH): requests queued when it breaks
    /// are failed, never sent on a new connection.
    keeps_state: Cell<bool>,
}

// === impl Backend ===

impl Backend {
    /// What this connection speaks: protocol and database.
    pub(crate) fn wire(&self) -> Wire {
        self.wire.get()
    }

    /// Whether it speaks RESP3.
    pub(crate) fn resp3(&self) -> bool {
        self.wire.get().resp3
    }

    /// The session that owns this connection wrote HELLO or SELECT on it (ahead of an
    /// EXEC or WATCH that must run on it): it now speaks `wire`, also after a reconnect.
    pub(crate) fn switched(&self, wire: Wire) {
        self.wire.set(wire);
    }

    /// How many times a connection of this backend broke or failed to connect.
    pub(crate) fn breaks(&self) -> u32 {
        self.breaks.get()
    }

    /// Mark the connection as holding state on the node (see `keeps_state`).
    pub(crate) fn keep_state(&self) {
        self.keeps_state.set(true);
    }

    fn note_break(&self) {
        self.breaks.set(self.breaks.get().wrapping_add(1));
        if let Some(health) = &self.replica {
            health.suspect();
        }
    }

    /// Tell `out`'s client that it will get no reply: an error in its entry, or, on a
    /// pub/sub stream (whose requests own no entry), the loss of the stream.
    fn fail(&self, out: Outgoing, reply: Bytes) {
        match self.entry_of(&out) {
            Some((seq, frag)) => out.client.deliver(seq, frag, reply),
            None => out.client.stream_lost(),
        }
    }

    /// Like `fail`, for a request that never left: its session may send it elsewhere.
    fn unsent(&self, out: Outgoing, reply: Bytes) {
        match self.entry_of(&out) {
            Some((seq, frag)) => out.client.not_sent(seq, frag, reply),
            None => out.client.stream_lost(),
        }
    }

    /// The entry `out` answers, unless it is a stream's command or on a stream connection.
    fn entry_of(&self, out: &Outgoing) -> Option<(u64, u32)> {
        match out.owes {
            Owes::Entry { seq, frag } if self.sink.borrow().is_none() => Some((seq, frag)),
            _ => None,
        }
    }

    /// Queue a request for the node, reading its patience from its frame: for the paths off
    /// the hot one (dedicated and pub/sub connections, redirects), where a blocking or slow
    /// command may come without its sender knowing. The hot paths use `send_with`.
    pub(crate) fn send(self: &Rc<Self>, out: Outgoing) {
        // A streamed upload's pieces are payload, not commands: not parsed (nor copied).
        let parse = !out.more && out.frame.len() <= PARSE_MAX;
        let patience = match parse && out.frame.first() == Some(&b'*') {
            true => Patience::of_frame(&out.frame),
            false => Patience::Normal,
        };
        self.send_with(out, patience);
    }

    /// Queue a request whose reply may take as long as `patience` allows; the connection
    /// task writes it on its next turn.
    pub(crate) fn send_with(self: &Rc<Self>, out: Outgoing, patience: Patience) {
        if let Some(until) = self.down_until.get() {
            if Instant::now() < until {
                // An upload's leading part owes no reply: the upload answers (`upload.rs`).
                if !out.more {
                    let err = node_error(&self.addr, "is unreachable (recent connect failure)");
                    self.unsent(out, err);
                }
                return;
            }
            self.down_until.set(None);
        }
        self.queue.borrow_mut().push_back((out, patience));
        if !self.running.replace(true) {
            tokio::task::spawn_local(run(self.clone()));
        } else if let Some(w) = self.waker.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    /// Whether the connection task is alive: while it is, parts already queued or written
    /// and parts sent next share one socket (a streamed upload relies on it).
    pub(crate) fn is_running(&self) -> bool {
        self.running.get()
    }

    /// Turn this (new, unused) connection into a stream to `client` (pub/sub).
    pub(crate) fn stream_to(&self, client: Rc<dyn ReplySink>) {
        *self.sink.borrow_mut() = Some(client);
    }

    /// End the connection (a session's dedicated connection when the session ends): the
    /// node sees the socket close, which also releases a client blocked there.
    pub(crate) fn close(&self) {
        self.closed.set(true);
        if let Some(w) = self.waker.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    /// Fail every queued request with `reply` (nothing of them reached the node).
    /// Fail what waits to be written (`never_sent`: it may go elsewhere, see `unsent`).
    fn fail_queued(&self, reply: &Bytes, never_sent: bool) {
        let queued: Vec<Outgoing> = self.queue.borrow_mut().drain(..).map(|q| q.0).collect();
        // A streamed upload's leading parts owe nothing: its last part, or the upload
        // itself when the connection is gone, answers for the request.
        for out in queued.into_iter().filter(|out| !out.more) {
            match never_sent {
                true => self.unsent(out, reply.clone()),
                false => self.fail(out, reply.clone()),
            }
        }
    }
}

/// An error reply naming the node, for requests that never reached it or whose fate is unknown.
fn node_error(addr: &str, what: &str) -> Bytes {
    Bytes::from(format!("-ERR slotgate: node {addr} {what}\r\n"))
}

/// The live connection's state, owned by the task.
struct Conn {
    backend: Rc<Backend>,
    stream: Stream,
    write_queue: VecDeque<Bytes>,
    in_flight: VecDeque<InFlight>,
    read_buf: BytesMut,
    framer: ReplyFramer,
    watchdog: Watchdog,
    /// In-flight count last added to the node's counters.
    reported_inflight: usize,
    /// A big bulk reply being passed on piece by piece (`backend/replies.rs`).
    streaming: Option<replies::ReplyStream>,
    /// Why the transaction whose EXEC comes next was refused (`backend/refusal.rs`).
    refusal: Option<Bytes>,
    /// Set-up replies still awaited that must succeed before any request is written.
    gate: usize,
    /// Why a set-up that had to succeed failed: what the requests queued here get.
    setup_failed: Option<Bytes>,
    /// How many replies this connection may owe (`window.rs`).
    window: window::OwedWindow,
}

// === impl Conn ===

impl Conn {
    fn new(backend: Rc<Backend>, stream: Stream) -> Conn {
        Conn {
            stream,
            write_queue: VecDeque::new(),
            in_flight: VecDeque::new(),
            read_buf: BytesMut::with_capacity(READ_CHUNK),
            framer: ReplyFramer::new(),
            watchdog: Watchdog::new(backend.request_timeout, backend.slow_timeout),
            reported_inflight: 0,
            streaming: None,
            refusal: None,
            gate: 0,
            setup_failed: None,
            window: window::OwedWindow::new(),
            backend,
        }
    }

    /// Pump once: take new requests, write what the socket accepts, deliver what it returned.
    /// Ready(reason) when the connection is finished.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<String> {
        self.remember_waker(cx);
        let mut moved = 0;
        loop {
            if self.backend.closed.get() {
                return Poll::Ready("closed by the proxy".into());
            }
            if self.gate == 0 {
                self.take_queued();
            }
            let room = writev::room(self.backend.quantum, moved);
            let wrote = match self.poll_write(cx, room) {
                Ok(n) => n,
                Err(e) => return Poll::Ready(format!("write failed: {e}")),
            };
            let room = writev::room(self.backend.quantum, moved + wrote);
            let read = match self.poll_read(cx, room) {
                Ok(n) => n,
                Err(reason) => return Poll::Ready(reason),
            };
            moved += wrote + read;
            if moved > self.backend.quantum {
                // A huge value in either direction passes in slices, between the worker's
                // other tasks, instead of holding the thread until it is through.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let waiting = self.gate == 0
                && !self.backend.queue.borrow().is_empty()
                && self.window.has_room(self.in_flight.len());
            if wrote == 0 && read == 0 && !waiting {
                return self.poll_idle(cx);
            }
        }
    }

    /// Let `send` and `close` wake this task; the waker is cloned only when it changed.
    fn remember_waker(&self, cx: &Context<'_>) {
        let mut w = self.backend.waker.borrow_mut();
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
    }

    /// Nothing moved: arm the request timeout while replies are owed, and publish the
    /// in-flight count only now, once per quiet turn rather than per reply.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<String> {
        let owed = !self.in_flight.is_empty() || self.streaming.is_some();
        if self.watchdog.poll_expired(cx, owed).is_ready() {
            let ms = self.watchdog.deadline().as_millis();
            return Poll::Ready(format!("no reply within {ms} ms"));
        }
        let owed = self.in_flight.len();
        self.backend
            .node
            .report_inflight(&mut self.reported_inflight, owed);
        Poll::Pending
    }

    /// Write what the socket takes, `room` bytes at most. Returns bytes written.
    fn poll_write(&mut self, cx: &mut Context<'_>, room: usize) -> io::Result<usize> {
        let mut total = 0;
        while !self.write_queue.is_empty() && total < room {
            let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
            let count = fill_slices(&self.write_queue, &mut slices, room - total);
            match Pin::new(&mut self.stream).poll_write_vectored(cx, &slices[..count]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    advance(&mut self.write_queue, n);
                    total += n;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break,
            }
        }
        // TLS may hold the last record back when the socket was full (plain: a no-op).
        if let Poll::Ready(Err(e)) = Pin::new(&mut self.stream).poll_flush(cx) {
            return Err(e);
        }
        Ok(total)
    }

    /// Read what the socket has, `room` bytes at most, and deliver every complete reply.
    /// Returns bytes read.
    fn poll_read(&mut self, cx: &mut Context<'_>, room: usize) -> Result<usize, String> {
        if self.read_buf.capacity() - self.read_buf.len() < READ_CHUNK / 4 {
            let want = match self.streaming {
                Some(_) => self.read_buf.len() + replies::STREAM_READ,
                None => self.framer.hint().unwrap_or(0),
            };
            let floor = self.read_buf.len() + READ_CHUNK;
            crate::backend::bigbuf::reserve_frame(&mut self.read_buf, want.max(floor));
        }
        let mut window = (&mut self.read_buf).limit(room);
        let n = match tokio_util::io::poll_read_buf(Pin::new(&mut self.stream), cx, &mut window) {
            Poll::Ready(Ok(0)) => return Err("closed by the node".into()),
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Err(format!("read failed: {e}")),
            Poll::Pending => return Ok(0),
        };
        self.deliver_replies()?;
        Ok(n)
    }
}
