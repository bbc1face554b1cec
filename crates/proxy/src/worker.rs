//! A worker: one thread, one single-threaded event loop, its own listener (SO_REUSEPORT), its
//! own clients and its own backend connections.
//!
//! Nothing a worker touches per request is shared with another thread except the slot map,
//! which is read through an atomic pointer. Backend connections are found by slot through a
//! small vector indexed like the map's masters, rebuilt lazily when a new map is installed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering::Acquire;
use std::sync::Arc;
use std::time::Duration;

use cluster::slot_map::SlotMap;

use crate::backend::{Backend, Settings, Wire};
use crate::budget::Budget;
use crate::config::ReadPolicy;
use crate::context::live::Live;
use crate::context::{Shared, WorkerStats};
use crate::topology::Topology;

mod reads;
pub(crate) use reads::ReadChoice;

/// Per-worker state shared by its sessions (single-threaded: `Rc` and `Cell`).
pub(crate) struct Worker {
    pub shared: Arc<Shared>,
    pub stats: Arc<WorkerStats>,
    /// The connections of database 0, where every client starts (and the only one Redis
    /// Cluster has).
    db0: Pools,
    /// The connections of other databases (Valkey 9's `cluster-databases`), and those
    /// with CLIENT NO-TOUCH or IMPORT-SOURCE on, made when a client first needs them: a
    /// connection never changes database or mode, so clients of different ones never
    /// share one.
    numbered: RefCell<HashMap<Wire, Rc<Pools>>>,
    round_robin: Cell<usize>,
    /// This worker's share of `limits.memory_budget_bytes` and what its clients hold.
    pub budget: Rc<Budget>,
    /// The live config as this worker last saw it, and its generation (`live()`).
    live: RefCell<Arc<Live>>,
    live_seen: Cell<u64>,
    /// The slot map, read per request without arc_swap's guard (`MapReader`).
    map: ::topology::MapReader,
    /// `proxy.turn_quantum_bytes`: what a session moves per poll before yielding.
    pub turn_quantum: usize,
    /// `[mirror]`: the draw's xorshift state, and the one sink the copies' replies go to
    /// (made at the first copy).
    mirror_draw: Cell<u64>,
    mirror_sink: RefCell<Option<Rc<dyn crate::backend::ReplySink>>>,
    /// The NOLOOP tracking clients with connections of their own (`Wire::tracker`), by id.
    trackers: RefCell<HashMap<u64, Rc<TrackerLink>>>,
}

/// The id of the connections the worker's tracking clients in the default mode use
/// (`Wire::tracker`), which the nodes track (`session/tracking/own.rs`): no client has it.
pub(crate) const READS: u64 = u64::MAX;

/// What a NOLOOP tracking client's own connections need from its tracking
/// (`session/tracking/own.rs`): each master's receiver, whose id their set-up names in
/// `CLIENT TRACKING ON BCAST NOLOOP REDIRECT <id>`, and where their pushes and breaks go.
pub(crate) struct TrackerLink {
    /// Each master's receiver id, by address, once it answered.
    pub ids: RefCell<HashMap<Rc<str>, u64>>,
    /// Told of a push on the connections (`tracking-redir-broken`) and of a break.
    pub sink: Rc<dyn crate::backend::ReplySink>,
    /// A connection was replaced since the feed last looked: the node forgot what it
    /// tracked on it.
    pub replaced: Cell<bool>,
    /// BCAST (every key), else the default mode (the keys read on the connection).
    pub bcast: bool,
    /// NOLOOP: the node leaves out what the connections write.
    pub noloop: bool,
    /// The clients' own connections that name these receivers too (a default-mode
    /// client's transactions and blocking commands): closed with the shared ones.
    pub own: RefCell<Vec<std::rc::Weak<Backend>>>,
}

/// One database's shared connections.
#[derive(Default)]
struct Pools {
    /// Connections speaking RESP2 (`pools[0]`) and RESP3 (`pools[1]`, opened with HELLO 3
    /// only once a RESP3 client needs them): Redis then encodes each reply in the protocol
    /// its client asked for, and the proxy never converts a reply. `pools[2]` and `[3]`:
    /// the same towards replicas, for reads (`READONLY` sent at set-up; `reads.rs`).
    pools: [Pool; 4],
    /// Each protocol's usable replicas by master index (`reads.rs`).
    reads: [RefCell<reads::ReadCache>; 2],
}

/// One protocol's connections, by address and by the current map's master index.
#[derive(Default)]
struct Pool {
    backends: RefCell<HashMap<Rc<str>, Rc<Backend>>>,
    /// `by_index[i]` is the backend of the map's i-th master, for `indexed_version`.
    by_index: RefCell<Vec<Option<Rc<Backend>>>>,
    indexed_version: Cell<u64>,
}

// === impl Worker ===

impl Worker {
    pub(crate) fn new(shared: Arc<Shared>, stats: Arc<WorkerStats>) -> Rc<Worker> {
        let budget = Budget::new(
            shared.config.limits.memory_budget_bytes,
            shared.workers.len(),
            stats.clone(),
        );
        let live_seen = shared.live_gen.load(Acquire);
        Rc::new(Worker {
            budget,
            turn_quantum: shared.config.proxy.turn_quantum_bytes,
            live: RefCell::new(shared.live.load_full()),
            live_seen: Cell::new(live_seen),
            map: shared.topology.reader(),
            shared,
            stats,
            db0: Pools::default(),
            numbered: RefCell::new(HashMap::new()),
            round_robin: Cell::new(0),
            mirror_draw: Cell::new(0x9e37_79b9_7f4a_7c15),
            mirror_sink: RefCell::new(None),
            trackers: RefCell::new(HashMap::new()),
        })
    }

    /// Whether this request is among the `percent` in 100 copied (`[mirror]`): a xorshift
    /// draw, so which requests are copied does not follow a client's own pattern.
    pub(crate) fn mirror_drawn(&self, percent: u32) -> bool {
        if percent >= 100 {
            return true;
        }
        let mut x = self.mirror_draw.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.mirror_draw.set(x);
        (x % 100) < u64::from(percent)
    }

    /// The sink of the mirror copies' replies, made by `make` the first time.
    pub(crate) fn mirror_sink(
        &self,
        make: impl FnOnce() -> Rc<dyn crate::backend::ReplySink>,
    ) -> Rc<dyn crate::backend::ReplySink> {
        self.mirror_sink
            .borrow_mut()
            .get_or_insert_with(make)
            .clone()
    }

    /// The configuration in force: one load of the reload generation per call, and
    /// only after a reload a new snapshot (never a per-request `ArcSwap` load or a shared
    /// reference count). A snapshot still borrowed delays the switch to the next call.
    /// Inlined: a request reads it up to three times (profiled: ~30 instructions a call
    /// out of line), and only its rare refresh is a call.
    #[inline]
    pub(crate) fn live(&self) -> std::cell::Ref<'_, Arc<Live>> {
        let generation = self.shared.live_gen.load(Acquire);
        if generation != self.live_seen.get() {
            self.refresh_live(generation);
        }
        self.live.borrow()
    }

    #[cold]
    #[inline(never)]
    fn refresh_live(&self, generation: u64) {
        if let Ok(mut mine) = self.live.try_borrow_mut() {
            *mine = self.shared.live.load_full();
            self.live_seen.set(generation);
        }
    }

    /// `cluster.max_redirects` and `cluster.failover_hold_ms` as in force.
    pub(crate) fn redirect_limits(&self) -> (u8, u64) {
        let live = self.live();
        let cluster = &live.config.cluster;
        (cluster.max_redirects, cluster.failover_hold_ms)
    }

    /// An ASK redirect: counted, and its slot marked migrating (the status page, and
    /// multi-key requests of it go alone: `session/order.rs`).
    pub(crate) fn note_ask(&self, slot: u16) {
        WorkerStats::bump(&self.stats.redirects_ask);
        self.note_migrating(slot);
    }

    /// `slot` is being moved (an ASK or a TRYAGAIN from its owner).
    pub(crate) fn note_migrating(&self, slot: u16) {
        let version = self.shared.topology.current().version();
        self.shared.ask_slots.mark(slot, version);
    }

    /// Whether `slot` was seen migrating under `map`.
    pub(crate) fn is_migrating(&self, slot: u16, map: &SlotMap) -> bool {
        self.shared.ask_slots.is_marked(slot, map.version())
    }

    /// The slot map in force: one atomic load while it is unchanged.
    #[inline]
    pub(crate) fn map(&self) -> Arc<SlotMap> {
        self.map.get()
    }

    /// `f` of the slot map in force, without a reference count taken: the request path's
    /// way to read it.
    #[inline]
    pub(crate) fn with_map<R>(&self, f: impl FnOnce(&SlotMap) -> R) -> R {
        self.map.with(|map| f(map))
    }

    pub(crate) fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// `f` with the shared connections of database `db`: database 0's without a lookup.
    /// Where a read-only command for `slot` goes under `policy` (not `Master`), and the
    /// replica view generation that chose it (`reads.rs`).
    pub(crate) fn read_choice(
        &self,
        map: &SlotMap,
        slot: u16,
        policy: ReadPolicy,
        spread: usize,
        wire: Wire,
    ) -> (ReadChoice, u64) {
        let generation = self.shared.replicas.generation();
        let choice = self.with_pools(wire, |pools| {
            let cell = &pools.reads[usize::from(wire.resp3)];
            if !cell.borrow().fits(map, generation) {
                let view = self.shared.replicas.view();
                let fresh = reads::ReadCache::build(map, generation, &view, |addr| {
                    self.pooled(pools, addr, wire, true)
                });
                *cell.borrow_mut() = fresh;
            }
            let choice = cell.borrow().choose(map, slot, policy, spread);
            choice
        });
        (choice, generation)
    }

    fn with_pools<R>(&self, wire: Wire, f: impl FnOnce(&Pools) -> R) -> R {
        if wire.db == 0 && !wire.no_touch && !wire.import_source && wire.tracker == 0 {
            return f(&self.db0);
        }
        // The protocol picks a pool inside `Pools`, not the `Pools`.
        let key = Wire {
            resp3: false,
            ..wire
        };
        let pools = self.numbered.borrow_mut().entry(key).or_default().clone();
        f(&pools)
    }

    /// The connection to the master of `slot` in `map`, or None when the slot has no owner.
    pub(crate) fn backend_for_slot(
        &self,
        map: &SlotMap,
        slot: u16,
        wire: Wire,
    ) -> Option<Rc<Backend>> {
        let idx = usize::from(map.node_index(slot)?);
        self.with_pools(wire, |pools| {
            let pool = &pools.pools[usize::from(wire.resp3)];
            if pool.indexed_version.get() != map.version() {
                pool.by_index.borrow_mut().clear();
                pool.indexed_version.set(map.version());
            }
            if let Some(Some(b)) = pool.by_index.borrow().get(idx) {
                if wire.tracker == 0 || !b.is_closed() {
                    return Some(b.clone());
                }
            }
            let backend = self.pooled(pools, &map.nodes().get(idx)?.addr, wire, false);
            let mut by_index = pool.by_index.borrow_mut();
            if by_index.len() <= idx {
                by_index.resize(idx + 1, None);
            }
            by_index[idx] = Some(backend.clone());
            Some(backend)
        })
    }

    /// Some master, rotating, for keyless commands: behind routes by key prefix, one of
    /// the catch-all pool's servers (its slots come first).
    pub(crate) fn any_backend(&self, map: &SlotMap, wire: Wire) -> Option<Rc<Backend>> {
        let i = self.round_robin.get().wrapping_add(1);
        self.round_robin.set(i);
        if let Some(n) = self.shared.placement.keyless_slots() {
            let node = map.node_of((i % usize::from(n)) as u16)?;
            return Some(self.backend_for_addr(&node.addr, wire));
        }
        let n = map.nodes().len();
        if n == 0 {
            return None;
        }
        Some(self.backend_for_addr(&map.nodes()[i % n].addr, wire))
    }

    /// The connection to `addr`, created on first use (redirect targets may be new nodes).
    pub(crate) fn backend_for_addr(&self, addr: &str, wire: Wire) -> Rc<Backend> {
        self.with_pools(wire, |pools| self.pooled(pools, addr, wire, false))
    }

    /// A pool's connection to `addr`, as a master's or (`replica`) a replica's.
    fn pooled(&self, pools: &Pools, addr: &str, wire: Wire, replica: bool) -> Rc<Backend> {
        let pool = &pools.pools[usize::from(wire.resp3) + 2 * usize::from(replica)];
        if let Some(b) = pool.backends.borrow().get(addr) {
            if wire.tracker == 0 || !b.is_closed() {
                return b.clone();
            }
            // A NOLOOP tracking client's connection closed on purpose (a WATCH or a
            // transaction dropped): its successor tracks from now on, so what changed
            // meanwhile is flushed (`tracking/own.rs`).
            if let Some(link) = self.trackers.borrow().get(&wire.tracker) {
                link.replaced.set(true);
            }
        }
        let mut settings = self.settings(addr, wire);
        if replica {
            // `READONLY` at set-up (`reads.rs`). A replica's tracking would name no
            // receiver: a NOLOOP client's reads there need none (its writes go to masters).
            settings.tracking = None;
            settings.replica = Some(self.shared.replicas.clone());
            settings.readonly = !self.shared.placement.covers_every_key();
        }
        let backend = crate::backend::open(addr, settings, self.shared.topology.clone());
        if let Some(link) = self.trackers.borrow().get(&wire.tracker) {
            backend.report_to(link.sink.clone(), false);
        }
        pool.backends
            .borrow_mut()
            .insert(backend.addr.clone(), backend.clone());
        backend
    }

    /// Start giving NOLOOP tracking client `id` connections of its own.
    pub(crate) fn link_tracker(&self, id: u64, link: Rc<TrackerLink>) {
        self.trackers.borrow_mut().insert(id, link);
    }

    /// Close NOLOOP tracking client `id`'s own connections (its receivers changed, or it
    /// stopped): the next request opens new ones, named to the receivers of then.
    /// `unlink`: it stopped, no more are made.
    pub(crate) fn close_tracker(&self, id: u64, unlink: bool) {
        if unlink {
            self.trackers.borrow_mut().remove(&id);
        }
        self.numbered.borrow_mut().retain(|wire, pools| {
            if wire.tracker != id {
                return true;
            }
            for pool in &pools.pools {
                pool.backends.borrow().values().for_each(|b| b.close());
            }
            false
        });
        if let Some(link) = self.trackers.borrow().get(&id) {
            let own = std::mem::take(&mut *link.own.borrow_mut());
            own.iter()
                .filter_map(std::rc::Weak::upgrade)
                .for_each(|b| b.close());
        }
    }

    /// A new connection to `addr` not shared with anyone (a session's pub/sub one, a hub's
    /// stream), in database 0. Each request's deadline follows its command (`watchdog.rs`):
    /// a blocking one may wait as long as its own timeout says; a subscription owes no reply.
    pub(crate) fn new_backend(&self, addr: &str, resp3: bool) -> Rc<Backend> {
        let settings = self.settings(addr, Wire::protocol(resp3));
        crate::backend::open(addr, settings, self.shared.topology.clone())
    }

    /// A new connection to `addr` for one session (its dedicated one), in its database; it
    /// runs as a mirror user once `acting` (its set-up, `auth/mirror.rs`) succeeded; None
    /// for the backend user. It learns the node's id for it (CLIENT UNBLOCK).
    pub(crate) fn new_backend_as(
        &self,
        addr: &str,
        wire: Wire,
        acting: Option<bytes::Bytes>,
    ) -> Rc<Backend> {
        if wire.tracker != 0 && wire.tracker != READS {
            // A NOLOOP tracking client has one connection per node, which the node tracks
            // for it: its blocking commands and transactions run there too, or the node
            // would count their writes as another client's (`tracking/own.rs`). Such a
            // client has no mirror user (`acting`): its tracking is the shared one then.
            return self.backend_for_addr(addr, wire);
        }
        let mut settings = self.settings(addr, wire);
        settings.acting = acting;
        settings.learn_id = true;
        if wire.tracker == READS {
            // Its flush sink hears no invalidation: they go to the worker's receivers.
            settings.tracking = Some(self.tracking_setup(READS, addr, false));
        }
        let backend = crate::backend::open(addr, settings, self.shared.topology.clone());
        if let Some(link) = self.trackers.borrow().get(&wire.tracker) {
            // It names the worker's receivers: a lost one closes it too (`close_tracker`).
            let mut own = link.own.borrow_mut();
            own.retain(|b| b.strong_count() > 0);
            own.push(Rc::downgrade(&backend));
        }
        backend
    }

    fn settings(&self, addr: &str, wire: Wire) -> Settings {
        let live = self.live();
        let cluster = &live.config.cluster;
        Settings {
            connect_timeout: Duration::from_millis(cluster.connect_timeout_ms),
            request_timeout: Duration::from_millis(cluster.request_timeout_ms),
            slow_timeout: Duration::from_millis(cluster.slow_command_timeout_ms),
            resp3: wire.resp3,
            db: wire.db,
            no_touch: wire.no_touch,
            import_source: wire.import_source,
            tracker: wire.tracker,
            // A NOLOOP tracking client's connection may carry its blocking commands.
            learn_id: wire.tracker != 0,
            auth: self.shared.backend_auth.clone(),
            acting: None,
            tracking: (wire.tracker != 0).then(|| {
                let in_band = wire.tracker == READS && wire.resp3;
                self.tracking_setup(wire.tracker, addr, in_band)
            }),
            tls: self.shared.backend_tls.clone(),
            node: self.stats.nodes.node(addr),
            quantum: self.turn_quantum,
            replica: None,
            readonly: false,
        }
    }

    /// Close NOLOOP tracking client `id`'s own connections to `addr` (they named no
    /// receiver there, or an old one).
    pub(crate) fn close_tracker_to(&self, id: u64, addr: &str) {
        if let Some(link) = self.trackers.borrow().get(&id) {
            let own = link.own.borrow();
            own.iter()
                .filter_map(std::rc::Weak::upgrade)
                .filter(|b| &*b.addr == addr)
                .for_each(|b| b.close());
        }
        for (wire, pools) in self.numbered.borrow().iter() {
            if wire.tracker == id {
                for pool in &pools.pools {
                    if let Some(b) = pool.backends.borrow_mut().remove(addr) {
                        b.close();
                    }
                    pool.by_index.borrow_mut().clear();
                }
            }
        }
    }

    /// NOLOOP tracking client `id`'s connection `source` now tracks for it: close its
    /// connections to the same node in another protocol or database (the client moved on
    /// with HELLO or SELECT), which would name its own writes. True if one was closed.
    pub(crate) fn retire_tracker_twins(&self, id: u64, source: usize) -> bool {
        let numbered = self.numbered.borrow();
        let found = numbered.iter().find_map(|(_, pools)| {
            pools.pools.iter().find_map(|pool| {
                let backends = pool.backends.borrow();
                let b = backends
                    .values()
                    .find(|b| Rc::as_ptr(b) as usize == source)?;
                Some((b.addr.clone(), b.wire()))
            })
        });
        let Some((addr, wire)) = found else {
            return false;
        };
        let mut retired = false;
        for (key, pools) in numbered.iter() {
            if key.tracker != id {
                continue;
            }
            for pool in &pools.pools {
                let mut backends = pool.backends.borrow_mut();
                let twin = backends.get(&addr).filter(|b| b.wire() != wire).cloned();
                if let Some(twin) = twin {
                    backends.remove(&addr);
                    twin.close();
                    pool.by_index.borrow_mut().clear();
                    retired = true;
                }
            }
        }
        retired
    }

    /// `CLIENT TRACKING ON [NOLOOP] [BCAST] REDIRECT <id>`, naming the receiver of tracking
    /// client `tracker` on `addr`; a receiver not known yet is named 0, which the node
    /// refuses (the connection fails rather than run untracked). `in_band`: no REDIRECT,
    /// the connection carries its invalidations itself (a shared `READS` one in RESP3).
    fn tracking_setup(&self, tracker: u64, addr: &str, in_band: bool) -> bytes::Bytes {
        let trackers = self.trackers.borrow();
        let id = trackers
            .get(&tracker)
            .and_then(|link| link.ids.borrow().get(addr).copied())
            .unwrap_or(0);
        let link = trackers.get(&tracker);
        let mut out = bytes::BytesMut::new();
        let id = id.to_string();
        let mut args: Vec<&[u8]> = vec![b"CLIENT", b"TRACKING", b"ON"];
        if link.is_some_and(|link| link.noloop) {
            args.push(b"NOLOOP");
        }
        if link.is_some_and(|link| link.bcast) {
            args.push(b"BCAST");
        }
        if !in_band {
            args.extend([&b"REDIRECT"[..], id.as_bytes()]);
        }
        resp::encode_command(&mut out, &args);
        out.freeze()
    }
}
