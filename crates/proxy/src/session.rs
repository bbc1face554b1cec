//! One client connection: read, frame, route, and write replies back in request order.
//!
//! ```text
//!   socket ─read─▶ read_buf ─parse─▶ Request ─route─▶ Local ──────────────┐
//!                                        │                                 ▼
//!                                        └─▶ Backend::send ─ ─ ─ ─▶ ReplyQueue (ClientCell)
//!   socket ◀─writev─ out ◀──────────── pop_ready (head only) ◀─────────────┘
//! ```
//!
//! The session is a hand-written future so one wake-up does everything that is ready: follow
//! redirects, move ready replies to `out`, write `out` in one vectored write, then read and
//! dispatch what the client sent. Requests are forwarded as the exact bytes the client sent
//! (a refcounted slice of `read_buf`), never re-encoded.
//!
//! Backpressure: when the client has too many requests in flight or too many reply bytes
//! waiting, the session stops reading its socket (TCP pushes back on the client) while the
//! backends keep being read for everyone.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use resp::{Request, RequestParser};
use tokio::net::TcpStream;

use crate::backend::{Backend, Outgoing};
use crate::exclusive::Held;
use crate::fanout::Fanout;
use crate::local::{self, SessionInfo};
use crate::pending::{ClientCell, Entry};
use crate::pubsub::{PubSub, PubSubTarget};
use crate::registry::ClientHandle;
use crate::router::{self, Local, Route};
use crate::stats::WorkerStats;
use crate::transaction::Transaction;
use crate::worker::Worker;

mod io;

/// Serve one client until it leaves or must be closed.
pub(crate) async fn serve(stream: TcpStream, peer: SocketAddr, worker: Rc<Worker>) {
    WorkerStats::bump(&worker.stats.connections_received);
    let connected = worker.shared.clients.fetch_add(1, Ordering::Relaxed) + 1;
    if connected > worker.shared.config.limits.maxclients {
        // Redis's answer, then close: O(1), no client list consulted.
        let _ = stream.try_write(b"-ERR max number of clients reached\r\n");
        worker.shared.clients.fetch_sub(1, Ordering::Relaxed);
        WorkerStats::bump(&worker.stats.rejected_connections);
        WorkerStats::bump(&worker.stats.connections_closed);
        return;
    }
    let id = worker.shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(client.id = id, client.addr = %peer, "client connected");
    let client = crate::client_cmd::register(&worker, id, peer, &stream).await;
    let mut session = Session::new(stream, worker.clone(), client);
    poll_fn(|cx| session.poll(cx)).await;
    session.cell.close();
    session.leave_budget();
    session.drop_dedicated();
    session.leave_pubsub();
    worker.shared.clients.fetch_sub(1, Ordering::Relaxed);
    WorkerStats::bump(&worker.stats.connections_closed);
    tracing::debug!(client.id = id, "client closed");
}

pub(crate) struct Session {
    stream: TcpStream,
    pub(crate) worker: Rc<Worker>,
    pub(crate) cell: Rc<ClientCell>,
    pub(crate) parser: RequestParser,
    pub(crate) read_buf: BytesMut,
    pub(crate) out: VecDeque<Bytes>,
    pub(crate) out_bytes: usize,
    /// How many buffers at the front of `out` are the session's own copies (`budget.rs`).
    pub(crate) out_owned: usize,
    pub(crate) info: SessionInfo,
    pub(crate) redirected: Vec<(u64, u32)>,
    /// No more requests will be read (EOF, QUIT, protocol error); finish what is in flight.
    pub(crate) draining: bool,
    /// Parsing stopped for backpressure or an exclusive request while `read_buf` may still
    /// hold complete requests: parse them before reading the socket again.
    pub(crate) input_stalled: bool,
    /// This session's own connection, for blocking commands and transactions.
    pub(crate) dedicated: Option<Rc<Backend>>,
    /// An exclusive request waiting for the requests before it to be answered.
    pub(crate) held: Option<Held>,
    /// An exclusive request is in flight: read nothing more until it is answered.
    pub(crate) serial: bool,
    /// MULTI in progress.
    pub(crate) tx: Option<Transaction>,
    /// Slot of the WATCHed keys, if any.
    pub(crate) watch_slot: Option<u16>,
    /// Subscription connections, while the client has subscriptions.
    pub(crate) pubsub: Option<PubSub>,
    /// Reused buffer for frames taken from the subscription connections.
    pub(crate) push_scratch: Vec<(usize, Bytes)>,
    /// Idle timeout or request deadline, armed only when it can fire.
    pub(crate) timer: crate::limits::Timer,
    /// False until AUTH succeeds, when the proxy requires authentication.
    pub(crate) authenticated: bool,
    /// Index of the authenticated user in `Shared::users`.
    pub(crate) user: Option<usize>,
    /// Reused buffer for finished latency samples.
    sample_scratch: Vec<(u16, std::time::Instant)>,
    /// Bytes read and written in the current poll (see `TURN_QUANTUM`).
    turn_bytes: usize,
    /// SLOWLOG stamps and marks (see slowlog_session.rs).
    pub(crate) slowlog: crate::slowlog_session::Tracker,
    /// This client's entry in the worker's registry (CLIENT LIST/KILL); dropped on close.
    pub(crate) client: ClientHandle,
    /// A big request being streamed to its node as it arrives (`upload.rs`).
    pub(crate) upload: Option<crate::upload::Upload>,
    /// The request at the parser's head is to be streamed once the requests before it are
    /// answered; it must not be parsed (framed) meanwhile.
    pub(crate) upload_waiting: bool,
}

// === impl Session ===

impl Session {
    fn new(stream: TcpStream, worker: Rc<Worker>, client: ClientHandle) -> Session {
        let id = client.id;
        let limits = resp::Limits {
            max_bulk_len: worker.shared.config.limits.max_bulk_bytes,
            ..resp::Limits::default()
        };
        let auth_required = worker.shared.config.auth_required();
        let mut parser = RequestParser::new(limits);
        parser.set_unauthenticated(auth_required);
        let threshold = worker.shared.slowlog.threshold_us;
        let slowlog = crate::slowlog_session::Tracker::new(threshold, stream.peer_addr().ok());
        Session {
            stream,
            cell: ClientCell::with_budget(worker.budget.clone()),
            worker,
            parser,
            read_buf: BytesMut::with_capacity(io::READ_CHUNK),
            out: VecDeque::new(),
            out_bytes: 0,
            out_owned: 0,
            info: SessionInfo::new(id),
            redirected: Vec::new(),
            draining: false,
            input_stalled: false,
            dedicated: None,
            held: None,
            serial: false,
            tx: None,
            watch_slot: None,
            pubsub: None,
            push_scratch: Vec::new(),
            timer: Default::default(),
            authenticated: !auth_required,
            user: None,
            sample_scratch: Vec::new(),
            turn_bytes: 0,
            slowlog,
            client,
            upload: None,
            upload_waiting: false,
        }
    }

    /// Ready(()) when the session is over.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.client.killed() {
            tracing::debug!(client.id = self.info.id, "closing client on CLIENT KILL");
            return Poll::Ready(());
        }
        if self.poll_inner(cx).is_ready() {
            return Poll::Ready(());
        }
        self.publish_state();
        match self.poll_limits(cx) {
            Poll::Ready(kind) => {
                tracing::debug!(
                    client.id = self.info.id,
                    ?kind,
                    "closing client on a time limit"
                );
                WorkerStats::bump(&self.worker.stats.limit_disconnects);
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// A request has started to arrive but is not complete.
    pub(crate) fn has_partial_request(&self) -> bool {
        (!self.read_buf.is_empty() || self.upload.is_some()) && !self.input_stalled
    }

    fn poll_inner(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.cell.register(cx.waker());
        self.turn_bytes = 0;
        loop {
            if let Some(done) = self.pump_output(cx) {
                return done;
            }
            if let Some(done) = self.pump_input(cx) {
                return done;
            }
        }
    }

    /// RESP2 subscribed mode: QUIT and RESET are answered here, everything else goes down
    /// the subscription connection so Redis gives its own subscribed-mode replies, in order.
    fn dispatch_subscribed(&mut self, req: Request, route: Route) {
        match route {
            Route::Local(Local::Quit) => {
                self.info.quit = true;
                self.reply_now(Bytes::from_static(b"+OK\r\n"));
            }
            Route::Local(Local::Reset) => {
                self.leave_pubsub();
                self.info = SessionInfo::new(self.info.id);
                self.registry_reset();
                self.reply_now(Bytes::from_static(b"+RESET\r\n"));
            }
            Route::PubSub(target) => {
                if matches!(target, PubSubTarget::Shard(_)) {
                    self.note_shard_command(&req);
                }
                self.send_pubsub(req.raw().clone(), target);
            }
            Route::Local(Local::Ping) => self.send_pubsub(req.raw().clone(), PubSubTarget::Bus),
            Route::Refuse(err) => self.reply_now(err),
            _ => {
                let name = cluster::lookup(req.arg(0)).map_or("", |spec| spec.name);
                self.refuse_subscribed(name);
            }
        }
    }

    /// Whether this client speaks RESP3 (HELLO 3): its requests go to RESP3 connections.
    pub(crate) fn resp3(&self) -> bool {
        self.info.protocol == 3
    }

    fn dispatch(&mut self, req: Request) {
        WorkerStats::bump(&self.worker.stats.commands_processed);
        let req = match self.authenticated {
            true => req,
            false => match self.gate_unauthenticated(req) {
                Some(req) => req,
                None => return,
            },
        };
        if self.user.is_some() {
            if let Some(noperm) = self.denied(&req) {
                return self.reply_now(noperm);
            }
        }
        let allow_admin = self.worker.shared.config.proxy.allow_admin_commands;
        let (route, command) = router::route_counted(&req, allow_admin);
        self.count_command(command);
        self.slowlog_arm(&req, command, matches!(route, Route::Refuse(_)));
        if self.subscribed_resp2() {
            return self.dispatch_subscribed(req, route);
        }
        if self.tx.is_some() && !matches!(route, Route::Tx { .. }) {
            return self.queue_in_transaction(req, route);
        }
        self.dispatch_routed(req, route);
    }

    /// Normal mode, outside MULTI: act on the route, answering here or sending on.
    fn dispatch_routed(&mut self, req: Request, route: Route) {
        match route {
            Route::Tx { cmd, slot } => self.transaction_command(cmd, req, slot),
            Route::Exclusive(slot) => self.hold(Held::single(req, slot)),
            Route::Scan => self.scan(&req),
            Route::PubSub(target) => self.pubsub_command(req, target),
            Route::Local(cmd) => self.run_local(&req, cmd),
            Route::Refuse(reply) => self.reply_now(reply),
            Route::Slot(slot) => self.forward(req, Some(slot)),
            Route::AnyNode => self.forward(req, None),
            Route::Split { keys, merge } => self.fan_out(Fanout::split(&req, &keys, merge)),
            Route::Broadcast(merge) => {
                let masters = self.worker.topology().current().nodes().len();
                self.fan_out(Fanout::broadcast(&req, masters, merge));
            }
        }
    }

    /// Commands answered by the proxy; some also change this session's own state.
    fn run_local(&mut self, req: &Request, cmd: Local) {
        match cmd {
            Local::Info if crate::info::wants_keyspace(req) => self.info_with_keyspace(req),
            Local::Client => {
                let reply = self.client_command(req);
                self.reply_now(reply);
            }
            cmd => {
                let shared = self.worker.shared.clone();
                let reply = local::run(cmd, req, &mut self.info, &shared);
                match cmd {
                    Local::Hello => self.sync_name(),
                    Local::Reset => self.registry_reset(),
                    _ => {}
                }
                self.reply_now(reply);
            }
        }
    }

    /// Count the call, and time one request in `SAMPLE_EVERY` (the entry it pushes).
    pub(crate) fn count_command(&mut self, command: Option<usize>) {
        let Some(command) = command else {
            return self.cell.arm_sample(None);
        };
        self.client.note_command(command);
        let stats = &self.worker.stats;
        stats.commands.call(command);
        let tick = stats.sample_tick.fetch_add(1, Ordering::Relaxed);
        let sampled = tick.is_multiple_of(u64::from(crate::cmdstats::SAMPLE_EVERY));
        self.cell
            .arm_sample(sampled.then(|| (command as u16, std::time::Instant::now())));
    }

    /// Record the latency of sampled requests whose replies were just handed to the writer.
    fn record_samples(&mut self) {
        self.cell.take_finished(&mut self.sample_scratch);
        if self.sample_scratch.is_empty() {
            return;
        }
        let now = std::time::Instant::now();
        for (command, started) in self.sample_scratch.drain(..) {
            let ns = now.duration_since(started).as_nanos() as u64;
            self.worker.stats.commands.sample(usize::from(command), ns);
        }
    }

    /// Queue a reply the proxy made itself, in order behind everything before it.
    fn reply_now(&mut self, reply: Bytes) {
        self.cell.push(Entry::ready(reply));
    }

    /// Send to the master of `slot` (or any master).
    fn forward(&mut self, req: Request, slot: Option<u16>) {
        let map = self.worker.topology().current();
        let stamp = map.stamp();
        let backend = match slot {
            Some(slot) => self.worker.backend_for_slot(&map, slot, self.resp3()),
            None => self.worker.any_backend(&map, self.resp3()),
        };
        let Some(backend) = backend else {
            return self.reply_now(Bytes::from_static(b"-CLUSTERDOWN Hash slot not served\r\n"));
        };
        let admit = self.admit(crate::order::stable(stamp, &map), slot, &backend);
        let frame = req.raw().clone();
        let seq = self.cell.push(Entry {
            reply: None,
            frame: Some(frame.clone()),
            sent_to: Some(backend.clone()),
            hops: 0,
            retries: 0,
            map_version: map.version(),
            slot,
            pinned: false,
            sampled: None,
            fanout: None,
            parts: None,
            partial: Vec::new(),
        });
        let out = Outgoing::new(frame, self.cell.clone(), seq);
        self.send_admitted(admit, out, &backend, slot);
    }
}
