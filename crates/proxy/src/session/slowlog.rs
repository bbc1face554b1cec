//! The session's side of SLOWLOG: stamp each read, mark each request with that stamp and its
//! bytes, and check the marks of the replies just handed to the writer.
//!
//! A mark rides on the first reply-queue entry its request pushes (as latency samples do), so
//! a fan-out request (MGET over several nodes) is one entry: its own argv, timed until the
//! merged reply is complete; a held request (BLPOP, EXEC) is timed from its read, including
//! the wait for the requests before it. A command queued in MULTI is not marked when it
//! is queued (it has not run) but with EXEC (`arm_exec`). Per request this costs a refcount on the request's
//! bytes and a queue slot; the clock is read once per read and once per
//! batch of replies.

use std::net::SocketAddr;

use crate::route::Counted;
use bytes::Bytes;
use resp::Request;

use crate::context::slowlog::{Client, Ring, Slowlog};
use crate::session::queue::{ClientCell, Mark};

/// Per-session state.
pub(crate) struct Tracker {
    /// The log's threshold, None when it is off (nothing is then armed or checked).
    threshold_us: Option<u64>,
    peer: Option<SocketAddr>,
    /// Coarse time of the latest read from the client's socket.
    read_us: u64,
    /// Reused buffer for the marks of answered requests.
    scratch: Vec<Mark>,
    /// Marks were armed and may still wait for their replies: recording goes on even if a
    /// reload turned the log off meanwhile, so they are drained, not left to pile up.
    armed: bool,
}

impl Tracker {
    pub(crate) fn new(threshold_us: Option<u64>, peer: Option<SocketAddr>) -> Tracker {
        Tracker {
            threshold_us,
            peer,
            read_us: 0,
            scratch: Vec::new(),
            armed: false,
        }
    }

    /// The client's address, as accept(2) gave it (None for a client without one).
    pub(crate) fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Bytes just came in from the client: the requests they complete start now.
    pub(crate) fn stamp_read(&mut self, log: &Slowlog) {
        // A reload may change the threshold; one relaxed load per read picks it up.
        self.threshold_us = log.threshold();
        if self.threshold_us.is_some() {
            self.read_us = log.now_us();
        }
    }

    /// Whether the log is on (as of the latest read).
    pub(crate) fn is_on(&self) -> bool {
        self.threshold_us.is_some()
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
        if self.threshold_us.is_none() {
            return;
        }
        let skip = unlogged || command.index.is_none() || command.skip_slowlog;
        self.armed |= !skip;
        let mark = (!skip).then(|| Mark {
            read_us: self.read_us,
            request: req.raw().clone(),
        });
        cell.arm_slowlog(mark);
    }

    /// Mark the entry EXEC pushes next with the commands its transaction runs (`queued`,
    /// their frames one after the other; None when nothing will run: no MULTI, or one
    /// aborted at queue time). Redis never logs EXEC but each command it ran, with that
    /// command's own time; the proxy sees only the transaction's, so each command of a
    /// slow transaction is logged with the whole transaction's time.
    pub(crate) fn arm_exec(&mut self, cell: &ClientCell, queued: Option<Bytes>) {
        if self.threshold_us.is_none() {
            return;
        }
        self.armed |= queued.is_some();
        let mark = queued.map(|request| Mark {
            read_us: self.read_us,
            request,
        });
        cell.arm_slowlog(mark);
    }

    /// Log the requests of `cell` whose replies were just handed to the writer, if they
    /// were slow, into `log` (and the worker's `ring`), under the client's `name`.
    pub(crate) fn record(
        &mut self,
        log: &Slowlog,
        ring: &Ring,
        cell: &ClientCell,
        name: Option<&Bytes>,
    ) {
        // The threshold in force when the reply comes, as Redis checks it after the command
        // ran: `CONFIG SET slowlog-log-slower-than -1` is not logged itself.
        self.threshold_us = log.threshold();
        let threshold = match self.threshold_us {
            Some(threshold) => threshold,
            // Turned off since: drain what was armed, log nothing.
            None if self.armed => u64::MAX,
            None => return,
        };
        let mut marks = std::mem::take(&mut self.scratch);
        cell.take_answered_marks(&mut marks);
        if !marks.is_empty() {
            let now = log.now_us();
            for mark in marks.drain(..) {
                let duration = now.saturating_sub(mark.read_us);
                if duration >= threshold {
                    let client = Client {
                        peer: self.peer,
                        name,
                    };
                    log.log(ring, &mark.request, duration, client);
                }
            }
        }
        self.scratch = marks;
        if self.threshold_us.is_none() {
            self.armed = cell.has_slow_marks();
        }
    }
}
