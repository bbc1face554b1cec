//! The session's side of SLOWLOG and COMMANDLOG: stamp each read, mark each request with
//! that stamp and its bytes, and log the requests whose replies were just handed to the
//! writer past the slow log's threshold or the two size logs' (`context/slowlog.rs`).
//!
//! A mark rides on the first reply-queue entry its request pushes (as latency samples do), so
//! a fan-out request (MGET over several nodes) is one entry: its own argv, timed until the
//! merged reply is complete; a held request (BLPOP, EXEC) is timed from its read, including
//! the wait for the requests before it. A command queued in MULTI is not marked when it is
//! queued (it has not run) but with EXEC (`arm_exec`). The queue checks each mark against
//! the thresholds as its entry is popped (`ClientCell::check_mark`) and keeps only those a
//! threshold takes. Per request this costs a few words in its entry: a request sent whole
//! is not even copied by reference, its entry's frame is read if it is logged; the clock is
//! read once per read and once per batch of popped replies.

use std::net::SocketAddr;

use crate::route::Counted;
use bytes::Bytes;
use resp::Request;

use crate::context::slowlog::{Client, LogKind, Slowlog};
use crate::context::WorkerStats;
use crate::session::queue::{Answered, ClientCell, Mark, SlowCheck};

/// The thresholds in force, as of the latest read; None for a log that is off.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Thresholds {
    slow_us: Option<u64>,
    request_bytes: Option<u64>,
    reply_bytes: Option<u64>,
}

impl Thresholds {
    fn of(log: &Slowlog) -> Thresholds {
        Thresholds {
            slow_us: log.threshold(),
            request_bytes: log.size_threshold(LogKind::LargeRequest),
            reply_bytes: log.size_threshold(LogKind::LargeReply),
        }
    }

    fn any(&self) -> bool {
        self.slow_us.is_some() || self.request_bytes.is_some() || self.reply_bytes.is_some()
    }

    /// What the queue checks popped marks against (None while every log is off).
    fn check(&self, log: &Slowlog) -> Option<SlowCheck> {
        self.any().then(|| SlowCheck {
            origin: log.origin(),
            slow_us: self.slow_us.unwrap_or(u64::MAX),
            request_bytes: self.request_bytes.unwrap_or(u64::MAX),
            reply_bytes: self.reply_bytes.unwrap_or(u64::MAX),
        })
    }
}

/// Per-session state.
pub(crate) struct Tracker {
    /// Nothing is armed or checked while all three are off.
    thresholds: Thresholds,
    /// The log's generation `thresholds` were read at.
    generation: u64,
    peer: Option<SocketAddr>,
    /// Coarse time of the latest read from the client's socket.
    read_us: u64,
    /// The popped requests a threshold took, between two `record`s (kept for its capacity).
    answered: Vec<Answered>,
}

impl Tracker {
    pub(crate) fn new(log: &Slowlog, peer: Option<SocketAddr>, cell: &ClientCell) -> Tracker {
        let generation = log.generation();
        let thresholds = Thresholds::of(log);
        cell.set_slow_check(thresholds.check(log));
        Tracker {
            thresholds,
            generation,
            peer,
            read_us: 0,
            answered: Vec::new(),
        }
    }

    /// The client's address, as accept(2) gave it (None for a client without one).
    pub(crate) fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// CONFIG SET or a reload may have changed a threshold: read them again if so.
    fn refresh(&mut self, log: &Slowlog, cell: &ClientCell) {
        let generation = log.generation();
        if generation != self.generation {
            self.generation = generation;
            self.thresholds = Thresholds::of(log);
            cell.set_slow_check(self.thresholds.check(log));
        }
    }

    /// Bytes just came in from the client: the requests they complete start now.
    pub(crate) fn stamp_read(&mut self, log: &Slowlog, cell: &ClientCell) {
        self.refresh(log, cell);
        if self.thresholds.slow_us.is_some() {
            self.read_us = log.now_us();
        }
    }

    /// Whether a log is on (as of the latest read).
    pub(crate) fn is_on(&self) -> bool {
        self.thresholds.any()
    }

    /// Mark the entry `req` pushes next in `cell`; none for what Redis never logs (refused
    /// requests, unknown commands, EXEC and the other `skip_slowlog` commands), nor when
    /// `unlogged` (refused, or queued in MULTI: see `arm_exec`). `whole`: the request is
    /// routed to one node as it is, so its entry keeps its frame and the mark needs none.
    pub(crate) fn arm(
        &mut self,
        cell: &ClientCell,
        req: &Request,
        command: Counted,
        unlogged: bool,
        whole: bool,
    ) {
        if unlogged || command.index.is_none() || command.skip_slowlog || !self.thresholds.any() {
            return cell.arm_slowlog(None);
        }
        let request = (!whole).then(|| req.raw().clone());
        cell.arm_slowlog(Some(Mark {
            read_us: self.read_us,
            request_bytes: req.raw().len() as u64,
            request,
        }));
    }

    /// `arm` for a request streamed to its node as it comes (`upload.rs`): `probe` stands
    /// for its arguments, and `size` is its whole size in bytes.
    pub(crate) fn arm_upload(
        &mut self,
        cell: &ClientCell,
        probe: &Request,
        command: Counted,
        size: usize,
    ) {
        let skip = command.index.is_none() || command.skip_slowlog;
        self.arm_bytes(cell, (!skip).then(|| probe.raw().clone()), Some(size));
    }

    /// Mark the entry EXEC pushes next with the commands its transaction runs (`queued`,
    /// their frames one after the other; None when nothing will run: no MULTI, or one
    /// aborted at queue time). Redis never logs EXEC but each command it ran, with that
    /// command's own time; the proxy sees only the transaction's, so each command of a
    /// slow transaction is logged with the whole transaction's time (and sizes).
    pub(crate) fn arm_exec(&mut self, cell: &ClientCell, queued: Option<Bytes>) {
        self.arm_bytes(cell, queued, None);
    }

    fn arm_bytes(&mut self, cell: &ClientCell, request: Option<Bytes>, size: Option<usize>) {
        if !self.thresholds.any() {
            return cell.arm_slowlog(None);
        }
        let mark = request.map(|request| Mark {
            read_us: self.read_us,
            request_bytes: size.unwrap_or(request.len()) as u64,
            request: Some(request),
        });
        cell.arm_slowlog(mark);
    }

    /// Log the requests of `cell` whose replies were just handed to the writer and that a
    /// threshold took (the queue checked them as they were popped), into `log` (and the
    /// worker's rings), under the client's `name`.
    pub(crate) fn record(
        &mut self,
        log: &Slowlog,
        stats: &WorkerStats,
        cell: &ClientCell,
        name: Option<&Bytes>,
    ) {
        // The thresholds in force when the reply comes, as Redis checks them after the
        // command ran: `CONFIG SET slowlog-log-slower-than -1` is not logged itself.
        self.refresh(log, cell);
        cell.take_logged(&mut self.answered);
        if self.answered.is_empty() {
            return;
        }
        let now = self.thresholds;
        let never = u64::MAX;
        let client = Client {
            peer: self.peer,
            name,
        };
        let time = log.now_us();
        for mark in self.answered.drain(..) {
            let checks = [
                (
                    LogKind::Slow,
                    time.saturating_sub(mark.read_us),
                    now.slow_us,
                ),
                (LogKind::LargeRequest, mark.request_bytes, now.request_bytes),
                (LogKind::LargeReply, mark.reply_bytes, now.reply_bytes),
            ];
            for (kind, value, threshold) in checks {
                if value >= threshold.unwrap_or(never) {
                    log.log_as(kind, stats.log_ring(kind), &mark.request, value, client);
                }
            }
        }
    }
}
