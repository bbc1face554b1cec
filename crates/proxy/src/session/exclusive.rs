//! Requests that must wait for every earlier request of their client to be answered before
//! they run: blocking commands (BLPOP, XREAD BLOCK…), WATCH and EXEC on the session's own
//! connection, pub/sub commands, KEYS (read in two rounds), and the local commands that
//! change the connection's mode (QUIT, RESET, HELLO).
//!
//! ```text
//!   request that changes or needs the connection ─▶ Held until every earlier request is
//!        answered and every pub/sub command confirmed ─▶ run ─▶ no further request is read
//!        until it completes (Redis runs a client's commands one at a time too)
//! ```
//!
//! Holding keeps the client's order of execution, not only its order of replies: a request
//! pipelined before a BLPOP has been answered before the BLPOP is sent, and a RESET or QUIT
//! never overtakes a reply (or a subscribe confirmation) still on its way. A blocked client
//! never stalls the shared connections of its worker. The dedicated connection is kept for
//! the session's next exclusive request to the same node, and closed when the session ends:
//! the node sees the socket close, which releases a client blocked there. The connection
//! that carries a WATCH is kept apart (`transaction.rs`), so a blocking command to another
//! node cannot close it and lose the WATCH.
//!
//! The commands that change a connection's mode run here too, answered as one Redis
//! answers them.
//!
//! QUIT, RESET and HELLO run only once every earlier request of the client is answered and
//! every pub/sub command confirmed (held as above), so they never overtake a
//! reply: `PING ; QUIT` gets its PONG, `SUBSCRIBE a ; RESET` its confirmation, and a HELLO
//! switching protocol leaves no request in flight on a connection of the other protocol.
//! Nothing after them is read until they ran, so the next request is routed in the mode
//! they leave. RESP2 subscribed mode (`Session::dispatch_subscribed`) sends what Redis
//! allows down the subscription connection and refuses the rest with Redis's own error.
//!
//! CLIENT PAUSE holds a request here too (`Intake::Paused`), before it runs: the pause in
//! force is read from `context/pause.rs` per request (one relaxed load while none is), and
//! the held request is dispatched when the pause ends (a timer) or is lifted (CLIENT
//! UNPAUSE wakes every session).

use std::future::Future;
use std::rc::Rc;
use std::task::Context;

use bytes::Bytes;
use resp::Request;

use crate::backend::Outgoing;
use crate::route::{Counted, Local, Route};
use crate::session::held::{Exclusive, Held, Intake, Migrating, Paused, Via};
use crate::session::local::SessionInfo;
use crate::session::login::Login;
use crate::session::order::Waiting;
use crate::session::pause;
use crate::session::queue::{Conn, Entry, Sent};
use crate::session::transaction::{EXEC, EXECABORT};
use crate::session::Session;

impl Session {
    /// Queue `held` to run alone once the requests before it are answered.
    pub(crate) fn hold(&mut self, held: Held) {
        self.intake = Intake::Held(held);
        self.release_held();
    }

    /// Whether every earlier request is answered and every pub/sub command confirmed.
    fn settled(&self) -> bool {
        self.client.cell.in_flight() == 0 && !self.pubsub.syncing()
    }

    /// A held EXEC of a transaction on its node may go before its queued commands are
    /// answered, in the same write as them: only they are owed, on its connection.
    fn exec_may_follow(&self) -> bool {
        let Intake::Held(Held::Exclusive(ex)) = &self.intake else {
            return false;
        };
        // Only while EXEC would go there: were the slot's master another now, that
        // connection would close under the commands' replies, whose errors the client
        // would read before a transaction that then runs elsewhere.
        let map = self.client.worker.map();
        let owner = ex.slot.and_then(|slot| map.node_of(slot));
        ex.on_node.as_ref().is_some_and(|on| {
            on.conn.breaks() == on.breaks
                && owner.is_some_and(|n| *n.addr == *on.conn.addr)
                && !self.pubsub.syncing()
                && self.client.cell.owed_only_by(&on.conn)
        })
    }

    /// Run the held request if nothing is in flight any more; also ends serial mode. True
    /// when a held request ran.
    pub(crate) fn release_held(&mut self) -> bool {
        if !self.settled() && !self.exec_may_follow() {
            return false;
        }
        // Answered: a CLIENT IMPORT-SOURCE ON the masters accepted holds from the next
        // request on, read only once serial mode ends below.
        crate::session::import_source::take(&self.client.cell, &mut self.client.info);
        let held = match std::mem::take(&mut self.intake) {
            Intake::Held(held) => held,
            // A waiting upload resumes from the parse loop; serial mode ends here.
            Intake::UploadWaiting => {
                self.intake = Intake::UploadWaiting;
                return false;
            }
            waiting @ (Intake::Paused(_) | Intake::Migrating(_)) => {
                self.intake = waiting;
                return false;
            }
            Intake::Open | Intake::Serial | Intake::Blocked => return false,
        };
        match held {
            Held::PubSub(req, target) => self.pubsub.dispatch(&self.client, &req, target),
            Held::BusExec { frame, queued } => self.pubsub.exec_on_bus(&self.client, frame, queued),
            Held::Local(req, cmd) => self.run_mode_change(&req, cmd),
            Held::Exclusive(ex) => self.run_exclusive(ex),
            Held::Keys(req) => {
                crate::session::send::parts::keys_twice(&self.client, &req);
                self.intake = Intake::Serial;
            }
            Held::Discard { conn, reply } => {
                conn.close();
                if let Some(reply) = reply {
                    self.client.cell.push_ready(Bytes::from_static(reply));
                }
            }
        }
        true
    }

    fn run_exclusive(&mut self, mut ex: Exclusive) {
        let map = self.client.worker.map();
        let addr = match ex.slot {
            Some(slot) => map.node_of(slot).map(|n| n.addr.clone()),
            None => map.nodes().first().map(|n| n.addr.clone()),
        };
        let on_node = ex.on_node.take();
        let whole = (ex.frame.clone(), ex.skip);
        if let Some(on) = &on_node {
            // The commands are queued there: EXEC alone, unless the node forgot them (a
            // break: they got errors, so nothing may run) or the slot's node is another now
            // (that connection closes: the whole frame goes to the new one).
            if on.conn.breaks() != on.breaks {
                on.conn.close();
                return self.client.cell.push_ready(Bytes::from_static(EXECABORT));
            }
            match addr.as_ref().is_some_and(|a| **a == *on.conn.addr) {
                true if ex.via == Via::Dedicated => self.client.use_dedicated(on.conn.clone()),
                true => {}
                false => on.conn.close(),
            }
        }
        let Some(addr) = addr else {
            return self.wait_for_owner(ex, map.version());
        };
        if on_node.as_ref().is_some_and(|on| *on.conn.addr == *addr) {
            ex.frame = Bytes::from_static(EXEC);
            ex.skip = 0;
        }
        let backend = match ex.via {
            Via::Watch => {
                let conn = self.tx.watch_connection(&mut self.client, &addr);
                crate::session::transaction::switch_first(&self.client, &conn, &mut ex);
                conn
            }
            Via::Dedicated => self.client.dedicated_for(&addr),
            Via::WatchedExec => match self.tx.watched_exec_connection(&mut self.client, &addr) {
                Some(conn) => {
                    crate::session::transaction::switch_first(&self.client, &conn, &mut ex);
                    conn
                }
                None => {
                    let nil = crate::session::transaction::exec_aborted(&self.client);
                    self.client.cell.push(Entry::ready(nil));
                    return;
                }
            },
        };
        if on_node.is_some_and(|on| !Rc::ptr_eq(&on.conn, &backend)) {
            // Not the connection holding the commands (the client's protocol changed).
            (ex.frame, ex.skip) = whole.clone();
        }
        let mut sent = Sent::new(ex.resend, &backend, ex.slot, Conn::Own);
        sent.map_version = map.version();
        let seq = self.client.cell.push(Entry::sent(sent));
        let out = Outgoing {
            skip: ex.skip,
            ..Outgoing::new(ex.frame, self.client.cell.clone(), seq)
        };
        // EXEC alone: as patient as the whole transaction it runs.
        backend.send_like(out, &whole.0);
        self.intake = match ex.blocks {
            true => Intake::Blocked,
            false => Intake::Serial,
        };
    }

    /// A slot with no owner in the map (a hole, `send/mod.rs::no_owner`): the request waits
    /// for a fresh map like any other, in its client's order, and goes to the slot's owner
    /// on the session's own connection (`send/release.rs`, pinned), so a BLPOP there blocks
    /// as it would have. WATCH and an EXEC after one need the connection that holds the
    /// WATCH: they get the CLUSTERDOWN a node would give at once, as before.
    fn wait_for_owner(&mut self, ex: Exclusive, map_version: u64) {
        let (Some(slot), Via::Dedicated) = (ex.slot, ex.via) else {
            let down = Bytes::from_static(crate::reply::NO_ROUTE);
            self.client.cell.push(Entry::ready(down));
            return;
        };
        let mut sent = Sent::unrouted(ex.resend, slot);
        sent.conn = Conn::Own;
        sent.map_version = map_version;
        let seq = self.client.cell.push(Entry::sent(sent));
        self.client.cell.start_ordering();
        let wire = self.client.wire();
        self.client.cell.wait(Waiting {
            pinned: true,
            skip: ex.skip,
            ..Waiting::fresh(seq, 0, slot, ex.frame, wire)
        });
        self.client.worker.topology().request_refresh_now();
        self.intake = match ex.blocks {
            true => Intake::Blocked,
            false => Intake::Serial,
        };
    }

    /// True while an exclusive request waits or runs, a pub/sub command is not yet
    /// confirmed, or a streamed upload waits for the requests before it: no further request
    /// is read (it might depend on the mode they leave).
    pub(crate) fn exclusive_busy(&self) -> bool {
        let waiting = match self.intake {
            Intake::Open => false,
            Intake::Held(_) | Intake::Paused(_) | Intake::Migrating(_) => true,
            Intake::Serial | Intake::Blocked | Intake::UploadWaiting => {
                self.client.cell.in_flight() > 0
            }
        };
        waiting || self.pubsub.syncing()
    }
    /// Whether `cmd` changes the connection's mode and so must wait for what is in flight.
    pub(super) fn is_mode_change(cmd: Local) -> bool {
        matches!(cmd, Local::Quit | Local::Reset | Local::Hello | Local::Wait)
    }

    /// Hold QUIT, RESET, HELLO or WAIT (or a subscriber's PING) until everything before it
    /// is answered. A subscriber's QUIT and PING wait behind a sync marker on each
    /// subscription connection too: the messages the nodes sent before them reach the
    /// client first, as from one Redis, where they are in its output buffer already (the
    /// PUBLISH that sent them, answered to another client on another connection, may
    /// arrive at the proxy first). RESET drains its own way (`reset_swallows`).
    pub(super) fn hold_mode_change(&mut self, req: Request, cmd: Local) {
        if matches!(cmd, Local::Quit | Local::Ping) {
            self.pubsub.send_to_all(&self.client, None);
        }
        self.hold(Held::Local(req, cmd));
    }

    /// QUIT, RESET or HELLO, once everything before it is answered.
    pub(crate) fn run_mode_change(&mut self, req: &Request, cmd: Local) {
        match cmd {
            Local::Quit => {
                self.client.info.quit = true;
                self.io.draining = true;
                self.client.reply_now(Bytes::from_static(b"+OK\r\n"));
            }
            Local::Reset
                if self.pubsub.reset_drain.is_none()
                    && self
                        .pubsub
                        .send_to_all(&self.client, Some(crate::session::pubsub::RESET)) =>
            {
                // Answered once the nodes dropped the subscriptions: `reset_swallows`.
                self.pubsub.reset_drain = Some(Default::default());
                self.intake = Intake::Held(Held::Local(req.clone(), cmd));
            }
            Local::Reset => {
                self.reset();
                self.client.reply_now(Bytes::from_static(b"+RESET\r\n"));
            }
            Local::Wait => {
                let map = self.client.worker.map();
                let shared = &self.client.worker.shared;
                match crate::session::wait::start(
                    req,
                    &mut self.client.written,
                    &map,
                    shared,
                    &self.client.cell,
                ) {
                    Ok(()) => self.intake = crate::session::held::Intake::Blocked,
                    Err(e) => self.client.reply_now(e),
                }
            }
            Local::Ping => self.client.reply_now(subscribed_pong(req)),
            Local::Client => self
                .tracking
                .command(&mut self.client, &mut self.intake, req),
            _ => {
                let before = self.client.info.protocol;
                let (reply, logged_in) = crate::session::auth::hello(&mut self.client, req);
                if let Some(done) = logged_in {
                    self.logged_in(done);
                }
                if let Some(p) = self.pubsub.subs.as_mut() {
                    p.switched |= self.client.info.protocol != before;
                }
                crate::session::client_command::sync_name(&self.client.handle, &self.client.info);
                self.client.reply_now(reply);
            }
        }
    }

    /// RESET, as Redis does it: leave subscribed mode, discard MULTI, forget WATCH, back to
    /// RESP2 with no name, NO-EVICT off, and the default user (so a proxy that requires a
    /// password requires it again).
    fn reset(&mut self) {
        self.pubsub.leave(&self.client); // also ends `reset_drain`
        self.tracking.off(&mut self.client);
        self.monitor.stop(&self.client.worker.shared);
        self.tx.open = None;
        self.tx.forget_watch();
        self.client.info = SessionInfo::new(self.client.info.id);
        crate::session::client_command::registry_reset(
            &self.client.handle,
            &self.client.cell,
            &self.client.info,
        );
        let auth_required = self.client.worker.live().config.auth_required();
        self.client.login = Login::at_connect(auth_required);
        self.io.parser.set_unauthenticated(auth_required);
    }

    /// Hold `req` until the pause that covers it ends at `end_ms` (or is lifted).
    pub(super) fn pause(&mut self, req: Request, route: Route, command: Counted, end: u64) {
        let deadline = pause::deadline(&self.client, end);
        self.intake = Intake::Paused(Box::new(Paused {
            req,
            route,
            command,
            wake: Box::pin(tokio::time::sleep_until(deadline)),
        }));
    }

    /// Dispatch the request CLIENT PAUSE held once no pause covers it any more; until then
    /// keep the timer armed for the pause's end (which a later CLIENT PAUSE may move).
    /// True when it was dispatched.
    pub(crate) fn release_paused(&mut self, cx: &mut Context<'_>) -> bool {
        let Intake::Paused(paused) = &mut self.intake else {
            return false;
        };
        if let Some(end) = pause::end(&self.client, &self.tx, &paused.req) {
            let deadline = pause::deadline(&self.client, end);
            if paused.wake.deadline() != deadline {
                paused.wake.as_mut().reset(deadline);
            }
            if paused.wake.as_mut().poll(cx).is_pending() {
                return false;
            }
        }
        let Intake::Paused(paused) = std::mem::take(&mut self.intake) else {
            return false;
        };
        let Paused {
            req,
            route,
            command,
            ..
        } = *paused;
        self.dispatch_unpaused(req, route, command);
        true
    }

    /// Hold `req` until the migration's movers say whether its keys left the source.
    pub(super) fn wait_for_migration(
        &mut self,
        req: Request,
        route: Route,
        command: Counted,
        moved: tokio::sync::oneshot::Receiver<Result<(), Bytes>>,
    ) {
        self.intake = Intake::Migrating(Box::new(Migrating {
            req,
            route,
            command,
            moved,
        }));
    }

    /// Dispatch the request the migration held once its keys moved, or answer the
    /// TRYAGAIN a failed move left. True when it was released.
    pub(crate) fn release_migrating(&mut self, cx: &mut Context<'_>) -> bool {
        let Intake::Migrating(waiting) = &mut self.intake else {
            return false;
        };
        let outcome = match std::pin::Pin::new(&mut waiting.moved).poll(cx) {
            std::task::Poll::Pending => return false,
            std::task::Poll::Ready(outcome) => outcome,
        };
        let Intake::Migrating(waiting) = std::mem::take(&mut self.intake) else {
            return false;
        };
        let Migrating {
            req,
            route,
            command,
            ..
        } = *waiting;
        match outcome {
            Ok(Ok(())) => self.dispatch_admitted(req, route, command),
            Ok(Err(reply)) => self.refuse_queued(reply),
            Err(_) => self.refuse_queued(crate::reply::error_line(
                "TRYAGAIN slotgate: migration: the mover stopped; nothing was run",
            )),
        }
        true
    }
}

/// PING in RESP2 subscribed mode: `["pong", message or ""]`, as Redis answers it there.
fn subscribed_pong(req: &Request) -> Bytes {
    if req.argc() > 2 {
        return crate::reply::error("wrong number of arguments for 'ping' command");
    }
    let mut out = bytes::BytesMut::new();
    resp::write_array_header(&mut out, 2);
    resp::write_bulk(&mut out, b"pong");
    let msg: &[u8] = if req.argc() > 1 { req.arg(1) } else { b"" };
    resp::write_bulk(&mut out, msg);
    out.freeze()
}
