//! One set of tracking connections per worker, shared by every client of the worker that
//! has CLIENT TRACKING on in BCAST mode (review S11; the default mode shares the worker's
//! `READS` connections the same way: `own.rs`).
//!
//! Why: with a connection per master for each tracking client, a few thousand clients with
//! client-side caching fill the nodes' `maxclients`, and then the proxy's own reconnects and
//! topology queries are refused too. The nodes cannot tell the proxy's clients apart anyway
//! (their reads share connections), so each connection tracks every key (BCAST, no prefix)
//! and each session keeps what its client asked for: its prefixes, the keys it read, its
//! user's keys (`tracking.rs`).
//!
//! ```text
//!   first CLIENT TRACKING ON of the worker ─▶ hub: a RESP3 connection per master,
//!        CLIENT TRACKING ON BCAST on each; the client's +OK once every master answered
//!   >2 invalidate [keys] from any master ─▶ every subscribed session ─▶ its own filter
//!   a connection breaks ─▶ every subscriber: flush everything; its successor's +OK ─▶
//!        another flush (what changed in the gap)
//!   last subscriber gone ─▶ the connections close
//! ```
//!
//! The hub has no task of its own: its connections' frames come through `FollowTarget`, and
//! its followers' ticks and breaks wake the subscribers, whose next poll matches the
//! connections to the map (`TrackingHub::follow`: a no-op unless something changed).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use bytes::Bytes;

use crate::session::follow::{FollowTarget, Followers, Subscribers};
use crate::session::queue::ClientCell;
use crate::worker::Worker;

/// What each master's connection is told once: track every key, push invalidations.
const TRACK_ALL: &[u8] = b"*4\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\nON\r\n$5\r\nBCAST\r\n";
pub(crate) use crate::session::follow::{FLUSH_ALL, HUB_FLUSH};

thread_local! {
    /// This worker thread's hub, while some session tracks.
    static HUB: RefCell<Weak<TrackingHub>> = const { RefCell::new(Weak::new()) };
}

/// The worker's tracking connections and the sessions they serve.
pub(crate) struct TrackingHub {
    followers: RefCell<Option<Followers>>,
    subscribers: Subscribers,
    /// Every master answered its set-up once: a connection set up after that may have
    /// missed invalidations, so its +OK flushes every subscriber.
    was_ready: Cell<bool>,
    /// The first refusal of the set-up, for the clients waiting for their +OK.
    refused: RefCell<Option<Bytes>>,
}

impl TrackingHub {
    /// The worker's hub, made on first use. Sessions hold it strongly: it lives while one
    /// of them tracks.
    pub(crate) fn of_this_worker() -> Rc<TrackingHub> {
        HUB.with(|hub| {
            if let Some(live) = hub.borrow().upgrade() {
                return live;
            }
            let new = Rc::new(TrackingHub {
                followers: RefCell::new(None),
                subscribers: Subscribers::default(),
                was_ready: Cell::new(false),
                refused: RefCell::new(None),
            });
            let target: Weak<dyn FollowTarget> = Rc::downgrade(&new) as Weak<TrackingHub>;
            *new.followers.borrow_mut() = Some(Followers::new(target));
            *hub.borrow_mut() = Rc::downgrade(&new);
            new
        })
    }

    pub(crate) fn subscribe(&self, cell: &Rc<ClientCell>) {
        self.subscribers.add(cell);
    }

    pub(crate) fn unsubscribe(&self, cell: &Rc<ClientCell>) {
        self.subscribers.remove(cell);
    }

    /// Whether `source` is one of the hub's connections.
    pub(crate) fn owns(&self, source: usize) -> bool {
        let followers = self.followers.borrow();
        followers.as_ref().is_some_and(|f| f.owns(source))
    }

    /// Every master's connection answered its set-up: None while one is still owed; the
    /// refusal if a master refused it.
    pub(crate) fn ready(&self) -> Option<Result<(), Bytes>> {
        if let Some(refused) = self.refused.borrow().as_ref() {
            return Some(Err(refused.clone()));
        }
        let followers = self.followers.borrow();
        followers.as_ref()?.all_answered().then_some(Ok(()))
    }

    /// Match the connections to the masters (a no-op unless the map, the second or a
    /// connection changed); a lost connection flushes every subscriber.
    pub(crate) fn follow(&self, worker: &Worker) {
        let topology = worker.topology();
        let map = topology.current();
        let lost = {
            let mut followers = self.followers.borrow_mut();
            let Some(f) = followers.as_mut() else {
                return;
            };
            let Some(followed) = f.follow(&map, None, topology) else {
                return;
            };
            // RESP3 whatever the clients speak.
            f.open_resp3(worker, followed.missing, TRACK_ALL);
            followed.lost
        };
        if lost {
            self.fan_out(HUB_FLUSH, Bytes::from_static(FLUSH_ALL));
        }
    }

    fn fan_out(&self, source: usize, frame: Bytes) {
        self.subscribers.push_frame(source, &frame);
    }
}

impl FollowTarget for TrackingHub {
    /// Invalidations go to every subscriber; the set-up's answers are the hub's.
    fn push_frame(&self, source: usize, frame: Bytes) {
        if frame.first() == Some(&b'>') {
            return self.fan_out(source, frame);
        }
        {
            let mut followers = self.followers.borrow_mut();
            let Some((_, owed)) = followers.as_mut().and_then(|f| f.find(source)) else {
                return;
            };
            if *owed == 0 {
                return;
            }
            *owed -= 1;
        }
        if frame.first() == Some(&b'-') {
            self.refused.borrow_mut().get_or_insert(frame);
        } else if self.was_ready.get() {
            // A connection opened since the subscribers' +OK: flush what changed in the gap.
            self.fan_out(source, Bytes::from_static(FLUSH_ALL));
        }
        if matches!(self.ready(), Some(Ok(()))) {
            self.was_ready.set(true);
        }
        self.subscribers.wake_all();
    }

    fn wake_up(&self) {
        self.subscribers.wake_all();
    }
}

impl Drop for TrackingHub {
    fn drop(&mut self) {
        if let Some(f) = self.followers.get_mut().as_ref() {
            f.close();
        }
    }
}
