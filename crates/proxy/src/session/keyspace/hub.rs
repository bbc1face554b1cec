//! One set of keyspace-notification connections per worker and protocol, shared by every
//! subscriber of the worker (review S11).
//!
//! Why: a node publishes notifications of its own keys only, so a subscriber to
//! `__keyspace@…` channels (or to a pattern that can match one, `*` included) must listen on
//! every master. With connections of its own, each such client cost every master a
//! connection, and enough of them filled the nodes' `maxclients`. The hub listens on every
//! master once, for the union of its subscribers' notification channels and patterns, each
//! counted by the sessions that hold it; each session passes on what its home confirmed
//! (`keyspace.rs`).
//!
//! ```text
//!   a session holds a new name ─▶ count 0→1: (P)SUBSCRIBE name, then a marker, on every
//!        master ─▶ the session's ticket: its home command goes once every connection
//!        answered the markers up to the ticket
//!   a session lets go ─▶ count 1→0: (P)UNSUBSCRIBE name on every master
//!   message / pmessage ─▶ every subscriber ─▶ kept if its home confirmed the name
//!   a new master ─▶ every held name, then a marker
//! ```
//!
//! Markers answer in order per connection, so "answered up to epoch e" is a count. Other
//! sessions' later rounds never hold a session back: it waits for its own ticket only.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use bytes::{Bytes, BytesMut};

use crate::backend::Outgoing;
use crate::session::follow::{source_of, FollowTarget, Followers, Subscribers};
use crate::session::pubsub_frame::{is_sync, SYNC_PING};
use crate::session::queue::ClientCell;
use crate::worker::Worker;

thread_local! {
    /// This worker thread's hubs (RESP2, RESP3), while some session subscribes.
    static HUBS: RefCell<[Weak<KeyspaceHub>; 2]> = const { RefCell::new([Weak::new(), Weak::new()]) };
}

/// The worker's notification connections for one protocol, and what they carry.
pub(crate) struct KeyspaceHub {
    pub(crate) resp3: bool,
    followers: RefCell<Option<Followers>>,
    /// Per connection (by source): the epoch of its first marker, and markers answered.
    markers: RefCell<HashMap<usize, (u64, u64)>>,
    /// The last marker round sent to every connection.
    epoch: Cell<u64>,
    /// Channels and patterns (true) held, with how many sessions hold each.
    held: RefCell<HashMap<(bool, Bytes), usize>>,
    subscribers: Subscribers,
}

impl KeyspaceHub {
    /// The worker's hub for `resp3`, made on first use; sessions hold it strongly.
    pub(crate) fn of_this_worker(resp3: bool) -> Rc<KeyspaceHub> {
        HUBS.with(|hubs| {
            let i = usize::from(resp3);
            if let Some(live) = hubs.borrow()[i].upgrade() {
                return live;
            }
            let new = Rc::new(KeyspaceHub {
                resp3,
                followers: RefCell::new(None),
                markers: RefCell::new(HashMap::new()),
                epoch: Cell::new(0),
                held: RefCell::new(HashMap::new()),
                subscribers: Subscribers::default(),
            });
            let target: Weak<dyn FollowTarget> = Rc::downgrade(&new) as Weak<KeyspaceHub>;
            *new.followers.borrow_mut() = Some(Followers::new(target));
            hubs.borrow_mut()[i] = Rc::downgrade(&new);
            new
        })
    }

    pub(crate) fn subscribe(&self, cell: &Rc<ClientCell>) {
        self.subscribers.add(cell);
    }

    pub(crate) fn unsubscribe(&self, cell: &Rc<ClientCell>) {
        self.subscribers.remove(cell);
    }

    /// The address of connection `source`, if it is the hub's.
    pub(crate) fn addr_of(&self, source: usize) -> Option<Rc<str>> {
        let followers = self.followers.borrow();
        let f = followers.as_ref()?;
        let conn = f.conns.iter().find(|(c, _)| source_of(c) == source);
        conn.map(|(c, _)| c.addr.clone())
    }

    /// A session holds these names too: the ones no session held yet are subscribed on
    /// every master, behind a new marker. Returns the ticket to wait for (`caught_up`).
    pub(crate) fn hold(&self, pattern: bool, names: &[Bytes]) -> u64 {
        let mut fresh: Vec<&[u8]> = Vec::new();
        {
            let mut held = self.held.borrow_mut();
            for name in names {
                let count = held.entry((pattern, name.clone())).or_insert(0);
                *count += 1;
                if *count == 1 {
                    fresh.push(name);
                }
            }
        }
        if !fresh.is_empty() {
            let verb: &[u8] = if pattern { b"PSUBSCRIBE" } else { b"SUBSCRIBE" };
            self.send_all(Some(command(verb, &fresh)), true);
        }
        self.epoch.get()
    }

    /// A session lets go of these names: the ones no session holds any more are
    /// unsubscribed on every master.
    pub(crate) fn release(&self, pattern: bool, names: &[Bytes]) {
        let mut gone: Vec<Bytes> = Vec::new();
        {
            let mut held = self.held.borrow_mut();
            for name in names {
                let key = (pattern, name.clone());
                if let Some(count) = held.get_mut(&key) {
                    *count -= 1;
                    if *count == 0 {
                        held.remove(&key);
                        gone.push(name.clone());
                    }
                }
            }
        }
        if !gone.is_empty() {
            let verb: &[u8] = if pattern {
                b"PUNSUBSCRIBE"
            } else {
                b"UNSUBSCRIBE"
            };
            let names: Vec<&[u8]> = gone.iter().map(|n| n.as_ref()).collect();
            self.send_all(Some(command(verb, &names)), false);
        }
    }

    /// Whether every connection answered the markers up to `ticket`.
    pub(crate) fn caught_up(&self, ticket: u64) -> bool {
        let followers = self.followers.borrow();
        let Some(f) = followers.as_ref() else {
            return true;
        };
        let markers = self.markers.borrow();
        f.conns.iter().all(|(c, _)| {
            markers
                .get(&source_of(c))
                .is_some_and(|(first, answered)| first + answered > ticket)
        })
    }

    /// Match the connections to the masters but the home (a no-op unless the map, the
    /// second or a connection changed); a new one gets every name held, then a marker.
    pub(crate) fn follow(&self, worker: &Worker) {
        let topology = worker.topology();
        let map = topology.current();
        let mut followers = self.followers.borrow_mut();
        let Some(f) = followers.as_mut() else {
            return;
        };
        // Not the home (`bus_connection`): its subscribers hear it on their own bus
        // connections, and a subscription of the hub there would count in PUBLISH's reply.
        let home = map
            .node_of(crate::route::PUBSUB_HOME_SLOT)
            .or(map.nodes().first())
            .map(|n| n.addr.clone());
        let Some(followed) = f.follow(&map, home.as_deref(), topology) else {
            return;
        };
        let mut markers = self.markers.borrow_mut();
        markers.retain(|source, _| f.conns.iter().any(|(c, _)| source_of(c) == *source));
        let held = self.held.borrow();
        for addr in followed.missing {
            let conn = worker.new_backend(&addr, self.resp3);
            let sink = f.sink.clone();
            conn.stream_to(sink.clone());
            for pattern in [false, true] {
                let names: Vec<&[u8]> = held
                    .keys()
                    .filter(|(p, _)| *p == pattern)
                    .map(|(_, n)| n.as_ref())
                    .collect();
                if !names.is_empty() {
                    let verb: &[u8] = if pattern { b"PSUBSCRIBE" } else { b"SUBSCRIBE" };
                    conn.send(Outgoing::stream(command(verb, &names), sink.clone()));
                }
            }
            conn.send(Outgoing::stream(Bytes::from_static(SYNC_PING), sink));
            markers.insert(source_of(&conn), (self.epoch.get(), 0));
            f.conns.push((conn, 0));
        }
    }

    /// `frame` (if any) to every connection, then, when `marked`, a marker of a new epoch.
    fn send_all(&self, frame: Option<Bytes>, marked: bool) {
        if marked {
            self.epoch.set(self.epoch.get() + 1);
        }
        let followers = self.followers.borrow();
        let Some(f) = followers.as_ref() else {
            return;
        };
        for (conn, _) in &f.conns {
            if let Some(frame) = &frame {
                conn.send(Outgoing::stream(frame.clone(), f.sink.clone()));
            }
            if marked {
                conn.send(Outgoing::stream(
                    Bytes::from_static(SYNC_PING),
                    f.sink.clone(),
                ));
            }
        }
    }
}

impl FollowTarget for KeyspaceHub {
    /// Messages go to every subscriber; markers and confirmations are the hub's.
    fn push_frame(&self, source: usize, frame: Bytes) {
        if is_sync(&frame) {
            if let Some((_, answered)) = self.markers.borrow_mut().get_mut(&source) {
                *answered += 1;
            }
            return self.subscribers.wake_all();
        }
        if crate::session::pubsub_frame::message_source(&frame).is_some() {
            self.subscribers.push_frame(source, &frame);
        }
    }

    fn wake_up(&self) {
        self.subscribers.wake_all();
    }
}

impl Drop for KeyspaceHub {
    fn drop(&mut self) {
        if let Some(f) = self.followers.get_mut().as_ref() {
            f.close();
        }
    }
}

fn command(verb: &[u8], names: &[&[u8]]) -> Bytes {
    let mut args: Vec<&[u8]> = vec![verb];
    args.extend_from_slice(names);
    let mut frame = BytesMut::new();
    resp::encode_command(&mut frame, &args);
    frame.freeze()
}
