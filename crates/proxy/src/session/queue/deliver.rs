//! Replies arriving from the backends, in whatever order the nodes answer: each lands in the
//! entry of its request, a redirect is set aside for the session to follow, and the session
//! is woken only when it can act (the head became ready, or a redirect waits).

use bytes::Bytes;

use super::{ClientCell, Kind};
use crate::backend::{is_redirect, ReplySink};

impl ClientCell {
    /// A backend's reply for part `frag` of request `seq` (part 0 of an unsplit request).
    /// Wakes the session only when it can act: the head became ready, or a redirect needs
    /// following.
    pub(crate) fn deliver(&self, seq: u64, frag: u32, reply: Bytes) {
        self.deliver_as(seq, frag, reply, true);
    }

    /// The proxy's own late answer for the `Entry::pending_local` at `seq`.
    pub(crate) fn deliver_local(&self, seq: u64, reply: Bytes) {
        self.deliver_as(seq, 0, reply, false);
    }

    /// `deliver`; `sent`: the request was in flight (false: it never left its queue).
    pub(super) fn deliver_as(&self, seq: u64, frag: u32, reply: Bytes, sent: bool) {
        let mut q = self.queue.borrow_mut();
        // An evicted client is closing: what it is still owed would only add to the excess.
        if q.closed || self.evicted.get().is_some() {
            return;
        }
        let Some(idx) = seq.checked_sub(q.head_seq) else {
            return;
        };
        // An answer for a request that never left is final: there is no node's word to follow.
        let redirect = sent && is_redirect(&reply);
        let Some(entry) = q.entries.get_mut(idx as usize) else {
            return;
        };
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

/// The backends see a client only as this.
impl ReplySink for ClientCell {
    fn deliver(&self, seq: u64, frag: u32, reply: Bytes) {
        ClientCell::deliver(self, seq, frag, reply)
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
