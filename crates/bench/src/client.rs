//! One simulated client: its keys, its schedule and its connections (one to the target, or
//! one per cluster node). It works in batches: encode up to `--pipeline` requests, route each,
//! send each node's share in one write, frame the replies, follow redirects, repeat.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::slot_map::SlotMap;

use crate::conn::Conn;
use crate::keys::{KeyDist, KeyGen, Rng};
use crate::pacing::{Pacer, PreciseSleep};
use crate::stats::Stats;
use crate::topology::Topology;
use crate::workload::Workload;

/// Marks an `ASKING` we sent ahead of a redirected request; its `+OK` is skipped.
pub(crate) const ASKING: u32 = u32::MAX;

/// Redirect hops per request before its last MOVED/ASK counts as the error.
pub(crate) const MAX_HOPS: usize = 5;

/// Where requests go.
#[derive(Clone)]
pub enum Route {
    /// Every request to one RESP endpoint; MOVED/ASK are errors.
    Fixed(SocketAddr),
    /// Routed by slot through the shared map; MOVED/ASK are followed.
    Cluster(Arc<Topology>),
}

/// What every client of a run shares (read-only).
pub struct Plan {
    /// The request mix.
    pub workload: Workload,
    /// Key distribution and keyspace size.
    pub key_dist: KeyDist,
    pub keyspace: u64,
    /// Requests per batch (closed loop) or the most in flight per client (open loop).
    pub pipeline: usize,
    /// Total requests/s over all clients (open loop); `None` = closed loop.
    pub rate: Option<f64>,
    /// A batch's replies must arrive within this.
    pub timeout: Duration,
    /// Total number of clients, for the key strides and the rate split.
    pub clients: u64,
    /// Base seed for the per-client generators.
    pub seed: u64,
    /// Close every connection after each batch (the next batch connects again).
    pub reconnect: bool,
    /// Check that each reply belongs to its request (see `workload::reply_matches`).
    pub verify: bool,
    /// Pace with tokio's millisecond timers instead of a timerfd per client.
    pub coarse_timer: bool,
}

/// One node connection and the requests in flight on it (indexes into the batch).
pub(crate) struct Node {
    pub addr: SocketAddr,
    pub conn: Option<Conn>,
    pub sent: Vec<u32>,
}

/// A simulated client.
pub struct Client {
    pub(crate) plan: Arc<Plan>,
    pub(crate) route: Route,
    pub(crate) rng: Rng,
    id: u64,
    keys: KeyGen,
    pacer: Option<Pacer>,
    /// Open loop only; `None` falls back to tokio's millisecond timers.
    sleeper: Option<PreciseSleep>,
    quota: Option<u64>,
    deadline: Option<Instant>,
    pub(crate) t0: Instant,
    pub(crate) stats: std::rc::Rc<RefCell<Stats>>,
    progress: Arc<AtomicU64>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) map: Option<Arc<SlotMap>>,
    /// Map node index → `nodes` index, valid for `map`.
    pub(crate) map_nodes: Vec<usize>,
    pub(crate) batch: Vec<u8>,
    /// Per request: byte span in `batch` and slot.
    pub(crate) spans: Vec<(usize, usize, u16)>,
    /// Per request: (intended) send time.
    pub(crate) t_send: Vec<Instant>,
    /// Requests to send in this round: (request, node index, preceded by ASKING).
    pub(crate) todo: Vec<(u32, usize, bool)>,
    /// Redirects received this round: (request, target, ASK, slot).
    pub(crate) redirects: Vec<(u32, SocketAddr, bool, u16)>,
    pub(crate) backoff: bool,
}

/// How one client is set up inside a run.
pub struct ClientSetup {
    pub id: u64,
    pub quota: Option<u64>,
    pub t0: Instant,
    pub deadline: Option<Instant>,
    pub stats: std::rc::Rc<RefCell<Stats>>,
    pub progress: Arc<AtomicU64>,
}

impl Client {
    /// A client with no connections yet.
    pub fn new(plan: Arc<Plan>, route: Route, s: ClientSetup) -> Client {
        let keys = KeyGen::new(&plan.key_dist, plan.keyspace, s.id, plan.clients);
        let pacer = plan.rate.map(|r| Pacer::new(s.t0, r, s.id, plan.clients));
        let rng = Rng::new(plan.seed.wrapping_mul(1_000_003).wrapping_add(s.id));
        let cap = plan.pipeline;
        Client {
            route,
            rng,
            id: s.id,
            keys,
            pacer,
            sleeper: None,
            quota: s.quota,
            deadline: s.deadline,
            t0: s.t0,
            stats: s.stats,
            progress: s.progress,
            nodes: Vec::new(),
            map: None,
            map_nodes: Vec::new(),
            batch: Vec::with_capacity(cap * 64),
            spans: Vec::with_capacity(cap),
            t_send: Vec::with_capacity(cap),
            todo: Vec::with_capacity(cap),
            redirects: Vec::new(),
            backoff: false,
            plan,
        }
    }

    /// Opens every connection the client will need, so set-up stays out of the measurement.
    pub async fn connect(&mut self) -> std::io::Result<()> {
        match &self.route {
            Route::Fixed(addr) => {
                self.node_index(*addr);
            }
            Route::Cluster(_) => self.sync_map(),
        }
        if self.plan.reconnect {
            return Ok(()); // churn: every batch pays its own connect, inside the measurement
        }
        for node in &mut self.nodes {
            node.conn = Some(Conn::connect(node.addr).await?);
        }
        Ok(())
    }

    /// Sets the measured start (the pacing timetable begins there) and the deadline.
    pub fn start(&mut self, t0: Instant, deadline: Option<Instant>) {
        self.t0 = t0;
        self.deadline = deadline;
        self.pacer = self
            .plan
            .rate
            .map(|r| Pacer::new(t0, r, self.id, self.plan.clients));
        if self.pacer.is_some() && !self.plan.coarse_timer {
            self.sleeper = PreciseSleep::new().ok();
        }
    }

    /// Runs until the quota or the deadline is reached.
    pub async fn run(mut self) {
        loop {
            let left = self.quota.unwrap_or(u64::MAX);
            if left == 0 || self.deadline.is_some_and(|d| Instant::now() >= d) {
                return;
            }
            let max = (self.plan.pipeline as u64).min(left) as usize;
            let n = match &self.pacer {
                None => max,
                Some(p) => match p.due(Instant::now(), max) {
                    0 => {
                        let due = p.next_due();
                        if let Some(Ok(())) = self.sleep_precisely(due).await {
                            continue;
                        }
                        tokio::time::sleep_until(due.into()).await;
                        continue;
                    }
                    due => due,
                },
            };
            self.run_batch(n).await;
            self.quota = self.quota.map(|q| q - n as u64);
            self.progress.fetch_add(n as u64, Ordering::Relaxed);
            if self.plan.reconnect {
                self.nodes.iter_mut().for_each(|n| n.conn = None);
            }
            if std::mem::take(&mut self.backoff) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    async fn sleep_precisely(&mut self, due: Instant) -> Option<std::io::Result<()>> {
        Some(self.sleeper.as_mut()?.until(due).await)
    }

    async fn run_batch(&mut self, n: usize) {
        self.build(n);
        for hop in 0..MAX_HOPS {
            if self.todo.is_empty() {
                break;
            }
            let follow = matches!(self.route, Route::Cluster(_)) && hop + 1 < MAX_HOPS;
            self.send_round(follow).await;
            self.plan_redirects().await;
        }
    }

    /// Encodes `n` requests and routes each to a node.
    fn build(&mut self, n: usize) {
        self.batch.clear();
        self.spans.clear();
        self.t_send.clear();
        self.todo.clear();
        if matches!(self.route, Route::Cluster(_)) {
            self.sync_map();
        }
        let now = Instant::now();
        let routed = matches!(self.route, Route::Cluster(_));
        for i in 0..n {
            let t = self.plan.workload.pick(&mut self.rng);
            let key = t.write(&mut self.batch, &mut self.keys, &mut self.rng);
            // CRC16 only when routing needs it: it was the top user-space cost at P16.
            let slot = match (routed, key) {
                (true, Some((a, b))) => cluster::key_slot(&self.batch[a..b]),
                _ => 0,
            };
            let start = self.spans.last().map_or(0, |s| s.1);
            self.spans.push((start, self.batch.len(), slot));
            let intended = match &mut self.pacer {
                Some(p) => {
                    let due = p.take();
                    let lag = now.saturating_duration_since(due).as_nanos() as u64;
                    self.stats.borrow_mut().lag.saturating_record(lag.max(1));
                    due
                }
                None => now,
            };
            self.t_send.push(intended);
            let node = self.node_for_slot(slot);
            self.todo.push((i as u32, node, false));
        }
    }

    fn node_for_slot(&mut self, slot: u16) -> usize {
        let Some(map) = &self.map else {
            return 0;
        };
        match map.node_index(slot) {
            Some(i) => self.map_nodes.get(usize::from(i)).copied().unwrap_or(0),
            // A slot nobody serves: ask any node and count what it answers (CLUSTERDOWN).
            None => 0,
        }
    }

    /// Picks up a newer shared map and re-indexes our connections by address.
    pub(crate) fn sync_map(&mut self) {
        let Route::Cluster(topo) = &self.route else {
            return;
        };
        let map = topo.map();
        if self.map.as_ref().is_some_and(|m| Arc::ptr_eq(m, &map)) {
            return;
        }
        let addrs: Vec<Option<SocketAddr>> =
            map.nodes().iter().map(|n| n.addr.parse().ok()).collect();
        self.map_nodes = addrs
            .into_iter()
            .map(|a| a.map_or(0, |a| self.node_index(a)))
            .collect();
        self.map = Some(map);
    }

    /// The index of the node at `addr`, added (unconnected) if new.
    pub(crate) fn node_index(&mut self, addr: SocketAddr) -> usize {
        if let Some(i) = self.nodes.iter().position(|n| n.addr == addr) {
            return i;
        }
        self.nodes.push(Node {
            addr,
            conn: None,
            sent: Vec::new(),
        });
        self.nodes.len() - 1
    }
}
