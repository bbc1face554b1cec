//! The per-client reply queue: how replies reach a client in its own request order.
//!
//! ```text
//!   session ──push(seq)──▶ ReplyQueue ◀──deliver(seq, frame)── backend conns (any order)
//!      ▲                       │
//!      └──── pop_ready() ◀─────┘   only the head, only once its reply is there
//! ```
//!
//! Every request a client sends gets the next sequence number and an `Entry` at the back of
//! the queue, whether its reply comes from a backend, from a redirect, or from the proxy
//! itself. Backends deliver into the entry for their sequence number, in whatever order the
//! nodes answer; the session writes entries out strictly from the head.
//!
//! Invariants:
//! - `entries[i]` belongs to sequence number `head_seq + i`; nothing else is ever addressed.
//! - A reply is written to the client only from the head, so replies never cross.
//! - After `close`, deliveries are dropped: a closed client's in-flight requests still finish
//!   on the shared backend connections (the bytes are already there), and their replies are
//!   read and discarded so the backend stream stays in step.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Waker;

use bytes::Bytes;
use resp::Request;

use crate::backend::Backend;

/// One request's place in its client's reply order.
pub(crate) struct Entry {
    /// The reply, once known. A redirect reply stays here until the session follows it.
    pub reply: Option<Bytes>,
    /// The request, kept while a redirect may still need to resend it (a refcount, not a copy).
    pub request: Option<Request>,
    /// The backend the request was last sent to: the host of an empty-host MOVED, and loop
    /// detection.
    pub sent_to: Option<Rc<Backend>>,
    /// MOVED/ASK hops followed so far.
    pub hops: u8,
    /// Slot-map version the request was routed with (a MOVED from an older map asks no refresh).
    pub map_version: u64,
}

/// The queue itself; see the module doc for the invariants.
#[derive(Default)]
pub(crate) struct ReplyQueue {
    head_seq: u64,
    entries: VecDeque<Entry>,
    /// Sequence numbers whose reply is a MOVED or ASK the session has not looked at yet.
    redirected: Vec<u64>,
    closed: bool,
}

/// The part of a client that backends may touch: its reply queue and its task's waker.
#[derive(Default)]
pub(crate) struct ClientCell {
    queue: RefCell<ReplyQueue>,
    waker: RefCell<Option<Waker>>,
    /// Replies delivered but not yet written, in bytes (for output backpressure).
    queued_bytes: Cell<usize>,
}

// === impl ClientCell ===

impl ClientCell {
    pub(crate) fn new() -> Rc<ClientCell> {
        Rc::new(ClientCell::default())
    }

    /// Remember the session task's waker; cheap when it did not change.
    pub(crate) fn register(&self, waker: &Waker) {
        let mut slot = self.waker.borrow_mut();
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    fn wake(&self) {
        if let Some(w) = self.waker.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    /// Append an entry and return its sequence number.
    pub(crate) fn push(&self, entry: Entry) -> u64 {
        let mut q = self.queue.borrow_mut();
        if let Some(reply) = &entry.reply {
            self.queued_bytes.set(self.queued_bytes.get() + reply.len());
        }
        q.entries.push_back(entry);
        q.head_seq + q.entries.len() as u64 - 1
    }

    /// A backend's (or the proxy's) reply for `seq`. Wakes the session only when it can act:
    /// the head became ready, or a redirect needs following.
    pub(crate) fn deliver(&self, seq: u64, reply: Bytes) {
        let mut q = self.queue.borrow_mut();
        if q.closed {
            return;
        }
        let Some(idx) = seq.checked_sub(q.head_seq) else {
            return;
        };
        let redirect = is_redirect(&reply);
        let len = reply.len();
        match q.entries.get_mut(idx as usize) {
            Some(entry) => entry.reply = Some(reply),
            None => return,
        }
        self.queued_bytes.set(self.queued_bytes.get() + len);
        if redirect {
            q.redirected.push(seq);
        }
        drop(q);
        if idx == 0 || redirect {
            self.wake();
        }
    }

    /// Take the redirects to follow; the session re-dispatches them with `with_entry`.
    pub(crate) fn take_redirected(&self, into: &mut Vec<u64>) {
        std::mem::swap(&mut self.queue.borrow_mut().redirected, into);
    }

    /// Run `f` on the entry for `seq`, if it is still queued.
    pub(crate) fn with_entry<R>(&self, seq: u64, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut q = self.queue.borrow_mut();
        let idx = seq.checked_sub(q.head_seq)? as usize;
        let entry = q.entries.get_mut(idx)?;
        if let Some(reply) = entry.reply.as_ref() {
            // The entry is about to be looked at again: its reply no longer counts as queued
            // output unless `f` leaves it there, which the next line re-adds.
            self.queued_bytes
                .set(self.queued_bytes.get().saturating_sub(reply.len()));
        }
        let out = f(entry);
        if let Some(reply) = entry.reply.as_ref() {
            self.queued_bytes.set(self.queued_bytes.get() + reply.len());
        }
        Some(out)
    }

    /// Move every ready reply at the head into `out`, in order. Returns how many bytes.
    pub(crate) fn pop_ready(&self, out: &mut VecDeque<Bytes>) -> usize {
        let mut q = self.queue.borrow_mut();
        let mut n = 0;
        while q.entries.front().is_some_and(|e| e.reply.is_some()) {
            let Some(reply) = q.entries.pop_front().and_then(|e| e.reply) else {
                break;
            };
            q.head_seq += 1;
            self.queued_bytes
                .set(self.queued_bytes.get().saturating_sub(reply.len()));
            n += reply.len();
            out.push_back(reply);
        }
        n
    }

    /// Requests queued whose reply has not been handed to the writer yet.
    pub(crate) fn in_flight(&self) -> usize {
        self.queue.borrow().entries.len()
    }

    /// Reply bytes delivered but not yet popped.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes.get()
    }

    /// The client is gone: drop everything, ignore later deliveries.
    pub(crate) fn close(&self) {
        let mut q = self.queue.borrow_mut();
        q.closed = true;
        q.entries.clear();
        q.redirected.clear();
        self.waker.borrow_mut().take();
    }
}

/// `-MOVED ` or `-ASK `: the only replies the proxy acts on instead of forwarding.
pub(crate) fn is_redirect(frame: &[u8]) -> bool {
    frame.starts_with(b"-MOVED ") || frame.starts_with(b"-ASK ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            reply: None,
            request: None,
            sent_to: None,
            hops: 0,
            map_version: 0,
        }
    }

    #[test]
    fn replies_leave_in_request_order_whatever_the_delivery_order() {
        let cell = ClientCell::new();
        let seqs: Vec<u64> = (0..3).map(|_| cell.push(entry())).collect();
        let mut out = VecDeque::new();
        cell.deliver(seqs[2], Bytes::from_static(b"+c\r\n"));
        cell.deliver(seqs[1], Bytes::from_static(b"+b\r\n"));
        assert_eq!(cell.pop_ready(&mut out), 0, "head not ready yet");
        cell.deliver(seqs[0], Bytes::from_static(b"+a\r\n"));
        assert_eq!(cell.pop_ready(&mut out), 12);
        assert_eq!(out, vec![&b"+a\r\n"[..], b"+b\r\n", b"+c\r\n"]);
        assert_eq!(cell.queued_bytes(), 0);
    }

    #[test]
    fn redirects_are_reported_not_popped_early() {
        let cell = ClientCell::new();
        let seq = cell.push(entry());
        cell.deliver(seq, Bytes::from_static(b"-MOVED 1 127.0.0.1:7000\r\n"));
        let mut r = Vec::new();
        cell.take_redirected(&mut r);
        assert_eq!(r, vec![seq]);
        cell.with_entry(seq, |e| e.reply = None);
        let mut out = VecDeque::new();
        assert_eq!(cell.pop_ready(&mut out), 0);
    }

    #[test]
    fn closed_clients_ignore_late_deliveries() {
        let cell = ClientCell::new();
        let seq = cell.push(entry());
        cell.close();
        cell.deliver(seq, Bytes::from_static(b"+late\r\n"));
        assert_eq!(cell.in_flight(), 0);
    }
}
