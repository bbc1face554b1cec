//! Keyspace and keyevent notifications from every master, merged as one Redis delivers them.
//!
//! A node publishes a notification for its own keys only, and the cluster bus does not carry
//! it (it carries every PUBLISH). So each subscription that can receive one (a
//! `__keyspace@…`/`__keyevent@…` channel, or a pattern that can match one, `*` included) is
//! also made on every master other than the home, over the session's keyspace connections:
//!
//! ```text
//!   PSUBSCRIBE p ─▶ keyspace conns (other masters): PSUBSCRIBE p + marker ─▶ all back?
//!                    ─▶ bus (home): PSUBSCRIBE p + marker ─▶ the client's confirmation
//!   home's frames ─────────────────────────────────────────────▶ client (everything)
//!   keyspace conn's frames ─▶ notifications of a confirmed subscription ─▶ client
//!                          └─▶ confirmations, markers, other messages ─▶ dropped
//! ```
//!
//! The home gets the command last, so when the client has its confirmation every master is
//! subscribed. A keyspace connection delivers only notifications on channels or patterns the
//! home confirmed (and not yet unsubscribed): a PUBLISH reaches every node, and the home
//! alone delivers it, once. The connections follow the masters: once a second, and whenever
//! one breaks, the session matches them to the current map (a new master gets the confirmed
//! subscriptions; a connection to a node that is no longer a master is closed). A broken
//! keyspace connection does not close the client: its node's notifications stop until the
//! map names that node's successor, as they would while a single server restarts.

use std::collections::HashSet;
use std::rc::Weak;

use bytes::{Bytes, BytesMut};

use crate::backend::Outgoing;
use crate::route::keyspace::{is_notification, may_match_notification};
use crate::session::follow::Followers;
use crate::session::pubsub::SYNC_PING;
use crate::session::pubsub_frame::{message_source, Confirmation};
use crate::session::queue::ClientCell;
use crate::session::Session;

/// A session's keyspace connections and the subscriptions they carry.
pub(crate) struct Keyspace {
    /// Connections to the masters other than the home, with the markers each owes.
    conns: Followers,
    /// Notification channels and patterns the home confirmed: what a new master gets.
    /// Sets: the client chooses how many, and each confirmation and message looks one up.
    channels: HashSet<Bytes>,
    patterns: HashSet<Bytes>,
    /// The bus's command, sent once every keyspace connection answered its part.
    pending_home: Option<Bytes>,
    /// The other masters' part of that command: a master that appears meanwhile gets it too.
    pending_part: Option<Bytes>,
}

// === impl Keyspace ===

impl Keyspace {
    /// Whether `source` is one of these connections, and its protocol.
    pub(crate) fn connection_resp3(&self, source: usize) -> Option<bool> {
        self.conns.connection_resp3(source)
    }

    pub(crate) fn close(&self) {
        self.conns.close();
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

    /// The subscriptions a newly opened connection needs.
    fn resubscriptions(&self) -> Vec<Bytes> {
        let mut out = Vec::new();
        for (name, list) in [
            (&b"SUBSCRIBE"[..], &self.channels),
            (b"PSUBSCRIBE", &self.patterns),
        ] {
            if list.is_empty() {
                continue;
            }
            let mut args: Vec<&[u8]> = vec![name];
            args.extend(list.iter().map(|b| b.as_ref()));
            let mut frame = BytesMut::new();
            resp::encode_command(&mut frame, &args);
            out.push(frame.freeze());
        }
        out
    }
}

// === impl Session (keyspace notifications) ===

impl Session {
    /// Send a classic (un)subscribe whose notification part is `part`: the part to every
    /// other master first, then `home` to the bus once they all answered. Returns `home`
    /// when it may go at once (no other master to wait for).
    pub(crate) fn send_with_keyspace(&mut self, part: Bytes, home: Bytes) -> Option<Bytes> {
        self.follow_masters();
        let Some(ks) = self.pubsub.as_mut().and_then(|p| p.keyspace.as_mut()) else {
            return Some(home);
        };
        if ks.conns.conns.is_empty() {
            return Some(home);
        }
        ks.pending_home = Some(home);
        ks.pending_part = Some(part.clone());
        let sink = ks.conns.sink.clone();
        for (conn, owed) in ks.conns.conns.iter_mut() {
            *owed += 1;
            for bytes in [part.clone(), Bytes::from_static(SYNC_PING)] {
                conn.send(Outgoing::stream(bytes, sink.clone()));
            }
        }
        None
    }

    /// A frame from `source`: None if that is not a keyspace connection, else whether the
    /// frame goes to the client (a notification the client subscribed to).
    pub(crate) fn keyspace_frame(&mut self, source: usize, frame: &Bytes) -> Option<bool> {
        let ks = self.pubsub.as_mut()?.keyspace.as_mut()?;
        let (_, owed) = ks.conns.find(source)?;
        if !crate::session::pubsub::is_sync(frame) {
            return Some(ks.delivers(frame));
        }
        *owed = owed.saturating_sub(1);
        self.release_pending_home();
        Some(false)
    }

    /// Send the bus its command once no keyspace connection owes a marker.
    fn release_pending_home(&mut self) {
        let Some(ks) = self.pubsub.as_mut().and_then(|p| p.keyspace.as_mut()) else {
            return;
        };
        if ks.conns.conns.iter().any(|(_, owed)| *owed > 0) {
            return;
        }
        ks.pending_part = None;
        if let Some(home) = ks.pending_home.take() {
            self.send_home(home);
        }
    }

    /// Start keyspace connections for this session (its first notification subscription).
    pub(crate) fn start_keyspace(&mut self) {
        let Some(p) = self.pubsub.as_mut() else {
            return;
        };
        if p.keyspace.is_some() {
            return;
        }
        p.keyspace = Some(Box::new(Keyspace {
            conns: Followers::new(std::rc::Rc::downgrade(&self.cell) as Weak<ClientCell>),
            channels: HashSet::new(),
            patterns: HashSet::new(),
            pending_home: None,
            pending_part: None,
        }));
    }

    /// Match the keyspace connections to the current masters: drop the broken ones and those
    /// to nodes that are no longer masters, open one to each new master.
    pub(crate) fn follow_masters(&mut self) {
        // Every poll of every session comes here: nothing more than this check without
        // keyspace connections (no map load).
        if self.pubsub.as_ref().is_none_or(|p| p.keyspace.is_none()) {
            return;
        }
        let topology = self.worker.topology();
        let map = topology.current();
        let Some(p) = self.pubsub.as_mut() else {
            return;
        };
        let home = p.bus_addr();
        let Some(ks) = p.keyspace.as_mut() else {
            return;
        };
        let Some(followed) = ks.conns.follow(&map, home.as_deref(), topology) else {
            return;
        };
        drop(map);
        for addr in followed.missing {
            self.open_keyspace_conn(&addr);
        }
        self.release_pending_home();
    }

    fn open_keyspace_conn(&mut self, addr: &str) {
        let conn = self.worker.new_backend(addr, self.resp3());
        let Some(ks) = self.pubsub.as_mut().and_then(|p| p.keyspace.as_mut()) else {
            return;
        };
        let sink = ks.conns.sink.clone();
        conn.stream_to(sink.clone());
        for frame in ks.resubscriptions() {
            conn.send(Outgoing::stream(frame, sink.clone()));
        }
        // A command waiting for the other masters: this one must confirm its part too.
        let mut owed = 0;
        if let Some(part) = ks.pending_part.clone() {
            owed = 1;
            for bytes in [part, Bytes::from_static(SYNC_PING)] {
                conn.send(Outgoing::stream(bytes, sink.clone()));
            }
        }
        ks.conns.conns.push((conn, owed));
    }
}
