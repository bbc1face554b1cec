//! Pub/sub through the proxy.
//!
//! ```text
//!   SUBSCRIBE/PSUBSCRIBE ─▶ the session's bus connection (any master: the cluster bus
//!                            carries PUBLISH to every node)
//!   SSUBSCRIBE ch        ─▶ the session's connection to the master of ch's slot
//!   every frame those connections send ─▶ straight to the client, in arrival order
//! ```
//!
//! Subscription connections are per session and in stream mode: frames are not paired with
//! requests. A RESP2 client in subscribed mode may only send (un)subscribe commands, PING,
//! QUIT and RESET: the proxy sends all of them down the bus connection, so Redis itself gives
//! the exact subscribed-mode replies and errors, in order. A RESP3 client keeps using normal
//! commands meanwhile; messages reach it as push frames between its replies.
//!
//! Subscribed mode ends when every subscription connection has confirmed a count of 0;
//! the connections are then closed. If one breaks, the client's connection is closed too, so
//! it reconnects and resubscribes as it would after losing a Redis server.
//!
//! Every command sent on a subscription connection is followed by a sync marker
//! (`PING slotgate:sync`), and the session reads no further request until every marker is
//! back. Only then is the mode known: after an UNSUBSCRIBE the client may have left
//! subscribed mode, so whether its next command is allowed, and where it goes, depends on
//! the confirmations. It also keeps the client's order: a reply or RESET never overtakes a
//! confirmation. The marker's answer is the pong array in subscribed mode and a bulk
//! string otherwise (RESP3, or RESP2 once the connection left subscribed mode).

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use bytes::Bytes;
use resp::Request;

use crate::backend::{Backend, Outgoing};
use crate::route::frames::array_elements;
use crate::route::PubSubTarget;
use crate::session::client::Client;
use crate::session::held::Held;
use crate::session::keyspace::Keyspace;
use crate::session::pubsub_frame::{confirmation, Confirmation};
use crate::session::pubsub_frame::{is_sync, SYNC_PING};

/// A session's subscription connections and their last confirmed counts.
#[derive(Default)]
pub(crate) struct PubSub {
    bus: Option<Rc<Backend>>,
    pub(crate) shards: Vec<Rc<Backend>>,
    /// (connection id, shard kind, subscriptions it last confirmed): Redis counts shard
    /// channels apart from channels and patterns, so one connection has two counts.
    counts: Vec<(usize, bool, i64)>,
    /// Sync markers sent and not yet answered: the session reads no request meanwhile.
    pub(crate) syncs: u32,
    /// The last pub/sub command sent for the client: a `-MOVED` on a stream answers it
    /// (SSUBSCRIBE on a stale map), and it is resent to the slot's owner.
    pub(crate) last_sent: Option<(Bytes, PubSubTarget)>,
    /// MOVED replies followed for `last_sent`: bounded by `max_redirects`, like any redirect.
    pub(crate) moved_resends: u8,
    /// Shard channels the client subscribed to and has not unsubscribed from. Sets: a
    /// client chooses how many, and each confirmation looks one up (review S9, S10).
    pub(crate) wanted: HashSet<Bytes>,
    /// Shard channels the node dropped (slot moved, failover) that the proxy is
    /// resubscribing without the client noticing, each with where its SSUBSCRIBE went.
    pub(crate) silent: HashMap<Bytes, Rc<str>>,
    /// Shard channels confirmed, over every connection: the count Redis reports.
    pub(crate) shard_confirmed: HashSet<Bytes>,
    /// The `sunsubscribe` confirmations the client's last SUNSUBSCRIBE is owed, each
    /// channel with how many times (Redis confirms a repeated name each time): exactly
    /// these reach it, whatever the nodes send (`resubscribe.rs`); with each, its first
    /// position in the command (what the proxy confirms itself goes in the client's order).
    pub(crate) owed: HashMap<Bytes, (u32, usize)>,
    /// The last SUNSUBSCRIBE without channels, and whether a confirmation answered it.
    pub(crate) unsub_all: Option<bool>,
    /// The client switched protocol while subscribed: frames may need its type byte.
    pub(crate) switched: bool,
    /// Connections to the other masters for keyspace notifications (`keyspace.rs`).
    pub(crate) keyspace: Option<Box<Keyspace>>,
    /// The notification part of the held (un)subscribe, and whether it subscribes.
    notification_part: Option<crate::route::keyspace::Part>,
    /// A transaction running on the bus (`exec_on_bus`): how many of the node's `+OK` and
    /// `+QUEUED` are still to come before EXEC's reply.
    bus_exec: Option<u32>,
}

// === impl PubSub ===

impl PubSub {
    /// Whether the subscription connection `source` speaks RESP3.
    pub(crate) fn connection_resp3(&self, source: usize) -> Option<bool> {
        let mut all = self.bus.iter().chain(self.shards.iter());
        let own = all.find(|c| Rc::as_ptr(c) as usize == source);
        own.map(|c| c.resp3())
            .or_else(|| self.keyspace.as_ref()?.connection_resp3(source))
    }

    /// The address of the bus connection (the home), once it is open.
    pub(crate) fn bus_addr(&self) -> Option<Rc<str>> {
        self.bus.as_ref().map(|b| b.addr.clone())
    }

    /// The shard subscriptions `conn` last confirmed.
    fn count_of(&self, conn: &Rc<Backend>) -> i64 {
        let id = Rc::as_ptr(conn) as usize;
        self.counts
            .iter()
            .find(|(s, shard, _)| *s == id && *shard)
            .map_or(0, |(_, _, n)| *n)
    }

    /// (channel and pattern subscriptions, shard channel subscriptions), for CLIENT LIST.
    pub(crate) fn counts(&self) -> (u32, u32) {
        let sum = |want: bool| -> u32 {
            let n: i64 = self
                .counts
                .iter()
                .filter(|c| c.1 == want)
                .map(|c| c.2)
                .sum();
            u32::try_from(n.max(0)).unwrap_or(u32::MAX)
        };
        (sum(false), sum(true))
    }
}

/// RESET, sent on each subscription connection: the node drops its subscriptions at once
/// and without a confirmation each, as for the client's own RESET.
pub(crate) const RESET: &[u8] = b"*1\r\n$5\r\nRESET\r\n";

/// A RESET of a subscribed client in progress. Closing the subscription connections would
/// not do: a node drops a closed connection's subscriptions when it gets to it, so another
/// client's PUBLISH right after `+RESET` could still count (and reach) this one. Each
/// connection gets RESET first, and the client's `+RESET` waits for their sync markers.
#[derive(Default)]
pub(crate) struct ResetDrain {
    /// Subscription connections whose `+RESET` came: what they send later is dropped.
    done: Vec<usize>,
}

/// The client's pub/sub: its subscription connections (None until its first pub/sub
/// command), and a RESET draining them.
#[derive(Default)]
pub(crate) struct ClientPubSub {
    pub(crate) subs: Option<PubSub>,
    /// A RESET waiting for its subscription connections to drop their subscriptions.
    pub(crate) reset_drain: Option<ResetDrain>,
}

impl ClientPubSub {
    /// Whether the client has subscription connections (it is subscribed, or leaving).
    pub(crate) fn is_on(&self) -> bool {
        self.subs.is_some()
    }

    /// (channel and pattern subscriptions, shard channel subscriptions), for CLIENT LIST.
    pub(crate) fn counts(&self) -> (u32, u32) {
        self.subs.as_ref().map_or((0, 0), PubSub::counts)
    }

    /// True while a RESP2 client is in subscribed mode: every command goes to the bus.
    pub(crate) fn subscribed_resp2(&self, client: &Client) -> bool {
        self.subs.is_some() && !client.resp3()
    }

    /// A pub/sub command: after the requests before it are answered and the pub/sub commands
    /// before it confirmed, to its connection.
    /// Returns it as the request to hold.
    pub(crate) fn command(&mut self, req: Request, target: PubSubTarget) -> Held {
        let part = crate::route::keyspace::notification_part(&req);
        if let Some(p) = self.subs.as_mut() {
            p.moved_resends = 0;
        }
        if part.is_some() {
            let p = self.subs.get_or_insert_with(PubSub::default);
            p.notification_part = part;
        }
        Held::PubSub(req, target)
    }

    /// The held pub/sub command, its turn come: the shard channels it names are wanted (or
    /// not) from now, as the node will see it, not from when it was read (a resubscription
    /// confirmed meanwhile is still the client's).
    pub(crate) fn dispatch(&mut self, client: &Client, req: &Request, target: PubSubTarget) {
        if matches!(target, PubSubTarget::Shard(_)) {
            self.note_shard_command(req);
        }
        self.send(client, req.raw().clone(), target);
    }

    /// A RESP3 subscriber's own PUBLISH or SPUBLISH goes down its subscription connection,
    /// so a message it sends itself arrives before the reply, as from one Redis (which
    /// writes the message while running the command). None: route it as usual.
    pub(crate) fn own_publish(&self, client: &Client, req: &Request) -> Option<PubSubTarget> {
        if self.subs.is_none() || !client.resp3() || req.argc() != 3 {
            return None;
        }
        let name = req.arg(0);
        if name.eq_ignore_ascii_case(b"publish") {
            return Some(PubSubTarget::Bus);
        }
        let shard = name.eq_ignore_ascii_case(b"spublish");
        let placement = &client.worker.shared.placement;
        shard.then(|| PubSubTarget::Shard(Some(placement.slot(req.arg(1)))))
    }

    /// Whether a pub/sub command still waits for its sync marker, or a shard channel the
    /// client let go of is still being resubscribed (`resubscribe.rs`): until it is
    /// dropped again, the mode the client's next command finds is not known.
    pub(crate) fn syncing(&self) -> bool {
        self.subs
            .as_ref()
            .is_some_and(|p| p.syncs > 0 || p.silent.keys().any(|c| !p.wanted.contains(c)))
    }

    /// Send `frame` (if any), then a sync marker, on every open subscription connection.
    pub(crate) fn send_to_all(&mut self, client: &Client, frame: Option<&'static [u8]>) -> bool {
        let Some(p) = self.subs.as_mut() else {
            return false;
        };
        for conn in p.bus.iter().chain(p.shards.iter()) {
            p.syncs += 1;
            for bytes in frame.into_iter().chain([SYNC_PING]) {
                conn.send(Outgoing::stream(
                    Bytes::from_static(bytes),
                    client.cell.clone(),
                ));
            }
        }
        p.syncs > 0
    }

    /// Send a frame, then a sync marker, on the subscription connection(s) for `target`,
    /// opening them as needed.
    pub(crate) fn send(&mut self, client: &Client, frame: Bytes, target: PubSubTarget) {
        if target == PubSubTarget::Bus {
            return self.send_bus(client, frame);
        }
        let targets = match target {
            PubSubTarget::Bus => vec![self.bus_connection(client)],
            PubSubTarget::Shard(Some(slot)) => {
                self.shard_connection(client, slot).into_iter().collect()
            }
            PubSubTarget::Shard(None) => self.subscribed_shards(client),
        };
        let p = self.subs.get_or_insert_with(PubSub::default);
        p.last_sent = Some((frame.clone(), target));
        for backend in targets {
            p.syncs += 1;
            for bytes in [frame.clone(), Bytes::from_static(SYNC_PING)] {
                backend.send(Outgoing::stream(bytes, client.cell.clone()));
            }
        }
    }

    /// A classic (un)subscribe: its notification part to the other masters first, if any
    /// (`keyspace.rs`), then the frame to the home.
    fn send_bus(&mut self, client: &Client, frame: Bytes) {
        let bus = self.bus_connection(client);
        let p = self.subs.get_or_insert_with(PubSub::default);
        p.last_sent = Some((frame.clone(), PubSubTarget::Bus));
        p.syncs += 1;
        let Some(part) = p.notification_part.take() else {
            return send_home_on(client, &bus, frame);
        };
        if part.subscribe {
            let resp3 = client.resp3();
            if let Some(p) = self.subs.as_mut().filter(|p| p.keyspace.is_none()) {
                p.keyspace = Some(Keyspace::start(resp3, &client.cell));
            }
        }
        self.follow_masters(client);
        let ks = self.subs.as_mut().and_then(|p| p.keyspace.as_mut());
        let home = match ks {
            Some(ks) => ks.hold_home(&part, frame.clone()),
            None => Some(frame.clone()),
        };
        if let Some(frame) = home {
            send_home_on(client, &bus, frame);
        }
    }

    /// EXEC of a transaction of (un)subscribe commands, PINGs and ECHOs (`transaction.rs`):
    /// `frame` (`MULTI`, the `queued` commands, `EXEC`) goes down the bus, whose node answers
    /// EXEC with each command's reply in its array, confirmations included, as one Redis
    /// does. The client had its `+QUEUED`s from the proxy: the node's are dropped.
    pub(crate) fn exec_on_bus(&mut self, client: &Client, frame: Bytes, queued: u32) {
        self.send(client, frame, PubSubTarget::Bus);
        if let Some(p) = self.subs.as_mut() {
            p.bus_exec = Some(queued + 1);
        }
    }

    /// A frame of the bus while a transaction runs there: None if it is not one of the
    /// transaction's, else the frame to pass on (EXEC's reply, whose confirmations set the
    /// counts as if each came alone).
    fn bus_exec_frame(&mut self, source: usize, frame: &Bytes) -> Option<Option<Bytes>> {
        let p = self.subs.as_mut()?;
        let left = p.bus_exec?;
        let on_bus = p
            .bus
            .as_ref()
            .is_some_and(|b| Rc::as_ptr(b) as usize == source);
        // RESP3 messages (`>`) may come between; RESP2 ones cannot (not subscribed before
        // EXEC, or MULTI would have been refused).
        if !on_bus || frame.first() == Some(&b'>') {
            return None;
        }
        if left > 0 {
            p.bus_exec = Some(left - 1);
            return Some(None);
        }
        p.bus_exec = None;
        let confirmed: Vec<Confirmation> = array_elements(frame)
            .unwrap_or_default()
            .iter()
            .filter_map(confirmation)
            .collect();
        for c in &confirmed {
            self.record_count(source, c);
        }
        Some(Some(frame.clone()))
    }

    /// The bus's command, its marker already counted in `syncs`.
    pub(crate) fn send_home(&mut self, client: &Client, frame: Bytes) {
        let bus = self.bus_connection(client);
        send_home_on(client, &bus, frame);
    }

    /// The shard connections with subscriptions (SUNSUBSCRIBE without channels): one with
    /// none would add a confirmation Redis does not send. With none at all, one connection
    /// gives Redis's answer for "nothing to unsubscribe".
    fn subscribed_shards(&mut self, client: &Client) -> Vec<Rc<Backend>> {
        let shards: Vec<Rc<Backend>> = self.subs.as_ref().map_or_else(Vec::new, |p| {
            p.shards
                .iter()
                .filter(|c| p.count_of(c) > 0)
                .cloned()
                .collect()
        });
        if !shards.is_empty() {
            return shards;
        }
        let any = self.subs.as_ref().and_then(|p| p.shards.first().cloned());
        vec![any.unwrap_or_else(|| self.bus_connection(client))]
    }

    fn bus_connection(&mut self, client: &Client) -> Rc<Backend> {
        if let Some(bus) = self.subs.as_ref().and_then(|p| p.bus.clone()) {
            return bus;
        }
        // Classic pub/sub's home (`PUBSUB_HOME_SLOT`), where PUBLISH goes too; any master
        // while slot 0 has none (its messages still arrive over the cluster bus).
        let map = client.worker.map();
        let home = map
            .node_of(crate::route::PUBSUB_HOME_SLOT)
            .or(map.nodes().first());
        let addr = home.map(|n| n.addr.clone()).unwrap_or_default();
        let bus = stream_connection(client, &addr);
        self.subs.get_or_insert_with(PubSub::default).bus = Some(bus.clone());
        bus
    }

    pub(crate) fn shard_connection(&mut self, client: &Client, slot: u16) -> Option<Rc<Backend>> {
        let addr = client
            .worker
            .topology()
            .current()
            .node_of(slot)?
            .addr
            .clone();
        let pubsub = self.subs.get_or_insert_with(PubSub::default);
        if let Some(conn) = pubsub.shards.iter().find(|c| *c.addr == *addr) {
            return Some(conn.clone());
        }
        let conn = stream_connection(client, &addr);
        self.subs
            .get_or_insert_with(PubSub::default)
            .shards
            .push(conn.clone());
        Some(conn)
    }

    /// Keep the keyspace hub's connections matched to the masters, and send the bus a
    /// command that waited for them (`keyspace.rs`). Every poll of every session comes
    /// here: nothing more than this check without keyspace notifications.
    pub(crate) fn follow_masters(&mut self, client: &Client) {
        let Some(ks) = self.subs.as_mut().and_then(|p| p.keyspace.as_mut()) else {
            return;
        };
        if let Some(home) = ks.follow(&client.worker) {
            self.send_home(client, home);
        }
    }

    /// `frame` as the client's protocol shows it (`push_shape.rs`).
    pub(crate) fn in_client_protocol(&self, client: &Client, source: usize, frame: Bytes) -> Bytes {
        match self.subs.as_ref() {
            Some(p) => p.in_client_protocol(source, frame, client.resp3()),
            None => frame,
        }
    }

    /// (The caller publishes the client's state before the confirmation is written: CLIENT
    /// LIST from a client that saw it counts it.)
    fn record_count(&mut self, source: usize, c: &Confirmation) {
        let Some(p) = self.subs.as_mut() else {
            return;
        };
        let shard = matches!(c.kind.as_ref(), b"ssubscribe" | b"sunsubscribe");
        match p
            .counts
            .iter_mut()
            .find(|(s, k, _)| *s == source && *k == shard)
        {
            Some(entry) => entry.2 = c.count,
            None => p.counts.push((source, shard, c.count)),
        }
    }

    /// Close every subscription connection (end of subscribed mode, RESET, session end).
    pub(crate) fn leave(&mut self, client: &Client) {
        self.reset_drain = None;
        if let Some(p) = self.subs.take() {
            for conn in p.bus.iter().chain(p.shards.iter()) {
                conn.close();
            }
            if let Some(mut ks) = p.keyspace {
                ks.close(&client.cell);
            }
        }
    }

    /// A frame from subscription connection `source` that is neither keyspace's nor
    /// tracking's: the frame to pass on, if any, and whether a confirmation changed the
    /// counts CLIENT LIST shows (published before the frame is written: a client that saw
    /// it counts it).
    pub(crate) fn on_frame(
        &mut self,
        client: &Client,
        source: usize,
        frame: Bytes,
    ) -> (Option<Bytes>, bool) {
        if is_sync(&frame) {
            let Some(p) = self.subs.as_mut() else {
                return (None, false);
            };
            p.syncs = p.syncs.saturating_sub(1);
            if p.syncs > 0 || p.owed.is_empty() {
                return (None, false);
            }
            return (Some(p.confirm_owed(client.resp3())), true);
        }
        if self.reset_swallows(source, &frame) {
            return (None, false);
        }
        if let Some(passed) = self.bus_exec_frame(source, &frame) {
            return (passed, true);
        }
        if let Some(confirmed) = confirmation(&frame) {
            self.record_count(source, &confirmed);
            if let Some(ks) = self.subs.as_mut().and_then(|p| p.keyspace.as_mut()) {
                ks.note_home(&confirmed);
            }
            if self.resubscribe_on_confirmation(client, &confirmed) {
                return (None, true);
            }
            let frame = match self.subs.as_mut() {
                Some(p) => p.shard_total(&confirmed, frame),
                None => frame,
            };
            return (Some(frame), true);
        }
        if self.resubscribe_on_moved(client, source, &frame)
            || self.resend_on_moved(client, source, &frame)
        {
            return (None, false);
        }
        (Some(frame), false)
    }

    /// A frame of the keyspace hub's connections (`keyspace.rs`): None if not theirs, else
    /// whether it goes to the client as it is.
    pub(crate) fn keyspace_frame(&self, source: usize, frame: &Bytes) -> Option<bool> {
        let p = self.subs.as_ref()?;
        let home = p.bus_addr();
        p.keyspace
            .as_ref()?
            .frame_from(source, frame, home.as_deref())
    }

    /// Subscribed mode ends once every subscription connection confirmed 0 subscriptions
    /// (and no silent resubscription is on its way).
    pub(crate) fn leave_if_done(&mut self, client: &Client) {
        let done = self.subs.as_ref().is_some_and(|p| {
            p.syncs == 0
                && p.silent.is_empty()
                && !p.counts.is_empty()
                && p.counts.iter().all(|(_, _, n)| *n == 0)
        });
        if done {
            self.leave(client);
        }
    }

    /// A frame from subscription connection `source` during a RESET: the node's `+RESET`
    /// and anything after it are not the client's (it has left subscribed mode); messages
    /// sent before it still are, as one Redis writes them before its `+RESET`.
    pub(crate) fn reset_swallows(&mut self, source: usize, frame: &[u8]) -> bool {
        let Some(drain) = self.reset_drain.as_mut() else {
            return false;
        };
        if drain.done.contains(&source) {
            return true;
        }
        if frame == b"+RESET\r\n" {
            drain.done.push(source);
            return true;
        }
        false
    }
}

fn send_home_on(client: &Client, bus: &Rc<Backend>, frame: Bytes) {
    for bytes in [frame, Bytes::from_static(SYNC_PING)] {
        bus.send(Outgoing::stream(bytes, client.cell.clone()));
    }
}

pub(crate) fn stream_connection(client: &Client, addr: &str) -> Rc<Backend> {
    let conn = client.worker.new_backend(addr, client.resp3());
    conn.stream_to(client.cell.clone());
    conn
}

/// A command Redis does not allow in RESP2 subscribed mode. Every confirmation before it
/// is already out (a request is read only once they are), so the error goes in order.
pub(crate) fn refuse_subscribed(client: &Client, req: &Request) {
    let name = full_name(req);
    let name = name.as_str();
    let why = format!(
        "Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    );
    // As Redis words any refused EXEC: the transaction is discarded too.
    let text = match name {
        "exec" => format!("-EXECABORT Transaction discarded because of: {why}\r\n"),
        _ => format!("-ERR {why}\r\n"),
    };
    client.reply_now(Bytes::from(text));
}

/// The command's name as Redis reports it in errors: `client|getname` for a subcommand.
fn full_name(req: &Request) -> String {
    match cluster::lookup(req.arg(0)) {
        Some(spec) => spec.resolve(req.argc(), |i| req.arg(i)).name.to_string(),
        None => String::from_utf8_lossy(req.arg(0)).to_lowercase(),
    }
}
