//! The global memory budget for client buffers (`limits.memory_budget_bytes`), like Redis 7's
//! `maxmemory-clients`: per-client limits bound one bad client, this bounds the sum of many.
//!
//! ```text
//!   deliver/push ──+bytes──▶ Budget.used (worker-local Cell) ◀──−bytes── write, close
//!                                  │
//!      used ≥ ¾ share ─▶ clients with a request in flight or replies unwritten read nothing
//!      used >   share ─▶ the largest client seen lately is woken and closes (warn, metric)
//! ```
//!
//! The budget is split evenly over the workers and each worker counts its own clients in a
//! plain `Cell`: no atomic is written per request. The counted bytes are the replies queued
//! for a client or handed to its writer, from delivery until the socket took them, and, for
//! each request not yet answered, its bookkeeping plus the reply it is expected to bring (a
//! moving average of the replies seen). Counting requests matters as much as replies: a
//! slow reader's pipeline read in full would put thousands of requests in flight, whose
//! replies the budget could only meet by evicting, and which delay every other client's
//! requests on the shared backend connections.
//!
//! Finding the largest client must not walk the clients (connect and close stay O(1)): each
//! session reports its size when it runs, and the worker keeps the few largest it has seen.
//! Sessions that grow run (a delivery wakes them), so the candidates follow the growth.
//!
//! Replies are zero-copy slices of a backend's read buffer, so one small reply held by a
//! stalled client would pin a whole read chunk, and memory would exceed what is counted. A
//! client whose socket is full gets its waiting replies copied into a buffer of its own, once
//! per turn, which releases the shared chunks: what a stalled client holds is what it counts.
//!
//! Invariant: `used` is the sum, over this worker's live sessions, of `out_bytes` plus their
//! cell's `charged()`; `releasing` is the sum of what evicted, not yet closed clients held.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::config::LimitsConfig;
use crate::context::WorkerStats;

/// Requests a worker holds unanswered (all clients together) past which clients with work
/// pending stop being read, whatever the bytes: the backends then hold at most this many
/// replies nobody is reading, and a well-behaved client's request never queues behind more
/// than this many of a slow reader's on the shared backend connection (Envoy's circuit
/// breakers default to 1024 requests per cluster; this is one full client pipeline).
const MAX_QUEUED_REQUESTS: usize = 16 * 1024;
/// The expected reply size before any was seen.
pub(crate) const FIRST_EXPECTED_REPLY: usize = 1024;
/// How many of the largest clients a worker remembers as eviction candidates.
const CANDIDATES: usize = 8;
/// Clients holding less are never candidates: evicting them would free little.
pub(crate) const MIN_CANDIDATE: usize = 64 * 1024;
/// The gauge is republished when the count moved by this much (not per request).
const PUBLISH_STEP: usize = 64 * 1024;
/// Replies waiting for a full socket are copied out of the shared read buffers up to this
/// many bytes per turn; a larger batch pins at most one read chunk beyond its own size.
pub(crate) const COMPACT_MAX: usize = 256 * 1024;

/// What the budget needs of a client: to mark it a candidate, and to evict it.
pub(crate) trait Evictable {
    fn set_candidate(&self, yes: bool);
    /// Neither closed nor protected (CLIENT NO-EVICT).
    fn evictable(&self) -> bool;
    /// Set once chosen: the bytes it held then.
    fn evicted(&self) -> Option<usize>;
    /// Chosen: mark it with the bytes it held and wake it; it closes itself.
    fn evict(&self, bytes: usize);
}

/// A client remembered as large, with the bytes it held when it last ran.
#[derive(Default)]
struct Candidate {
    cell: Option<Weak<dyn Evictable>>,
    bytes: usize,
}

impl Candidate {
    fn live(&self) -> Option<Rc<dyn Evictable>> {
        self.cell.as_ref()?.upgrade()
    }
}

/// One worker's share of the budget and its accounting.
#[derive(Default)]
pub(crate) struct Budget {
    /// This worker's share in bytes; 0 = no budget.
    pub(crate) share: usize,
    used: Cell<usize>,
    /// Bytes of clients chosen for eviction that have not closed yet (not counted twice).
    pub(crate) releasing: Cell<usize>,
    published: Cell<usize>,
    largest: RefCell<[Candidate; CANDIDATES]>,
    pub(crate) stats: Arc<WorkerStats>,
    /// Moving average of the replies delivered: what a request in flight is charged for.
    expected_reply: Cell<usize>,
    /// Requests queued in this worker's clients' reply queues (answered or not, not popped).
    requests: Cell<usize>,
}

// === impl Budget ===

impl Budget {
    /// `total` split over `workers`; 0 turns the budget off.
    pub(crate) fn new(total: usize, workers: usize, stats: Arc<WorkerStats>) -> Rc<Budget> {
        Rc::new(Budget {
            share: total / workers.max(1),
            stats,
            expected_reply: Cell::new(FIRST_EXPECTED_REPLY),
            ..Budget::default()
        })
    }

    pub(crate) fn add(&self, n: usize) {
        self.used.set(self.used.get() + n);
    }

    pub(crate) fn release(&self, n: usize) {
        self.used.set(self.used.get().saturating_sub(n));
    }

    /// `n` requests entered (`n > 0`) or left a reply queue.
    pub(crate) fn count_requests(&self, entered: usize, left: usize) {
        self.requests
            .set((self.requests.get() + entered).saturating_sub(left));
    }

    /// A reply arrived: it moves the expected size (1/16 weight, integer only).
    pub(crate) fn observe_reply(&self, len: usize) {
        let e = self.expected_reply.get();
        self.expected_reply.set(e - e / 16 + len / 16);
    }

    pub(crate) fn expected_reply(&self) -> usize {
        self.expected_reply.get()
    }

    /// Bytes counted now.
    pub(crate) fn used(&self) -> usize {
        self.used.get()
    }

    /// Near the share: clients with work pending are read one request at a time, so what
    /// is already in flight can still arrive without passing the share.
    pub(crate) fn pressed(&self) -> bool {
        self.share > 0
            && (self.used.get() >= self.share - self.share / 4
                || self.requests.get() >= MAX_QUEUED_REQUESTS)
    }

    /// Requests queued in this worker's reply queues (for tests).
    #[cfg(test)]
    pub(crate) fn queued_requests(&self) -> usize {
        self.requests.get()
    }

    pub(crate) fn half_used(&self) -> bool {
        self.share > 0 && self.used.get() >= self.share / 2
    }

    pub(crate) fn over(&self) -> bool {
        self.share > 0 && self.used.get().saturating_sub(self.releasing.get()) > self.share
    }

    /// Record that `cell` holds `bytes` now, keeping the largest few.
    pub(crate) fn note<C: Evictable + 'static>(&self, cell: &Rc<C>, bytes: usize) {
        let mut list = self.largest.borrow_mut();
        let me = Rc::as_ptr(cell) as *const ();
        let mine = |c: &Candidate| {
            c.cell
                .as_ref()
                .is_some_and(|w| w.as_ptr() as *const () == me)
        };
        if let Some(slot) = list.iter_mut().find(|c| mine(c)) {
            if bytes < MIN_CANDIDATE {
                *slot = Candidate::default();
                cell.set_candidate(false);
            } else {
                slot.bytes = bytes;
            }
            return;
        }
        if bytes < MIN_CANDIDATE {
            return cell.set_candidate(false);
        }
        let weight = |c: &Candidate| c.live().map_or(0, |_| c.bytes);
        let Some(smallest) = list.iter_mut().min_by_key(|c| weight(c)) else {
            return;
        };
        if weight(smallest) < bytes {
            if let Some(old) = smallest.live() {
                old.set_candidate(false);
            }
            let weak: Weak<dyn Evictable> = Rc::downgrade(cell) as Weak<dyn Evictable>;
            *smallest = Candidate {
                cell: Some(weak),
                bytes,
            };
            cell.set_candidate(true);
        }
    }

    /// Close the largest live candidate: mark it and wake it; it logs and closes itself.
    pub(crate) fn evict_largest(&self) {
        let victim = {
            let mut list = self.largest.borrow_mut();
            let best = list
                .iter_mut()
                .filter(|c| c.live().is_some_and(|cell| cell.evictable()))
                .max_by_key(|c| c.bytes);
            best.map(std::mem::take)
        };
        let Some(victim) = victim else {
            return;
        };
        let Some(cell) = victim.live() else {
            return;
        };
        cell.set_candidate(false);
        if cell.evicted().is_none() {
            self.releasing.set(self.releasing.get() + victim.bytes);
            cell.evict(victim.bytes);
        }
    }

    /// Refresh the cross-thread gauge when the count moved by a step.
    pub(crate) fn publish(&self) {
        let used = self.used.get();
        if used.abs_diff(self.published.get()) >= PUBLISH_STEP || (used == 0) {
            self.published.set(used);
            self.stats
                .client_buffer_bytes
                .store(used as u64, Ordering::Relaxed);
        }
    }
}

/// Cap a new client socket's kernel buffers when configured (errors ignored: the kernel's
/// defaults then stay, as before).
pub(crate) fn size_socket_buffers(stream: &tokio::net::TcpStream, limits: &LimitsConfig) {
    let bytes = limits.client_socket_buffer_bytes;
    if bytes > 0 {
        let socket = socket2::SockRef::from(stream);
        let _ = socket.set_send_buffer_size(bytes);
        let _ = socket.set_recv_buffer_size(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_starts_at_three_quarters_and_off_means_never() {
        let budget = Budget::new(4000, 2, Arc::default());
        budget.add(1499);
        assert!(!budget.pressed());
        budget.add(1);
        assert!(budget.pressed() && !budget.over());
        let off = Budget::new(0, 2, Arc::default());
        off.add(usize::MAX / 2);
        assert!(!off.pressed() && !off.over());
    }
}
