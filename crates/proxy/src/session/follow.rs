//! Stream connections to every master (but one), kept matched to the map: the worker's
//! keyspace notification hub (`keyspace/hub.rs`), tracking hub (`tracking/hub.rs`) and
//! near cache (`near_cache.rs`).
//! Once a second, and whenever one breaks, their owner is woken and matches them to the
//! current map: a connection to a node that is no longer a master, or that broke, is
//! closed, and each master without one gets one (a master whose connection broke, on a
//! later second only, never in a loop against a node that refuses connections). A break
//! does not close a client.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::time::Duration;

use bytes::Bytes;
use cluster::slot_map::SlotMap;

use crate::backend::{Backend, Outgoing, ReplySink, StreamSink};
use crate::session::queue::ClientCell;
use crate::topology::Topology;
use crate::worker::Worker;

/// The RESP3 flush-everything invalidation Redis sends after FLUSHALL.
pub(crate) const FLUSH_ALL: &[u8] = b">2\r\n$10\r\ninvalidate\r\n_\r\n";
/// The source the tracking feeds' own flushes come from (a lost connection has none); no
/// connection's address is 1.
pub(crate) const HUB_FLUSH: usize = 1;
/// The source of the invalidations a `READS` connection speaking RESP3 carries itself, in
/// line with its replies (`tracking/own.rs`); no connection's address is 2.
pub(crate) const IN_BAND: usize = 2;

/// How often a session with such connections matches them to the map.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// The connections, each with the markers or replies it owes.
pub(crate) struct Followers {
    pub(crate) conns: Vec<(Rc<Backend>, u32)>,
    /// The map version and follower tick the connections were last matched at.
    version: u64,
    tick: u64,
    /// Masters whose connection broke, and the tick it broke at.
    broken: Vec<(Rc<str>, u64)>,
    pub(crate) sink: Rc<FollowSink>,
}

/// Who gets the connections' frames and is woken to follow the map: a hub, which hands
/// them to its sessions.
pub(crate) trait FollowTarget {
    fn push_frame(&self, source: usize, frame: Bytes);
    fn wake_up(&self);
}

/// The sessions a hub serves. Weak: a session that ended drops out by itself.
#[derive(Default)]
pub(crate) struct Subscribers(RefCell<Vec<Weak<ClientCell>>>);

impl Subscribers {
    pub(crate) fn add(&self, cell: &Rc<ClientCell>) {
        let mut subs = self.0.borrow_mut();
        subs.retain(|s| s.strong_count() > 0);
        if !subs
            .iter()
            .any(|s| std::ptr::eq(s.as_ptr(), Rc::as_ptr(cell)))
        {
            subs.push(Rc::downgrade(cell));
        }
    }

    pub(crate) fn remove(&self, cell: &Rc<ClientCell>) {
        let mut subs = self.0.borrow_mut();
        subs.retain(|s| s.strong_count() > 0 && !std::ptr::eq(s.as_ptr(), Rc::as_ptr(cell)));
    }

    /// Hand `frame` to every session (each decides what its client gets).
    pub(crate) fn push_frame(&self, source: usize, frame: &Bytes) {
        for cell in self.live() {
            cell.push_frame(source, frame.clone());
        }
    }

    /// Wake every session: its next poll looks at the hub again.
    pub(crate) fn wake_all(&self) {
        self.live().iter().for_each(|c| c.wake_up());
    }

    /// The sessions still there. A copy: a session woken or handed a frame may join or
    /// leave the hub meanwhile.
    fn live(&self) -> Vec<Rc<ClientCell>> {
        let mut subs = self.0.borrow_mut();
        subs.retain(|s| s.strong_count() > 0);
        subs.iter().filter_map(Weak::upgrade).collect()
    }
}

/// Where the connections' frames go: the target, but a break only marks them for
/// replacement instead of closing a client.
pub(crate) struct FollowSink {
    /// Weak: the hub owns its followers, which own this sink.
    target: Weak<dyn FollowTarget>,
    broke: Cell<bool>,
    ticks: Cell<u64>,
    /// The connections were closed: a frame still on its way must not reach the client.
    closed: Cell<bool>,
}

// A stream connection owes no reply by sequence; a stream's unsent command is `stream_lost`.
impl StreamSink for FollowSink {
    fn push_frame(&self, source: usize, frame: Bytes) {
        if let Some(target) = self.target.upgrade().filter(|_| !self.closed.get()) {
            target.push_frame(source, frame);
        }
    }

    fn stream_lost(&self) {
        self.broke.set(true);
        if let Some(target) = self.target.upgrade() {
            target.wake_up();
        }
    }
}

/// Wake the session every `FOLLOW_EVERY` while the connections exist.
fn spawn_follower(sink: Weak<FollowSink>) {
    tokio::task::spawn_local(async move {
        loop {
            tokio::time::sleep(FOLLOW_EVERY).await;
            let Some(sink) = sink.upgrade() else {
                return;
            };
            sink.ticks.set(sink.ticks.get() + 1);
            match sink.target.upgrade() {
                Some(target) => target.wake_up(),
                None => return,
            }
        }
    });
}

pub(crate) fn source_of(conn: &Rc<Backend>) -> usize {
    Rc::as_ptr(conn) as usize
}

/// What matching the connections to the map changed.
pub(crate) struct Followed {
    /// Masters that need a connection.
    pub missing: Vec<String>,
    /// A connection broke (what it carried may have been missed).
    pub lost: bool,
}

impl Followers {
    pub(crate) fn new(target: Weak<dyn FollowTarget>) -> Followers {
        let sink = Rc::new(FollowSink {
            target,
            broke: Cell::new(false),
            ticks: Cell::new(0),
            closed: Cell::new(false),
        });
        spawn_follower(Rc::downgrade(&sink));
        Followers {
            conns: Vec::new(),
            version: 0,
            tick: 0,
            broken: Vec::new(),
            sink,
        }
    }

    /// A RESP3 connection to each of `missing` (a node pushes invalidations only on RESP3),
    /// told `setup` first, whose one reply each owes.
    pub(crate) fn open_resp3(
        &mut self,
        worker: &Worker,
        missing: Vec<String>,
        setup: &'static [u8],
    ) {
        for addr in missing {
            let conn = worker.new_backend(&addr, true);
            conn.stream_to(self.sink.clone());
            conn.send(Outgoing::stream(
                Bytes::from_static(setup),
                self.sink.clone(),
            ));
            self.conns.push((conn, 1));
        }
    }

    /// The connection `source` and what it owes, if it is one of these.
    pub(crate) fn find(&mut self, source: usize) -> Option<&mut (Rc<Backend>, u32)> {
        self.conns.iter_mut().find(|(c, _)| source_of(c) == source)
    }

    /// Whether `source` is one of these connections, and its protocol.
    /// Whether `source` is one of the connections.
    pub(crate) fn owns(&self, source: usize) -> bool {
        self.conns.iter().any(|(c, _)| source_of(c) == source)
    }

    /// Every connection answered its set-up (none is still owed), and there is one.
    pub(crate) fn all_answered(&self) -> bool {
        !self.conns.is_empty() && self.conns.iter().all(|(_, owed)| *owed == 0)
    }

    pub(crate) fn close(&self) {
        self.sink.closed.set(true);
        self.conns.iter().for_each(|(c, _)| c.close());
    }

    /// Match the connections to the masters of `map` other than `except`. None when there
    /// is nothing to look at (no break, same map, same second).
    pub(crate) fn follow(
        &mut self,
        map: &SlotMap,
        except: Option<&str>,
        topology: &Topology,
    ) -> Option<Followed> {
        let broke = self.sink.broke.replace(false);
        let tick = self.sink.ticks.get();
        if !broke && self.version == map.version() && self.tick == tick {
            return None;
        }
        (self.version, self.tick) = (map.version(), tick);
        self.broken.retain(|(_, at)| *at == tick);
        let wanted = |addr: &str| Some(addr) != except;
        let is_master = |addr: &str| map.nodes().iter().any(|n| n.addr == addr);
        let (kept, dropped): (Vec<_>, Vec<_>) = self
            .conns
            .drain(..)
            .partition(|(c, _)| c.breaks() == 0 && is_master(&c.addr) && wanted(&c.addr));
        self.conns = kept;
        let mut lost = false;
        for (conn, _) in dropped {
            conn.close();
            if conn.breaks() > 0 {
                lost = true;
                self.broken.push((conn.addr.clone(), tick));
                topology.request_refresh_now();
            }
        }
        let missing = map
            .nodes()
            .iter()
            .map(|n| n.addr.clone())
            .filter(|a| wanted(a) && !self.conns.iter().any(|(c, _)| *c.addr == **a))
            .filter(|a| !self.broken.iter().any(|(b, _)| **b == **a))
            .collect();
        Some(Followed { missing, lost })
    }
}

/// Where a tracking client's own connection in the default mode reports
/// (`Client::new_backend_as`): its break or close loses what the node tracked on it, so the
/// client's cache is flushed (`tracking/own.rs`).
struct FlushSink(Weak<ClientCell>);

impl StreamSink for FlushSink {
    fn push_frame(&self, _source: usize, _frame: Bytes) {}
    fn stream_lost(&self) {
        if let Some(cell) = self.0.upgrade() {
            cell.push_frame(HUB_FLUSH, Bytes::from_static(FLUSH_ALL));
            cell.wake_up();
        }
    }
}

/// The sink of `cell`'s own tracked connections.
pub(crate) fn flush_sink(cell: &Rc<ClientCell>) -> Rc<dyn ReplySink> {
    Rc::new(FlushSink(Rc::downgrade(cell)))
}
