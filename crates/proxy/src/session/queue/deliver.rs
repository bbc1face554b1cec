//! Replies arriving from the backends, in whatever order the nodes answer: each lands in the
//! entry of its request, a redirect is set aside for the session to follow, and the session
//! is woken only when it can act (the head became ready, or a redirect waits).

use bytes::Bytes;

use super::{ClientCell, Kind};
use crate::backend::{is_redirect, ReplySink};
use crate::context::WorkerStats;
use crate::route::Merge;
use crate::session::failover_hold::Hold;

impl ClientCell {
    /// A backend's reply for part `frag` of request `seq` (part 0 of an unsplit request).
    /// Wakes the session only when it can act: the head became ready, or a redirect needs
    /// following.
    pub(crate) fn deliver(&self, seq: u64, frag: u32, reply: Bytes) {
        self.deliver_as(seq, frag, reply, Arrival::Node);
    }

    /// The proxy's own late answer for the `Entry::pending_local` at `seq`.
    pub(crate) fn deliver_local(&self, seq: u64, reply: Bytes) {
        self.deliver_as(seq, 0, reply, Arrival::NeverLeft);
    }

    /// `deliver`, for an answer that came as `how`.
    pub(super) fn deliver_as(&self, seq: u64, frag: u32, reply: Bytes, how: Arrival) {
        let mut q = self.queue.borrow_mut();
        // An evicted client is closing: what it is still owed would only add to the excess.
        if q.closed || self.evicted.get().is_some() {
            return;
        }
        let Some(idx) = seq.checked_sub(q.head_seq) else {
            return;
        };
        // An answer for a request that never left is final: there is no node's word to follow.
        let redirect = match how {
            Arrival::Node => is_redirect(&reply),
            Arrival::NeverLeft => false,
            Arrival::NotSent | Arrival::NoRoute => true,
        };
        // Only what went to a node was counted in flight in its lane (`order.rs`).
        let sent = matches!(how, Arrival::Node | Arrival::NotSent);
        let Some(entry) = q.entries.get_mut(idx as usize) else {
            return;
        };
        let (how, redirect) = match &entry.kind {
            // INFO's part for a master that is down is left out of the merge at once, not
            // held for its failover: INFO answers while a node is down, as a node would.
            Kind::Fanout(f) if how == Arrival::NotSent && f.merge == Merge::Info => {
                (Arrival::Node, false)
            }
            _ => (how, redirect),
        };
        if let (Some(epochs), Some(written)) = (self.write_epochs.get(), entry.written) {
            // A write's reply, before its client can see it (`context/near_cache.rs`).
            epochs.bump(written);
        }
        if let Some(hold) = entry.hold_mut(frag) {
            note_hold(hold, how, &self.budget.stats);
        }
        let mut second_round = None;
        let ready = match (&mut entry.kind, redirect) {
            (Kind::Fanout(f), true) => {
                if let Some(part) = f.parts.get_mut(frag as usize) {
                    part.reply = Some(reply);
                }
                None
            }
            (Kind::Fanout(f), false) => {
                let merged = f.complete(frag as usize, reply);
                second_round = f.release_second_round();
                merged
            }
            (_, _) => Some(reply),
        };
        let became_ready = ready.is_some() && !redirect;
        let unblocked = sent && self.order_answered(entry, frag);
        if let Some(reply) = ready {
            self.budget.observe_reply(reply.len());
            self.add_queued(reply.len());
            entry.reply = Some(reply);
        }
        if redirect {
            q.redirected.push((seq, frag));
        }
        // The session sends them as it follows redirects (`session/redirect.rs`).
        let second = second_round.is_some();
        q.redirected
            .extend(second_round.into_iter().flatten().map(|i| (seq, i)));
        drop(q);
        if (idx == 0 && became_ready) || redirect || unblocked || second {
            self.wake();
        }
    }
}

/// How an answer reached the reply queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// From the node: a reply, a redirect to follow, or a failure of unknown outcome.
    Node,
    /// From the proxy, for a request that never left: final.
    NeverLeft,
    /// From the proxy, for a request that never reached its node: the session may hold it
    /// for the slot's next master (`session/redirect.rs`).
    NotSent,
    /// From the proxy, for a request whose slot had no owner in the map: routed again by
    /// slot after a fresh map, as a node's CLUSTERDOWN is (`session/redirect.rs`).
    NoRoute,
}

/// Start or end a request's hold for a failover: a node's reply to a held request ends it.
pub(super) fn note_hold(hold: &mut Hold, how: Arrival, stats: &WorkerStats) {
    match how {
        Arrival::NotSent => {
            hold.pending = true;
            if hold.since.is_none() {
                hold.since = Some(tokio::time::Instant::now());
                WorkerStats::bump(&stats.failover_held);
            }
        }
        Arrival::Node if hold.since.is_some() => {
            *hold = Hold::default();
            WorkerStats::bump(&stats.failover_released);
        }
        _ => {}
    }
}

/// The backends see a client only as this.
impl ReplySink for ClientCell {
    fn deliver(&self, seq: u64, frag: u32, reply: Bytes) {
        ClientCell::deliver(self, seq, frag, reply)
    }

    fn not_sent(&self, seq: u64, frag: u32, reply: Bytes) {
        self.deliver_as(seq, frag, reply, Arrival::NotSent)
    }

    fn may_stream_reply(&self, seq: u64, frag: u32) -> bool {
        ClientCell::may_stream_reply(self, seq, frag)
    }

    fn deliver_piece(&self, seq: u64, piece: Bytes, total: usize) {
        ClientCell::deliver_piece(self, seq, piece, total)
    }

    fn push_frame(&self, source: usize, frame: Bytes) {
        ClientCell::push_frame(self, source, frame)
    }

    fn stream_lost(&self) {
        ClientCell::stream_lost(self)
    }
}
