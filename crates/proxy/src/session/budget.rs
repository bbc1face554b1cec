//! The session's side of the worker's memory budget (`crate::budget`): stop reading near
//! the share, copy stalled replies out of shared read buffers, report this client's size,
//! and close it when the budget chose it.

use bytes::{Bytes, BytesMut};

use super::client::Client;
use super::io::Io;
use super::queue::ClientCell;
use crate::budget::{Evictable, COMPACT_MAX, MIN_CANDIDATE};
use crate::context::WorkerStats;

impl Evictable for ClientCell {
    fn set_candidate(&self, yes: bool) {
        self.candidate.set(yes);
    }

    fn evictable(&self) -> bool {
        !self.is_closed() && !self.no_evict.get()
    }

    fn evicted(&self) -> Option<usize> {
        ClientCell::evicted(self)
    }

    fn evict(&self, bytes: usize) {
        ClientCell::evict(self, bytes)
    }
}

/// Query buffers above this are charged to the budget (four read chunks).
const QUERY_CHARGE_FROM: usize = 256 * 1024;

impl Io {
    /// Once half the share is used, a client whose socket is full (replies wait in `out`
    /// after a write) reads nothing more: what it holds is not drained by anyone, so the
    /// condition lasts, and the slow readers stay stopped instead of refilling the backends
    /// each time the count dips. Near the share, a client with a request in flight reads
    /// nothing either: everyone goes one request at a time.
    pub(crate) fn budget_allows_read(&self, client: &Client) -> bool {
        let budget = &client.worker.budget;
        if !self.out.is_empty() && budget.half_used() {
            return false;
        }
        !budget.pressed() || (client.cell.in_flight() == 0 && self.out.is_empty())
    }

    /// After each write attempt: copy out replies waiting for a full socket, report this
    /// client's size, evict the largest client when over the share. True when this session
    /// was evicted and must close.
    pub(crate) fn enforce_budget(&mut self, client: &Client, queued: usize) -> bool {
        if !self.out.is_empty() {
            self.compact_out();
        }
        self.charge_held_input(client);
        let budget = &client.worker.budget;
        budget.publish();
        if budget.share == 0 {
            return false;
        }
        let mine = self.out_bytes + client.cell.charged() + queued + self.held_charged;
        if mine >= MIN_CANDIDATE || client.cell.candidate.get() {
            budget.note(&client.cell, mine);
        }
        if budget.over() {
            budget.evict_largest();
        }
        let Some(held) = client.cell.evicted() else {
            return false;
        };
        tracing::warn!(
            client.id = client.info.id,
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

    /// A request buffered past a few read chunks (a big value that is not streamed, a
    /// restricted user's, an MSET) is this client's memory: charged to the budget like
    /// Redis's `maxmemory-clients` counts the query buffer (review S9). So is a big client
    /// name: Redis does not bound its length, and a thousand clients with 10 MiB names hold
    /// 10 GB. Small buffers and names are left out, so an ordinary client pays a few
    /// compares per poll.
    fn charge_held_input(&mut self, client: &Client) {
        let big = |n: usize| if n > QUERY_CHARGE_FROM { n } else { 0 };
        let name = client.info.name.as_ref().map_or(0, Bytes::len);
        let now = big(self.read_buf.capacity()) + big(name);
        if now != self.held_charged {
            let budget = &client.worker.budget;
            budget.release(self.held_charged);
            budget.add(now);
            self.held_charged = now;
        }
    }

    /// The session is over: its unwritten replies leave the count, and so does its place
    /// among the candidates and, if it was evicted, among the bytes being released.
    /// (The caller drops a transaction's queue first: it releases its charge as it goes.)
    pub(crate) fn leave_budget(&mut self, client: &Client) {
        let budget = &client.worker.budget;
        budget.release(std::mem::take(&mut self.held_charged));
        budget.release(std::mem::take(&mut self.out_bytes));
        self.out.clear();
        if client.cell.candidate.get() {
            budget.note(&client.cell, 0);
        }
        if let Some(held) = client.cell.evicted() {
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
    use crate::budget::{Budget, FIRST_EXPECTED_REPLY};
    use crate::session::queue::ENTRY_COST;
    use std::sync::Arc;

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
        let pending = || crate::session::queue::Entry {
            reply: None,
            ..crate::session::queue::Entry::ready(Bytes::new())
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
        assert_eq!(budget.queued_requests(), 0);
    }
}
