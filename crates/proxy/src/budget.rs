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

use bytes::{Bytes, BytesMut};

use crate::config::LimitsConfig;
use crate::context::WorkerStats;
use crate::pending::ClientCell;
use crate::session::Session;

/// What one request waiting for its reply costs besides the reply: its `Entry`, the
/// backend's bookkeeping and its share of the client's read buffer.
pub(crate) const ENTRY_COST: usize = std::mem::size_of::<crate::pending::Entry>() + 128;
/// Requests a worker holds unanswered (all clients together) past which clients with work
/// pending stop being read, whatever the bytes: the backends then hold at most this many
/// replies nobody is reading, and a well-behaved client's request never queues behind more
/// than this many of a slow reader's on the shared backend connection (Envoy's circuit
/// breakers default to 1024 requests per cluster; this is one full client pipeline).
const MAX_QUEUED_REQUESTS: usize = 16 * 1024;
/// The expected reply size before any was seen.
const FIRST_EXPECTED_REPLY: usize = 1024;
/// How many of the largest clients a worker remembers as eviction candidates.
const CANDIDATES: usize = 8;
/// Clients holding less are never candidates: evicting them would free little.
const MIN_CANDIDATE: usize = 64 * 1024;
/// The gauge is republished when the count moved by this much (not per request).
const PUBLISH_STEP: usize = 64 * 1024;
/// Replies waiting for a full socket are copied out of the shared read buffers up to this
/// many bytes per turn; a larger batch pins at most one read chunk beyond its own size.
const COMPACT_MAX: usize = 256 * 1024;

/// A client remembered as large, with the bytes it held when it last ran.
#[derive(Default)]
struct Candidate {
    cell: Weak<ClientCell>,
    bytes: usize,
}

/// One worker's share of the budget and its accounting.
#[derive(Default)]
pub(crate) struct Budget {
    /// This worker's share in bytes; 0 = no budget.
    share: usize,
    used: Cell<usize>,
    /// Bytes of clients chosen for eviction that have not closed yet (not counted twice).
    releasing: Cell<usize>,
    published: Cell<usize>,
    largest: RefCell<[Candidate; CANDIDATES]>,
    stats: Arc<WorkerStats>,
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

    fn half_used(&self) -> bool {
        self.share > 0 && self.used.get() >= self.share / 2
    }

    fn over(&self) -> bool {
        self.share > 0 && self.used.get().saturating_sub(self.releasing.get()) > self.share
    }

    /// Record that `cell` holds `bytes` now, keeping the largest few.
    fn note(&self, cell: &Rc<ClientCell>, bytes: usize) {
        let mut list = self.largest.borrow_mut();
        let me = Rc::as_ptr(cell);
        if let Some(slot) = list.iter_mut().find(|c| c.cell.as_ptr() == me) {
            if bytes < MIN_CANDIDATE {
                *slot = Candidate::default();
                cell.candidate.set(false);
            } else {
                slot.bytes = bytes;
            }
            return;
        }
        if bytes < MIN_CANDIDATE {
            return cell.candidate.set(false);
        }
        let weight = |c: &Candidate| {
            if c.cell.strong_count() == 0 {
                0
            } else {
                c.bytes
            }
        };
        let Some(smallest) = list.iter_mut().min_by_key(|c| weight(c)) else {
            return;
        };
        if weight(smallest) < bytes {
            if let Some(old) = smallest.cell.upgrade() {
                old.candidate.set(false);
            }
            *smallest = Candidate {
                cell: Rc::downgrade(cell),
                bytes,
            };
            cell.candidate.set(true);
        }
    }

    /// Close the largest live candidate: mark it and wake it; it logs and closes itself.
    fn evict_largest(&self) {
        let victim = {
            let mut list = self.largest.borrow_mut();
            let best = list
                .iter_mut()
                .filter(|c| {
                    c.cell
                        .upgrade()
                        .is_some_and(|cell| !cell.is_closed() && !cell.no_evict.get())
                })
                .max_by_key(|c| c.bytes);
            best.map(std::mem::take)
        };
        let Some(Candidate { cell, bytes }) = victim else {
            return;
        };
        let Some(cell) = cell.upgrade() else {
            return;
        };
        cell.candidate.set(false);
        if cell.evicted().is_none() {
            self.releasing.set(self.releasing.get() + bytes);
            cell.evict(bytes);
        }
    }

    /// Refresh the cross-thread gauge when the count moved by a step.
    fn publish(&self) {
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

// === impl Session (memory budget) ===

impl Session {
    /// Once half the share is used, a client whose socket is full (replies wait in `out`
    /// after a write) reads nothing more: what it holds is not drained by anyone, so the
    /// condition lasts, and the slow readers stay stopped instead of refilling the backends
    /// each time the count dips. Near the share, a client with a request in flight reads
    /// nothing either: everyone goes one request at a time.
    pub(crate) fn budget_allows_read(&self) -> bool {
        let budget = &self.worker.budget;
        if !self.out.is_empty() && budget.half_used() {
            return false;
        }
        !budget.pressed() || (self.cell.in_flight() == 0 && self.out.is_empty())
    }

    /// After each write attempt: copy out replies waiting for a full socket, report this
    /// client's size, evict the largest client when over the share. True when this session
    /// was evicted and must close.
    pub(crate) fn enforce_budget(&mut self) -> bool {
        if !self.out.is_empty() {
            self.compact_out();
        }
        let budget = &self.worker.budget;
        budget.publish();
        if budget.share == 0 {
            return false;
        }
        let mine = self.out_bytes + self.cell.charged();
        if mine >= MIN_CANDIDATE || self.cell.candidate.get() {
            budget.note(&self.cell, mine);
        }
        if budget.over() {
            budget.evict_largest();
        }
        let Some(held) = self.cell.evicted() else {
            return false;
        };
        tracing::warn!(
            client.id = self.info.id,
            held,
            worker_bytes = budget.used(),
            share = budget.share,
            "evicting client: its worker is over its share of limits.memory_budget_bytes"
        );
        WorkerStats::bump(&budget.stats.clients_evicted);
        true
    }

    /// Copy the replies added to `out` since the last call into one buffer of this client's
    /// own, so they stop pinning the backends' shared read chunks.
    fn compact_out(&mut self) {
        let start = self.out_owned.min(self.out.len());
        let fresh: usize = self.out.range(start..).map(Bytes::len).sum();
        if fresh > 0 && fresh <= COMPACT_MAX && self.out.len() > start {
            let mut own = BytesMut::with_capacity(fresh);
            for part in self.out.range(start..) {
                own.extend_from_slice(part);
            }
            self.out.truncate(start);
            self.out.push_back(own.freeze());
        }
        self.out_owned = self.out.len();
    }

    /// The session is over: its unwritten replies leave the count, and so does its place
    /// among the candidates and, if it was evicted, among the bytes being released.
    pub(crate) fn leave_budget(&mut self) {
        let budget = &self.worker.budget;
        budget.release(std::mem::take(&mut self.out_bytes));
        self.out.clear();
        if self.cell.candidate.get() {
            budget.note(&self.cell, 0);
        }
        if let Some(held) = self.cell.evicted() {
            budget
                .releasing
                .set(budget.releasing.get().saturating_sub(held));
        }
        budget.publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_candidate_is_evicted_and_its_bytes_count_as_releasing() {
        let budget = Budget::new(1 << 20, 1, Arc::default());
        let cells: Vec<_> = (0..10)
            .map(|_| ClientCell::with_budget(budget.clone()))
            .collect();
        for (i, cell) in cells.iter().enumerate() {
            budget.add((i + 1) * 100 * 1024);
            budget.note(cell, (i + 1) * 100 * 1024);
        }
        assert!(budget.over());
        budget.evict_largest();
        assert_eq!(cells[9].evicted(), Some(1000 * 1024));
        assert!(cells[..9].iter().all(|c| c.evicted().is_none()));
        assert_eq!(budget.releasing.get(), 1000 * 1024);
        assert!(!cells[0].candidate.get(), "the smallest fell off the list");
    }

    #[test]
    fn every_charge_returns_to_zero() {
        let budget = Budget::new(1 << 30, 1, Arc::default());
        let cell = ClientCell::with_budget(budget.clone());
        let pending = || crate::pending::Entry {
            reply: None,
            ..crate::pending::Entry::ready(Bytes::new())
        };
        let seqs: Vec<u64> = (0..3).map(|_| cell.push(pending())).collect();
        cell.push_ready(Bytes::from_static(b"+OK\r\n"));
        assert!(budget.used() >= 3 * (ENTRY_COST + FIRST_EXPECTED_REPLY));
        cell.deliver(seqs[0], 0, Bytes::from_static(b"$1\r\na\r\n"));
        cell.deliver(seqs[1], 0, Bytes::from_static(b"$1\r\nb\r\n"));
        let mut out = std::collections::VecDeque::new();
        let written = cell.pop_ready(&mut out);
        assert_eq!(written, 14);
        assert!(
            budget.used() >= written,
            "popped replies stay counted until written"
        );
        budget.release(written);
        cell.close();
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.requests.get(), 0);
    }

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
