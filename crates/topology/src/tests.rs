//! Every test runs on tokio's paused clock (`start_paused`): the refresher's waits and the
//! scripted query latency are tokio time, so no assertion depends on wall-clock speed. (The
//! one std clock involved, the 10 s MOVED patch TTL, is far from what any test spends.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::slot_map::{NodeEntry, SlotMap, SlotRange};
use tokio::sync::oneshot;

use crate::{bootstrap, BootstrapError, Pacing, Source, Topology};

const MIN: Duration = Duration::from_millis(1000);

/// (first slot, last slot, addr, node id).
type Owner = (u16, u16, String, String);

/// Every node answers with the same scripted owners: (first slot, last slot, addr, id).
#[derive(Clone, Default)]
struct Script {
    ranges: Arc<Mutex<Vec<Owner>>>,
    queries: Arc<AtomicU64>,
    /// Time each query takes (paused time, so free in wall-clock terms).
    latency: Duration,
}

impl Script {
    fn set(&self, ranges: &[(u16, u16, &str, &str)]) {
        let owned = ranges
            .iter()
            .map(|&(s, e, a, i)| (s, e, a.to_string(), i.to_string()))
            .collect();
        *self.ranges.lock().unwrap() = owned;
    }

    fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }
}

impl Source for Script {
    type Error = String;

    async fn fetch(&mut self, _addr: &str, version: u64) -> Result<SlotMap, String> {
        self.queries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(self.latency).await;
        let ranges: Vec<SlotRange> = self
            .ranges
            .lock()
            .unwrap()
            .iter()
            .map(|(start, end, addr, id)| SlotRange {
                start: *start,
                end: *end,
                master: NodeEntry {
                    addr: addr.clone(),
                    id: Some(id.clone()),
                    replicas: vec![],
                },
            })
            .collect();
        SlotMap::from_ranges(version, &ranges).map_err(|e| e.to_string())
    }
}

const HALVES: &[(u16, u16, &str, &str)] = &[(0, 8191, "a:1", "ida"), (8192, 16383, "b:1", "idb")];

fn pacing() -> Pacing {
    Pacing {
        min_interval: MIN,
        max_extra: Duration::ZERO,
        periodic: Duration::from_secs(3600),
    }
}

/// A topology bootstrapped from `script`, with its refresher running; drop the sender to stop.
/// A topology bootstrapped from a script serving `HALVES`, with no refresher running.
async fn halves() -> (Script, Topology) {
    let script = Script::default();
    script.set(HALVES);
    let map = bootstrap(&["a:1".into()], &mut script.clone())
        .await
        .unwrap();
    (script, Topology::new(map, pacing()))
}

async fn started(script: &Script) -> (Arc<Topology>, oneshot::Sender<()>) {
    let map = bootstrap(&["a:1".to_string()], &mut script.clone())
        .await
        .unwrap();
    let topo = Arc::new(Topology::new(map, pacing()));
    let (tx, rx) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = rx.await;
    };
    tokio::spawn(topo.clone().run_refresher(script.clone(), shutdown));
    (topo, tx)
}

#[tokio::test(start_paused = true)]
async fn asks_during_a_refresh_earn_exactly_one_more() {
    let script = Script {
        latency: Duration::from_millis(300),
        ..Script::default()
    };
    script.set(HALVES);
    let (topo, _stop) = started(&script).await;
    tokio::time::sleep(MIN * 2).await;
    let before = script.queries();
    topo.request_refresh_now();
    tokio::time::sleep(Duration::from_millis(100)).await; // the refresh is now in flight
    for _ in 0..1000 {
        topo.request_refresh_now();
    }
    tokio::time::sleep(MIN * 10).await;
    assert_eq!(
        script.queries() - before,
        2,
        "one refresh, then one for the asks"
    );
    assert_eq!(topo.stats.refresh_requested.load(Ordering::Relaxed), 1001);
    assert!(!topo.refresh_pending());
}

#[tokio::test(start_paused = true)]
async fn a_steady_stream_of_asks_is_throttled_to_one_per_interval() {
    let script = Script::default();
    script.set(HALVES);
    let (topo, _stop) = started(&script).await;
    let before = script.queries();
    for _ in 0..100 {
        topo.request_refresh_now();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refreshes = script.queries() - before;
    // 10 s of asks at a 1 s minimum interval.
    assert!((9..=10).contains(&refreshes), "{refreshes} refreshes");
    assert!(topo.stats.refresh_throttled.load(Ordering::Relaxed) >= 9);
}

#[tokio::test(start_paused = true)]
async fn an_ask_from_an_older_map_is_free() {
    let script = Script::default();
    script.set(HALVES);
    let (topo, _stop) = started(&script).await;
    script.set(&[(0, 16383, "a:1", "ida")]);
    topo.request_refresh(1);
    tokio::time::sleep(MIN * 3).await;
    assert_eq!(topo.current().version(), 2, "new map installed");
    assert_eq!(topo.current().node_of(9000).unwrap().addr, "a:1");
    topo.request_refresh(1);
    assert_eq!(topo.stats.refresh_skipped_stale.load(Ordering::Relaxed), 1);
    assert!(!topo.refresh_pending());
}

#[tokio::test(start_paused = true)]
async fn foreign_empty_and_unchanged_maps_are_not_installed() {
    let (script, topo) = halves().await;
    let mut source = script.clone();
    assert!(topo.refresh_once(&mut source).await, "unchanged: answered");
    script.set(&[(0, 16383, "c:1", "idc")]);
    assert!(topo.refresh_once(&mut source).await, "foreign: answered");
    script.set(&[]);
    assert!(
        !topo.refresh_once(&mut source).await,
        "empty: no usable answer"
    );
    assert_eq!(topo.stats.maps_installed.load(Ordering::Relaxed), 0);
    assert_eq!(topo.stats.refresh_failed.load(Ordering::Relaxed), 1);
    assert_eq!(topo.current().node_of(0).unwrap().addr, "a:1");
}

#[tokio::test(start_paused = true)]
async fn a_moved_to_a_new_node_survives_a_lagging_refresh() {
    let (script, topo) = halves().await;
    topo.learn_moved(42, "c:1", 1);
    assert_eq!(topo.current().node_of(42).unwrap().addr, "c:1");
    assert!(topo.refresh_pending());
    assert!(topo.refresh_once(&mut script.clone()).await);
    assert_eq!(
        topo.current().node_of(42).unwrap().addr,
        "c:1",
        "the patch wins"
    );
    assert_eq!(topo.current().node_of(43).unwrap().addr, "a:1");
}

#[tokio::test(start_paused = true)]
async fn bootstrap_reports_the_last_failure() {
    let mut script = Script::default();
    let none: &[String] = &[];
    assert!(matches!(
        bootstrap(none, &mut script).await,
        Err(BootstrapError::NoSeeds)
    ));
    let err = bootstrap(&["x:1".into()], &mut script).await.unwrap_err();
    assert!(err.to_string().starts_with("x:1: "), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_reader_sees_each_new_map_at_its_next_read() {
    let (script, topo) = halves().await;
    let topo = Arc::new(topo);
    let reader = topo.reader();
    assert_eq!(reader.get().node_of(42).unwrap().addr, "a:1");
    // A MOVED to a node the map lacks installs a new map.
    topo.learn_moved(42, "c:1", 1);
    assert_eq!(reader.get().node_of(42).unwrap().addr, "c:1");
    // A refresh installs another: the reader's map is the one installed.
    script.set(&[(0, 16383, "a:1", "a")]);
    assert!(topo.refresh_once(&mut script.clone()).await);
    let map = reader.get();
    assert!(Arc::ptr_eq(&map, &topo.current()));
    assert_eq!(map.node_of(43).unwrap().addr, "a:1");
}

#[tokio::test(start_paused = true)]
async fn a_read_nested_in_another_gets_the_map_too() {
    let (_script, topo) = halves().await;
    let topo = Arc::new(topo);
    let reader = topo.reader();
    let (outer, inner) = reader.with(|outer| (outer.version(), reader.get().version()));
    assert_eq!(outer, inner);
    let nested = reader.with(|_| reader.with(|map| map.version()));
    assert_eq!(nested, topo.current().version());
}
