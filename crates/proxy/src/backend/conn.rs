//! A live connection's state, owned by its task (`task.rs`): the write queue, who is owed
//! each reply (`in_flight`), the read buffer and framer, the watchdog and the window; and
//! the pump that moves bytes. What arrives is handed out by `replies.rs`, a refused
//! transaction noted by `refusal.rs`.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use resp::ReplyFramer;
use tokio::io::AsyncWrite;

use super::handle::Backend;
use super::requests::{InFlight, Owed};
use super::sink::ReplySink;
use super::watchdog::Watchdog;
use super::window;
use super::writev::{self, advance, fill_slices};
use crate::tls::Stream;

/// Reads go into at least this much spare room: a short read then proves the socket drained,
/// and tokio skips the extra `read` that would only return EAGAIN.
const READ_CHUNK: usize = 64 * 1024;
/// At most this many buffers per `writev`.
const MAX_IOVECS: usize = 64;

/// Read size while streaming: each read becomes one piece, bigger than what the session's
/// copy-out of stalled small replies (`budget.rs`, 256 KiB) would copy.
const STREAM_READ: usize = 512 * 1024;

static ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

/// A big bulk reply on its way to its client.
pub(super) struct ReplyStream {
    pub(super) client: Rc<dyn ReplySink>,
    pub(super) seq: u64,
    /// Bytes of the frame (header, payload, CRLF) not yet passed on.
    pub(super) left: usize,
    pub(super) total: usize,
}

/// The live connection's state, owned by the task.
pub(super) struct Conn {
    pub(super) backend: Rc<Backend>,
    pub(super) stream: Stream,
    pub(super) write_queue: VecDeque<Bytes>,
    pub(super) in_flight: VecDeque<InFlight>,
    pub(super) read_buf: BytesMut,
    pub(super) framer: ReplyFramer,
    pub(super) watchdog: Watchdog,
    /// In-flight count last added to the node's counters.
    pub(super) reported_inflight: usize,
    /// Slow commands owed (`InFlight::slow`), and the count last reported.
    pub(super) slow_owed: usize,
    pub(super) reported_slow: usize,
    /// A big bulk reply being passed on piece by piece (`backend/replies.rs`).
    pub(super) streaming: Option<ReplyStream>,
    /// Why the transaction whose EXEC comes next was refused (`backend/refusal.rs`).
    pub(super) refusal: Option<Bytes>,
    /// Set-up replies still awaited that must succeed before any request is written.
    pub(super) gate: usize,
    /// Why a set-up that had to succeed failed: what the requests queued here get.
    pub(super) setup_failed: Option<Bytes>,
    /// How many replies this connection may owe (`window.rs`).
    pub(super) window: window::OwedWindow,
}

// === impl Conn ===

impl Conn {
    pub(super) fn new(backend: Rc<Backend>, stream: Stream) -> Conn {
        Conn {
            stream,
            write_queue: VecDeque::new(),
            in_flight: VecDeque::new(),
            read_buf: BytesMut::with_capacity(READ_CHUNK),
            framer: ReplyFramer::new(),
            watchdog: Watchdog::new(backend.request_timeout, backend.slow_timeout),
            reported_inflight: 0,
            slow_owed: 0,
            reported_slow: 0,
            streaming: None,
            refusal: None,
            gate: 0,
            setup_failed: None,
            window: window::OwedWindow::new(),
            backend,
        }
    }

    /// Pump once: take new requests, write what the socket accepts, deliver what it returned.
    /// Ready(reason) when the connection is finished.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<String> {
        self.remember_waker(cx);
        let mut moved = 0;
        loop {
            if self.backend.closed.get() {
                return Poll::Ready("closed by the proxy".into());
            }
            if self.gate == 0 {
                self.take_queued();
            }
            let room = writev::room(self.backend.quantum, moved);
            let wrote = match self.poll_write(cx, room) {
                Ok(n) => n,
                Err(e) => return Poll::Ready(format!("write failed: {e}")),
            };
            let room = writev::room(self.backend.quantum, moved + wrote);
            let read = match self.poll_read(cx, room) {
                Ok(n) => n,
                Err(reason) => return Poll::Ready(reason),
            };
            moved += wrote + read;
            if moved > self.backend.quantum {
                // A huge value in either direction passes in slices, between the worker's
                // other tasks, instead of holding the thread until it is through.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let waiting = self.gate == 0
                && !self.backend.queue.borrow().is_empty()
                && self.window.has_room(self.in_flight.len());
            if wrote == 0 && read == 0 && !waiting {
                return self.poll_idle(cx);
            }
        }
    }

    /// Let `send` and `close` wake this task; the waker is cloned only when it changed.
    fn remember_waker(&self, cx: &Context<'_>) {
        let mut w = self.backend.waker.borrow_mut();
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
    }

    /// Nothing moved: arm the request timeout while replies are owed, and publish the
    /// in-flight count only now, once per quiet turn rather than per reply.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<String> {
        let owed = !self.in_flight.is_empty() || self.streaming.is_some();
        if self.watchdog.poll_expired(cx, owed).is_ready() {
            let ms = self.watchdog.deadline().as_millis();
            return Poll::Ready(format!("no reply within {ms} ms"));
        }
        let owed = self.in_flight.len();
        let node = &self.backend.node;
        node.report_inflight(&mut self.reported_inflight, owed);
        node.report_slow(&mut self.reported_slow, self.slow_owed);
        Poll::Pending
    }

    /// Write what the socket takes, `room` bytes at most. Returns bytes written.
    fn poll_write(&mut self, cx: &mut Context<'_>, room: usize) -> io::Result<usize> {
        let mut total = 0;
        while !self.write_queue.is_empty() && total < room {
            let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
            let count = fill_slices(&self.write_queue, &mut slices, room - total);
            match Pin::new(&mut self.stream).poll_write_vectored(cx, &slices[..count]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    advance(&mut self.write_queue, n);
                    total += n;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break,
            }
        }
        // TLS may hold the last record back when the socket was full (plain: a no-op).
        if let Poll::Ready(Err(e)) = Pin::new(&mut self.stream).poll_flush(cx) {
            return Err(e);
        }
        Ok(total)
    }

    /// Read what the socket has, `room` bytes at most, and deliver every complete reply.
    /// Returns bytes read.
    fn poll_read(&mut self, cx: &mut Context<'_>, room: usize) -> Result<usize, String> {
        if self.read_buf.capacity() - self.read_buf.len() < READ_CHUNK / 4 {
            let want = match self.streaming {
                Some(_) => self.read_buf.len() + STREAM_READ,
                None => self.framer.hint().unwrap_or(0),
            };
            let floor = self.read_buf.len() + READ_CHUNK;
            crate::backend::bigbuf::reserve_frame(&mut self.read_buf, want.max(floor));
        }
        let mut window = (&mut self.read_buf).limit(room);
        let n = match tokio_util::io::poll_read_buf(Pin::new(&mut self.stream), cx, &mut window) {
            Poll::Ready(Ok(0)) => return Err("closed by the node".into()),
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Err(format!("read failed: {e}")),
            Poll::Pending => return Ok(0),
        };
        self.deliver_replies()?;
        Ok(n)
    }

    /// Move what sessions queued to the write queue, recording who is owed each reply,
    /// while the replies owed fit the connection's window (`window.rs`).
    fn take_queued(&mut self) {
        let mut queue = self.backend.queue.borrow_mut();
        while self.window.has_room(self.in_flight.len()) {
            let Some((out, patience)) = queue.pop_front() else {
                break;
            };
            if out.asking {
                self.write_queue.push_back(Bytes::from_static(ASKING));
                self.in_flight.push_back(InFlight::SET_UP);
            }
            for _ in 0..out.skip {
                self.in_flight.push_back(InFlight::QUEUED);
            }
            let owner = self.backend.entry_of(&out);
            self.write_queue.push_back(out.frame);
            let Some((seq, frag)) = owner.filter(|_| !out.more) else {
                continue;
            };
            let owed = match out.queued {
                true => Owed::Queuing {
                    client: out.client,
                    seq,
                },
                false => Owed::Client {
                    client: out.client,
                    seq,
                    frag,
                },
            };
            let limit = self.watchdog.owe(patience);
            let slow = patience == crate::patience::Patience::Slow;
            self.slow_owed += usize::from(slow);
            self.in_flight.push_back(InFlight { owed, limit, slow });
        }
    }
}
