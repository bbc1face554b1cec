//! The commands that change a connection's mode, answered as one Redis answers them.
//!
//! QUIT, RESET and HELLO run only once every earlier request of the client is answered and
//! every pub/sub command confirmed (`exclusive.rs` holds them), so they never overtake a
//! reply: `PING ; QUIT` gets its PONG, `SUBSCRIBE a ; RESET` its confirmation, and a HELLO
//! switching protocol leaves no request in flight on a connection of the other protocol.
//! Nothing after them is read until they ran, so the next request is routed in the mode
//! they leave. RESP2 subscribed mode (`dispatch_subscribed`) sends what Redis allows down
//! the subscription connection and refuses the rest with Redis's own error.

use bytes::Bytes;
use resp::Request;

use super::Session;
use crate::route::{Local, Route};
use crate::session::held::{Held, Intake};
use crate::session::local::SessionInfo;
use crate::session::login::Login;

impl Session {
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
                let map = self.client.worker.topology().current();
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
        self.tracking.off(&self.client);
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
                let name = full_name(&req);
                crate::session::pubsub::refuse_subscribed(&self.client, &name);
            }
        }
    }
}

/// The command's name as Redis reports it in errors: `client|getname` for a subcommand.
fn full_name(req: &Request) -> String {
    match cluster::lookup(req.arg(0)) {
        Some(spec) => spec.resolve(req.argc(), |i| req.arg(i)).name.to_string(),
        None => String::from_utf8_lossy(req.arg(0)).to_lowercase(),
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
