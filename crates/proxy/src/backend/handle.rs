//! The handle sessions hold on one worker's connection to one node (`Backend`): the queue
//! they append requests to, what the connection speaks, and the lazy start of its task.
//! The task and the connection's state (`task.rs`, `conn.rs`) depend on this file, never
//! the reverse: the handle is given how to start its task when it is made (`mod.rs`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::requests::{Outgoing, Owes};
use super::settings::Settings;
use super::sink::ReplySink;
use super::stats::NodeStats;
use crate::patience::Patience;
use crate::topology::Topology;

/// Frames longer than this are not parsed for their patience: blocking commands and
/// transactions are small, and a streamed upload's last piece is payload.
const PARSE_MAX: usize = 64 * 1024;

/// What a connection speaks: its protocol, its database, whether it leaves keys' access
/// times alone (CLIENT NO-TOUCH) and whether it sees expired keys as an import source
/// (CLIENT IMPORT-SOURCE, Valkey). Requests of a client go to connections of its own
/// `Wire`, so the node encodes replies in the client's protocol, runs commands in the
/// client's database and touches and sees keys as the client asked; no request ever changes a
/// shared connection's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Wire {
    pub resp3: bool,
    pub db: u16,
    pub no_touch: bool,
    pub import_source: bool,
    /// The id of the NOLOOP tracking client these connections are for (0: shared).
    pub tracker: u64,
}

impl Wire {
    /// Protocol `resp3`, database 0 (pub/sub streams: channels have no database).
    pub(crate) fn protocol(resp3: bool) -> Wire {
        Wire {
            resp3,
            db: 0,
            no_touch: false,
            import_source: false,
            tracker: 0,
        }
    }
}

/// The handle sessions hold; the connection task owns the socket.
pub(crate) struct Backend {
    pub addr: Rc<str>,
    pub(super) queue: RefCell<VecDeque<(Outgoing, Patience)>>,
    pub(super) waker: RefCell<Option<Waker>>,
    pub(super) running: Cell<bool>,
    /// Set by `close`: the connection task ends and drops the socket.
    pub(super) closed: Cell<bool>,
    /// Until when to fail requests without dialling, after a failed connect.
    pub(super) down_until: Cell<Option<Instant>>,
    pub(super) connect_timeout: Duration,
    /// No reply for this long while requests are owed poisons the connection (0: never).
    pub(super) request_timeout: Duration,
    pub(super) slow_timeout: Duration,
    /// Told when this node cannot be reached, so a dead master is noticed without a MOVED.
    pub(super) topology: Arc<Topology>,
    /// The protocol (HELLO 3 first on every new connection, for RESP3 clients) and the
    /// database (`SELECT` at set-up when not 0: Valkey 9's numbered databases in cluster
    /// mode). Changed only by a session that switched its own connection in band
    /// (`Backend::switched`).
    pub(super) wire: Cell<Wire>,
    /// `AUTH [user] password` sent first on every new connection, when configured.
    pub(super) auth: Option<Bytes>,
    /// The mirror user's set-up (`Settings::acting`): requests wait until it succeeded.
    pub(super) acting: Option<Bytes>,
    /// A NOLOOP tracking client's `CLIENT TRACKING … REDIRECT` (`Settings::tracking`):
    /// requests wait until it succeeded.
    pub(super) tracking: Option<Bytes>,
    /// TLS towards the node (`backend_tls`), when enabled.
    pub(super) tls: Option<Arc<crate::tls::Connector>>,
    /// Stream mode (a session's pub/sub connection): every frame the node sends is handed to
    /// this client as it comes, with no request/reply pairing.
    pub(super) sink: RefCell<Option<Rc<dyn ReplySink>>>,
    /// A connection the nodes track a client on (`Wire::tracker`): its tracking feed, told
    /// of the pushes that answer no request and of a break (the node forgot the tracking),
    /// and (`feed_on_close`) of the connection's close too.
    pub(super) feed: RefCell<Option<Rc<dyn ReplySink>>>,
    pub(super) feed_on_close: Cell<bool>,
    /// This worker's counters for the node.
    pub node: Arc<NodeStats>,
    /// Whether the set-up asks the node's id for the connection (`Settings::learn_id`),
    /// and the id it answered (0 until then, and from each reconnect until it answers
    /// again); shared with the registry while a blocking command waits on it.
    pub(super) learn_id: bool,
    pub(crate) node_id: Arc<std::sync::atomic::AtomicU64>,
    /// Bytes one connection moves in one poll before yielding: as much as a client's
    /// (`proxy.turn_quantum_bytes` for both), so a client can drain a streamed reply as fast
    /// as it arrives.
    pub(super) quantum: usize,
    /// A replica connection (`Settings::replica`): only reads ride it, so what it owed when
    /// it broke may go to the master instead of failing (`replies.rs`).
    pub(crate) replica: Option<Arc<crate::topology::ReplicaHealth>>,
    /// `READONLY` at set-up (`Settings::readonly`).
    pub(super) readonly: bool,
    /// Connections lost or failed so far: state the node kept per connection (a WATCH)
    /// is gone once this changes.
    pub(super) breaks: Cell<u32>,
    /// The node keeps state for this connection (a WATCH): requests queued when it breaks
    /// are failed, never sent on a new connection.
    pub(super) keeps_state: Cell<bool>,
    /// Starts the connection task (`task.rs`), given by `mod.rs`'s `open`: the handle
    /// starts its task on the first request, without depending on the task's code.
    start: fn(Rc<Backend>),
}

// === impl Backend ===

impl Backend {
    pub(crate) fn new(
        addr: &str,
        settings: Settings,
        topology: Arc<Topology>,
        start: fn(Rc<Backend>),
    ) -> Rc<Backend> {
        let Settings {
            connect_timeout,
            request_timeout,
            slow_timeout,
            resp3,
            db,
            no_touch,
            import_source,
            tracker,
            learn_id,
            auth,
            acting,
            tracking,
            tls,
            node,
            quantum,
            replica,
            readonly,
        } = settings;
        Rc::new(Backend {
            addr: addr.into(),
            queue: RefCell::new(VecDeque::new()),
            waker: RefCell::new(None),
            running: Cell::new(false),
            closed: Cell::new(false),
            down_until: Cell::new(None),
            connect_timeout,
            request_timeout,
            slow_timeout,
            topology,
            learn_id,
            node_id: Arc::default(),
            wire: Cell::new(Wire {
                resp3,
                db,
                no_touch,
                import_source,
                tracker,
            }),
            auth,
            acting,
            tracking,
            tls,
            sink: RefCell::new(None),
            feed: RefCell::new(None),
            feed_on_close: Cell::new(false),
            node,
            quantum,
            replica,
            readonly,
            breaks: Cell::new(0),
            keeps_state: Cell::new(false),
            start,
        })
    }

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

    pub(super) fn note_break(&self) {
        self.breaks.set(self.breaks.get().wrapping_add(1));
        if let Some(health) = &self.replica {
            health.suspect();
        }
    }

    /// Tell `out`'s client that it will get no reply: an error in its entry, or, on a
    /// pub/sub stream (whose requests own no entry), the loss of the stream.
    pub(super) fn fail(&self, out: Outgoing, reply: Bytes) {
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
    pub(super) fn entry_of(&self, out: &Outgoing) -> Option<(u64, u32)> {
        match out.owes {
            Owes::Entry { seq, frag } if self.sink.borrow().is_none() => Some((seq, frag)),
            _ => None,
        }
    }

    /// Queue a request for the node, reading its patience from its frame: for the paths off
    /// the hot one (dedicated and pub/sub connections, redirects), where a blocking or slow
    /// command may come without its sender knowing. The hot paths use `send_with`.
    pub(crate) fn send(self: &Rc<Self>, out: Outgoing) {
        let frame = out.frame.clone();
        self.send_like(out, &frame);
    }

    /// `send`, with the patience read from `like`: a transaction's EXEC sent alone takes
    /// that of the commands it runs, queued on the node before it.
    pub(crate) fn send_like(self: &Rc<Self>, out: Outgoing, like: &Bytes) {
        // A streamed upload's pieces are payload, not commands: not parsed (nor copied).
        let parse = !out.more && like.len() <= PARSE_MAX;
        let patience = match parse && like.first() == Some(&b'*') {
            true => Patience::of_frame(like),
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
            (self.start)(self.clone());
        } else if let Some(w) = self.waker.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    /// Connect now rather than at the first request, so the set-up (a NOLOOP client's
    /// tracking) is in force before any (`session/tracking/own.rs`).
    pub(crate) fn connect_now(self: &Rc<Self>) {
        let down = self
            .down_until
            .get()
            .is_some_and(|until| Instant::now() < until);
        if !down && !self.closed.get() && !self.running.replace(true) {
            (self.start)(self.clone());
        }
    }

    /// Requests waiting to be written.
    pub(crate) fn queued(&self) -> usize {
        self.queue.borrow().len()
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

    /// Report this connection's breaks and stray pushes to `feed` (`Backend::feed`), and
    /// (`on_close`) its close: what the node tracked on it is gone either way.
    pub(crate) fn report_to(&self, feed: Rc<dyn ReplySink>, on_close: bool) {
        *self.feed.borrow_mut() = Some(feed);
        self.feed_on_close.set(on_close);
    }

    /// Whether `close` was called: the connection ended, or ends at its next turn.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// End the connection (a session's dedicated connection when the session ends): the
    /// node sees the socket close, which also releases a client blocked there.
    pub(crate) fn close(&self) {
        if !self.closed.replace(true) && self.feed_on_close.get() {
            if let Some(feed) = self.feed.borrow().as_ref() {
                feed.stream_lost();
            }
        }
        if let Some(w) = self.waker.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    /// Fail every queued request with `reply` (nothing of them reached the node).
    /// Fail what waits to be written (`never_sent`: it may go elsewhere, see `unsent`).
    pub(super) fn fail_queued(&self, reply: &Bytes, never_sent: bool) {
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
pub(super) fn node_error(addr: &str, what: &str) -> Bytes {
    Bytes::from(format!("-ERR slotgate: node {addr} {what}\r\n"))
}
