//! The session's side of SLOWLOG: stamp each read, mark each request with that stamp and its
//! bytes, and check the marks of the replies just handed to the writer.
//!
//! A mark rides on the first reply-queue entry its request pushes (as latency samples do), so
//! a fan-out request (MGET over several nodes) is one entry: its own argv, timed until the
//! merged reply is complete; a held request (BLPOP, EXEC) is timed from its read, including
//! the wait for the requests before it. Per request this costs a refcount on the request's
//! bytes and a queue slot; the clock is read once per read and once per
//! batch of replies.

use std::net::SocketAddr;

use bytes::Bytes;
use cluster::command::flags;
use resp::Request;

use crate::context::slowlog::Client;
use crate::session::Session;

/// A request waiting for its reply: when it was read, and its bytes (a refcount).
pub(crate) struct Mark {
    pub read_us: u64,
    pub request: Bytes,
}

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
}

// === impl Session (slowlog) ===

impl Session {
    /// Bytes just came in from the client: the requests they complete start now.
    pub(crate) fn slowlog_stamp_read(&mut self) {
        // A reload may change the threshold; one relaxed load per read picks it up.
        self.slowlog.threshold_us = self.worker.shared.slowlog.threshold();
        if self.slowlog.threshold_us.is_some() {
            self.slowlog.read_us = self.worker.shared.slowlog.now_us();
        }
    }

    /// Mark the entry `req` pushes next; none for what Redis never logs (refused requests,
    /// unknown commands, EXEC and the other `skip_slowlog` commands).
    pub(crate) fn slowlog_arm(&mut self, req: &Request, command: Option<usize>, refused: bool) {
        if self.slowlog.threshold_us.is_none() {
            return;
        }
        let skip = refused
            || command
                .and_then(cluster::command::at_stats_index)
                .is_none_or(|spec| spec.has(flags::SKIP_SLOWLOG));
        self.slowlog.armed |= !skip;
        let mark = (!skip).then(|| Mark {
            read_us: self.slowlog.read_us,
            request: req.raw().clone(),
        });
        self.cell.arm_slowlog(mark);
    }

    /// Log the requests whose replies were just handed to the writer, if they were slow.
    pub(crate) fn slowlog_record(&mut self) {
        let threshold = match self.slowlog.threshold_us {
            Some(threshold) => threshold,
            // Turned off since: drain what was armed, log nothing.
            None if self.slowlog.armed => u64::MAX,
            None => return,
        };
        let mut marks = std::mem::take(&mut self.slowlog.scratch);
        self.cell.take_answered_marks(&mut marks);
        if !marks.is_empty() {
            let log = &self.worker.shared.slowlog;
            let now = log.now_us();
            for mark in marks.drain(..) {
                let duration = now.saturating_sub(mark.read_us);
                if duration >= threshold {
                    let client = Client {
                        peer: self.slowlog.peer,
                        name: self.info.name.as_ref(),
                    };
                    log.log(&self.worker.stats.slowlog, &mark.request, duration, client);
                }
            }
        }
        self.slowlog.scratch = marks;
        if self.slowlog.threshold_us.is_none() {
            self.slowlog.armed = self.cell.has_slow_marks();
        }
    }
}
