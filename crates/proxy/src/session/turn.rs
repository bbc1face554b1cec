//! One turn of a session: follow redirects, move ready replies and pushed frames to the
//! socket side (`io.rs`) and write them, then read and parse what the client sent, within
//! the limits that decide when to stop reading (backpressure) or close (hard limits). The
//! requests it parses go to `mod.rs`, which decides what each is and where it goes.
//!
//! ```text
//!   pump_output: redirects followed ─▶ ready replies popped (head only) ─▶ pushes ─▶ writev
//!   pump_input:  read (quantum) ─▶ parse ─▶ Session::dispatch, or a streamed upload
//! ```

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BufMut;
use resp::{Parsed, Progress};
use tokio::io::AsyncWrite;

use super::Session;
use crate::backend::{advance, fill_slices, room};
use crate::context::WorkerStats;
use crate::session::held::Intake;
use crate::session::io::READ_CHUNK;
use crate::session::limits::TimerKind;
use crate::session::redirect;
use crate::session::tracking::TurnMark;
use crate::session::upload::{Start, Step};

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
        // Before this turn's replies are taken: an invalidation that came with them may go
        // ahead of them (`tracking/owed.rs`).
        let cell = &self.client.cell;
        let mark = TurnMark {
            head: cell.head_seq(),
            owed: cell.in_flight() > 0,
        };
        let out_at = self.io.out.len();
        self.io.out_bytes += self.client.cell.pop_ready(&mut self.io.out);
        self.record_samples();
        let shared = &self.client.worker.shared;
        let name = self.client.info.name.as_ref();
        let stats = &self.client.worker.stats;
        self.client
            .slowlog
            .record(&shared.slowlog, stats, &self.client.cell, name);
        let (resp3, subscribed) = (
            self.client.resp3(),
            self.pubsub.subscribed_resp2(&self.client),
        );
        crate::session::tracking::redirect::deliver_mail(
            &self.client.handle,
            &self.client.cell,
            resp3,
            subscribed,
        );
        let mut pushed = self.forward_pushes(mark, out_at);
        if self.monitor.is_on() {
            match self.monitor.take(&mut self.io.out, cx.waker()) {
                Some(bytes) => pushed += bytes,
                // Fell too far behind: closed, as Redis closes it past its buffer limit.
                None => return Some(Poll::Ready(())),
            }
        }
        self.io.out_bytes += pushed;
        self.client.worker.budget.add(pushed);
        // An invalidation queued behind the replies owed (`tracking/keys.rs`) may be due now.
        self.io.out_bytes += self.client.cell.pop_ready(&mut self.io.out);
        if self.client.cell.is_lost() || self.output_overflow() {
            return Some(Poll::Ready(()));
        }
        // After the pop: a held request waits for the replies before it to be written. One
        // that ran may have answered at once (QUIT, RESET, HELLO): pop that reply too.
        if self.release_held() || self.release_paused(cx) || self.release_migrating(cx) {
            self.io.out_bytes += self.client.cell.pop_ready(&mut self.io.out);
        }
        if self.poll_flush(cx).is_err()
            || self.io.enforce_budget(
                &self.client,
                self.tx.open.as_ref().map_or(0, |tx| tx.bytes()),
            )
        {
            return Some(Poll::Ready(()));
        }
        if self.io.turn_bytes > self.client.worker.turn_quantum {
            // Come back on the next turn, after the worker's other clients.
            cx.waker().wake_by_ref();
            return Some(Poll::Pending);
        }
        if !self.io.draining {
            return None;
        }
        // A blocked command may never answer: a departed client must not keep it. Any other
        // request read is answered and its reply written first (EXEC, WATCH: review S7).
        let blocked = matches!(self.intake, Intake::Blocked | Intake::Paused(_));
        let done = blocked || (self.io.out.is_empty() && self.client.cell.in_flight() == 0);
        Some(if done { Poll::Ready(()) } else { Poll::Pending })
    }

    /// Then requests: read and dispatch what the client sent, unless backpressure says wait.
    /// None: go round again (something changed).
    pub(super) fn pump_input(&mut self, cx: &mut Context<'_>) -> Option<Poll<()>> {
        if !self.may_read() {
            // A big request waiting to be streamed must not arrive whole meanwhile, or it
            // would be framed after all: read only a little past its start.
            let waiting_full = crate::session::upload::waiting(&self.intake)
                && self.io.read_buf.len() >= READ_CHUNK * 4;
            if !self.exclusive_busy() || waiting_full {
                return Some(Poll::Pending);
            }
            if self.io.read_buf.len() >= BLOCKED_READ_AHEAD {
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
                    self.io.input_stalled = true;
                    None
                }
            };
        }
        // An EXEC's replayed commands come before anything more is read.
        if std::mem::take(&mut self.io.input_stalled) || self.tx.replaying() {
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
        let live = self.client.worker.live();
        let limits = &live.config.limits;
        let queued = self.io.out_bytes + self.client.cell.queued_bytes();
        let over = match self.pubsub.is_on() {
            true => queued > limits.pubsub_output_limit_bytes,
            false => limits.output_hard_limit_bytes > 0 && queued > limits.output_hard_limit_bytes,
        };
        if over {
            tracing::info!(
                client.id = self.client.info.id,
                queued,
                "closing client over its output buffer limit"
            );
            WorkerStats::bump(&self.client.worker.stats.output_limit_disconnects);
        }
        over
    }

    /// Backpressure: read only while the client's backlog is within bounds.
    pub(super) fn may_read(&self) -> bool {
        let live = self.client.worker.live();
        let limits = &live.config.limits;
        !self.exclusive_busy()
            && self.client.cell.in_flight() < limits.max_pending_per_client
            && self.io.out_bytes + self.client.cell.queued_bytes() < limits.output_soft_limit_bytes
            && self.io.budget_allows_read(&self.client)
    }

    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> ReadOutcome {
        // A streamed upload reads in bigger pieces: each one is a separate send.
        let chunk = match self.upload.active() {
            true => UPLOAD_READ_CHUNK,
            false => READ_CHUNK,
        };
        crate::session::io::room_for_read(&mut self.io.read_buf, chunk);
        let max = room(self.client.worker.turn_quantum, self.io.turn_bytes);
        let mut window = (&mut self.io.read_buf).limit(max);
        match tokio_util::io::poll_read_buf(Pin::new(&mut self.io.stream), cx, &mut window) {
            Poll::Pending => ReadOutcome::Pending,
            Poll::Ready(Ok(0)) => {
                // Half-closed: answer what was sent, then close.
                self.io.draining = true;
                ReadOutcome::Data
            }
            Poll::Ready(Ok(n)) => {
                self.io.turn_bytes += n;
                self.io.net_in += n as u64;
                self.io.timer.reset(TimerKind::Idle);
                self.client
                    .slowlog
                    .stamp_read(&self.client.worker.shared.slowlog, &self.client.cell);
                self.client.handle.touch();
                ReadOutcome::Data
            }
            Poll::Ready(Err(_)) => ReadOutcome::Gone,
        }
    }

    /// Parse every complete request and dispatch it. False when the client must be dropped
    /// without any reply (query buffer overflow, the cross-protocol guard).
    pub(super) fn parse_and_dispatch(&mut self) -> bool {
        if crate::session::upload::waiting(&self.intake) && self.client.cell.in_flight() > 0 {
            return true;
        }
        loop {
            let others_idle = self.upload_others_idle();
            let resumed = self.upload.resume_waiting(
                &mut self.io,
                &mut self.client,
                &mut self.intake,
                others_idle,
            );
            if resumed && crate::session::upload::waiting(&self.intake) {
                return true;
            }
            match self
                .upload
                .pump(&mut self.io, &mut self.client, &mut self.intake)
            {
                Step::Wait => return true,
                Step::Close => {
                    self.io.draining = true;
                    return true;
                }
                Step::Done => {}
            }
            if !self.may_read() && !self.io.draining {
                self.io.input_stalled = true;
                return true;
            }
            if let Some(req) = self.tx.next_replayed() {
                self.dispatch_replayed(req);
                continue;
            }
            match self.io.parser.parse(&mut self.io.read_buf) {
                Ok(Progress::Done(Parsed::Request(req))) => {
                    crate::backend::bigbuf::retire(&mut self.io.read_buf, req.raw().len());
                    self.io.timer.reset(TimerKind::RequestDeadline);
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
                    WorkerStats::bump(&self.client.worker.stats.protocol_errors);
                    self.client.reply_now(e.to_resp());
                    self.io.draining = true;
                    return true;
                }
            }
            if self.client.info.quit {
                self.io.draining = true;
                return true;
            }
        }
    }

    /// Reserve exactly once for a big request, and enforce the query buffer limit.
    pub(super) fn make_room(&mut self, frame_len_hint: Option<usize>) -> bool {
        let limit = match self.client.login.authenticated() {
            true => {
                self.client
                    .worker
                    .live()
                    .config
                    .limits
                    .max_query_buffer_bytes
            }
            false => crate::session::auth::PRE_AUTH_BUFFER,
        };
        if self.io.read_buf.len() > limit {
            tracing::info!(
                client.id = self.client.info.id,
                "closing client that reached max query buffer length"
            );
            return false;
        }
        if let Some(total) = frame_len_hint {
            crate::backend::bigbuf::reserve_frame(&mut self.io.read_buf, total.min(limit));
        }
        true
    }

    /// Write as much of `out` as the socket takes, several replies per write.
    pub(super) fn poll_flush(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        // Past the quantum the caller yields; what is left goes out on the next turn.
        while !self.io.out.is_empty() && self.io.turn_bytes <= self.client.worker.turn_quantum {
            let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
            let max = room(self.client.worker.turn_quantum, self.io.turn_bytes);
            let count = fill_slices(&self.io.out, &mut slices, max);
            match Pin::new(&mut self.io.stream).poll_write_vectored(cx, &slices[..count]) {
                Poll::Ready(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    self.io.turn_bytes += n;
                    self.io.net_out += n as u64;
                    let buffers = self.io.out.len();
                    advance(&mut self.io.out, n);
                    let done = buffers - self.io.out.len();
                    self.io.out_owned = self.io.out_owned.saturating_sub(done);
                    self.io.out_bytes = self.io.out_bytes.saturating_sub(n);
                    self.client.worker.budget.release(n);
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
        }
        // TLS may hold the last record back when the socket was full; a plain socket
        // answers Ready at once.
        match Pin::new(&mut self.io.stream).poll_flush(cx) {
            Poll::Ready(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// No MULTI, WATCH or subscription: their state lives on the dedicated connection, which
    /// a streamed upload uses (`upload.rs`).
    fn upload_others_idle(&self) -> bool {
        self.tx.open.is_none() && self.tx.watch.is_none() && !self.pubsub.is_on()
    }

    fn try_start_upload(&mut self) -> Start {
        let others_idle = self.upload_others_idle();
        self.upload.try_start(
            &mut self.io,
            &mut self.client,
            &mut self.intake,
            others_idle,
        )
    }

    /// Move frames from the subscription connections to the client; end subscribed mode once
    /// every connection confirmed 0 subscriptions. Returns the bytes moved. Invalidations
    /// that go ahead of this turn's replies (`mark`) go into `out` at `out_at`, where those
    /// replies start.
    fn forward_pushes(&mut self, mark: TurnMark, out_at: usize) -> usize {
        // A plain session's turn: nothing subscribed, tracked or pushed.
        if !self.pubsub.is_on() && !self.tracking.is_on() && !self.client.cell.has_pushes() {
            return 0;
        }
        let mut frames = std::mem::take(&mut self.push_scratch);
        self.client.cell.take_pushes(&mut frames);
        self.pubsub.follow_masters(&self.client);
        self.tracking.follow(&mut self.client);
        let mut bytes = 0;
        let mut ahead = Vec::new();
        for (source, frame) in frames.drain(..) {
            let side = self.pubsub.keyspace_frame(source, &frame);
            let tracked = || {
                self.tracking
                    .frame(&self.client, source, &frame, mark, &mut ahead)
            };
            let frame = match side.or_else(tracked) {
                Some(false) => continue,
                Some(true) => frame,
                None => match self.pubsub.on_frame(&self.client, source, frame) {
                    (frame, true) => {
                        self.publish_state();
                        let Some(frame) = frame else { continue };
                        frame
                    }
                    (Some(frame), false) => frame,
                    (None, false) => continue,
                },
            };
            let frame = self.pubsub.in_client_protocol(&self.client, source, frame);
            if self.client.resp3()
                && self.client.cell.in_flight() > 0
                && !matches!(self.intake, Intake::Blocked)
                && is_message_push(&frame)
            {
                // A message while replies are owed waits behind them: one Redis delivers a
                // message its client's own EXEC or script published after that reply, and
                // here the reply and the message travel on different connections. (A
                // blocked client gets its messages meanwhile, as from Redis.)
                self.client.cell.push_out_of_band(frame);
                continue;
            }
            bytes += frame.len();
            self.io.out.push_back(frame);
        }
        for (i, push) in ahead.into_iter().enumerate() {
            bytes += push.len();
            self.io.out.insert(out_at + i, push);
        }
        self.push_scratch = frames;
        self.pubsub.leave_if_done(&self.client);
        bytes
    }
}

/// A RESP3 `message`, `pmessage` or `smessage` push.
fn is_message_push(frame: &[u8]) -> bool {
    [
        &b">3\r\n$7\r\nmessage\r\n"[..],
        b">4\r\n$8\r\npmessage\r\n",
        b">3\r\n$8\r\nsmessage\r\n",
    ]
    .iter()
    .any(|head| frame.starts_with(head))
}
