//! The replica view: which replicas may serve reads, and which node of each shard answers
//! fastest, sampled off the request path by the topology thread and published whole.
//!
//! ```text
//!   topology thread: every second (or at once when a replica connection broke)
//!     each master: INFO server replication persistence ─▶ master_repl_offset, round trip,
//!                  availability zone
//!     each replica: the same ─▶ down? loading? link down? lag = master's − its offset
//!   ─▶ ReplicaView (ArcSwap) + generation (bumped only when a routing choice changes)
//!   workers: one relaxed load of the generation per read; a new view only when it moved
//! ```
//!
//! A replica is usable when it answered within `SAMPLE_TIMEOUT`, is not loading, its link
//! to its master is up and in sync, and it is at most `max_replica_lag` bytes of
//! replication offset behind (the master is sampled first, so the lag can only be
//! overstated by what was written in between).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use cluster::slot_map::SlotMap;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::replica_info::{self, NodeInfo};
use ::topology::Topology;

use crate::node_query::NodeConn;
use crate::tls::Connector;

/// Pause between two samples of every node.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Shortest pause between two samples, when broken replica connections ask for one.
const SAMPLE_GAP: Duration = Duration::from_millis(100);
/// A node that does not answer INFO this fast is not fit to serve reads (busy or paused).
const SAMPLE_TIMEOUT: Duration = Duration::from_millis(500);

/// Why a replica serves no reads, or `Up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fitness {
    Up,
    /// Unreachable, or too slow to answer.
    Down,
    Loading,
    /// Its link to the master is down or a full sync is in progress.
    Syncing,
    /// More than `max_replica_lag` bytes behind.
    Lagging,
}

impl Fitness {
    pub fn name(self) -> &'static str {
        match self {
            Fitness::Up => "up",
            Fitness::Down => "down",
            Fitness::Loading => "loading",
            Fitness::Syncing => "syncing",
            Fitness::Lagging => "lagging",
        }
    }
}

/// One replica as last sampled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaState {
    pub addr: String,
    pub master: String,
    pub fitness: Fitness,
    /// Bytes of replication offset behind its master (0 when unknown).
    pub lag: u64,
    /// INFO's round trip, microseconds (0 when it did not answer).
    pub rtt_us: u64,
}

/// What the workers route reads by; replaced whole on each sample.
#[derive(Debug, Default)]
pub struct ReplicaView {
    pub replicas: Vec<ReplicaState>,
    /// Master address → the address with the lowest round trip among it and its usable
    /// replicas (`nearest`).
    nearest: HashMap<String, String>,
}

impl ReplicaView {
    /// Whether the replica at `addr` may serve reads now.
    pub fn usable(&self, addr: &str) -> bool {
        self.replicas
            .iter()
            .any(|r| r.addr == addr && r.fitness == Fitness::Up)
    }

    /// The fastest node of `master`'s shard, if sampled.
    pub fn nearest(&self, master: &str) -> Option<&str> {
        self.nearest.get(master).map(String::as_str)
    }

    /// What routing depends on: equal keys route every read alike.
    fn routing_key(&self) -> RoutingKey<'_> {
        let usable = self
            .replicas
            .iter()
            .map(|r| (r.addr.as_str(), r.fitness == Fitness::Up))
            .collect();
        let mut nearest: Vec<_> = self.nearest.iter().collect();
        nearest.sort();
        (usable, nearest)
    }
}

/// Each replica's usability and each shard's nearest node, in a comparable form.
type RoutingKey<'a> = (Vec<(&'a str, bool)>, Vec<(&'a String, &'a String)>);

/// The published view, its generation, and the sampler's wake-up.
#[derive(Debug, Default)]
pub struct ReplicaHealth {
    view: ArcSwap<ReplicaView>,
    /// Moves only when a routing choice changed, so workers rebuild what they cache rarely.
    generation: AtomicU64,
    /// `cluster.max_replica_lag`, set at start and by each reload.
    max_lag: AtomicU64,
    /// `cluster.availability_zone`, set at start and by each reload.
    zone: ArcSwap<String>,
    wake: Notify,
}

impl ReplicaHealth {
    pub fn new(max_lag: u64, zone: &str) -> Arc<ReplicaHealth> {
        let health = ReplicaHealth::default();
        health.set_max_lag(max_lag);
        health.set_zone(zone);
        Arc::new(health)
    }

    /// The proxy's availability zone (`nearest` prefers nodes in it); sampled next round.
    pub fn set_zone(&self, zone: &str) {
        if **self.zone.load() != zone {
            self.zone.store(Arc::new(zone.to_string()));
            self.wake.notify_one();
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn view(&self) -> Arc<ReplicaView> {
        self.view.load_full()
    }

    pub(crate) fn set_max_lag(&self, bytes: u64) {
        self.max_lag.store(bytes, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// A replica connection broke: sample now rather than within a second.
    pub(crate) fn suspect(&self) {
        self.wake.notify_one();
    }

    fn publish(&self, view: ReplicaView) {
        let changed = self.view.load().routing_key() != view.routing_key();
        self.view.store(Arc::new(view));
        if changed {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Sample every node of the current map, for ever (the caller drops it at shutdown).
pub(crate) async fn run_sampler(
    health: Arc<ReplicaHealth>,
    topology: Arc<Topology>,
    auth: Option<bytes::Bytes>,
    tls: Option<Arc<Connector>>,
) {
    let mut conns: HashMap<String, NodeConn> = HashMap::new();
    loop {
        tokio::select! {
            _ = health.wake.notified() => {}
            _ = tokio::time::sleep(SAMPLE_EVERY) => {}
        }
        let map = topology.current();
        let max_lag = health.max_lag.load(Ordering::Relaxed);
        let zone = health.zone.load_full();
        let mut sampler = Sampler {
            conns: &mut conns,
            auth: auth.as_ref(),
            tls: tls.as_deref(),
            zone: &zone,
        };
        let view = sampler.view_of(&map, max_lag, &health.view()).await;
        let known: Vec<&str> = map
            .nodes()
            .iter()
            .flat_map(|n| std::iter::once(&n.addr).chain(&n.replicas))
            .map(String::as_str)
            .collect();
        conns.retain(|addr, _| known.contains(&addr.as_str()));
        health.publish(view);
        tokio::time::sleep(SAMPLE_GAP).await;
    }
}

/// One round's connections and credentials.
struct Sampler<'a> {
    conns: &'a mut HashMap<String, NodeConn>,
    auth: Option<&'a bytes::Bytes>,
    tls: Option<&'a crate::tls::Connector>,
    /// The proxy's availability zone, or empty.
    zone: &'a str,
}

impl Sampler<'_> {
    /// Every shard's replicas judged, and its nearest node (`nearest_of`).
    async fn view_of(&mut self, map: &SlotMap, max_lag: u64, before: &ReplicaView) -> ReplicaView {
        let mut view = ReplicaView::default();
        for master in map.nodes().iter().filter(|n| !n.replicas.is_empty()) {
            let sampled = self.sample(&master.addr).await;
            let mut candidates: Vec<Candidate<'_>> = sampled
                .map(|(info, rtt)| (!info.in_zone, rtt, master.addr.as_str()))
                .into_iter()
                .collect();
            for addr in &master.replicas {
                let own = self.sample(addr).await;
                let in_zone = own.is_some_and(|(info, _)| info.in_zone);
                let state = judge(addr, &master.addr, sampled, own, max_lag);
                if state.fitness == Fitness::Up {
                    candidates.push((!in_zone, state.rtt_us, addr));
                }
                view.replicas.push(state);
            }
            if let Some(nearest) = nearest_of(&candidates, before.nearest(&master.addr)) {
                view.nearest
                    .insert(master.addr.clone(), nearest.to_string());
            }
        }
        view
    }

    /// INFO from `addr` and its round trip in microseconds; None when it did not answer.
    async fn sample(&mut self, addr: &str) -> Option<(NodeInfo, u64)> {
        const ARGS: &[&[u8]] = &[b"INFO", b"server", b"replication", b"persistence"];
        let started = Instant::now();
        let reply = tokio::time::timeout(SAMPLE_TIMEOUT, async {
            if !self.conns.contains_key(addr) {
                let conn = NodeConn::connect(addr, self.auth, self.tls).await.ok()?;
                self.conns.insert(addr.to_string(), conn);
            }
            self.conns.get_mut(addr)?.call(ARGS).await.ok()
        })
        .await;
        let rtt = started.elapsed().as_micros() as u64;
        let text = match reply {
            Ok(Some(resp::Value::BulkString(b))) => String::from_utf8_lossy(&b).into_owned(),
            // A timeout leaves a reply on its way: the connection cannot be reused.
            _ => {
                self.conns.remove(addr);
                return None;
            }
        };
        Some((replica_info::parse(&text, self.zone), rtt.max(1)))
    }
}

/// A shard's node that may serve reads: (outside the proxy's zone, round trip µs, address).
type Candidate<'a> = (bool, u64, &'a str);

/// A shard's nearest node among the master and its usable replicas: in the proxy's zone
/// when one is (a configured zone, `cluster.availability_zone`), then the fastest, unless
/// the previous nearest is in the same zone class and still within a quarter of the
/// fastest's round trip (round trips jitter; without the margin reads would hop between
/// nodes every second).
fn nearest_of<'a>(candidates: &[Candidate<'a>], before: Option<&str>) -> Option<&'a str> {
    let &(outside, best, fastest) = candidates.iter().min()?;
    let kept = before.and_then(|prev| {
        let &(prev_outside, rtt, addr) = candidates.iter().find(|(_, _, a)| *a == prev)?;
        (prev_outside == outside && rtt <= best + best / 4).then_some(addr)
    });
    Some(kept.unwrap_or(fastest))
}

/// A replica's state from its own sample and its master's.
fn judge(
    addr: &str,
    master: &str,
    master_info: Option<(NodeInfo, u64)>,
    own: Option<(NodeInfo, u64)>,
    max_lag: u64,
) -> ReplicaState {
    let mut state = ReplicaState {
        addr: addr.to_string(),
        master: master.to_string(),
        fitness: Fitness::Down,
        lag: 0,
        rtt_us: 0,
    };
    let Some((info, rtt)) = own else {
        return state;
    };
    state.rtt_us = rtt;
    state.lag = master_info.map_or(0, |(m, _)| m.offset.saturating_sub(info.offset));
    state.fitness = if info.loading {
        Fitness::Loading
    } else if !info.replica || info.link_down {
        // Not a replica (any more): a failover; the next map will say what it is.
        Fitness::Syncing
    } else if state.lag > max_lag {
        Fitness::Lagging
    } else {
        Fitness::Up
    };
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(replica: bool, offset: u64) -> Option<(NodeInfo, u64)> {
        let info = NodeInfo {
            replica,
            offset,
            ..NodeInfo::default()
        };
        Some((info, 100))
    }

    #[test]
    fn a_replica_is_judged_by_answer_link_and_lag() {
        let fit = |own, lag_limit| judge("r:1", "m:1", info(false, 5000), own, lag_limit).fitness;
        assert_eq!(fit(info(true, 4990), 100), Fitness::Up);
        assert_eq!(fit(info(true, 100), 100), Fitness::Lagging);
        assert_eq!(fit(None, 100), Fitness::Down);
        assert_eq!(fit(info(false, 5000), 100), Fitness::Syncing);
        let loading = NodeInfo {
            replica: true,
            loading: true,
            ..NodeInfo::default()
        };
        assert_eq!(fit(Some((loading, 1)), 100), Fitness::Loading);
    }

    #[test]
    fn the_nearest_node_is_in_the_proxys_zone_then_the_fastest() {
        // (outside the zone, round trip, address)
        let master = (true, 100, "m");
        let far_fast = (true, 50, "r1");
        let near_slow = (false, 400, "r2");
        assert_eq!(nearest_of(&[master, far_fast], None), Some("r1"));
        assert_eq!(nearest_of(&[master, far_fast, near_slow], None), Some("r2"));
        // Within a quarter of the fastest, the previous one stays, in its own zone class.
        assert_eq!(nearest_of(&[master, far_fast], Some("m")), Some("r1"));
        assert_eq!(
            nearest_of(&[(true, 100, "m"), (true, 90, "r1")], Some("m")),
            Some("m")
        );
        assert_eq!(
            nearest_of(&[master, far_fast, near_slow], Some("r1")),
            Some("r2")
        );
        assert_eq!(nearest_of(&[], None), None);
    }

    #[test]
    fn only_a_routing_change_moves_the_generation() {
        let health = ReplicaHealth::new(100, "");
        let state = |fitness, rtt_us| ReplicaState {
            addr: "r:1".into(),
            master: "m:1".into(),
            fitness,
            lag: 0,
            rtt_us,
        };
        let view = |fitness, rtt| ReplicaView {
            replicas: vec![state(fitness, rtt)],
            nearest: HashMap::new(),
        };
        health.publish(view(Fitness::Up, 10));
        assert_eq!(health.generation(), 1);
        health.publish(view(Fitness::Up, 20));
        assert_eq!(
            health.generation(),
            1,
            "a new round trip alone routes nothing"
        );
        health.publish(view(Fitness::Lagging, 20));
        assert_eq!(health.generation(), 2);
        assert!(!health.view().usable("r:1"));
    }
}
