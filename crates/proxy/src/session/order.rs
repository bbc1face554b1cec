//! Execution order: a client's requests to one slot execute in the order it sent them,
//! through MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, READONLY and failover (replies were
//! always in order: `queue.rs`).
//!
//! The rule, per client and per slot: a request (new, or resent after a redirect or retry)
//! is written to a connection only when
//! - no earlier request of the client for that slot is waiting (for a redirect to be
//!   followed, for its retry delay, or for its own turn), and
//! - every request of the client for that slot still in flight is in flight on that same
//!   connection.
//!
//! Otherwise it waits in the client's queue, ordered by sequence number, and goes as soon as
//! the rule holds; the queue is released in sequence order. A node runs the commands of one
//! connection in the order they arrive, so the node that executes them executes them in the
//! client's order. Split requests (MSET across slots) take part per slot: each part is a
//! request of its slot. Keyless requests (PING, EVAL with no keys) have no slot and are not
//! ordered. Retries wait on one timer per session; a waiting request is dropped with its
//! client, so nothing is sent after the client left.
//!
//! The second condition is stricter than "the earlier requests are on that connection":
//! a resend also waits for later requests still in flight elsewhere. It costs a round trip
//! in a rare case and lets a count per slot stand for the set of requests in flight. And
//! a request released from the queue goes alone: nothing else of its slot is sent until it
//! is answered. Two resends written together to an importing node can otherwise be split
//! by it, the first refused again (TRYAGAIN: one of its keys is not there yet) and the
//! second run. It costs a round trip per request of that slot while the episode lasts.
//!
//! A multi-key request of a slot seen migrating (an ASK or TRYAGAIN from its owner under
//! the current map: `context/asks.rs`) goes alone too, from its first send: admitted, its
//! lane turns serial. Written with the client's later requests of the slot, it could meet
//! TRYAGAIN (one of its keys already moved) while the node runs a later SET of one of its
//! keys; its retry would then land after that SET (one Redis ends with the SET's value).
//! The cost is a round trip per multi-key request of a migrating slot, for each client that
//! pipelines behind one; other slots and single-key requests pay one bit test.
//!
//! What it cannot undo: requests already written together. A node that refuses one request
//! (MOVED, ASK, TRYAGAIN, LOADING…) and runs a later one it received on the same
//! connection, because its own state changed in between (a slot assigned to it mid-way, a
//! load finished), has run them out of order before the proxy sees the refusal; from then
//! on nothing more is sent past the refused one. A Redis Cluster client talking to the
//! nodes directly has the same limit. It needs a slot's owner to change while a pipeline
//! is on its way there: a slot that leaves a node and comes back within that time, a map
//! older than the move, a replica promoted under it.
//!
//! Cost: nothing is tracked while nothing was redirected and every request in flight was
//! routed with the same map state (`SlotMap::stamp`: which map, which in-place patches) and
//! protocol as the new one. Then each slot's requests are all on its owner's connection and
//! the rule holds without looking: a few integer compares per request, no allocation.
//! Tracking starts on a redirect or a routing change (one pass over the requests in flight)
//! and stops as soon as nothing tracked is in flight or waiting.
//!
//! Requests on the session's dedicated connection (blocking commands, transactions,
//! streamed uploads) start only when nothing else of the client is in flight and nothing
//! more is read until they end (`exclusive.rs`), so they are alone in their lane; their
//! redirects and retries take the same queue.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Context;

use bytes::Bytes;
use cluster::slot_map::{SlotMap, Stamp};
use tokio::time::{Instant, Sleep};

use crate::backend::{Backend, Wire};

#[cfg(test)]
mod tests;

/// A connection's identity. Compared only while the connection holds requests of the lane,
/// whose entries keep it alive, so the address cannot be reused meanwhile.
pub(crate) type ConnId = usize;

pub(crate) fn conn_id(backend: &Rc<Backend>) -> ConnId {
    Rc::as_ptr(backend) as usize
}

/// What routed a request: requests routed alike went to the same owner for every slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RouteKey {
    pub stamp: Stamp,
    /// The protocol and database of the connections it went to.
    pub wire: Wire,
    /// 0: to the slot's master. Otherwise a read routed by a read policy, with the replica
    /// view generation and the policy that chose its node (`session/send/mod.rs`): a read
    /// and a write of one slot may then be on two connections, and a new view may move a
    /// slot's reads, so either change starts tracking.
    pub via: u64,
}

/// `before` (taken before routing by `map`) if the routing saw exactly that map state.
pub(crate) fn stable(before: Stamp, map: &SlotMap) -> Option<Stamp> {
    (map.stamp_after() == before && before.seq.is_multiple_of(2)).then_some(before)
}

/// What to do with a new request (or part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Nothing is tracked: send it.
    Untracked,
    /// Tracked and allowed (already counted in flight): send it.
    Go,
    /// An earlier request of its slot waits or is elsewhere: queue it.
    Wait,
}

/// Where a waiting request goes when released.
#[derive(Debug)]
pub(crate) enum Target {
    /// The owner of `Waiting::route` in the map of that moment: a request not sent yet, or
    /// a reroute after CLUSTERDOWN/LOADING/READONLY (`fallback`: the node it was on, used
    /// when the slot has no owner then).
    Owner { fallback: Option<Rc<str>> },
    /// A node by address: a MOVED or ASK target, or the node that said TRYAGAIN.
    Node(Rc<str>),
}

/// A request (or part) waiting to be sent.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub seq: u64,
    pub frag: u32,
    /// The slot that orders it among its client's requests; None: keyless, unordered.
    pub slot: Option<u16>,
    /// The slot to route by for `Target::Owner` (a MOVED's slot, or `slot`).
    pub route: Option<u16>,
    /// A retry's delay: not before then.
    pub not_before: Option<Instant>,
    pub target: Target,
    pub frame: Bytes,
    pub asking: bool,
    /// On the session's dedicated connection.
    pub pinned: bool,
    /// Replies before the one owed (a transaction's MULTI and queued commands).
    pub skip: u32,
    /// The protocol and database of the connection it was routed to, kept for its resend.
    pub wire: Wire,
}

impl Waiting {
    /// A new request that must wait for its turn before its first send.
    pub(crate) fn fresh(seq: u64, frag: u32, slot: u16, frame: Bytes, wire: Wire) -> Waiting {
        Waiting {
            seq,
            frag,
            slot: Some(slot),
            route: Some(slot),
            not_before: None,
            target: Target::Owner { fallback: None },
            frame,
            asking: false,
            pinned: false,
            skip: 0,
            wire,
        }
    }
}

/// One slot's tracked requests.
#[derive(Debug, Default)]
struct Lane {
    /// The connection every request in flight is on (meaningful while `in_flight > 0`).
    conn: ConnId,
    in_flight: u32,
    waiting: u32,
    /// Found in flight on two connections when tracking started: nothing goes until drained.
    mixed: bool,
    /// The release pass that left a request of this lane waiting: later ones wait too.
    held_in: u64,
    /// A request released from the queue (a resend, or one that waited its turn) is in
    /// flight: nothing else of the lane goes until it is answered. Sent together, a resend
    /// refused again (TRYAGAIN at an importing node: one of its keys is not there yet) and
    /// a later request the node runs would execute out of order.
    serial: bool,
}

impl Lane {
    /// Whether a request may go on `conn` as far as requests in flight are concerned.
    fn admits(&self, conn: ConnId) -> bool {
        self.in_flight == 0 || (!self.mixed && !self.serial && self.conn == conn)
    }

    fn add(&mut self, conn: ConnId) {
        if self.in_flight == 0 {
            self.conn = conn;
            self.mixed = false;
            self.serial = false;
        } else if self.conn != conn {
            self.mixed = true;
        }
        self.in_flight += 1;
    }
}

/// A client's ordering state; lives in its `ClientCell` so deliveries can update it.
#[derive(Default)]
pub(crate) struct Order {
    active: bool,
    /// What the last new request was routed with (None: unknown, a patch ran meanwhile).
    routed: Option<RouteKey>,
    lanes: HashMap<u16, Lane>,
    /// Waiting requests, by (seq, frag).
    waiting: VecDeque<Waiting>,
    /// The other buffer of a release pass, kept for its capacity.
    spare: VecDeque<Waiting>,
    pass: u64,
    /// Something may have become sendable since the last pass.
    dirty: bool,
    /// The earliest retry time among requests held only by their delay.
    deadline: Option<Instant>,
    /// The session's one retry timer, kept once made.
    timer: Option<Pin<Box<Sleep>>>,
}

// === impl Order ===

impl Order {
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }

    /// Note the route of a new request; true when it may differ from the previous one's.
    pub(crate) fn route_changed(&mut self, key: Option<RouteKey>) -> bool {
        let before = std::mem::replace(&mut self.routed, key);
        key.is_none() || before != key
    }

    /// While starting: a request found in flight on `conn`.
    pub(crate) fn track(&mut self, slot: u16, conn: ConnId) {
        self.lanes.entry(slot).or_default().add(conn);
    }

    /// After `track`ing what is in flight: active only if anything is.
    pub(crate) fn settle(&mut self) {
        self.active = !self.lanes.is_empty() || !self.waiting.is_empty();
    }

    /// A new request for `slot` routed to `conn` (tracking is active). On `Go` it is
    /// counted in flight there; `alone` (a request that goes alone), its lane also turns
    /// serial (later requests of the slot wait until it is answered) and tracking is on.
    pub(crate) fn admit(&mut self, slot: u16, conn: ConnId, alone: bool) -> Admit {
        let lane = self.lanes.entry(slot).or_default();
        if lane.waiting > 0 || !lane.admits(conn) {
            return Admit::Wait;
        }
        lane.add(conn);
        if alone {
            lane.serial = true;
            self.active = true;
        }
        Admit::Go
    }

    /// A tracked request of `slot` was answered (a reply, an error, or a redirect to
    /// follow). True when its lane drained while requests of it wait: wake the session.
    pub(crate) fn answered(&mut self, slot: u16) -> bool {
        let Some(lane) = self.lanes.get_mut(&slot) else {
            return false;
        };
        lane.in_flight = lane.in_flight.saturating_sub(1);
        if lane.in_flight > 0 {
            return false;
        }
        if lane.waiting > 0 {
            self.dirty = true;
            return true;
        }
        self.lanes.remove(&slot);
        self.settle();
        false
    }

    /// Queue a request in sequence order (tracking must have started: `settle`d after
    /// `track`ing what is in flight).
    pub(crate) fn wait(&mut self, w: Waiting) {
        if let Some(slot) = w.slot {
            self.lanes.entry(slot).or_default().waiting += 1;
        }
        let at = self
            .waiting
            .partition_point(|x| (x.seq, x.frag) < (w.seq, w.frag));
        self.waiting.insert(at, w);
        self.active = true;
        self.dirty = true;
    }

    /// Whether a release pass could send something now.
    pub(crate) fn wants_pass(&self, now: Instant) -> bool {
        !self.waiting.is_empty() && (self.dirty || self.deadline.is_some_and(|d| d <= now))
    }

    /// One pass over the queue in sequence order: move each request the rule lets go to
    /// `ready`, counted in flight on the connection `resolve` picked (None: no route, to be
    /// failed). `resolve` is asked only for requests not held by an earlier one or a delay.
    pub(crate) fn release<B>(
        &mut self,
        now: Instant,
        mut resolve: impl FnMut(&Waiting) -> Option<B>,
        id: impl Fn(&B) -> ConnId,
        ready: &mut Vec<(Waiting, Option<B>)>,
    ) {
        self.pass += 1;
        self.dirty = false;
        self.deadline = None;
        let mut keep = std::mem::take(&mut self.spare);
        while let Some(w) = self.waiting.pop_front() {
            match self.try_release(&w, now, &mut resolve, &id) {
                Some(to) => ready.push((w, to)),
                None => keep.push_back(w),
            }
        }
        self.spare = std::mem::replace(&mut self.waiting, keep);
        self.lanes.retain(|_, l| l.in_flight > 0 || l.waiting > 0);
        self.settle();
    }

    /// Some(route) when `w` goes now; None when it stays (and holds its lane's later ones).
    fn try_release<B>(
        &mut self,
        w: &Waiting,
        now: Instant,
        resolve: &mut impl FnMut(&Waiting) -> Option<B>,
        id: &impl Fn(&B) -> ConnId,
    ) -> Option<Option<B>> {
        let pass = self.pass;
        let lane = w.slot.map(|s| self.lanes.entry(s).or_default());
        if lane.as_ref().is_some_and(|l| l.held_in == pass) {
            return None;
        }
        if let Some(at) = w.not_before.filter(|at| *at > now) {
            self.deadline = Some(self.deadline.map_or(at, |d| d.min(at)));
            if let Some(lane) = lane {
                lane.held_in = pass;
            }
            return None;
        }
        let to = resolve(w);
        let Some(lane) = lane else {
            return Some(to);
        };
        match &to {
            Some(b) if !lane.admits(id(b)) => {
                lane.held_in = pass;
                return None;
            }
            Some(b) => {
                lane.add(id(b));
                lane.serial = true;
            }
            None => {}
        }
        lane.waiting -= 1;
        Some(to)
    }

    /// Arm the retry timer for the earliest delay; true when it has already expired.
    pub(crate) fn poll_timer(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(deadline) = self.deadline.filter(|_| !self.waiting.is_empty()) else {
            return false;
        };
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        timer.as_mut().poll(cx).is_ready()
    }

    /// The client is gone: drop everything waiting (it is never sent) and stop tracking.
    pub(crate) fn clear(&mut self) {
        *self = Order::default();
    }
}
