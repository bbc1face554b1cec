//! Keyspace and keyevent notifications from every master, merged as one Redis delivers them.
//!
//! A node publishes a notification for its own keys only, and the cluster bus does not carry
//! it (it carries every PUBLISH). So each subscription that can receive one (a
//! `__keyspace@…`/`__keyevent@…` channel, or a pattern that can match one, `*` included) is
//! also held on every master, by the worker's keyspace hub (`keyspace/hub.rs`), shared by
//! every subscriber of the worker:
//!
//! ```text
//!   PSUBSCRIBE p ─▶ hub: holds p (subscribed on every master) ─▶ every master caught up?
//!                    ─▶ bus (home): PSUBSCRIBE p + marker ─▶ the client's confirmation
//!   home's frames ─────────────────────────────────────────────▶ client (everything)
//!   hub's messages ─▶ notifications of a confirmed subscription, from masters other
//!                     than the home ─▶ client; anything else ─▶ dropped
//! ```
//!
//! The home gets the command last, so when the client has its confirmation every master is
//! subscribed. The hub delivers only notifications on channels or patterns the home
//! confirmed (and not yet unsubscribed), and none from the home itself: a PUBLISH reaches
//! every node, and the home alone delivers it, once. The hub's connections follow the
//! masters (once a second, and whenever one breaks; a new master gets every name held). A
//! broken connection does not close the client: its node's notifications stop until the
//! map names that node's successor, as they would while a single server restarts.

use std::collections::HashSet;
use std::rc::Rc;

use bytes::Bytes;

use crate::route::keyspace::{is_notification, may_match_notification, Part};
use crate::session::pubsub_frame::{message_source, Confirmation};
use crate::session::queue::ClientCell;
use crate::worker::Worker;

mod hub;

use hub::KeyspaceHub;

/// A session's part in keyspace notifications.
pub(crate) struct Keyspace {
    /// The worker's notification connections, which this session listens to.
    hub: Rc<KeyspaceHub>,
    /// Notification channels and patterns the home confirmed: what the client gets.
    /// Sets: the client chooses how many, and each confirmation and message looks one up.
    channels: HashSet<Bytes>,
    patterns: HashSet<Bytes>,
    /// What this session holds on the hub (pattern, name): released as it unsubscribes.
    held: HashSet<(bool, Bytes)>,
    /// The bus's command, sent once the hub's connections answered up to the ticket.
    pending_home: Option<(Bytes, u64)>,
}

// === impl Keyspace ===

impl Keyspace {
    /// Whether `source` is one of the hub's connections, and its protocol.
    pub(crate) fn connection_resp3(&self, source: usize) -> Option<bool> {
        self.hub.addr_of(source).map(|_| self.hub.resp3)
    }

    /// The session leaves: what it held is released.
    pub(crate) fn close(&mut self, cell: &Rc<crate::session::queue::ClientCell>) {
        for pattern in [false, true] {
            let names: Vec<Bytes> = self
                .held
                .iter()
                .filter(|(p, _)| *p == pattern)
                .map(|(_, n)| n.clone())
                .collect();
            self.hub.release(pattern, &names);
        }
        self.held.clear();
        self.hub.unsubscribe(cell);
    }

    /// Hold or release what a (un)subscribe names on the hub. The ticket to wait for
    /// before the home may get the command, when it subscribes.
    fn apply(&mut self, part: &Part) -> Option<u64> {
        if part.subscribe {
            let fresh: Vec<Bytes> = part
                .names
                .iter()
                .filter(|n| self.held.insert((part.pattern, (*n).clone())))
                .cloned()
                .collect();
            return Some(self.hub.hold(part.pattern, &fresh));
        }
        let names: Vec<Bytes> = match part.names.is_empty() {
            true => self
                .held
                .iter()
                .filter(|(p, _)| *p == part.pattern)
                .map(|(_, n)| n.clone())
                .collect(),
            false => part.names.clone(),
        };
        let gone: Vec<Bytes> = names
            .into_iter()
            .filter(|n| self.held.remove(&(part.pattern, n.clone())))
            .collect();
        self.hub.release(part.pattern, &gone);
        None
    }

    /// The home confirmed (or dropped) a subscription: what a new master must get.
    pub(crate) fn note_home(&mut self, c: &Confirmation) {
        let list = match c.kind.as_ref() {
            b"subscribe" | b"unsubscribe" if is_notification(&c.channel) => &mut self.channels,
            b"psubscribe" | b"punsubscribe" if may_match_notification(&c.channel) => {
                &mut self.patterns
            }
            _ => return,
        };
        match c.kind.as_ref() {
            b"subscribe" | b"psubscribe" => list.insert(c.channel.clone()),
            _ => list.remove(&c.channel),
        };
    }

    /// Whether a keyspace connection's message goes to the client: a notification under a
    /// channel or pattern the home confirmed.
    fn delivers(&self, frame: &Bytes) -> bool {
        match message_source(frame) {
            Some((None, channel)) => self.channels.contains(&channel),
            Some((Some(pattern), channel)) => {
                is_notification(&channel) && self.patterns.contains(&pattern)
            }
            None => false,
        }
    }

    /// A session's first notification subscription: it joins the worker's hub, in its
    /// protocol, as the client `cell`.
    pub(crate) fn start(resp3: bool, cell: &Rc<ClientCell>) -> Box<Keyspace> {
        let hub = KeyspaceHub::of_this_worker(resp3);
        hub.subscribe(cell);
        Box::new(Keyspace {
            hub,
            channels: HashSet::new(),
            patterns: HashSet::new(),
            held: HashSet::new(),
            pending_home: None,
        })
    }

    /// A classic (un)subscribe whose notification part is `part`: held on (or released
    /// from) the hub first, then `home` to the bus once every master caught up. Returns
    /// `home` when it may go at once.
    pub(crate) fn hold_home(&mut self, part: &Part, home: Bytes) -> Option<Bytes> {
        let Some(ticket) = self.apply(part) else {
            return Some(home);
        };
        if self.hub.caught_up(ticket) {
            return Some(home);
        }
        self.pending_home = Some((home, ticket));
        None
    }

    /// Whether `source` is one of the hub's connections: then whether its `frame` goes to
    /// the client (a notification it subscribed to, from a master other than `home`).
    pub(crate) fn frame_from(
        &self,
        source: usize,
        frame: &Bytes,
        home: Option<&str>,
    ) -> Option<bool> {
        let addr = self.hub.addr_of(source)?;
        Some(home != Some(&*addr) && self.delivers(frame))
    }

    /// Keep the hub's connections matched to the masters (`follow.rs`); the bus's waiting
    /// command, once they caught up with its ticket.
    pub(crate) fn follow(&mut self, worker: &Worker) -> Option<Bytes> {
        self.hub.clone().follow(worker);
        let (_, ticket) = self.pending_home.as_ref()?;
        if !self.hub.caught_up(*ticket) {
            return None;
        }
        self.pending_home.take().map(|(home, _)| home)
    }
}
