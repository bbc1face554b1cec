//! NOLOOP: a tracking client that is not told of its own writes. Only the node can tell
//! whose write changed a key, and it tells by connection, so such a client gets
//! connections of its own, which the nodes track for it.
//!
//! ```text
//!   CLIENT TRACKING ON … NOLOOP ─▶ per master a receiver (RESP3, its CLIENT ID learned)
//!        ─▶ per master a connection of the client's own (`Wire::tracker`), set up with
//!        CLIENT TRACKING ON NOLOOP [BCAST] REDIRECT <that master's receiver> ─▶ the
//!        client's +OK once the node confirmed each; its requests go there from then on
//!   another client writes k ─▶ the node pushes k to the receiver ─▶ the session's filter
//!        (prefixes, keys read, user's keys: `tracking.rs`) ─▶ the client
//!   the client writes k (also in MULTI, a script, a blocking command: all on those
//!        connections) ─▶ the node leaves it out
//!   a receiver breaks ─▶ the connections naming it close; a flush; a new receiver
//!   one of its connections breaks or closes ─▶ a flush (the node forgot its tracking)
//! ```
//!
//! In the default mode the node tracks the keys the client reads there, as Redis does for
//! a client of its own: a script's reads count, a key is told once until read again. The
//! worker's shared `READS` connections speaking RESP3 name no receiver: they carry their
//! invalidations themselves (`IN_BAND`), in the node's order among the replies, so a key
//! evicted before a command runs is known to come before that command's reply
//! (`tracking/owed.rs`). RESP2 connections cannot carry pushes and name the receivers.
//!
//! Why not count the client's own writes on the shared feed instead: the node merges a
//! key's invalidations of one event loop into one (a key the client wrote and that then
//! expired lazily gives one, which the client must get), and a write that changed
//! nothing sends none, so counting would hide another client's invalidation: one too
//! few, where the shared feed's one too many is safe.
//!
//! Cost: two connections per master for each NOLOOP client (the shared feed has none per
//! client). A client whose ACL user is restricted runs its scripts as a mirror user on
//! connections of its own already (`auth/mirror.rs`); it keeps the shared feed and hears
//! of its own writes too (docs/commands.md).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use bytes::Bytes;

use crate::backend::{StreamSink, Wire};
use crate::session::follow::{FollowTarget, Followers, Subscribers, IN_BAND};
use crate::session::queue::ClientCell;
use crate::session::tracking::hub::{FLUSH_ALL, HUB_FLUSH};
use crate::worker::{TrackerLink, Worker, READS};

/// The head of every invalidation push.
const INVALIDATE_HEAD: &[u8] = b">2\r\n$10\r\ninvalidate\r\n";

/// A receiver's set-up: its id, for the REDIRECT of the client's connections.
const CLIENT_ID: &[u8] = b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n";

/// NOLOOP clients with connections of their own, per worker: each costs every master two
/// connections, and a client chooses how many it opens, so past this many a NOLOOP client
/// keeps the shared feed (and hears of its own writes too: one too many, safe).
pub(crate) const MAX_OWN_PER_WORKER: usize = 128;

thread_local! {
    /// This worker thread's feed for its tracking clients in the default mode, while one
    /// tracks.
    static READS_FEED: RefCell<Weak<OwnFeed>> = const { RefCell::new(Weak::new()) };
    /// This worker thread's NOLOOP clients with connections of their own.
    static OWN_FEEDS: Cell<usize> = const { Cell::new(0) };
}

/// Whether another NOLOOP client of this worker may have connections of its own.
pub(crate) fn room_for_own() -> bool {
    OWN_FEEDS.with(|n| n.get() < MAX_OWN_PER_WORKER)
}

/// Receivers and the link connections are made from: one NOLOOP client's own, or the
/// worker's for its tracking clients in the default mode (`READS`).
pub(crate) struct OwnFeed {
    followers: RefCell<Option<Followers>>,
    /// Who hears the invalidations: the NOLOOP client, or every tracking client of the
    /// worker in the default mode.
    subscribers: Subscribers,
    worker: Weak<Worker>,
    /// What keys its connections (`Wire::tracker`): the client's id, or `READS`.
    tracker: u64,
    link: Rc<TrackerLink>,
    /// Every receiver answered once (the client's +OK is out): a receiver learned after
    /// that replaces the connections that named another.
    was_ready: Cell<bool>,
    /// Receivers that answered since the last `follow`, by address.
    learned: RefCell<Vec<Rc<str>>>,
    /// The client's connections were opened to every master for `Wire` (None: not yet).
    opened: Cell<Option<Wire>>,
    /// Those whose tracking the node has not confirmed yet, before the client's +OK.
    owed: RefCell<Vec<usize>>,
    /// Connections whose tracking the node confirmed since the last `follow`.
    confirmed: RefCell<Vec<usize>>,
    refused: RefCell<Option<Bytes>>,
}

/// Where the client's own connections report: a break (or a push, `tracking-redir-broken`,
/// which a receiver's break handles) wakes the session for a flush; a shared `READS`
/// connection in RESP3 also brings its invalidations.
struct ConnSink {
    feed: Weak<OwnFeed>,
}

impl StreamSink for ConnSink {
    /// `+OK` to the connection's tracking set-up, or an invalidation it carries (a push,
    /// `tracking-redir-broken`, is left to the receiver's break).
    fn push_frame(&self, source: usize, frame: Bytes) {
        if frame.starts_with(INVALIDATE_HEAD) {
            if let Some(feed) = self.feed.upgrade() {
                feed.subscribers.push_frame(IN_BAND, &frame);
            }
            return;
        }
        if let Some(feed) = self.feed.upgrade().filter(|_| frame.first() == Some(&b'+')) {
            feed.confirmed.borrow_mut().push(source);
            feed.wake_up();
        }
    }
    fn stream_lost(&self) {
        if let Some(feed) = self.feed.upgrade() {
            feed.link.replaced.set(true);
            feed.wake_up();
        }
    }
}

impl OwnFeed {
    /// Receivers for client `tracker`, whose session is `cell`; its connections are made
    /// from then on (`Worker::link_tracker`).
    /// `bcast`: the node tracks every key for it (BCAST), else the keys it reads.
    /// `noloop`: the node leaves out what the connections write.
    pub(crate) fn start(
        worker: &Rc<Worker>,
        tracker: u64,
        bcast: bool,
        noloop: bool,
    ) -> Rc<OwnFeed> {
        let feed = Rc::new_cyclic(|me: &Weak<OwnFeed>| OwnFeed {
            followers: RefCell::new(None),
            subscribers: Subscribers::default(),
            worker: Rc::downgrade(worker),
            tracker,
            link: Rc::new(TrackerLink {
                ids: RefCell::default(),
                sink: Rc::new(ConnSink { feed: me.clone() }),
                replaced: Cell::new(false),
                bcast,
                noloop,
                own: RefCell::default(),
            }),
            was_ready: Cell::new(false),
            learned: RefCell::default(),
            opened: Cell::new(None),
            owed: RefCell::default(),
            confirmed: RefCell::default(),
            refused: RefCell::new(None),
        });
        let target: Weak<dyn FollowTarget> = Rc::downgrade(&feed) as Weak<OwnFeed>;
        *feed.followers.borrow_mut() = Some(Followers::new(target));
        worker.link_tracker(tracker, feed.link.clone());
        if tracker != READS {
            OWN_FEEDS.with(|n| n.set(n.get() + 1));
        }
        feed
    }

    /// The worker's feed for its tracking clients in the default mode: made on first use,
    /// kept while a session holds it. Their requests go to the worker's `READS`
    /// connections, which the nodes track (`CLIENT TRACKING ON REDIRECT <receiver>`): a
    /// node tells of a key once some client read it there (a script's reads included), and
    /// each session passes on those its client read (`keys.rs`).
    pub(crate) fn reads_of_this_worker(worker: &Rc<Worker>) -> Rc<OwnFeed> {
        READS_FEED.with(|feed| {
            if let Some(live) = feed.borrow().upgrade() {
                return live;
            }
            let new = OwnFeed::start(worker, READS, false, false);
            *feed.borrow_mut() = Rc::downgrade(&new);
            new
        })
    }

    pub(crate) fn subscribe(&self, cell: &Rc<ClientCell>) {
        self.subscribers.add(cell);
    }

    pub(crate) fn unsubscribe(&self, cell: &Rc<ClientCell>) {
        self.subscribers.remove(cell);
    }

    /// Close the receivers and the client's connections (tracking off, or the session's end).
    pub(crate) fn stop(&self, worker: &Worker) {
        if let Some(f) = self.followers.borrow().as_ref() {
            f.close();
        }
        worker.close_tracker(self.tracker, true);
    }

    /// Whether `source` is one of the receivers, or (`READS`) the connections that carry
    /// their invalidations themselves.
    pub(crate) fn owns(&self, source: usize) -> bool {
        if source == IN_BAND {
            return self.tracker == READS;
        }
        let followers = self.followers.borrow();
        followers.as_ref().is_some_and(|f| f.owns(source))
    }

    /// Every master's receiver answered its id and every master's connection of the
    /// client's confirmed its tracking: None while one is owed; the refusal if a master
    /// refused.
    pub(crate) fn ready(&self) -> Option<Result<(), Bytes>> {
        if let Some(refused) = self.refused.borrow().as_ref() {
            return Some(Err(refused.clone()));
        }
        // BCAST tracks every key from the set-up on: the connections must be there before
        // the client's +OK. The default mode tracks what is read there, from the first read.
        let opened = self.opened.get().is_some() && self.owed.borrow().is_empty();
        if !self.receivers_ready() || (self.link.bcast && !opened) {
            return None;
        }
        self.was_ready.set(true);
        Some(Ok(()))
    }

    fn receivers_ready(&self) -> bool {
        let followers = self.followers.borrow();
        followers.as_ref().is_some_and(Followers::all_answered)
    }

    /// Match the receivers to the masters and the client's connections (in `wire`, its
    /// protocol and database) to the receivers; flush the client when the node may have
    /// forgotten its tracking (a receiver or one of its connections lost, a master new).
    pub(crate) fn follow(&self, worker: &Worker, wire: Wire) {
        let topology = worker.topology();
        let map = topology.current();
        let mut flush = self.link.replaced.replace(false);
        let mut open = self.opened.get() != Some(wire);
        {
            let mut followers = self.followers.borrow_mut();
            let Some(f) = followers.as_mut() else {
                return;
            };
            if let Some(followed) = f.follow(&map, None, topology) {
                if followed.lost {
                    // The connections naming a lost receiver track for nobody now.
                    worker.close_tracker(self.tracker, false);
                    flush = true;
                }
                let kept: Vec<Rc<str>> = f.conns.iter().map(|(c, _)| c.addr.clone()).collect();
                self.link
                    .ids
                    .borrow_mut()
                    .retain(|addr, _| kept.contains(addr));
                f.open_resp3(worker, followed.missing, CLIENT_ID);
                open = true;
            }
        }
        for addr in self.learned.take() {
            // Connections made before this receiver answered named none (and failed).
            worker.close_tracker_to(self.tracker, &addr);
            open = true;
        }
        for source in self.confirmed.take() {
            self.owed.borrow_mut().retain(|s| *s != source);
            if !self.link.bcast {
                // The default mode: each connection tracks the keys read on it, and the
                // node invalidates them on a slot's move too; one in another protocol or
                // database keeps tracking what was read there.
                continue;
            }
            // Tracking where none was (a master new to the client, a connection replaced):
            // what changed before is unknown.
            if !worker.retire_tracker_twins(self.tracker, source) && self.was_ready.get() {
                flush = true;
            }
        }
        if open && self.link.bcast && self.receivers_ready() {
            self.open(worker, wire);
        }
        if flush {
            self.flush();
        }
    }

    /// A connection of the client's to every master, tracking from now on rather than
    /// from its first request: the node must count another client's write before it.
    fn open(&self, worker: &Worker, wire: Wire) {
        let first = self.opened.replace(Some(wire)).is_none();
        let ids = self.link.ids.borrow().clone();
        for addr in ids.keys() {
            let conn = worker.backend_for_addr(addr, wire);
            if !conn.is_running() && first {
                self.owed.borrow_mut().push(Rc::as_ptr(&conn) as usize);
            }
            conn.connect_now();
        }
    }

    fn flush(&self) {
        let flush = Bytes::from_static(FLUSH_ALL);
        self.subscribers.push_frame(HUB_FLUSH, &flush);
    }

    /// A receiver's answer to CLIENT ID (`:id`), or its refusal.
    fn learn(&self, source: usize, frame: &Bytes) {
        let addr = {
            let mut followers = self.followers.borrow_mut();
            let Some((conn, owed)) = followers.as_mut().and_then(|f| f.find(source)) else {
                return;
            };
            if *owed == 0 {
                return;
            }
            *owed -= 1;
            conn.addr.clone()
        };
        if frame.first() == Some(&b'-') {
            self.refused.borrow_mut().get_or_insert(frame.clone());
            return;
        }
        let id = frame
            .strip_prefix(b":")
            .and_then(|rest| resp::string2ll(rest.strip_suffix(b"\r\n")?))
            .and_then(|id| u64::try_from(id).ok());
        if let Some(id) = id {
            self.link.ids.borrow_mut().insert(addr.clone(), id);
            if self.was_ready.get() {
                self.learned.borrow_mut().push(addr);
            }
        }
    }
}

impl FollowTarget for OwnFeed {
    /// Invalidations go to the session; CLIENT ID's answers are the feed's.
    fn push_frame(&self, source: usize, frame: Bytes) {
        if frame.first() == Some(&b'>') {
            return self.subscribers.push_frame(source, &frame);
        }
        self.learn(source, &frame);
        self.wake_up();
    }

    fn wake_up(&self) {
        self.subscribers.wake_all();
    }
}

impl Drop for OwnFeed {
    fn drop(&mut self) {
        if self.tracker != READS {
            OWN_FEEDS.with(|n| n.set(n.get().saturating_sub(1)));
        }
        if let Some(f) = self.followers.get_mut().as_ref() {
            f.close();
        }
        if let Some(worker) = self.worker.upgrade() {
            worker.close_tracker(self.tracker, true);
        }
    }
}
