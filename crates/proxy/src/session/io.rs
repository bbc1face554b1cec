//! The session's socket side: reading and parsing requests, writing replies, and the limits
//! that decide when to stop reading (backpressure) or close (hard limits). Kept apart from
//! `session.rs`, which decides what each request is and where it goes.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BufMut;
use resp::{Parsed, Progress};
use tokio::io::AsyncWrite;

use super::Session;
use crate::backend::{advance, fill_slices, room};
use crate::context::WorkerStats;
use crate::session::exclusive::Intake;
use crate::session::limits::TimerKind;
use crate::session::redirect;
use crate::session::upload::{Start, Step};

pub(super) const READ_CHUNK: usize = 16 * 1024;
/// Below glibc's mmap threshold, so each piece comes from (and returns to) the heap.
const UPLOAD_READ_CHUNK: usize = 64 * 1024;
const MAX_IOVECS: usize = 64;

/// What reading the socket produced.
pub(super) enum ReadOutcome {
    Data,
    Pending,
    /// The client went away or must be dropped at once.
    Gone,
}

/// What a client may send ahead of a request that runs alone (a blocking command, WAIT,
/// KEYS, a subscription awaiting its marker): read unparsed, so a departure is noticed;
/// past it, nothing more is read until the request is answered. A client that leaves
/// after sending more than this is noticed when its request ends.
const BLOCKED_READ_AHEAD: usize = 4 << 20;

impl Session {
    /// Replies first: follow redirects, move ready replies to `out`, write them. Some(poll)
    /// when this turn ends here (done, closed, yielding, or draining).
    pub(super) fn pump_output(&mut self, cx: &mut Context<'_>) -> Option<Poll<()>> {
        redirect::follow(self, cx);
        self.out_bytes += self.cell.pop_ready(&mut self.out);
        self.record_samples();
        let shared = &self.worker.shared;
        let name = self.info.name.as_ref();
        let ring = &self.worker.stats.slowlog;
        self.slowlog.record(&shared.slowlog, ring, &self.cell, name);
        let (resp3, subscribed) = (self.resp3(), self.subscribed_resp2());
        crate::session::tracking::redirect::deliver_mail(
            &self.client,
            &self.cell,
            resp3,
            subscribed,
        );
        let pushed = self.forward_pushes();
        self.out_bytes += pushed;
        self.worker.budget.add(pushed);
        // An invalidation queued behind the replies owed (`tracking/keys.rs`) may be due now.
        self.out_bytes += self.cell.pop_ready(&mut self.out);
        if self.cell.is_lost() || self.output_overflow() {
            return Some(Poll::Ready(()));
        }
        // After the pop: a held request waits for the replies before it to be written. One
        // that ran may have answered at once (QUIT, RESET, HELLO): pop that reply too.
        if self.release_held() {
            self.out_bytes += self.cell.pop_ready(&mut self.out);
        }
        if self.poll_flush(cx).is_err() || self.enforce_budget() {
            return Some(Poll::Ready(()));
        }
        if self.turn_bytes > self.worker.turn_quantum {
            // Come back on the next turn, after the worker's other clients.
            cx.waker().wake_by_ref();
            return Some(Poll::Pending);
        }
        if !self.draining {
            return None;
        }
        // A blocked command may never answer: a departed client must not keep it. Any other
        // request read is answered and its reply written first (EXEC, WATCH: review S7).
        let blocked = matches!(self.intake, Intake::Blocked);
        let done = blocked || (self.out.is_empty() && self.cell.in_flight() == 0);
        Some(if done { Poll::Ready(()) } else { Poll::Pending })
    }

    /// Then requests: read and dispatch what the client sent, unless backpressure says wait.
    /// None: go round again (something changed).
    pub(super) fn pump_input(&mut self, cx: &mut Context<'_>) -> Option<Poll<()>> {
        if !self.may_read() {
            // A big request waiting to be streamed must not arrive whole meanwhile, or it
            // would be framed after all: read only a little past its start.
            let waiting_full = self.upload_waiting() && self.read_buf.len() >= READ_CHUNK * 4;
            if !self.exclusive_busy() || waiting_full {
                return Some(Poll::Pending);
            }
            if self.read_buf.len() >= BLOCKED_READ_AHEAD {
                // Enough is waiting behind the blocked request: the rest waits in the
                // socket (TCP backpressure), not in memory the client chooses (the hostile
                // fuzzer's huge-counts: 500 MiB read ahead of a BLPOP).
                return Some(Poll::Pending);
            }
            // Blocked: keep reading (unparsed, bounded) only to notice a departure.
            return match self.poll_fill(cx) {
                ReadOutcome::Pending => Some(Poll::Pending),
                ReadOutcome::Gone => Some(Poll::Ready(())),
                ReadOutcome::Data if !self.make_room(None) => Some(Poll::Ready(())),
                ReadOutcome::Data => {
                    self.input_stalled = true;
                    None
                }
            };
        }
        if std::mem::take(&mut self.input_stalled) {
            return (!self.parse_and_dispatch()).then_some(Poll::Ready(()));
        }
        match self.poll_fill(cx) {
            ReadOutcome::Pending => Some(Poll::Pending),
            ReadOutcome::Gone => Some(Poll::Ready(())),
            ReadOutcome::Data => (!self.parse_and_dispatch()).then_some(Poll::Ready(())),
        }
    }

    /// Hard output limits, as Redis's `client-output-buffer-limit`: replies queued for a
    /// client past the limit (subscribers have their own, lower one) close it at once, with
    /// no partial reply, a log line and a counter. The soft limit only stops reading new
    /// requests; this one bounds what requests already in flight can still pile up. Subscribers
    /// that do not read their messages meet Redis's `client-output-buffer-limit pubsub`.
    pub(super) fn output_overflow(&self) -> bool {
        let live = self.worker.live();
        let limits = &live.config.limits;
        let queued = self.out_bytes + self.cell.queued_bytes();
        let over = match self.pubsub.is_some() {
            true => queued > limits.pubsub_output_limit_bytes,
            false => limits.output_hard_limit_bytes > 0 && queued > limits.output_hard_limit_bytes,
        };
        if over {
            tracing::info!(
                client.id = self.info.id,
                queued,
                "closing client over its output buffer limit"
            );
            WorkerStats::bump(&self.worker.stats.output_limit_disconnects);
        }
        over
    }

    /// Backpressure: read only while the client's backlog is within bounds.
    pub(super) fn may_read(&self) -> bool {
        let live = self.worker.live();
        let limits = &live.config.limits;
        !self.exclusive_busy()
            && self.cell.in_flight() < limits.max_pending_per_client
            && self.out_bytes + self.cell.queued_bytes() < limits.output_soft_limit_bytes
            && self.budget_allows_read()
    }

    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> ReadOutcome {
        // A streamed upload reads in bigger pieces: each one is a separate send.
        let chunk = match self.upload.is_some() {
            true => UPLOAD_READ_CHUNK,
            false => READ_CHUNK,
        };
        if self.read_buf.capacity() - self.read_buf.len() < chunk / 2 {
            self.read_buf.reserve(chunk);
        }
        let max = room(self.worker.turn_quantum, self.turn_bytes);
        let mut window = (&mut self.read_buf).limit(max);
        match tokio_util::io::poll_read_buf(Pin::new(&mut self.stream), cx, &mut window) {
            Poll::Pending => ReadOutcome::Pending,
            Poll::Ready(Ok(0)) => {
                // Half-closed: answer what was sent, then close.
                self.draining = true;
                ReadOutcome::Data
            }
            Poll::Ready(Ok(n)) => {
                self.turn_bytes += n;
                self.timer.reset(TimerKind::Idle);
                self.slowlog.stamp_read(&self.worker.shared.slowlog);
                self.client.touch();
                ReadOutcome::Data
            }
            Poll::Ready(Err(_)) => ReadOutcome::Gone,
        }
    }

    /// Parse every complete request and dispatch it. False when the client must be dropped
    /// without any reply (query buffer overflow, the cross-protocol guard).
    pub(super) fn parse_and_dispatch(&mut self) -> bool {
        if self.upload_waiting() && self.cell.in_flight() > 0 {
            return true;
        }
        loop {
            if self.resume_waiting_upload() && self.upload_waiting() {
                return true;
            }
            match self.pump_upload() {
                Step::Wait => return true,
                Step::Close => {
                    self.draining = true;
                    return true;
                }
                Step::Done => {}
            }
            if !self.may_read() && !self.draining {
                self.input_stalled = true;
                return true;
            }
            match self.parser.parse(&mut self.read_buf) {
                Ok(Progress::Done(Parsed::Request(req))) => {
                    crate::backend::bigbuf::retire(&mut self.read_buf, req.raw().len());
                    self.timer.reset(TimerKind::RequestDeadline);
                    self.dispatch(req);
                }
                Ok(Progress::Done(Parsed::Noop)) => {}
                Ok(Progress::Done(Parsed::Close)) => return false,
                Ok(Progress::Incomplete { frame_len_hint }) => match self.try_start_upload() {
                    Start::Started => {}
                    // Waiting, the body stays in the socket: no frame-sized buffer.
                    Start::Wait => return self.make_room(None),
                    Start::No => return self.make_room(frame_len_hint),
                },
                Err(e) => {
                    WorkerStats::bump(&self.worker.stats.protocol_errors);
                    self.reply_now(e.to_resp());
                    self.draining = true;
                    return true;
                }
            }
            if self.info.quit {
                self.draining = true;
                return true;
            }
        }
    }

    /// Reserve exactly once for a big request, and enforce the query buffer limit.
    pub(super) fn make_room(&mut self, frame_len_hint: Option<usize>) -> bool {
        let limit = match self.login.authenticated() {
            true => self.worker.live().config.limits.max_query_buffer_bytes,
            false => crate::session::auth::PRE_AUTH_BUFFER,
        };
        if self.read_buf.len() > limit {
            tracing::info!(
                client.id = self.info.id,
                "closing client that reached max query buffer length"
            );
            return false;
        }
        if let Some(total) = frame_len_hint {
            crate::backend::bigbuf::reserve_frame(&mut self.read_buf, total.min(limit));
        }
        true
    }

    /// Write as much of `out` as the socket takes, several replies per write.
    pub(super) fn poll_flush(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        // Past the quantum the caller yields; what is left goes out on the next turn.
        while !self.out.is_empty() && self.turn_bytes <= self.worker.turn_quantum {
            let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
            let max = room(self.worker.turn_quantum, self.turn_bytes);
            let count = fill_slices(&self.out, &mut slices, max);
            match Pin::new(&mut self.stream).poll_write_vectored(cx, &slices[..count]) {
                Poll::Ready(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    self.turn_bytes += n;
                    let buffers = self.out.len();
                    advance(&mut self.out, n);
                    let done = buffers - self.out.len();
                    self.out_owned = self.out_owned.saturating_sub(done);
                    self.out_bytes = self.out_bytes.saturating_sub(n);
                    self.worker.budget.release(n);
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
        }
        // TLS may hold the last record back when the socket was full; a plain socket
        // answers Ready at once.
        match Pin::new(&mut self.stream).poll_flush(cx) {
            Poll::Ready(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }
}
