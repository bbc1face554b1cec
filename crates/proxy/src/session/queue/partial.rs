//! Streamed replies on the client's side: the pieces of one big bulk reply, delivered as the
//! node sends them (`backend/replies.rs`), wait in their request's entry and leave for the
//! writer as soon as that entry is at the head, before the reply is complete.
//!
//! Only a whole request's own reply is streamed, never a part of a split one (its replies
//! are merged), and a streamed reply is final: a big bulk string is never a redirect, so
//! its pieces skip the redirect check (a piece of a value may well start with `-ASK`).

use bytes::Bytes;

use super::{ClientCell, Kind};

impl ClientCell {
    /// Whether the reply owed to part `frag` of request `seq` may be streamed.
    pub(crate) fn may_stream_reply(&self, seq: u64, frag: u32) -> bool {
        let q = self.queue.borrow();
        if q.closed || self.evicted.get().is_some() || frag != 0 {
            return false;
        }
        let Some(idx) = seq.checked_sub(q.head_seq) else {
            return false;
        };
        q.entries
            .get(idx as usize)
            .is_some_and(|e| matches!(e.kind, Kind::Sent(_)) && e.reply.is_none())
    }

    /// One piece of request `seq`'s streamed reply; `total` is the reply's length when this
    /// piece is its last, 0 otherwise.
    pub(crate) fn deliver_piece(&self, seq: u64, piece: Bytes, total: usize) {
        let mut q = self.queue.borrow_mut();
        if q.closed || self.evicted.get().is_some() {
            return;
        }
        let Some(idx) = seq.checked_sub(q.head_seq) else {
            return;
        };
        let Some(entry) = q.entries.get_mut(idx as usize) else {
            return;
        };
        self.add_queued(piece.len());
        if let (Some(epochs), Some(written)) = (self.write_epochs.get(), entry.written.take()) {
            // A write's reply, before its client can see any of it (`deliver.rs`).
            epochs.bump(written);
        }
        let mut unblocked = false;
        if total > 0 {
            // The reply is whole: what any reply's arrival does (`deliver.rs`), but the
            // redirect check. Without it, a request of the same slot waiting behind this one
            // in the client's order (`order.rs`) was never released: the second of two big
            // GETs resent after a MOVED waited forever.
            if let Some(hold) = entry.hold_mut(0) {
                super::deliver::note_hold(hold, super::deliver::Arrival::Node, &self.budget.stats);
            }
            unblocked = self.order_answered(entry, 0);
            self.budget.observe_reply(total);
            entry.reply = Some(piece);
        } else {
            entry.partial.push(piece);
        }
        drop(q);
        if idx == 0 || unblocked {
            self.wake();
        }
    }
}
