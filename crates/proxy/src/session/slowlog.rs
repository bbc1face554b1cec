//! The session's side of SLOWLOG and COMMANDLOG: stamp each read, mark each request with
//! that stamp and its bytes, and check the marks of the replies just handed to the writer
//! against the slow log's threshold and the two size logs' (`context/slowlog.rs`).
//!
//! A mark rides on the first reply-queue entry its request pushes (as latency samples do), so
//! a fan-out request (MGET over several nodes) is one entry: its own argv, timed until the
//! merged reply is complete; a held request (BLPOP, EXEC) is timed from its read, including
//! the wait for the requests before it. A command queued in MULTI is not marked when it is
//! queued (it has not run) but with EXEC (`arm_exec`). Per request this costs a refcount on
//! the request's bytes and a queue slot; the clock is read once per read and once per batch
//! of replies.

use std::net::SocketAddr;

use crate::route::Counted;
use bytes::Bytes;
use resp::Request;

use crate::context::slowlog::{Client, LogKind, Slowlog};
use crate::context::WorkerStats;
use crate::session::queue::{ClientCell, Mark};

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
    /// Marks were armed and may still wait for their replies: recording goes on even if a
    /// reload turned the logs off meanwhile, so they are drained, not left to pile up.
    armed: bool,
}

impl Tracker {
    pub(crate) fn new(log: &Slowlog, peer: Option<SocketAddr>, cell: &ClientCell) -> Tracker {
        let generation = log.generation();
        let thresholds = Thresholds::of(log);
        cell.size_replies(thresholds.reply_bytes.is_some());
        Tracker {
            thresholds,
            generation,
            peer,
            read_us: 0,
            armed: false,
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
            cell.size_replies(self.thresholds.reply_bytes.is_some());
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
    /// `unlogged` (refused, or queued in MULTI: see `arm_exec`).
    pub(crate) fn arm(
        &mut self,
        cell: &ClientCell,
        req: &Request,
        command: Counted,
        unlogged: bool,
    ) {
        let skip = unlogged || command.index.is_none() || command.skip_slowlog;
        self.arm_bytes(cell, (!skip).then(|| req.raw().clone()), None);
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
            return;
        }
        self.armed |= request.is_some();
        let mark = request.map(|request| Mark {
            read_us: self.read_us,
            request_bytes: size.unwrap_or(request.len()) as u64,
            request,
            reply_bytes: 0,
        });
        cell.arm_slowlog(mark);
    }

    /// Log the requests of `cell` whose replies were just handed to the writer, if they
    /// were slow or large, into `log` (and the worker's rings), under the client's `name`.
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
        let now = self.thresholds;
        if !now.any() && !self.armed {
            return;
        }
        // Turned off since: drain what was armed, log nothing.
        let never = u64::MAX;
        let client = Client {
            peer: self.peer,
            name,
        };
        // Read once per batch of replies, and only when one of them was marked.
        let mut time = None;
        cell.drain_answered_marks(|mark| {
            let time = *time.get_or_insert_with(|| log.now_us());
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
        });
        if !now.any() {
            self.armed = cell.has_slow_marks();
        }
    }
}
