//! The per-worker client registry behind CLIENT LIST / INFO / KILL: a slab with a free list,
//! so accept and close are O(1) and never walk the clients (a list searched on every close
//! is what makes short connections expensive in Redis itself).
//!
//! ```text
//!   accept ─lock─▶ pop a free slot (or grow) ─▶ fill Meta ─▶ ClientHandle (slot index)
//!   close  ─lock─▶ clear Meta, push the index on the free list          (both O(1))
//!   CLIENT LIST/KILL (any worker) ─lock each worker's slab─▶ walk its occupied slots
//! ```
//!
//! The lock is taken by its owner only on connect, close and the rare name changes, so it is
//! uncontended; nothing per request touches it. What changes per request (last command, buffer
//! sizes, flags) lives in `Live`: relaxed atomics the session stores into, once per wake-up.
//! Slots and their `Live` are allocated once and reused, so churn allocates nothing.
//! `idle` and `age` read a coarse per-worker clock that a ticker advances, never a clock
//! read per request.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;

pub(crate) use mail::Mail;
use mail::Mailbox;

mod mail;

/// How often the coarse clock advances (Redis reports idle and age in whole seconds).
pub(crate) const TICK: Duration = Duration::from_millis(250);

/// One worker's clients.
#[derive(Debug)]
pub struct Registry {
    slab: Mutex<Slab>,
    epoch: Instant,
    /// Milliseconds since `epoch`, advanced every `TICK` by the worker.
    now_ms: AtomicU64,
    /// The listening address when it is a specific one (every client's `laddr`).
    listen: OnceLock<Option<SocketAddr>>,
}

#[derive(Debug, Default)]
struct Slab {
    slots: Vec<Slot>,
    free: Vec<usize>,
    live: usize,
}

#[derive(Debug)]
struct Slot {
    meta: Option<Meta>,
    live: Arc<Live>,
    /// Invalidations posted to this client by another's CLIENT TRACKING REDIRECT.
    mail: Mailbox,
}

/// What is fixed at connect or changes only on rare commands (SETNAME, SETINFO).
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: Option<SocketAddr>,
    pub fd: i32,
    pub created_ms: u64,
    pub name: Option<Bytes>,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    /// Wakes the session's task, so a kill from another worker is noticed at once.
    pub waker: Waker,
}

/// Flag bits in `Live::flags`.
pub(crate) mod flag {
    pub const PUBSUB: u32 = 1;
    pub const MULTI: u32 = 2;
    pub const BLOCKED: u32 = 4;
    pub const WRITABLE: u32 = 8;
    /// CLIENT TRACKING on (flag letter `t`).
    pub const TRACKING: u32 = 16;
    /// A WATCH in force (INFO's `watching_clients`).
    pub const WATCHING: u32 = 32;
    /// CLIENT NO-TOUCH on (flag letter `T`).
    pub const NO_TOUCH: u32 = 64;
    /// READONLY sent (flag letter `r`).
    pub const READONLY: u32 = 128;
    /// CLIENT CAPA REDIRECT sent (`capa=r`).
    pub const CAPA_REDIRECT: u32 = 256;
    /// CLIENT IMPORT-SOURCE on (Valkey's flag letter `I`).
    pub const IMPORT_SOURCE: u32 = 512;
}

/// What INFO's Clients section counts over one worker's clients.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Census {
    pub blocked: u64,
    pub pubsub: u64,
    pub tracking: u64,
    pub watching: u64,
    /// The largest query buffer and output memory right now (Redis reports the largest
    /// of the last seconds; the proxy's sessions publish theirs once per wake-up).
    pub max_qbuf: u64,
    pub max_omem: u64,
}

/// What the session publishes as it runs: single writer (its session), relaxed.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub killed: AtomicBool,
    /// CLIENT NO-EVICT on (shown as flag `e`).
    pub no_evict: AtomicBool,
    /// Table index of the last command + 1 (0: none yet).
    pub last_cmd: AtomicU32,
    pub active_ms: AtomicU64,
    pub qbuf: AtomicU64,
    pub rbs: AtomicU64,
    pub omem: AtomicU64,
    pub oll: AtomicU64,
    pub flags: AtomicU32,
    pub sub: AtomicU32,
    pub ssub: AtomicU32,
    pub multi: AtomicU32,
    /// Index in `Shared::users` + 1 (0: the default user).
    pub user: AtomicU32,
    pub resp: AtomicU32,
    /// The database SELECT chose.
    pub db: AtomicU32,
    /// `Slot::mail` holds something (set by the poster, cleared by the session).
    pub has_mail: AtomicBool,
    /// Keys WATCHed (Redis 8's and Valkey's `watch=`).
    pub watch: AtomicU32,
    /// Bytes read from and written to the client, and its commands (`tot-net-in`,
    /// `tot-net-out`, `tot-cmds`), published by the session once per wake-up.
    pub net_in: AtomicU64,
    pub net_out: AtomicU64,
    pub cmds: AtomicU64,
    /// While a blocking command waits on the session's own connection: the node and the
    /// node's id for that connection (0 until it answered CLIENT ID), for CLIENT UNBLOCK.
    pub blocked_on: Mutex<Option<(String, Arc<AtomicU64>)>>,
}

/// A snapshot of one client, for CLIENT LIST and KILL.
#[derive(Debug, Clone)]
pub(crate) struct ClientView {
    pub meta: Meta,
    pub live: Arc<Live>,
    pub now_ms: u64,
}

/// A session's place in its worker's registry; leaving removes it (O(1)).
#[derive(Debug)]
pub(crate) struct ClientHandle {
    pub id: u64,
    registry: Arc<Registry>,
    index: usize,
    pub live: Arc<Live>,
}

// === impl Registry ===

impl Default for Registry {
    fn default() -> Registry {
        Registry {
            slab: Mutex::default(),
            epoch: Instant::now(),
            now_ms: AtomicU64::new(0),
            listen: OnceLock::new(),
        }
    }
}

impl Registry {
    /// The coarse clock: milliseconds since the registry was made, within `TICK`.
    pub(crate) fn now_ms(&self) -> u64 {
        self.now_ms.load(Relaxed)
    }

    /// Advance the coarse clock (the worker's ticker).
    pub(crate) fn tick(&self) {
        self.now_ms
            .store(self.epoch.elapsed().as_millis() as u64, Relaxed);
    }

    /// `laddr` for every client when the proxy listens on one specific address (parsed once);
    /// None for a wildcard address, where each socket must be asked.
    pub(crate) fn listen_addr(&self, configured: &str) -> Option<SocketAddr> {
        *self.listen.get_or_init(|| {
            let addr: SocketAddr = configured.parse().ok()?;
            (!addr.ip().is_unspecified()).then_some(addr)
        })
    }

    /// Clients registered right now.
    pub(crate) fn len(&self) -> usize {
        self.lock().live
    }

    fn lock(&self) -> MutexGuard<'_, Slab> {
        // A panic elsewhere while holding it leaves the slab consistent (each step is one
        // field write), so a poisoned lock is still usable.
        self.slab.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register a new client: reuses a free slot, so steady churn allocates nothing.
    pub(crate) fn insert(self: &Arc<Self>, mut meta: Meta) -> ClientHandle {
        let now = self.now_ms();
        meta.created_ms = now;
        let id = meta.id;
        let mut slab = self.lock();
        slab.live += 1;
        let index = match slab.free.pop() {
            Some(i) => i,
            None => {
                slab.slots.push(Slot {
                    meta: None,
                    live: Arc::default(),
                    mail: Mailbox::default(),
                });
                slab.slots.len() - 1
            }
        };
        let slot = &mut slab.slots[index];
        slot.live.reset(now);
        slot.meta = Some(meta);
        ClientHandle {
            id,
            registry: self.clone(),
            index,
            live: slot.live.clone(),
        }
    }

    /// Every client of this worker (CLIENT LIST, KILL): O(slots), under the lock briefly.
    /// A killed client is gone already, as in Redis, even before its task has closed it.
    pub(crate) fn snapshot(&self, into: &mut Vec<ClientView>) {
        let now_ms = self.now_ms();
        let slab = self.lock();
        into.extend(slab.slots.iter().filter_map(|s| {
            if s.live.killed.load(Relaxed) {
                return None;
            }
            Some(ClientView {
                meta: s.meta.clone()?,
                live: s.live.clone(),
                now_ms,
            })
        }));
    }

    /// Count this worker's clients by state into `into` (INFO clients): O(clients), under
    /// the lock briefly, no allocation.
    pub(crate) fn census(&self, into: &mut Census) {
        let slab = self.lock();
        for slot in slab.slots.iter().filter(|s| s.meta.is_some()) {
            let live = &slot.live;
            if live.killed.load(Relaxed) {
                continue;
            }
            let flags = live.flags.load(Relaxed);
            let count = |bit: u32| u64::from(flags & bit != 0);
            into.blocked += count(flag::BLOCKED);
            into.pubsub += count(flag::PUBSUB);
            into.tracking += count(flag::TRACKING);
            into.watching += count(flag::WATCHING);
            into.max_qbuf = into.max_qbuf.max(live.qbuf.load(Relaxed));
            into.max_omem = into.max_omem.max(live.omem.load(Relaxed));
        }
    }

    /// Wake every client of this worker (a graceful shutdown changed phase).
    pub(crate) fn wake_all(&self) {
        let slab = self.lock();
        for meta in slab.slots.iter().filter_map(|s| s.meta.as_ref()) {
            meta.waker.wake_by_ref();
        }
    }

    /// Where client `id` waits on a blocking command, if it does (`Live::blocked_on`).
    pub(crate) fn blocked_on(&self, id: u64) -> Option<(String, Arc<AtomicU64>)> {
        let slab = self.lock();
        let slot = slab
            .slots
            .iter()
            .find(|s| s.meta.as_ref().is_some_and(|m| m.id == id))?;
        let on = slot
            .live
            .blocked_on
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        on.clone()
    }

    /// Mark the client `id` killed and wake it; false when it is no longer here.
    pub(crate) fn kill(&self, id: u64) -> bool {
        let slab = self.lock();
        let found = slab
            .slots
            .iter()
            .find(|s| s.meta.as_ref().is_some_and(|m| m.id == id));
        let Some(slot) = found else { return false };
        if slot.live.killed.swap(true, Relaxed) {
            return false;
        }
        if let Some(meta) = &slot.meta {
            meta.waker.wake_by_ref();
        }
        true
    }
}

// === impl Live ===

impl Live {
    fn reset(&self, now_ms: u64) {
        self.killed.store(false, Relaxed);
        self.no_evict.store(false, Relaxed);
        self.last_cmd.store(0, Relaxed);
        self.active_ms.store(now_ms, Relaxed);
        let counters = [
            &self.qbuf,
            &self.rbs,
            &self.omem,
            &self.oll,
            &self.net_in,
            &self.net_out,
            &self.cmds,
        ];
        for field in counters {
            field.store(0, Relaxed);
        }
        for field in [
            &self.flags,
            &self.sub,
            &self.ssub,
            &self.multi,
            &self.user,
            &self.db,
            &self.watch,
        ] {
            field.store(0, Relaxed);
        }
        self.resp.store(2, Relaxed);
        self.has_mail.store(false, Relaxed);
        *self.blocked_on.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Where a tracking client's invalidations go (`mail.rs`): found once, when tracking is
/// turned on; posting takes the registry lock once per invalidation.
#[derive(Debug, Clone)]
pub(crate) struct Recipient {
    pub id: u64,
    registry: Arc<Registry>,
    index: usize,
}

impl Registry {
    /// The client `id`, if this worker serves it.
    pub(crate) fn recipient(self: &Arc<Self>, id: u64) -> Option<Recipient> {
        let slab = self.lock();
        let index = slab
            .slots
            .iter()
            .position(|s| s.meta.as_ref().is_some_and(|m| m.id == id))?;
        Some(Recipient {
            id,
            registry: self.clone(),
            index,
        })
    }
}

impl Recipient {
    /// Post `mail` and wake the client; false when it has left (its slot holds another).
    pub(crate) fn post(&self, mail: Mail) -> bool {
        let mut slab = self.registry.lock();
        let Some(slot) = slab.slots.get_mut(self.index) else {
            return false;
        };
        let Some(meta) = slot.meta.as_ref().filter(|m| m.id == self.id) else {
            return false;
        };
        let waker = meta.waker.clone();
        slot.mail.post(mail);
        slot.live.has_mail.store(true, Relaxed);
        drop(slab);
        waker.wake();
        true
    }
}

// === impl ClientHandle ===

impl ClientHandle {
    /// Set by CLIENT KILL, from any worker.
    pub(crate) fn killed(&self) -> bool {
        self.live.killed.load(Relaxed)
    }

    /// The command just read, for CLIENT LIST's `cmd=`: one relaxed store per request.
    /// The client's last command, for CLIENT LIST's `cmd=`: its statistics index plus one
    /// in the low 16 bits, its subcommand's position plus one (0: none) in the high 16.
    pub(crate) fn note_command(&self, table_index: usize, sub: u16) {
        let packed = (table_index as u32 + 1) & 0xffff | u32::from(sub) << 16;
        self.live.last_cmd.store(packed, Relaxed);
    }

    /// Note activity: one coarse-clock load and one store, at most once per read.
    pub(crate) fn touch(&self) {
        self.live.active_ms.store(self.registry.now_ms(), Relaxed);
    }

    /// Take what other clients' tracking posted here (one relaxed load when nothing).
    pub(crate) fn take_mail(&self, into: &mut Vec<Mail>) {
        // A plain load first: the common case writes nothing.
        if !self.live.has_mail.load(Relaxed) || !self.live.has_mail.swap(false, Relaxed) {
            return;
        }
        self.registry.lock().slots[self.index].mail.take(into);
    }

    /// Change the rare fields (name, library) under the worker's lock.
    pub(crate) fn update(&self, f: impl FnOnce(&mut Meta)) {
        if let Some(meta) = self.registry.lock().slots[self.index].meta.as_mut() {
            f(meta);
        }
    }
}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        let mut slab = self.registry.lock();
        slab.slots[self.index].meta = None;
        slab.slots[self.index].mail.clear();
        slab.free.push(self.index);
        slab.live -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: u64) -> Meta {
        Meta {
            id,
            addr: "127.0.0.1:5000".parse().unwrap(),
            laddr: None,
            fd: 7,
            created_ms: 0,
            name: None,
            lib_name: None,
            lib_ver: None,
            waker: Waker::noop().clone(),
        }
    }

    #[test]
    fn mail_reaches_its_client_only_while_it_is_there() {
        let registry = Arc::new(Registry::default());
        let handle = registry.insert(meta(7));
        let to = registry.recipient(7).expect("client 7");
        assert!(registry.recipient(8).is_none());
        assert!(to.post(Mail::Keys(Bytes::from_static(b"*0\r\n"))));
        let mut got = Vec::new();
        handle.take_mail(&mut got);
        assert_eq!(got, [Mail::Keys(Bytes::from_static(b"*0\r\n"))]);
        drop(handle);
        let other = registry.insert(meta(9)); // reuses the slot
        assert!(!to.post(Mail::Flush));
        let mut got = Vec::new();
        other.take_mail(&mut got);
        assert!(got.is_empty());
    }

    #[test]
    fn slots_are_reused_and_removal_is_by_index() {
        let reg = Arc::new(Registry::default());
        let a = reg.insert(meta(1));
        let b = reg.insert(meta(2));
        assert_eq!(reg.len(), 2);
        drop(a);
        let c = reg.insert(meta(3));
        assert_eq!(c.index, 0, "the freed slot is reused");
        assert_eq!(reg.lock().slots.len(), 2, "churn does not grow the slab");
        let mut all = Vec::new();
        reg.snapshot(&mut all);
        let ids: Vec<u64> = all.iter().map(|v| v.meta.id).collect();
        assert_eq!(ids, [3, 2]);
        assert!(reg.kill(2) && b.killed());
        assert!(!reg.kill(2), "killed once");
        assert!(!reg.kill(1), "a departed client cannot be killed");
        all.clear();
        reg.snapshot(&mut all);
        assert_eq!(all.len(), 1, "a killed client is no longer listed");
        drop((b, c));
        assert_eq!(reg.len(), 0);
    }
}
