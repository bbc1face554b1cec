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
//!
//! The parts: `Session` (here, fields private) holds its socket side (`Io`, `io.rs`), the
//! client as every feature sees it (`Client`, `client.rs`), and each feature's state, None
//! until first used. `impl Session` lives in three files: here (the future, dispatch by
//! `Route`), `turn.rs` (one wake-up's work) and `exclusive.rs` (held requests and mode
//! changes): the places that decide across features. Each feature (`send/`,
//! `transaction.rs`, `pubsub.rs`, `tracking.rs`, `upload.rs`, `auth.rs`) owns its state and
//! logic, takes `&Client` and what else it needs, and names no `Session`.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering::{self, Relaxed};
use std::task::{Context, Poll};

use bytes::Bytes;
use resp::{Request, RequestParser};

use crate::context::near_cache::written as near_cache_written;
use crate::context::registry::{flag, ClientHandle};
use crate::context::WorkerStats;
use crate::route::{self, Counted, Local, Merge, Route, TxCommand};
use crate::session::client::Client;
use crate::session::fanout::Fanout;
use crate::session::held::{Held, Intake};
use crate::session::io::Io;
use crate::session::login::Login;
use crate::session::pubsub::ClientPubSub;
use crate::session::queue::ClientCell;
use crate::session::transaction::Transactions;
use crate::tls::Stream;
use crate::worker::Worker;
use local::SessionInfo;

pub(crate) mod acl;
pub(crate) mod acl_users;
pub(crate) mod auth;
pub(crate) mod budget;
pub(crate) mod client;
pub(crate) mod client_command;
mod close;
mod drain;
pub(crate) mod exclusive;
pub(crate) mod failover_hold;
pub(crate) mod fanout;
pub(crate) mod follow;
pub(crate) mod held;
mod import_source;
mod io;
pub(crate) mod keyspace;
pub(crate) mod limits;
pub(crate) mod local;
pub(crate) mod login;
mod migration_gate;
mod monitor;
pub(crate) mod near_cache;
pub(crate) mod order;
mod pause;
pub(crate) mod pubsub;
pub(crate) mod pubsub_frame;
mod push_shape;
pub(crate) mod queue;
pub(crate) mod redirect;
pub(crate) mod resubscribe;
pub(crate) mod send;
mod side_call;
pub(crate) mod slowlog;
pub(crate) mod tracking;
mod traffic_mirror;
pub(crate) mod transaction;
mod turn;
pub(crate) mod upload;
pub(crate) mod wait;
pub(crate) mod wait_probe;

/// Serve one client until it leaves or must be closed.
/// `extra`: the address of the extra listener (`proxy.extra_listen`) the client came by.
pub(crate) async fn serve(
    mut stream: Stream,
    peer: SocketAddr,
    worker: Rc<Worker>,
    extra: Option<SocketAddr>,
) {
    WorkerStats::bump(&worker.stats.connections_received);
    let connected = worker.shared.clients.fetch_add(1, Ordering::Relaxed) + 1;
    if connected > worker.live().config.limits.maxclients {
        // Redis's answer, then close: O(1), no client list consulted.
        close::reject(&mut stream).await;
        worker.shared.clients.fetch_sub(1, Ordering::Relaxed);
        WorkerStats::bump(&worker.stats.rejected_connections);
        WorkerStats::bump(&worker.stats.connections_closed);
        return;
    }
    let id = worker.shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(client.id = id, client.addr = %peer, "client connected");
    let client = crate::session::client_command::register(&worker, id, peer, &stream, extra).await;
    // Boxed: the task's future holds a pointer, not the session, so the runtime's moves of
    // the future (its spawn and each stage change, about seven per connection) stay small.
    let mut session = Box::new(Session::new(stream, peer, worker, client));
    poll_fn(|cx| session.poll(cx)).await;
    close::goodbye(&mut session.io.stream).await;
    tracing::debug!(client.id = id, "client closed");
}

/// One client connection: its socket side, the client as every feature sees it, and the
/// state of each feature in use (None until first used, so a plain session stays small).
pub(crate) struct Session {
    /// The socket, its buffers and the turn's byte count (`io.rs`).
    io: Io,
    /// The worker, the reply queue, who the client is (`client.rs`).
    client: Client,
    /// What happens to the requests the client sends next (`exclusive.rs`).
    intake: Intake,
    /// MULTI and WATCH (`transaction.rs`).
    tx: Transactions,
    /// Subscription connections, while the client has subscriptions (`pubsub.rs`).
    pubsub: ClientPubSub,
    /// Reused buffer for frames taken from the subscription connections.
    push_scratch: Vec<(usize, Bytes)>,
    /// Reused buffer for finished latency samples.
    sample_scratch: Vec<crate::session::queue::Finished>,
    /// A big request being streamed to its node as it arrives (`upload.rs`).
    upload: crate::session::upload::Uploads,
    /// CLIENT TRACKING's connections, while it is on (`tracking.rs`).
    tracking: crate::session::tracking::ClientTracking,
    /// MONITOR's feed, while the client monitors (`monitor.rs`).
    monitor: crate::session::monitor::ClientMonitor,
    /// Whether the registry shows this client waiting on its own connection (CLIENT
    /// UNBLOCK, `side_call.rs`): changed only when that changes.
    published_block: std::cell::Cell<bool>,
}

/// The session's end, however it ends: also when its task panics (the unwinding drops it),
/// so the client count, the budget's charges and the node connections are never leaked.
impl Drop for Session {
    fn drop(&mut self) {
        self.client.cell.close();
        self.tx.open = None;
        self.io.leave_budget(&self.client);
        self.client.drop_dedicated();
        self.tx.forget_watch();
        self.pubsub.leave(&self.client);
        self.tracking.off(&mut self.client);
        self.monitor.stop(&self.client.worker.shared);
        // The request buffer goes to the worker's next client, as at the end of an idle
        // turn (`io.rs`): a short connection then reads into a spare, not a new one.
        self.io.read_buf.clear();
        io::hand_back(&mut self.io.read_buf);
        self.client
            .worker
            .shared
            .clients
            .fetch_sub(1, Ordering::Relaxed);
        WorkerStats::bump(&self.client.worker.stats.connections_closed);
    }
}

// === impl Session ===

impl Session {
    fn new(stream: Stream, peer: SocketAddr, worker: Rc<Worker>, client: ClientHandle) -> Session {
        let id = client.id;
        let (max_bulk_len, auth_required) = {
            let live = worker.live();
            (
                live.config.limits.max_bulk_bytes,
                live.config.auth_required(),
            )
        };
        let limits = resp::Limits {
            max_bulk_len,
            ..resp::Limits::default()
        };
        let mut parser = RequestParser::new(limits);
        parser.set_unauthenticated(auth_required);
        if worker.shared.identity.current().mixed_inline_quotes() {
            parser.set_inline_quotes(resp::InlineQuotes::Mixed);
        }
        let cell = ClientCell::with_budget(worker.budget.clone());
        // The address accept(2) returned: asking the socket again is a getpeername per client.
        let slowlog =
            crate::session::slowlog::Tracker::new(&worker.shared.slowlog, Some(peer), &cell);
        if let Some(epochs) = &worker.shared.write_epochs {
            cell.count_writes(epochs.clone());
        }
        Session {
            io: Io::new(stream, parser),
            client: Client {
                cell,
                worker,
                info: SessionInfo::new(id),
                login: Login::at_connect(auth_required),
                handle: client,
                slowlog,
                written: Default::default(),
                redirected: Vec::new(),
                dedicated: None,
            },
            intake: Intake::Open,
            tx: Transactions::default(),
            pubsub: ClientPubSub::default(),
            push_scratch: Vec::new(),
            sample_scratch: Vec::new(),
            upload: Default::default(),
            tracking: Default::default(),
            monitor: Default::default(),
            published_block: Default::default(),
        }
    }

    /// Ready(()) when the session is over.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // A session with no user pays one compare.
        let removed = self.client.login.user().is_some()
            && self.client.login.removed(&self.client.worker.live());
        if self.client.handle.killed() || removed {
            tracing::debug!(
                client.id = self.client.info.id,
                "closing client (CLIENT KILL, or its user removed)"
            );
            return Poll::Ready(());
        }
        let phase = drain::Phase::now(&self.client.worker.shared);
        if phase.stops_reading() {
            self.io.draining = true;
        }
        if self.poll_inner(cx).is_ready() || (phase.ends_when_idle() && self.owes_nothing()) {
            return Poll::Ready(());
        }
        if self.client.cell.in_flight() == 0 && !self.upload.active() {
            crate::session::io::hand_back(&mut self.io.read_buf);
        }
        self.publish_state();
        let wanted = {
            let live = self.client.worker.live();
            let idle =
                self.client.cell.in_flight() == 0 && self.io.out.is_empty() && !self.pubsub.is_on();
            limits::wanted(&live.config.limits, self.has_partial_request(), idle)
        };
        match self.io.timer.poll(cx, wanted) {
            Poll::Ready(kind) => {
                tracing::debug!(
                    client.id = self.client.info.id,
                    ?kind,
                    "closing client on a time limit"
                );
                WorkerStats::bump(&self.client.worker.stats.limit_disconnects);
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Every request read is answered and written, and no partial one is buffered (a
    /// draining session closes then, `drain.rs`).
    fn owes_nothing(&self) -> bool {
        !matches!(self.intake, Intake::Paused(_) | Intake::Migrating(_))
            && self.io.out.is_empty()
            && self.client.cell.in_flight() == 0
            && self.io.read_buf.is_empty()
            && !self.upload.active()
    }

    /// Publish what CLIENT LIST shows (`client_command.rs`): a few relaxed stores, once per
    /// wake-up.
    pub(crate) fn publish_state(&self) {
        let live = &self.client.handle.live;
        live.qbuf.store(self.io.read_buf.len() as u64, Relaxed);
        live.rbs.store(self.io.read_buf.capacity() as u64, Relaxed);
        let omem = self.io.out_bytes + self.client.cell.queued_bytes();
        live.omem.store(omem as u64, Relaxed);
        live.oll.store(self.io.out.len() as u64, Relaxed);
        let bit = |on: bool, f: u32| if on { f } else { 0 };
        let flags = bit(self.pubsub.is_on(), flag::PUBSUB)
            | bit(self.tx.open.is_some(), flag::MULTI)
            | bit(
                matches!(self.intake, Intake::Blocked | Intake::Paused(_)),
                flag::BLOCKED,
            )
            | bit(!self.io.out.is_empty(), flag::WRITABLE)
            | bit(self.tracking.is_on(), flag::TRACKING)
            | bit(self.tx.watch.is_some(), flag::WATCHING)
            | bit(self.client.info.no_touch, flag::NO_TOUCH)
            | bit(self.client.info.import_source, flag::IMPORT_SOURCE)
            | bit(self.client.info.readonly, flag::READONLY)
            | bit(self.client.info.capa_redirect, flag::CAPA_REDIRECT);
        live.flags.store(flags, Relaxed);
        let (sub, ssub) = self.pubsub.counts();
        live.sub.store(sub, Relaxed);
        live.ssub.store(ssub, Relaxed);
        let multi = self.tx.open.as_ref().map_or(0, |tx| tx.len() as u32 + 1);
        live.multi.store(multi, Relaxed);
        live.watch.store(self.tx.watched_keys(), Relaxed);
        live.net_in.store(self.io.net_in, Relaxed);
        live.net_out.store(self.io.net_out, Relaxed);
        // Redis counts a command when it has run: a blocked one once it is answered.
        let blocked = u64::from(matches!(self.intake, Intake::Blocked));
        live.cmds
            .store(self.io.requests.saturating_sub(blocked), Relaxed);
        let blocked_on = match (&self.intake, &self.client.dedicated) {
            (Intake::Blocked, Some(conn)) => Some(conn),
            _ => None,
        };
        if blocked_on.is_some() != self.published_block.get() {
            self.published_block.set(blocked_on.is_some());
            let on = blocked_on.map(|c| (c.addr.to_string(), c.node_id.clone()));
            *live.blocked_on.lock().unwrap_or_else(|e| e.into_inner()) = on;
        }
        let user = self.client.login.user().map_or(0, |u| u as u32 + 1);
        live.user.store(user, Relaxed);
        live.resp
            .store(u32::from(self.client.info.protocol.number()), Relaxed);
        live.db.store(u32::from(self.client.info.db), Relaxed);
    }

    /// A request has started to arrive but is not complete.
    pub(crate) fn has_partial_request(&self) -> bool {
        (!self.io.read_buf.is_empty() || self.upload.active()) && !self.io.input_stalled
    }

    fn poll_inner(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.client.cell.register(cx.waker());
        self.io.turn_bytes = 0;
        loop {
            if let Some(done) = self.pump_output(cx) {
                return done;
            }
            if let Some(done) = self.pump_input(cx) {
                return done;
            }
        }
    }

    fn dispatch(&mut self, req: Request) {
        WorkerStats::bump(&self.client.worker.stats.commands_processed);
        self.io.requests += 1;
        let req = match self.client.login.authenticated() {
            true => req,
            false => match auth::gate(req) {
                auth::Gate::Run(req) => req,
                auth::Gate::Auth(req) => {
                    let reply = self.auth(&req);
                    return self.client.cell.push_ready(reply);
                }
                auth::Gate::Refused(reply) => return self.client.cell.push_ready(reply),
            },
        };
        if self.client.login.user().is_some() {
            let noperm = self.client.login.denied(&self.client.worker.live(), &req);
            if let Some(noperm) = noperm {
                // Refused at queue time, as Redis refuses it: EXEC then answers EXECABORT.
                if let Some(tx) = self.tx.open.as_mut() {
                    tx.abort();
                }
                return self.client.reply_now(noperm);
            }
        }
        if self.monitor.is_on() {
            let spec = cluster::lookup(req.arg(0)).map(|s| s.resolve(req.argc(), |i| req.arg(i)));
            if let Some(refusal) = spec.and_then(|spec| self.monitor.refusal(spec)) {
                return self.client.reply_now(refusal);
            }
        }
        let allow_admin = self.client.worker.live().config.proxy.allow_admin_commands;
        let placement = &self.client.worker.shared.placement;
        let (route, command) = route::route_counted(&req, allow_admin, placement);
        // After AUTH, ACL and the shape checks, before anything runs: as Redis, which
        // answers those errors at once during a pause.
        if !matches!(route, Route::Refuse(_)) {
            if let Some(end) = pause::end(&self.client, &self.tx, &req) {
                return self.pause(req, route, command, end);
            }
        }
        self.dispatch_unpaused(req, route, command);
    }

    /// A request no pause holds: dispatched once the migration's gate lets it pass. While
    /// keys move, reads go to the masters: a replica may not have a key's RESTORE yet.
    fn dispatch_unpaused(&mut self, req: Request, mut route: Route, command: Counted) {
        let migrating = self.client.worker.shared.migration.as_ref();
        if migrating.is_some_and(|m| m.gating())
            && !matches!(route, Route::Refuse(_) | Route::Local(_))
        {
            if let Route::Read(slot) = route {
                route = Route::Slot(slot);
            }
            match migration_gate::check(&self.client, &req) {
                migration_gate::Gate::Pass => {}
                migration_gate::Gate::Refuse(reply) => return self.refuse_queued(reply),
                migration_gate::Gate::Wait(moved) => {
                    return self.wait_for_migration(req, route, command, moved)
                }
            }
        }
        self.dispatch_admitted(req, route, command);
    }

    /// Answer `reply` in place of a request; one inside MULTI makes EXEC answer EXECABORT,
    /// as Redis's queue-time refusals do.
    fn refuse_queued(&mut self, reply: Bytes) {
        if let Some(tx) = self.tx.open.as_mut() {
            tx.abort();
        }
        self.client.reply_now(reply);
    }

    /// A request past AUTH, ACL and CLIENT PAUSE: counted, noted, and sent on its way.
    fn dispatch_admitted(&mut self, req: Request, route: Route, counted: Counted) {
        let command = counted.index;
        if self.tracking.is_on() {
            self.tracking
                .note_request(&self.client, &req, self.tx.open.is_some());
        }
        let refused = matches!(route, Route::Refuse(_));
        let sampled = self.client.count_command(command, counted.sub, refused) && !refused;
        if sampled {
            self.client.note_hot_key(&req);
        }
        if let Some(epochs) = &self.client.worker.shared.write_epochs {
            // Before the write leaves: no worker's cache serves its key any more; its entry
            // bumps again when the reply arrives (`context/near_cache.rs`).
            let written = command.and_then(|c| near_cache_written(&req, c, route.slot()));
            if let Some(written) = written {
                epochs.bump(written);
                self.client.cell.arm_write(written);
            }
        }
        if counted.replicates {
            let client = &mut self.client;
            client
                .worker
                .with_map(|map| client.written.note(&route, map));
        }
        // As in Redis, QUIT and RESET act at once inside MULTI; everything else is queued.
        let tx_bypass = matches!(
            route,
            Route::Tx { .. } | Route::Local(Local::Quit | Local::Reset)
        );
        let queued = self.tx.open.is_some() && !tx_bypass;
        match route {
            Route::Tx {
                cmd: TxCommand::Exec,
                ..
            } if self.client.slowlog.is_on() => {
                let frames = self.tx.queued_frames();
                self.client.slowlog.arm_exec(&self.client.cell, frames);
            }
            // A queued command is logged with EXEC, if it runs (`session/slowlog.rs`).
            _ => {
                let skip = refused || queued;
                // Sent as it came to one node (no user's script mirror, no publish held
                // behind subscriptions): its entry keeps the frame the log would copy.
                let whole = matches!(route, Route::Slot(_) | Route::Read(_))
                    && self.client.login.user().is_none()
                    && !self.pubsub.is_on();
                self.client
                    .slowlog
                    .arm(&self.client.cell, &req, counted, skip, whole);
            }
        }
        if !refused {
            self.learn_code_flags(&req, command);
        }
        let shared = &self.client.worker.shared;
        if !refused && shared.monitors.active() {
            let peer = self.client.slowlog.peer();
            monitor::feed(shared, &req, self.client.info.db, peer);
        }
        if self.pubsub.subscribed_resp2(&self.client) {
            return self.dispatch_subscribed(req, route);
        }
        if queued {
            return self.tx.queue(&mut self.client, req, route);
        }
        if let Route::Read(slot) = route {
            if self.client.worker.shared.write_epochs.is_some() && self.client.info.db == 0 {
                if let Some(reply) = self.near_cache(&req, slot, sampled) {
                    return self.client.reply_now(reply);
                }
            }
        }
        self.dispatch_routed(req, route);
    }

    /// `[near_cache]`: the reply to a GET the worker's cache holds; otherwise the key is
    /// noted (a pattern's, or hot on the sampled requests) for a fill.
    fn near_cache(&self, req: &Request, slot: u16, sampled: bool) -> Option<Bytes> {
        let key = near_cache::get_key(req)?;
        let cache = near_cache::NearCache::of_this_worker(&self.client.worker)?;
        let map = self.client.worker.map();
        if let Some(reply) = cache.answer(key, slot, &map, self.client.resp3()) {
            return Some(reply);
        }
        cache.missed(key, slot);
        if sampled {
            let now_ms = self.client.worker.stats.registry.now_ms();
            cache.sampled(key, slot, now_ms);
        }
        None
    }

    /// A command of a transaction whose EXEC replays it (`transaction.rs`): checked,
    /// counted and noted when it was queued; routed again, as the map may have changed.
    fn dispatch_replayed(&mut self, req: Request) {
        let allow_admin = self.client.worker.live().config.proxy.allow_admin_commands;
        let placement = &self.client.worker.shared.placement;
        let (route, _) = route::route_counted(&req, allow_admin, placement);
        self.dispatch_routed(req, route);
    }

    /// Normal mode, outside MULTI: act on the route, answering here or sending on.
    fn dispatch_routed(&mut self, req: Request, route: Route) {
        if let Some(target) = self.pubsub.own_publish(&self.client, &req) {
            return self.hold(Held::PubSub(req, target));
        }
        // On every routed request: a session with no user pays one compare.
        let mirror = match self.client.login.user() {
            Some(_) => self
                .client
                .login
                .mirror_slot(&self.client.worker.live(), &req, &route),
            None => None,
        };
        if let Some(slot) = mirror {
            return self.hold(Held::script(req, slot));
        }
        let shared = &self.client.worker.shared;
        if let Some(copies) = &shared.traffic_mirror {
            if matches!(route, Route::Slot(_) | Route::Read(_)) {
                traffic_mirror::copy(&self.client, &req, copies);
            }
        }
        if route == Route::Local(Local::Ping) {
            // While a node may be busy with a script, PING asks it (`side_call.rs`).
            if let Some(node) = side_call::busy_nodes(shared).into_iter().next() {
                let resp3 = self.client.resp3();
                return side_call::start(&req, vec![node], resp3, shared, &self.client.cell);
            }
        }
        match route {
            Route::OwnConnections if !side_call::room(shared) => self
                .client
                .reply_now(Bytes::from_static(side_call::TRY_AGAIN)),
            Route::OwnConnections => {
                let map = shared.topology.current();
                let masters = map.nodes().iter().map(|n| n.addr.clone()).collect();
                side_call::start(
                    &req,
                    masters,
                    self.client.resp3(),
                    shared,
                    &self.client.cell,
                )
            }
            Route::Tx { cmd, slot } => {
                if let Some(held) = self.tx.command(&self.client, cmd, req, slot) {
                    self.hold(held);
                }
            }
            Route::Exclusive(slot) => self.hold(Held::single(req, slot)),
            Route::Scan => send::parts::scan(&self.client, &req),
            Route::PubSub(target) => {
                let held = self.pubsub.command(req, target);
                self.hold(held)
            }
            Route::Local(cmd) if Self::is_mode_change(cmd) => self.hold_mode_change(req, cmd),
            Route::Local(cmd) => self.run_local(&req, cmd),
            Route::Refuse(reply) => self.client.reply_now(reply),
            Route::Slot(slot) => send::forward(&self.client, &req, Some(slot)),
            Route::Read(slot) => {
                send::forward_read(&self.client, &req, slot, self.tx.watch.is_some())
            }
            Route::AnyNode => send::forward(&self.client, &req, None),
            Route::Split(split) => send::parts::fan_out(
                &self.client,
                Fanout::split(
                    &req,
                    &split.keys,
                    split.merge,
                    split.shape,
                    &self.client.worker.shared.placement,
                ),
            ),
            Route::Broadcast(Merge::Concat) if req.arg(0).eq_ignore_ascii_case(b"keys") => {
                self.hold(Held::Keys(req))
            }
            Route::Broadcast(merge) => {
                if req.arg(0).eq_ignore_ascii_case(b"config") {
                    let shared = self.client.worker.shared.clone();
                    if let Some(reply) = acl_users::config_set_requirepass(&req, &shared) {
                        return self.client.reply_now(reply);
                    }
                    // The proxy's SLOWLOG follows CONFIG SET slowlog-*, as one Redis's does,
                    // HELLO its availability-zone, and CONFIG RESETSTAT clears its error
                    // counts and its commandstats.
                    let shared = &self.client.worker.shared;
                    shared.slowlog.config_set(&req);
                    shared.identity.config_set(&req);
                    if req.argc() == 2 && req.arg(1).eq_ignore_ascii_case(b"resetstat") {
                        shared.workers.iter().for_each(|w| {
                            w.errors.reset();
                            w.commands.reset();
                        });
                    }
                }
                // A transaction's command replayed at EXEC runs inside one on each master.
                send::parts::broadcast(&self.client, &req, merge, self.tx.replaying())
            }
        }
    }

    /// EVAL, SCRIPT and FUNCTION tell which code declares `no-writes`, for CLIENT PAUSE
    /// WRITE (`context/code_flags.rs`): three compares of the command's index otherwise.
    fn learn_code_flags(&self, req: &Request, command: Option<usize>) {
        static CODE: std::sync::OnceLock<[Option<usize>; 3]> = std::sync::OnceLock::new();
        let code = CODE.get_or_init(|| {
            ["eval", "script", "function"].map(|name| {
                cluster::lookup(name.as_bytes()).and_then(crate::context::cmdstats::command_index)
            })
        });
        if command.is_none() || !code.contains(&command) {
            return;
        }
        if let Some(spec) = cluster::lookup(req.arg(0)) {
            let sub = spec.resolve(req.argc(), |i| req.arg(i));
            self.client.worker.shared.code_flags.learn(sub.name, req);
        }
    }

    /// Commands answered by the proxy; some also change this session's own state.
    fn run_local(&mut self, req: &Request, cmd: Local) {
        match cmd {
            Local::Info if !crate::admin::info::from_masters(req).is_empty() => {
                send::parts::info_with_masters(
                    &self.client,
                    req,
                    &crate::admin::info::from_masters(req),
                )
            }
            Local::Client if req.argc() > 1 && req.arg(1).eq_ignore_ascii_case(b"tracking") => {
                // Once every earlier request is answered: NOLOOP moves the client's
                // requests to connections of its own (`tracking/own.rs`).
                self.hold_mode_change(req.clone(), Local::Client)
            }
            Local::Client
                if req.argc() == 2
                    && [&b"trackinginfo"[..], b"getredir"]
                        .iter()
                        .any(|s| req.arg(1).eq_ignore_ascii_case(s)) =>
            {
                self.tracking.info(&self.client, req)
            }
            Local::Client if req.argc() > 1 && req.arg(1).eq_ignore_ascii_case(b"caching") => {
                self.tracking.caching(&self.client, req)
            }
            Local::Client if req.argc() > 1 && req.arg(1).eq_ignore_ascii_case(b"unblock") => {
                side_call::unblock(req, &self.client.worker.shared, &self.client.cell)
            }
            Local::Client
                if req.argc() > 1 && req.arg(1).eq_ignore_ascii_case(b"import-source") =>
            {
                let shared = &self.client.worker.shared;
                if import_source::command(req, shared, &self.client.cell, &mut self.client.info) {
                    self.intake = Intake::Serial;
                }
            }
            Local::Client => {
                self.publish_state();
                let resp3 = self.client.resp3();
                let live = std::sync::Arc::clone(&self.client.worker.live());
                let shared = self.client.worker.shared.clone();
                let mut asker = client_command::Asker {
                    shared: &shared,
                    users: &live.users,
                    client: &self.client.handle,
                    cell: &self.client.cell,
                    info: &mut self.client.info,
                    resp3,
                };
                let reply = client_command::command(req, &mut asker);
                self.client.reply_now(reply);
            }
            Local::Auth => {
                let reply = self.auth(req);
                self.client.reply_now(reply);
            }
            Local::Acl => {
                let reply = acl::command(req, &self.client.worker.live(), self.client.login.user());
                self.client.reply_now(reply);
            }
            Local::Monitor => {
                self.monitor
                    .start(&self.client.worker.shared, &self.client.cell);
            }
            Local::AclUsers => {
                let shared = self.client.worker.shared.clone();
                let reply = acl_users::command(req, &shared, self.client.resp3());
                self.client.reply_now(reply);
            }
            cmd => {
                let shared = self.client.worker.shared.clone();
                let reply = local::run(cmd, req, &mut self.client.info, &shared);
                self.client.reply_now(reply);
            }
        }
    }

    /// Record the latency of sampled requests whose replies were just handed to the writer,
    /// and count the error replies among them (INFO errorstats).
    fn record_samples(&mut self) {
        let mut errors = Vec::new();
        self.client.cell.take_errors(&mut errors);
        for (command, reply) in &errors {
            let stats = &self.client.worker.stats;
            stats.errors.record(reply);
            if let Some(called) = *command {
                stats
                    .commands
                    .fail(usize::from(called.command), called.refused, reply);
            }
        }
        self.client.cell.take_finished(&mut self.sample_scratch);
        if self.sample_scratch.is_empty() {
            return;
        }
        self.client.note_answered(&self.sample_scratch);
        let now = tokio::time::Instant::now();
        for f in self.sample_scratch.drain(..) {
            let ns = now.duration_since(f.started).as_nanos() as u64;
            if let Some(node) = &f.node {
                node.sampled(ns);
            }
            self.client
                .worker
                .stats
                .commands
                .sample(usize::from(f.command), ns);
        }
    }

    /// AUTH: the reply, after acting on what the login changed.
    fn auth(&mut self, req: &Request) -> Bytes {
        match auth::command(&mut self.client, req) {
            Ok(done) => {
                self.logged_in(done);
                Bytes::from_static(b"+OK\r\n")
            }
            Err(reply) => reply,
        }
    }

    /// A login succeeded: connections that run as the former user go. A WATCH's connection
    /// runs as the former user (its mirror, or the backend user): an EXEC there would run
    /// the new user's transaction with the old rights, so the WATCH is lost and EXEC answers
    /// nil, as when a watched key was touched, and nothing runs.
    pub(crate) fn logged_in(&mut self, done: auth::LoggedIn) {
        if done.other_user {
            self.client.drop_dedicated();
            self.tracking.user_changed(&mut self.client);
        }
        if done.other_acting {
            self.tx.lose_watch();
        }
        self.io.parser.set_unauthenticated(false);
    }

    /// RESP2 subscribed mode: QUIT and RESET are answered here, everything else Redis allows
    /// goes down the subscription connection so Redis gives its own subscribed-mode replies.
    pub(super) fn dispatch_subscribed(&mut self, req: Request, route: Route) {
        match route {
            // PING is answered here, in Redis's subscribed-mode shape, once the messages sent
            // before it are out: down a connection that is not subscribed (the bus, for a
            // client with only shard channels) it would get `+PONG`.
            Route::Local(cmd @ (Local::Quit | Local::Ping | Local::Reset)) => {
                self.hold_mode_change(req, cmd)
            }
            Route::PubSub(target) => {
                let held = self.pubsub.command(req, target);
                self.hold(held)
            }
            Route::Refuse(err) => self.client.reply_now(err),
            _ => {
                crate::session::pubsub::refuse_subscribed(&self.client, &req);
            }
        }
    }
}
