//! The near cache (`[near_cache]`, docs/hotkeys.md): GET of a hot key answered from the
//! worker's memory, never with a value older than a write acknowledged before the GET
//! arrived.
//!
//! Each worker keeps its own cache and one RESP3 connection per master with `CLIENT
//! TRACKING ON` (default mode, no REDIRECT). A value is read for the cache on that
//! connection (GETRANGE and PTTL), so the master tracks the key for it and pushes the key's
//! invalidation on the same connection, after the read's reply, the moment anything
//! changes it: a write from any client, an expiry, an eviction, a FLUSHALL.
//!
//! ```text
//!   GET k, k hot (sampled rate) or matching a pattern ─▶ forwarded as always, and a fill:
//!       snapshot of the write epochs ─▶ GETRANGE k 0 max, PTTL k on the tracking connection
//!       ─▶ kept if no write of k's slot was dispatched or answered since the snapshot
//!   GET k, cached, epochs unchanged, owner unchanged, not expired ─▶ answered here
//!   >2 invalidate [k]  ─▶ k dropped (a fill of k on its way: not kept)
//!   >2 invalidate null, or a tracking connection lost ─▶ everything dropped
//! ```
//!
//! Writes through this proxy do not wait for the invalidation: they bump the shared write
//! epochs when dispatched and when answered (`context/near_cache.rs`), which every entry
//! checks. Writers that bypass the proxy are seen when their invalidation arrives.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::{Rc, Weak};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use cluster::slot_map::SlotMap;
use resp::{Request, Value};
use tokio::time::{Duration, Instant};

use crate::backend::Outgoing;
use crate::budget::Budget;
use crate::config::NearCacheConfig;
use crate::context::near_cache::{NearCacheCounters, Snapshot, WriteEpochs};
use crate::context::WorkerStats;
use crate::session::follow::{source_of, FollowTarget, Followers};
use crate::worker::Worker;

/// Told to each master's connection once: track what this connection reads.
const TRACK: &[u8] = b"*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\nON\r\n";
/// What an entry costs beyond its key and value (map slot, order slot, owner).
const ENTRY_COST: usize = 96;
/// Keys counted for the automatic policy per worker and second; more are not counted.
const RATE_KEYS: usize = 1024;
/// Keys longer than this are never cached nor counted (hot keys are short; a client's
/// 100 MB key must not be copied into the rate table or a fill).
const MAX_KEY: usize = 1024;
/// Fills on their way per worker; a key missed beyond this waits for a later read.
const MAX_FILLING: usize = 1024;
/// A key whose fill could not be kept (too long, another type, a redirect) is not read for
/// the cache again for this long, so a hot 1 MB value is not fetched at every miss.
const UNCACHEABLE_MS: u64 = 10_000;
/// Such keys remembered per worker at most (the oldest half forgotten beyond).
const MAX_UNCACHEABLE: usize = 1024;

thread_local! {
    /// This worker thread's cache, made at its first GET once `[near_cache]` is on; it
    /// lives as long as the thread.
    static CACHE: RefCell<Option<Rc<NearCache>>> = const { RefCell::new(None) };
}

/// One worker's cache.
pub(crate) struct NearCache {
    worker: Weak<Worker>,
    followers: RefCell<Option<Followers>>,
    state: RefCell<State>,
    epochs: Arc<WriteEpochs>,
    budget: Rc<Budget>,
    stats: Arc<WorkerStats>,
    max_bytes: usize,
    max_value: usize,
    patterns: Vec<Vec<u8>>,
    /// Sampled GETs of one key per second that make it hot on this worker.
    hot_sampled: u64,
    /// The second the rate counts are for.
    rate_second: Cell<u64>,
}

#[derive(Default)]
struct State {
    entries: HashMap<Bytes, Entry>,
    /// Keys in the order they were filled, with their generation: eviction takes the
    /// oldest fill (an entry refilled since is a newer generation and stays).
    order: VecDeque<(Bytes, u64)>,
    generation: u64,
    bytes: usize,
    /// The fills each connection owes replies to, in order.
    pending: HashMap<usize, VecDeque<Fill>>,
    /// Keys with a fill on its way (one at a time per key).
    filling: HashSet<Bytes>,
    /// Connections that refused `CLIENT TRACKING ON`: nothing read on them is kept.
    refused: HashSet<usize>,
    /// Sampled GETs per key this second (the automatic policy).
    rates: HashMap<Bytes, u64>,
    /// Keys whose value could not be cached, and when that was learned (`UNCACHEABLE_MS`).
    uncacheable: HashMap<Bytes, Instant>,
    /// Keys the automatic policy found hot, and the last second they were: a miss of one
    /// (its entry invalidated by a write) fills it again at once, not at its next sampled
    /// read. Kept one second after it cooled; at most two seconds' worth of `RATE_KEYS`.
    hot: HashMap<Bytes, u64>,
}

struct Entry {
    /// The GET reply's bulk frame; None for a missing key.
    value: Option<Bytes>,
    slot: u16,
    owner: Rc<str>,
    snapshot: Snapshot,
    expires: Option<Instant>,
    generation: u64,
    cost: usize,
}

struct Fill {
    key: Bytes,
    slot: u16,
    owner: Rc<str>,
    snapshot: Snapshot,
    sent_at: Instant,
    /// GETRANGE's answer once it came: the value's frame, or not cacheable (another
    /// type, too long, a redirect).
    got: Option<Result<Bytes, ()>>,
    /// An invalidation of the key arrived while the fill was on its way.
    poisoned: bool,
}

impl NearCache {
    /// The worker's cache; None when `[near_cache]` is off.
    pub(crate) fn of_this_worker(worker: &Rc<Worker>) -> Option<Rc<NearCache>> {
        let epochs = worker.shared.write_epochs.as_ref()?;
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if let Some(live) = cache.as_ref() {
                return Some(live.clone());
            }
            let new = NearCache::new(worker, epochs.clone());
            *cache = Some(new.clone());
            Some(new)
        })
    }

    fn new(worker: &Rc<Worker>, epochs: Arc<WriteEpochs>) -> Rc<NearCache> {
        let cfg: NearCacheConfig = worker.shared.config.near_cache.clone();
        let workers = worker.shared.workers.len().max(1) as u64;
        let per_worker_rate = cfg.auto_reads_per_second.div_ceil(workers);
        let sample = u64::from(crate::context::cmdstats::SAMPLE_EVERY);
        let cache = Rc::new(NearCache {
            worker: Rc::downgrade(worker),
            followers: RefCell::new(None),
            state: RefCell::new(State::default()),
            epochs,
            budget: worker.budget.clone(),
            stats: worker.stats.clone(),
            max_bytes: cfg.max_bytes / workers as usize,
            max_value: cfg.max_value_bytes,
            patterns: cfg.patterns.iter().map(|p| p.as_bytes().to_vec()).collect(),
            hot_sampled: match cfg.auto_reads_per_second {
                0 => u64::MAX,
                _ => per_worker_rate.div_ceil(sample).max(1),
            },
            rate_second: Cell::new(0),
        });
        let target: Weak<dyn FollowTarget> = Rc::downgrade(&cache) as Weak<NearCache>;
        *cache.followers.borrow_mut() = Some(Followers::new(target));
        cache
    }

    fn counters(&self) -> &NearCacheCounters {
        &self.stats.near_cache
    }

    /// The reply to `GET key` from the cache, if it holds a value it may serve: no write
    /// of the slot since its fill, the slot still on the node it was read from, not past
    /// its TTL.
    pub(crate) fn answer(
        &self,
        key: &[u8],
        slot: u16,
        map: &SlotMap,
        resp3: bool,
    ) -> Option<Bytes> {
        let valid = {
            let state = self.state.borrow();
            let entry = state.entries.get(key)?;
            let fresh = entry.slot == slot
                && entry.snapshot == self.epochs.snapshot(key, slot)
                && map.node_of(slot).is_some_and(|n| *n.addr == *entry.owner)
                && entry.expires.is_none_or(|at| Instant::now() < at);
            fresh.then(|| entry.value.clone())
        };
        match valid {
            Some(value) => {
                NearCacheCounters::bump(&self.counters().hits);
                Some(value.unwrap_or_else(|| null_reply(resp3)))
            }
            None => {
                self.remove(key);
                None
            }
        }
    }

    /// A GET of `key` the cache could not answer: fill it if a pattern names it, or if the
    /// automatic policy found it hot lately.
    pub(crate) fn missed(&self, key: &[u8], slot: u16) {
        let named = self
            .patterns
            .iter()
            .any(|p| crate::auth::glob_match(p, key))
            || self.state.borrow().hot.contains_key(key);
        if named {
            self.fill(key, slot);
        }
    }

    /// A sampled GET of `key` (one request in `SAMPLE_EVERY`): counted, and filled once it
    /// is read often enough this second.
    pub(crate) fn sampled(&self, key: &[u8], slot: u16, now_ms: u64) {
        if self.hot_sampled == u64::MAX {
            return;
        }
        let second = now_ms / 1000;
        let hot = {
            let mut state = self.state.borrow_mut();
            if self.rate_second.replace(second) != second {
                state.rates.clear();
                state.hot.retain(|_, last| *last + 1 >= second);
            }
            let full = state.rates.len() >= RATE_KEYS;
            let count = match state.rates.get_mut(key) {
                Some(c) => {
                    *c += 1;
                    *c
                }
                None if full => 0,
                None => {
                    state.rates.insert(Bytes::copy_from_slice(key), 1);
                    1
                }
            };
            let hot = count >= self.hot_sampled;
            if hot {
                match state.hot.get_mut(key) {
                    Some(last) => *last = second,
                    None => {
                        state.hot.insert(Bytes::copy_from_slice(key), second);
                    }
                }
            }
            hot
        };
        if hot {
            self.fill(key, slot);
        }
    }

    /// Read `key` for the cache on its master's tracking connection, unless held already
    /// or on its way.
    fn fill(&self, key: &[u8], slot: u16) {
        let Some(worker) = self.worker.upgrade() else {
            return;
        };
        // Near the worker's share of the memory budget, clients come first.
        if self.budget.pressed() {
            return;
        }
        {
            let mut state = self.state.borrow_mut();
            let busy = state.filling.len() >= MAX_FILLING;
            if busy || state.filling.contains(key) || state.entries.contains_key(key) {
                return;
            }
            if let Some(at) = state.uncacheable.get(key) {
                if at.elapsed() < Duration::from_millis(UNCACHEABLE_MS) {
                    return;
                }
                state.uncacheable.remove(key);
            }
        }
        self.follow(&worker);
        let map = worker.map();
        let Some(owner) = map.node_of(slot).map(|n| n.addr.clone()) else {
            return;
        };
        let conn = {
            let followers = self.followers.borrow();
            let Some(f) = followers.as_ref() else {
                return;
            };
            match f
                .conns
                .iter()
                .find(|(c, _)| *c.addr == *owner && c.breaks() == 0)
            {
                Some((c, _)) => c.clone(),
                None => return,
            }
        };
        let source = source_of(&conn);
        let key = Bytes::copy_from_slice(key);
        let fill = Fill {
            key: key.clone(),
            slot,
            owner: owner.as_str().into(),
            snapshot: self.epochs.snapshot(&key, slot),
            sent_at: Instant::now(),
            got: None,
            poisoned: false,
        };
        {
            let mut state = self.state.borrow_mut();
            if state.refused.contains(&source) {
                return;
            }
            state.filling.insert(key.clone());
            state.pending.entry(source).or_default().push_back(fill);
        }
        NearCacheCounters::bump(&self.counters().fills);
        let sink = self.followers.borrow().as_ref().map(|f| f.sink.clone());
        if let Some(sink) = sink {
            let limit = self.max_value;
            conn.send(Outgoing::stream(read_and_pttl(&key, limit), sink));
        }
    }

    /// Match the tracking connections to the map's masters; a lost one drops everything
    /// (its invalidations may have been missed).
    fn follow(&self, worker: &Worker) {
        let topology = worker.topology();
        let map = topology.current();
        let (lost, live) = {
            let mut followers = self.followers.borrow_mut();
            let Some(f) = followers.as_mut() else {
                return;
            };
            let Some(followed) = f.follow(&map, None, topology) else {
                return;
            };
            f.open_resp3(worker, followed.missing, TRACK);
            let live: HashSet<usize> = f.conns.iter().map(|(c, _)| source_of(c)).collect();
            (followed.lost, live)
        };
        {
            // Fills on connections closed since are never answered.
            let mut state = self.state.borrow_mut();
            let gone: Vec<usize> = state
                .pending
                .keys()
                .filter(|s| !live.contains(s))
                .copied()
                .collect();
            for source in gone {
                for fill in state.pending.remove(&source).into_iter().flatten() {
                    state.filling.remove(&fill.key);
                }
            }
            state.refused.retain(|s| live.contains(s));
        }
        if lost {
            self.drop_all();
        }
    }

    fn on_frame(&self, source: usize, frame: Bytes) {
        if frame.first() == Some(&b'>') {
            return self.on_push(&frame);
        }
        // The set-up's answer comes before any fill's.
        let setup = {
            let mut followers = self.followers.borrow_mut();
            match followers.as_mut().and_then(|f| f.find(source)) {
                Some((_, owed)) if *owed > 0 => {
                    *owed -= 1;
                    true
                }
                Some(_) => false,
                None => return,
            }
        };
        if setup {
            if frame.first() == Some(&b'-') {
                tracing::warn!(
                    "near cache: a master refused CLIENT TRACKING ON ({}); nothing it serves is cached",
                    String::from_utf8_lossy(frame.strip_suffix(b"\r\n").unwrap_or(&frame))
                );
                let mut state = self.state.borrow_mut();
                state.refused.insert(source);
            }
            return;
        }
        let done = {
            let mut state = self.state.borrow_mut();
            let refused = state.refused.contains(&source);
            let Some(queue) = state.pending.get_mut(&source) else {
                return;
            };
            let Some(fill) = queue.front_mut() else {
                return;
            };
            match fill.got {
                None => {
                    fill.got = Some(match bulk_len(&frame) {
                        Some(len) if len <= self.max_value => Ok(frame),
                        _ => Err(()),
                    });
                    if refused {
                        fill.poisoned = true;
                    }
                    return;
                }
                Some(_) => {
                    let fill = queue.pop_front();
                    fill.map(|f| (f, pttl(&frame)))
                }
            }
        };
        if let Some((fill, ttl)) = done {
            self.state.borrow_mut().filling.remove(&fill.key);
            self.keep(fill, ttl);
        }
    }

    /// A fill's two answers came: keep the value if nothing may have changed it since the
    /// snapshot, and PTTL gave its lifetime (-1: none; -2: no key, whose GETRANGE read "").
    fn keep(&self, fill: Fill, ttl: Option<i64>) {
        let value = match fill.got {
            Some(Ok(value)) => value,
            Some(Err(())) => return self.uncacheable(fill.key),
            None => return,
        };
        let value = match ttl {
            Some(-2) => None,
            _ => Some(value),
        };
        if fill.poisoned || self.epochs.snapshot(&fill.key, fill.slot) != fill.snapshot {
            return;
        }
        let expires = match ttl {
            Some(ms) if ms >= 0 => Some(fill.sent_at + Duration::from_millis(ms as u64)),
            Some(-1 | -2) => None,
            _ => return,
        };
        let cost = ENTRY_COST + fill.key.len() + value.as_ref().map_or(0, Bytes::len);
        if cost > self.max_bytes {
            return;
        }
        self.remove(&fill.key);
        let mut state = self.state.borrow_mut();
        while state.bytes + cost > self.max_bytes {
            let Some((key, generation)) = state.order.pop_front() else {
                break;
            };
            if state
                .entries
                .get(&key)
                .is_some_and(|e| e.generation == generation)
            {
                if let Some(e) = state.entries.remove(&key) {
                    state.bytes -= e.cost;
                    self.budget.release(e.cost);
                    NearCacheCounters::bump(&self.counters().evicted);
                }
            }
        }
        state.generation += 1;
        let generation = state.generation;
        state.order.push_back((fill.key.clone(), generation));
        state.bytes += cost;
        self.budget.add(cost);
        state.entries.insert(
            fill.key,
            Entry {
                value,
                slot: fill.slot,
                owner: fill.owner,
                snapshot: fill.snapshot,
                expires,
                generation,
                cost,
            },
        );
        NearCacheCounters::bump(&self.counters().filled);
        self.publish(&state);
    }

    /// Remember that `key` could not be cached, for `UNCACHEABLE_MS`.
    fn uncacheable(&self, key: Bytes) {
        let mut state = self.state.borrow_mut();
        if state.uncacheable.len() >= MAX_UNCACHEABLE {
            let mut ages: Vec<Instant> = state.uncacheable.values().copied().collect();
            ages.sort_unstable();
            let median = ages[ages.len() / 2];
            state.uncacheable.retain(|_, at| *at > median);
        }
        state.uncacheable.insert(key, Instant::now());
    }

    /// `>2 invalidate [keys]` (or null: everything) from a master.
    fn on_push(&self, frame: &Bytes) {
        let Ok(Some((Value::Push(items), _))) = resp::decode(frame) else {
            return;
        };
        if items.first().and_then(Value::as_bytes) != Some(b"invalidate".as_slice()) {
            return;
        }
        match items.get(1) {
            Some(Value::Array(keys)) => {
                for key in keys.iter().filter_map(Value::as_bytes) {
                    self.invalidate(key);
                }
            }
            _ => self.drop_all(),
        }
    }

    fn invalidate(&self, key: &[u8]) {
        {
            let mut state = self.state.borrow_mut();
            for fill in state.pending.values_mut().flatten() {
                if fill.key == key {
                    fill.poisoned = true;
                }
            }
        }
        if self.remove(key) {
            NearCacheCounters::bump(&self.counters().invalidated);
        }
    }

    fn remove(&self, key: &[u8]) -> bool {
        let mut state = self.state.borrow_mut();
        let Some(e) = state.entries.remove(key) else {
            return false;
        };
        state.bytes -= e.cost;
        self.budget.release(e.cost);
        self.publish(&state);
        true
    }

    /// Everything dropped, and every fill on its way disowned.
    fn drop_all(&self) {
        let mut state = self.state.borrow_mut();
        let dropped = state.entries.len() as u64;
        self.budget.release(state.bytes);
        state.entries.clear();
        state.order.clear();
        state.bytes = 0;
        for fill in state.pending.values_mut().flatten() {
            fill.poisoned = true;
        }
        self.counters()
            .invalidated
            .fetch_add(dropped, std::sync::atomic::Ordering::Relaxed);
        self.publish(&state);
    }

    fn publish(&self, state: &State) {
        use std::sync::atomic::Ordering::Relaxed;
        let c = self.counters();
        c.entries.store(state.entries.len() as u64, Relaxed);
        c.bytes.store(state.bytes as u64, Relaxed);
    }
}

impl FollowTarget for NearCache {
    fn push_frame(&self, source: usize, frame: Bytes) {
        self.on_frame(source, frame);
    }

    /// Once a second, and at once when a connection breaks.
    fn wake_up(&self) {
        if let Some(worker) = self.worker.upgrade() {
            self.follow(&worker);
        }
    }
}

impl Drop for NearCache {
    fn drop(&mut self) {
        self.budget.release(self.state.get_mut().bytes);
        if let Some(f) = self.followers.get_mut().as_ref() {
            f.close();
        }
    }
}

/// The key of a `GET key` request the cache may answer: exactly GET and one key, of at most
/// `MAX_KEY` bytes.
pub(crate) fn get_key(req: &Request) -> Option<&[u8]> {
    let get = req.argc() == 2 && req.arg(0).eq_ignore_ascii_case(b"get");
    (get && req.arg(1).len() <= MAX_KEY).then(|| req.arg(1))
}

fn null_reply(resp3: bool) -> Bytes {
    Bytes::from_static(match resp3 {
        true => b"_\r\n",
        false => b"$-1\r\n",
    })
}

/// `GETRANGE key 0 limit` and `PTTL key`, one write: the value (one byte more than
/// `limit` says it is too long, and a hot key of 100 MB is never read whole for the
/// cache), and whether the key exists (GETRANGE answers "" for a missing key, PTTL -2).
fn read_and_pttl(key: &[u8], limit: usize) -> Bytes {
    let mut out = BytesMut::with_capacity(2 * key.len() + 80);
    let end = limit.to_string();
    let klen = key.len();
    out.extend_from_slice(format!("*4\r\n$8\r\nGETRANGE\r\n${klen}\r\n").as_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(format!("\r\n$1\r\n0\r\n${}\r\n{end}\r\n", end.len()).as_bytes());
    out.extend_from_slice(format!("*2\r\n$4\r\nPTTL\r\n${klen}\r\n").as_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(b"\r\n");
    out.freeze()
}

/// The length of a bulk string frame's payload; None for any other frame.
fn bulk_len(frame: &[u8]) -> Option<usize> {
    let rest = frame.strip_prefix(b"$")?;
    let end = rest.iter().position(|&b| b == b'\r')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// PTTL's answer, if it is one.
fn pttl(frame: &[u8]) -> Option<i64> {
    let digits = frame.strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fill_is_getrange_then_pttl_in_one_write() {
        assert_eq!(
            &read_and_pttl(b"k1", 100)[..],
            &b"*4\r\n$8\r\nGETRANGE\r\n$2\r\nk1\r\n$1\r\n0\r\n$3\r\n100\r\n*2\r\n$4\r\nPTTL\r\n$2\r\nk1\r\n"[..]
        );
        assert_eq!(bulk_len(b"$5\r\nhello\r\n"), Some(5));
        assert_eq!(bulk_len(b"-WRONGTYPE x\r\n"), None);
        assert_eq!(pttl(b":-2\r\n"), Some(-2));
        assert_eq!(pttl(b":1500\r\n"), Some(1500));
        assert_eq!(pttl(b"-ERR x\r\n"), None);
    }

    #[test]
    fn only_a_plain_get_of_one_key_is_answered() {
        let req = |parts: &[&[u8]]| Request::from_args(parts);
        assert_eq!(get_key(&req(&[b"get", b"k"])), Some(&b"k"[..]));
        assert_eq!(get_key(&req(&[b"GETEX", b"k"])), None);
        assert_eq!(get_key(&req(&[b"GET", b"k", b"x"])), None);
        let long = vec![b'k'; MAX_KEY + 1];
        assert_eq!(
            get_key(&req(&[b"GET", &long])),
            None,
            "a key too long to cache"
        );
    }
}
