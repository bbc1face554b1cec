//! The per-client reply queue: how replies reach a client in its own request order.
//!
//! ```text
//!   session ──push(seq)──▶ ReplyQueue ◀──deliver(seq, frame)── backend conns (any order)
//!      ▲                       │
//!      └──── pop_ready() ◀─────┘   only the head, only once its reply is there
//! ```
//!
//! Every request a client sends gets the next sequence number and an `Entry` at the back of
//! the queue, whether its reply comes from a backend, from a redirect, or from the proxy
//! itself. Backends deliver into the entry for their sequence number, in whatever order the
//! nodes answer; the session writes entries out strictly from the head.
//!
//! Invariants:
//! - `entries[i]` belongs to sequence number `head_seq + i`; nothing else is ever addressed.
//! - A reply is written to the client only from the head, so replies never cross.
//! - After `close`, deliveries are dropped: a closed client's in-flight requests still finish
//!   on the shared backend connections (the bytes are already there), and their replies are
//!   read and discarded so the backend stream stays in step.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Waker;

use bytes::Bytes;

use crate::budget::Budget;
use crate::context::near_cache::{WriteEpochs, Written};

/// What one request waiting for its reply costs besides the reply: its `Entry`, the
/// backend's bookkeeping and its share of the client's read buffer.
pub(crate) const ENTRY_COST: usize = std::mem::size_of::<Entry>() + 128;

/// The queue itself; see the module doc for the invariants.
#[derive(Default)]
pub(crate) struct ReplyQueue {
    head_seq: u64,
    entries: VecDeque<Entry>,
    /// (sequence number, part) whose reply is a MOVED or ASK the session has not looked at yet.
    redirected: Vec<(u64, u32)>,
    closed: bool,
}

/// A marked request whose reply was just handed to the writer and that a log's threshold
/// takes (`ClientCell::take_logged`): what the logs record.
pub(crate) struct Answered {
    pub read_us: u64,
    pub request: Bytes,
    pub request_bytes: u64,
    pub reply_bytes: u64,
}

/// The logs' thresholds as the session last read them, checked as each marked entry is
/// popped (`u64::MAX`: that log is off), and the logs' clock.
#[derive(Clone, Copy)]
pub(crate) struct SlowCheck {
    pub origin: tokio::time::Instant,
    pub slow_us: u64,
    pub request_bytes: u64,
    pub reply_bytes: u64,
}

impl SlowCheck {
    /// Whether a request read at `read_us` (`now_us` its clock's reading when it was popped),
    /// of `request_bytes`, answered with `reply_bytes`, reaches a threshold.
    fn takes(&self, read_us: u64, now_us: u64, request_bytes: u64, reply_bytes: u64) -> bool {
        now_us.saturating_sub(read_us) >= self.slow_us
            || request_bytes >= self.request_bytes
            || reply_bytes >= self.reply_bytes
    }
}

/// The part of a client that backends may touch: its reply queue and its task's waker.
/// No `Default`: a default `Budget` would build (and drop) a whole `WorkerStats`, 50 KB of
/// zeroed counters, on every connect.
pub(crate) struct ClientCell {
    queue: RefCell<ReplyQueue>,
    waker: RefCell<Option<Waker>>,
    /// Replies delivered but not yet written, in bytes (for output backpressure).
    queued_bytes: Cell<usize>,
    /// Frames from the client's pub/sub connections, forwarded as they arrive.
    pushes: RefCell<VecDeque<(usize, Bytes)>>,
    /// A pub/sub connection broke: the client must be told by closing its connection.
    lost: Cell<bool>,
    /// Pieces of the head entry's streamed reply went to the writer, its end did not: no
    /// push frame may be written until it is complete, or it would land inside the bulk.
    mid_reply: Cell<bool>,
    /// Arrays whose elements are entries of their own (`push_group`): the header's
    /// sequence number and the element count, and the elements of the one being written
    /// still to pop. No push frame is written inside such an array either.
    groups: RefCell<VecDeque<(u64, u32)>>,
    group_left: Cell<u32>,
    /// The sample the next pushed entry takes (armed by the session for sampled requests).
    next_sample: Cell<Option<(u16, tokio::time::Instant)>>,
    /// The command index (and whether it was refused) the next pushed entry takes.
    next_command: Cell<Option<Called>>,
    /// `[near_cache]`: what the next pushed entry's write bumps when its reply arrives.
    next_write: Cell<Option<Written>>,
    /// Samples whose reply was handed to the writer, for the session to record.
    finished: RefCell<Vec<Finished>>,
    /// `[hotkeys]`: the key the next pushed sampled entry takes, and those of sampled
    /// entries not yet popped, by sequence number. Empty while hot keys are off.
    next_key: Cell<Option<SampleKey>>,
    sample_keys: RefCell<VecDeque<(u64, SampleKey)>>,
    /// Bytes of the head entry's streamed reply already handed to the writer.
    head_streamed: Cell<usize>,
    /// Whole error replies handed to the writer, with their request's command, for the
    /// session to count (INFO errorstats and commandstats); empty unless an error was
    /// answered.
    errors: RefCell<Vec<(Option<Called>, Bytes)>>,
    /// SLOWLOG: the mark the next pushed entry takes, the thresholds its pop is checked
    /// against (None while every log is off), and the popped requests they took.
    next_slow: Cell<Option<Mark>>,
    slow_check: Cell<Option<SlowCheck>>,
    logged: RefCell<Vec<Answered>>,
    /// The worker's memory budget: every reply byte queued here is counted there too.
    budget: Rc<Budget>,
    /// Chosen for eviction by the budget, with the bytes it held then.
    evicted: Cell<Option<usize>>,
    /// Listed among the budget's largest clients.
    pub(crate) candidate: Cell<bool>,
    /// CLIENT NO-EVICT on: the budget never picks this client (Redis's `maxmemory-clients`).
    pub(crate) no_evict: Cell<bool>,
    /// A CLIENT IMPORT-SOURCE every master accepted, set by its side call before its reply
    /// is delivered, for the session to take into its info (`import_source.rs`).
    pub(crate) import_source: Cell<Option<bool>>,
    /// What the budget was charged for the entries still queued: their bookkeeping and the
    /// reply each request is expected to bring. Released an average share per entry popped,
    /// the remainder when the queue empties or closes, so it always returns to zero.
    inflight_charge: Cell<usize>,
    /// Execution order: lanes of tracked requests, and the requests waiting their turn.
    order: RefCell<crate::session::order::Order>,
    /// CLIENT REPLY: whether the next entries' replies are written.
    reply_mode: Cell<ReplyMode>,
    /// `[near_cache]`: the write epochs a write's reply bumps before the client sees it.
    write_epochs: std::cell::OnceCell<std::sync::Arc<WriteEpochs>>,
}

/// A sampled request's first key, for the hot-key board: the key (a slice of the request,
/// cut to the board's longest key), whether the command writes, and the request's size.
#[derive(Debug, Clone, Default)]
pub(crate) struct SampleKey {
    pub key: Bytes,
    pub write: bool,
    pub request_bytes: u32,
}

/// A sampled request whose reply went to the writer: its command, when it was dispatched,
/// the reply's size, and its key when `[hotkeys]` noted one.
#[derive(Debug)]
pub(crate) struct Finished {
    pub command: u16,
    pub started: tokio::time::Instant,
    pub reply_bytes: usize,
    pub key: Option<SampleKey>,
    /// The node's counters, for a request sent whole to one node.
    pub node: Option<std::sync::Arc<crate::backend::stats::NodeStats>>,
}

/// CLIENT REPLY's state, decided per request in request order as each entry is pushed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ReplyMode {
    /// Every reply is written.
    #[default]
    On,
    /// No reply is written until CLIENT REPLY ON.
    Off,
    /// The next `n` entries' replies are dropped (CLIENT REPLY SKIP: its own and the next
    /// command's), then On again.
    Skip(u8),
}

// === impl ClientCell ===

impl ClientCell {
    #[cfg(test)]
    pub(crate) fn new() -> Rc<ClientCell> {
        ClientCell::with_budget(Budget::new(0, 1, Default::default()))
    }

    /// A client whose queued replies count against `budget`.
    pub(crate) fn with_budget(budget: Rc<Budget>) -> Rc<ClientCell> {
        Rc::new(ClientCell {
            queue: Default::default(),
            waker: Default::default(),
            queued_bytes: Default::default(),
            pushes: Default::default(),
            lost: Default::default(),
            mid_reply: Default::default(),
            groups: Default::default(),
            group_left: Default::default(),
            next_sample: Default::default(),
            next_command: Default::default(),
            next_write: Default::default(),
            finished: Default::default(),
            next_key: Default::default(),
            sample_keys: Default::default(),
            head_streamed: Default::default(),
            errors: Default::default(),
            next_slow: Default::default(),
            slow_check: Default::default(),
            logged: Default::default(),
            budget,
            evicted: Default::default(),
            candidate: Default::default(),
            no_evict: Default::default(),
            import_source: Default::default(),
            inflight_charge: Default::default(),
            order: Default::default(),
            reply_mode: Default::default(),
            write_epochs: Default::default(),
        })
    }

    /// The next entry pushed is a write's: `written` is bumped again when its reply arrives.
    pub(crate) fn arm_write(&self, written: Written) {
        self.next_write.set(Some(written));
    }

    /// Count this client's writes for the near cache (`context/near_cache.rs`).
    pub(crate) fn count_writes(&self, epochs: std::sync::Arc<WriteEpochs>) {
        let _ = self.write_epochs.set(epochs);
    }

    fn add_queued(&self, n: usize) {
        self.queued_bytes.set(self.queued_bytes.get() + n);
        self.budget.add(n);
    }

    fn sub_queued(&self, n: usize) {
        self.queued_bytes
            .set(self.queued_bytes.get().saturating_sub(n));
        self.budget.release(n);
    }

    /// The budget chose this client to be closed (`bytes`: what it held then); wake it.
    pub(crate) fn evict(&self, bytes: usize) {
        self.evicted.set(Some(bytes));
        self.wake();
    }

    /// Bytes this client is charged for: replies queued, and requests not yet answered.
    pub(crate) fn charged(&self) -> usize {
        self.queued_bytes.get() + self.inflight_charge.get()
    }

    /// Set once the budget chose this client: the bytes it held then.
    pub(crate) fn evicted(&self) -> Option<usize> {
        self.evicted.get()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.queue.borrow().closed
    }

    /// Remember the session task's waker; cheap when it did not change.
    pub(crate) fn register(&self, waker: &Waker) {
        let mut slot = self.waker.borrow_mut();
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    fn wake(&self) {
        if let Some(w) = self.waker.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    /// Wake the session to look at its connections again (a keyspace connection broke, or
    /// the map may have changed).
    pub(crate) fn wake_up(&self) {
        self.wake();
    }

    /// Time the next entry pushed (a sampled request); `None` stops a sample that pushed none.
    pub(crate) fn arm_sample(&self, sample: Option<(u16, tokio::time::Instant)>) {
        self.next_sample.set(sample);
        self.next_key.take();
    }

    /// `[hotkeys]`: the key of the sampled request armed by `arm_sample`.
    pub(crate) fn arm_key(&self, key: SampleKey) {
        self.next_key.set(Some(key));
    }

    /// The command of the next entry pushed (None: not counted).
    pub(crate) fn arm_command(&self, command: Option<Called>) {
        self.next_command.set(command);
    }

    /// Samples completed since the last call.
    pub(crate) fn take_finished(&self, into: &mut Vec<Finished>) {
        into.append(&mut self.finished.borrow_mut());
    }

    /// The error replies handed to the writer since the last call.
    pub(crate) fn take_errors(&self, into: &mut Vec<(Option<Called>, Bytes)>) {
        let mut errors = self.errors.borrow_mut();
        if !errors.is_empty() {
            into.append(&mut errors);
        }
    }

    /// Give the next entry pushed a SLOWLOG mark (`None`: the request is not logged).
    pub(crate) fn arm_slowlog(&self, mark: Option<Mark>) {
        self.next_slow.set(mark);
    }

    /// The thresholds popped entries' marks are checked against (None: every log is off,
    /// and marks are dropped unchecked).
    pub(crate) fn set_slow_check(&self, check: Option<SlowCheck>) {
        self.slow_check.set(check);
    }

    /// The popped marked requests a threshold took, oldest first, if any.
    pub(crate) fn take_logged(&self, into: &mut Vec<Answered>) {
        let mut logged = self.logged.borrow_mut();
        if !logged.is_empty() {
            into.append(&mut logged);
        }
    }

    /// An entry's mark (`kind` the entry's), checked as its reply (`reply_bytes`, 0 if silenced) goes to the
    /// writer; `now_us` is read once per pop, at the first mark.
    fn check_mark(&self, mark: Mark, kind: &Kind, reply_bytes: usize, now_us: &mut Option<u64>) {
        let Some(check) = self.slow_check.get() else {
            return;
        };
        let now = *now_us.get_or_insert_with(|| check.origin.elapsed().as_micros() as u64);
        let reply_bytes = reply_bytes as u64;
        if !check.takes(mark.read_us, now, mark.request_bytes, reply_bytes) {
            return;
        }
        let request = mark.request.or_else(|| match kind {
            Kind::Sent(sent) => match &sent.resend {
                Resend::Frame(frame) => Some(frame.clone()),
                _ => None,
            },
            _ => None,
        });
        // Without its bytes (a whole request the proxy answered itself after all: a near
        // cache hit, a refusal after routing) there is nothing to log: such answers take
        // no node's time, and Redis logs no refusal.
        if let Some(request) = request {
            self.logged.borrow_mut().push(Answered {
                read_us: mark.read_us,
                request,
                request_bytes: mark.request_bytes,
                reply_bytes,
            });
        }
    }

    /// A big request on its way to a node is this client's memory until it is answered
    /// (it waits in the connection's write queue while the node reads slower than the
    /// client sends): charged with the request's entry, released with it.
    pub(crate) fn charge_request(&self, bytes: usize) {
        self.inflight_charge.set(self.inflight_charge.get() + bytes);
        self.budget.add(bytes);
    }

    /// CLIENT REPLY: applies from the next entry pushed (the CLIENT REPLY's own).
    pub(crate) fn set_reply_mode(&self, mode: ReplyMode) {
        self.reply_mode.set(mode);
    }

    pub(crate) fn reply_mode(&self) -> ReplyMode {
        self.reply_mode.get()
    }

    /// Whether the entry pushed now is silent, stepping a SKIP along.
    fn take_silence(&self) -> bool {
        match self.reply_mode.get() {
            ReplyMode::On => false,
            ReplyMode::Off => true,
            ReplyMode::Skip(n) => {
                let left = n.saturating_sub(1);
                self.reply_mode.set(match left {
                    0 => ReplyMode::On,
                    _ => ReplyMode::Skip(left),
                });
                true
            }
        }
    }

    /// Append an entry and return its sequence number.
    pub(crate) fn push(&self, mut entry: Entry) -> u64 {
        entry.silent = self.take_silence();
        let mut key = None;
        if let Some(sample) = self.next_sample.take() {
            entry.sampled = Some(sample);
            key = self.next_key.take();
        }
        entry.command = self.next_command.take();
        entry.written = self.next_write.take();
        entry.slow = self.next_slow.take();
        let seq = self.append(entry);
        if let Some(key) = key {
            self.sample_keys.borrow_mut().push_back((seq, key));
        }
        seq
    }

    /// Queue a push the proxy passes on (a pub/sub message, an invalidation) behind the
    /// replies owed: never silenced by CLIENT REPLY OFF or SKIP, as Redis delivers pushes
    /// whatever the reply mode, and leaving the marks armed for the next request alone.
    pub(crate) fn push_out_of_band(&self, frame: Bytes) -> u64 {
        self.append(Entry::ready(frame))
    }

    /// Charge `entry` and queue it; its sequence number.
    fn append(&self, entry: Entry) -> u64 {
        let mut q = self.queue.borrow_mut();
        let charge = match &entry.reply {
            Some(reply) => {
                self.add_queued(reply.len());
                crate::session::queue::ENTRY_COST
            }
            None => crate::session::queue::ENTRY_COST + self.budget.expected_reply(),
        };
        self.inflight_charge
            .set(self.inflight_charge.get() + charge);
        self.budget.add(charge);
        self.budget.count_requests(1, 0);
        q.entries.push_back(entry);
        q.head_seq + q.entries.len() as u64 - 1
    }

    /// Append an entry whose reply is already known.
    pub(crate) fn push_ready(&self, reply: Bytes) {
        self.push(Entry::ready(reply));
    }

    /// The header of an array of `n` elements that are the next `n` entries pushed (EXEC of
    /// a transaction replayed command by command, `transaction.rs`).
    pub(crate) fn push_group(&self, n: u32) {
        let seq = self.push(Entry::ready(Bytes::from(format!("*{n}\r\n"))));
        if n > 0 {
            self.groups.borrow_mut().push_back((seq, n));
        }
    }

    /// Entry `seq` was handed to the writer: count it against the array it belongs to, or
    /// start the array it heads.
    fn count_group(&self, seq: u64) {
        if self.group_left.get() > 0 {
            self.group_left.set(self.group_left.get() - 1);
        }
        let mut groups = self.groups.borrow_mut();
        if let Some(&(head, n)) = groups.front() {
            if head == seq {
                groups.pop_front();
                self.group_left.set(n);
            }
        }
    }

    /// A frame from a pub/sub connection (message, confirmation, or a reply in subscribed
    /// mode), to be written after whatever is already queued.
    /// `source` identifies the connection (for per-connection subscription counts).
    pub(crate) fn push_frame(&self, source: usize, frame: Bytes) {
        if self.queue.borrow().closed {
            return;
        }
        self.pushes.borrow_mut().push_back((source, frame));
        self.wake();
    }

    /// Take the pending pub/sub frames, in arrival order; none while a streamed reply is
    /// half written (they are taken once it is complete).
    /// Whether frames from pub/sub or tracking connections wait to be taken.
    pub(crate) fn has_pushes(&self) -> bool {
        !self.pushes.borrow().is_empty()
    }

    pub(crate) fn take_pushes(&self, into: &mut Vec<(usize, Bytes)>) {
        if self.mid_reply.get() || self.group_left.get() > 0 {
            return;
        }
        into.extend(self.pushes.borrow_mut().drain(..));
    }

    /// A pub/sub connection was lost (see `is_lost`).
    pub(crate) fn stream_lost(&self) {
        self.lost.set(true);
        self.wake();
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.get()
    }

    /// Take the redirects to follow; the session re-dispatches them with `with_entry`.
    /// Whether redirects wait to be followed.
    pub(crate) fn has_redirected(&self) -> bool {
        !self.queue.borrow().redirected.is_empty()
    }

    pub(crate) fn take_redirected(&self, into: &mut Vec<(u64, u32)>) {
        std::mem::swap(&mut self.queue.borrow_mut().redirected, into);
    }

    /// Run `f` on the entry for `seq`, if it is still queued.
    pub(crate) fn with_entry<R>(&self, seq: u64, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut q = self.queue.borrow_mut();
        let idx = seq.checked_sub(q.head_seq)? as usize;
        let entry = q.entries.get_mut(idx)?;
        if let Some(reply) = entry.reply.as_ref() {
            // The entry is about to be looked at again: its reply no longer counts as queued
            // output unless `f` leaves it there, which the next line re-adds.
            self.sub_queued(reply.len());
        }
        let out = f(entry);
        if let Some(reply) = entry.reply.as_ref() {
            self.add_queued(reply.len());
        }
        Some(out)
    }

    /// Move every ready reply at the head into `out`, in order. Returns how many bytes.
    pub(crate) fn pop_ready(&self, out: &mut VecDeque<Bytes>) -> usize {
        let mut q = self.queue.borrow_mut();
        let mut n = 0;
        let mut now_us = None;
        while let Some(head) = q.entries.front_mut() {
            // A streamed reply's pieces leave before its end (still budgeted until written).
            let mut pieces = 0;
            // Only a streamed reply has pieces: most entries skip the drain.
            if !head.partial.is_empty() {
                for piece in head.partial.drain(..) {
                    pieces += 1;
                    self.head_streamed
                        .set(self.head_streamed.get() + piece.len());
                    if head.silent {
                        self.sub_queued(piece.len());
                        continue;
                    }
                    n += piece.len();
                    self.queued_bytes
                        .set(self.queued_bytes.get().saturating_sub(piece.len()));
                    out.push_back(piece);
                }
            }
            if head.reply.is_none() {
                if pieces > 0 && !head.silent {
                    self.mid_reply.set(true);
                }
                break;
            }
            self.mid_reply.set(false);
            let share = self.inflight_charge.get() / q.entries.len();
            self.inflight_charge.set(self.inflight_charge.get() - share);
            self.budget.release(share);
            self.budget.count_requests(0, 1);
            let Some(entry) = q.entries.pop_front() else {
                break;
            };
            let streamed = self.head_streamed.replace(0);
            let Some(reply) = entry.reply else {
                break;
            };
            if let Some((command, started)) = entry.sampled {
                let key = self.sample_key(q.head_seq);
                self.finished.borrow_mut().push(Finished {
                    command,
                    started,
                    reply_bytes: streamed + reply.len(),
                    key,
                    node: match &entry.kind {
                        Kind::Sent(sent) => sent.sent_to.as_ref().map(|b| b.node.clone()),
                        _ => None,
                    },
                });
            }
            if let Some(mark) = entry.slow {
                let bytes = if entry.silent {
                    0
                } else {
                    streamed + reply.len()
                };
                self.check_mark(mark, &entry.kind, bytes, &mut now_us);
            }
            self.count_group(q.head_seq);
            q.head_seq += 1;
            if pieces == 0 && matches!(reply.first(), Some(b'-' | b'!')) {
                self.errors
                    .borrow_mut()
                    .push((entry.command, reply.clone()));
            }
            if entry.silent {
                // CLIENT REPLY OFF/SKIP: it ran; its reply is dropped, not written.
                self.sub_queued(reply.len());
                continue;
            }
            // Handed to the writer: still held (and budgeted) until written.
            self.queued_bytes
                .set(self.queued_bytes.get().saturating_sub(reply.len()));
            n += reply.len();
            out.push_back(reply);
        }
        n
    }

    /// The noted key of sampled entry `seq`, dropping those of entries gone before it.
    fn sample_key(&self, seq: u64) -> Option<SampleKey> {
        let mut keys = self.sample_keys.borrow_mut();
        while keys.front().is_some_and(|(s, _)| *s < seq) {
            keys.pop_front();
        }
        match keys.front() {
            Some((s, _)) if *s == seq => keys.pop_front().map(|(_, k)| k),
            _ => None,
        }
    }

    /// The sequence number of the oldest entry not yet handed to the writer (or of the next
    /// entry pushed, when none is queued).
    pub(crate) fn head_seq(&self) -> u64 {
        self.queue.borrow().head_seq
    }

    /// The sequence number the next entry pushed gets.
    pub(crate) fn next_seq(&self) -> u64 {
        let q = self.queue.borrow();
        q.head_seq + q.entries.len() as u64
    }

    /// Requests queued whose reply has not been handed to the writer yet.
    pub(crate) fn in_flight(&self) -> usize {
        self.queue.borrow().entries.len()
    }

    /// Whether every entry still queued is a local answer or a request sent on `conn`: a
    /// transaction's EXEC may follow its queued commands on that connection at once, as
    /// the node runs them in order there and nothing else of the client is owed.
    pub(crate) fn owed_only_by(&self, conn: &Rc<crate::backend::Backend>) -> bool {
        self.queue.borrow().entries.iter().all(|e| match &e.kind {
            Kind::Local => e.reply.is_some(),
            Kind::Sent(s) => s.sent_to.as_ref().is_some_and(|b| Rc::ptr_eq(b, conn)),
            Kind::Fanout(_) => false,
        })
    }

    /// Reply bytes delivered but not yet popped.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes.get()
    }

    /// The client is gone: drop everything, ignore later deliveries.
    pub(crate) fn close(&self) {
        let mut q = self.queue.borrow_mut();
        q.closed = true;
        self.budget.count_requests(0, q.entries.len());
        q.entries.clear();
        q.redirected.clear();
        self.logged.borrow_mut().clear();
        self.sample_keys.borrow_mut().clear();
        self.sub_queued(self.queued_bytes.get());
        self.budget.release(self.inflight_charge.replace(0));
        self.waker.borrow_mut().take();
        self.order().clear();
    }
}

mod deliver;
mod entry;
#[cfg(test)]
use crate::backend::is_redirect;
pub(crate) use entry::{Called, Conn, Entry, Kind, Mark, Resend, Sent};
mod ordering;
mod partial;
#[cfg(test)]
mod tests;
