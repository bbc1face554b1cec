//! Per-node counters: requests in flight, connection state, failures, losses, redirects
//! and the sampled requests' latency, kept per worker and summed on read, for INFO `backends` and `/metrics`.
//!
//! Each backend connection resolves its node's counters once, when it is created (the only
//! time the worker's registry mutex is taken on the worker's side); after that it updates them
//! with relaxed atomics that only its worker writes. In-flight is reported as a difference
//! once per connection turn, not per request. Readers lock each worker's registry in turn:
//! O(workers × nodes), never O(clients) or O(requests).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::time::Instant;

/// One worker's counters for one node (every connection kind: shared, dedicated, pub/sub).
#[derive(Debug, Default)]
pub struct NodeStats {
    inflight: AtomicU64,
    /// Slow commands owed (scripts, KEYS…: `Patience::Slow`), reported per quiet turn.
    slow: AtomicU64,
    /// The worker's total of `slow` over its nodes (`NodeRegistry::slow`).
    worker_slow: Arc<AtomicU64>,
    open: AtomicU64,
    connecting: AtomicU64,
    connect_failures: AtomicU64,
    conn_lost: AtomicU64,
    redirects: AtomicU64,
    /// Reads sent to this node as a replica (`read_policy`, READONLY).
    replica_reads: AtomicU64,
    /// The sampled requests (one in 16) sent whole to this node and answered, and their
    /// time from dispatch to reply: the status page's requests/s and latency per master.
    samples: AtomicU64,
    sampled_ns: AtomicU64,
    /// Milliseconds since `origin()` of the last successful connect / last failure; 0: never.
    last_ok_ms: AtomicU64,
    last_error_ms: AtomicU64,
}

/// One worker's nodes, by address.
#[derive(Debug, Default)]
pub struct NodeRegistry {
    map: Mutex<HashMap<String, Arc<NodeStats>>>,
    /// Slow commands owed over every node: PING reads it (one load per worker) to know
    /// whether any node may be busy before it looks for which.
    slow: Arc<AtomicU64>,
}

/// One node's counters summed over the workers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NodeTotals {
    pub inflight: u64,
    pub open: u64,
    pub connecting: u64,
    pub connect_failures: u64,
    pub conn_lost: u64,
    pub redirects: u64,
    pub replica_reads: u64,
    pub samples: u64,
    pub sampled_ns: u64,
    pub last_ok_ms: u64,
    pub last_error_ms: u64,
}

/// What INFO and `/metrics` say about a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// At least one connection is open.
    Up,
    /// The latest connect failed or the latest connection was lost, and none is open.
    Down,
    /// A dial is in progress and nothing has failed since the last success.
    Connecting,
    /// No connection and no failure: not needed yet (connections open on first use).
    Idle,
}

/// Process-wide origin of the millisecond stamps, so every worker's stamps compare.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Milliseconds since `origin()`, at least 1 (0 means "never").
pub(crate) fn now_ms() -> u64 {
    origin().elapsed().as_millis() as u64 + 1
}

// === impl NodeRegistry ===

impl NodeRegistry {
    /// The counters of `addr`, created on first use.
    pub(crate) fn node(&self, addr: &str) -> Arc<NodeStats> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let stats = map.entry(addr.to_string()).or_insert_with(|| {
            Arc::new(NodeStats {
                worker_slow: self.slow.clone(),
                ..NodeStats::default()
            })
        });
        stats.clone()
    }

    /// Slow commands this worker's connections owe, over every node.
    pub(crate) fn slow_owed(&self) -> u64 {
        self.slow.load(Ordering::Relaxed)
    }

    /// The nodes this worker owes slow commands to (added to `into`, once each).
    pub(crate) fn slow_nodes(&self, into: &mut Vec<String>) {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        for (addr, stats) in map.iter() {
            if stats.slow.load(Ordering::Relaxed) > 0 && !into.contains(addr) {
                into.push(addr.clone());
            }
        }
    }

    pub(crate) fn add_to(&self, into: &mut HashMap<String, NodeTotals>) {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        for (addr, stats) in map.iter() {
            stats.add_to(into.entry(addr.clone()).or_default());
        }
    }
}

// === impl NodeStats ===

/// Add or subtract 1 (each counter has a single writer, its worker).
fn add(counter: &AtomicU64, delta: i64) {
    match delta >= 0 {
        true => counter.fetch_add(delta as u64, Ordering::Relaxed),
        false => counter.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed),
    };
}

impl NodeStats {
    pub(crate) fn dialing(&self) {
        add(&self.connecting, 1);
    }

    pub(crate) fn connected(&self) {
        add(&self.connecting, -1);
        add(&self.open, 1);
        self.last_ok_ms.store(now_ms(), Ordering::Relaxed);
    }

    pub(crate) fn connect_failed(&self) {
        add(&self.connecting, -1);
        add(&self.connect_failures, 1);
        self.last_error_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// A connection ended; `lost` unless the proxy closed it on purpose.
    pub(crate) fn closed(&self, lost: bool) {
        add(&self.open, -1);
        if lost {
            add(&self.conn_lost, 1);
            self.last_error_ms.store(now_ms(), Ordering::Relaxed);
        }
    }

    /// A MOVED or ASK reply came from this node.
    pub(crate) fn redirected(&self) {
        add(&self.redirects, 1);
    }

    /// A read was sent to this node as a replica.
    pub(crate) fn replica_read(&self) {
        add(&self.replica_reads, 1);
    }

    /// A sampled request sent to this node was answered after `ns`.
    pub(crate) fn sampled(&self, ns: u64) {
        self.samples.fetch_add(1, Ordering::Relaxed);
        self.sampled_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// A connection now owes `now` replies; it had reported `reported`.
    pub(crate) fn report_inflight(&self, reported: &mut usize, now: usize) {
        if *reported != now {
            add(&self.inflight, now as i64 - *reported as i64);
            *reported = now;
        }
    }

    /// A connection now owes `now` slow commands; it had reported `reported`.
    pub(crate) fn report_slow(&self, reported: &mut usize, now: usize) {
        if *reported != now {
            let delta = now as i64 - *reported as i64;
            add(&self.slow, delta);
            add(&self.worker_slow, delta);
            *reported = now;
        }
    }

    fn add_to(&self, t: &mut NodeTotals) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        t.inflight += get(&self.inflight);
        t.open += get(&self.open);
        t.connecting += get(&self.connecting);
        t.connect_failures += get(&self.connect_failures);
        t.conn_lost += get(&self.conn_lost);
        t.redirects += get(&self.redirects);
        t.replica_reads += get(&self.replica_reads);
        t.samples += get(&self.samples);
        t.sampled_ns += get(&self.sampled_ns);
        t.last_ok_ms = t.last_ok_ms.max(get(&self.last_ok_ms));
        t.last_error_ms = t.last_error_ms.max(get(&self.last_error_ms));
    }
}

// === impl NodeTotals ===

impl NodeTotals {
    pub fn state(&self) -> NodeState {
        if self.open > 0 {
            NodeState::Up
        } else if self.last_error_ms > self.last_ok_ms {
            NodeState::Down
        } else if self.connecting > 0 {
            NodeState::Connecting
        } else {
            NodeState::Idle
        }
    }

    /// Seconds since the last connect failure or connection loss; None if there was none.
    pub fn last_error_age_s(&self, now_ms: u64) -> Option<u64> {
        (self.last_error_ms > 0).then(|| now_ms.saturating_sub(self.last_error_ms) / 1000)
    }
}

impl NodeState {
    pub fn name(self) -> &'static str {
        match self {
            NodeState::Up => "up",
            NodeState::Down => "down",
            NodeState::Connecting => "connecting",
            NodeState::Idle => "idle",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_follows_the_latest_event() {
        let registry = NodeRegistry::default();
        let node = registry.node("127.0.0.1:1");
        let sum = || {
            let mut all = HashMap::new();
            registry.add_to(&mut all);
            all["127.0.0.1:1"]
        };
        assert_eq!(sum().state(), NodeState::Idle);
        node.dialing();
        assert_eq!(sum().state(), NodeState::Connecting);
        node.connected();
        let mut reported = 0;
        node.report_inflight(&mut reported, 5);
        node.report_inflight(&mut reported, 2);
        assert_eq!(
            (sum().state(), sum().inflight, sum().open),
            (NodeState::Up, 2, 1)
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
        node.report_inflight(&mut reported, 0);
        node.closed(true);
        node.dialing();
        node.connect_failed();
        let t = sum();
        assert_eq!(
            (t.state(), t.conn_lost, t.connect_failures),
            (NodeState::Down, 1, 1)
        );
        assert_eq!(t.last_error_age_s(t.last_error_ms + 2500), Some(2));
        assert_eq!(NodeTotals::default().last_error_age_s(10), None);
        assert!(Arc::ptr_eq(&node, &registry.node("127.0.0.1:1")));
    }
}
