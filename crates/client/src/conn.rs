//! One multiplexed, pipelined connection to one node, owned by one task.
//!
//! Callers never touch the socket. They hand the actor a batch (encoded bytes
//! plus how many replies it produces) over an mpsc queue; the actor appends the
//! bytes to its write queue and registers the batch in its FIFO in the same
//! step, so the FIFO is always in exact write order (the reply-crossing bugs of
//! field report 004 and Lettuce came from those two getting out of step).
//! Woken by a batch, the actor yields once before writing, so every caller
//! already runnable adds its batch to the same `writev`: the server then
//! reads, runs and answers many batches per event-loop turn.
//!
//! The actor reads while it writes (one `select!` over both halves), so a
//! large value pipelined behind a large reply cannot deadlock TCP. Any I/O or
//! framing error poisons the connection: every in-flight batch fails with
//! `OutcomeUnknown` for its unanswered replies, queued batches fail with
//! `NotSent`, and the task ends; the next caller opens a fresh connection.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use resp::{ReplyFramer, Value};
use smallvec::SmallVec;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::dedicated::Dedicated;
use crate::error::{Error, Result};

/// Replies of one batch, one entry per reply, in write order.
pub(crate) type Replies = Vec<Result<Value>>;

/// Stop taking new batches while this many bytes wait to be written: the queue
/// behind it is the caller's backpressure.
const MAX_UNWRITTEN: usize = 8 << 20;
/// Segments per `writev`.
const MAX_IOV: usize = 64;
/// Read buffer refill size.
const READ_CHUNK: usize = 64 * 1024;

struct Request {
    segments: Vec<Bytes>,
    replies: usize,
    tx: oneshot::Sender<Replies>,
}

/// A cheap, cloneable handle to one node's connection actor.
#[derive(Clone, Debug)]
pub(crate) struct ConnHandle {
    tx: mpsc::UnboundedSender<Request>,
}

impl ConnHandle {
    /// Starts an actor that connects to `addr` and serves batches.
    /// With `resp3` the actor sends `HELLO 3` before any batch; if the
    /// server refuses, every batch fails as not sent.
    pub fn spawn(addr: String, connect_timeout: Duration, resp3: bool) -> ConnHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(addr, rx, connect_timeout, resp3));
        ConnHandle { tx }
    }

    /// True once the actor has stopped taking batches (poisoned or closed).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Queues one batch at once (so batches to several nodes go out
    /// together) and returns the ticket to wait on for its replies.
    pub fn submit(&self, segments: Vec<Bytes>, replies: usize) -> Ticket {
        let (tx, rx) = oneshot::channel();
        let req = Request {
            segments,
            replies,
            tx,
        };
        // Zero replies would never complete; no such batch is ever queued.
        if replies == 0 || self.tx.send(req).is_err() {
            return Ticket(TicketInner::Ready(replies));
        }
        Ticket(TicketInner::Waiting(rx, replies))
    }
}

/// The replies of a submitted batch, to be awaited.
pub(crate) struct Ticket(TicketInner);

enum TicketInner {
    /// Never queued: every reply fails as not sent.
    Ready(usize),
    Waiting(oneshot::Receiver<Replies>, usize),
}

impl Ticket {
    /// Always exactly as many entries as the batch's replies, failed ones
    /// carrying why.
    pub async fn wait(self) -> Replies {
        match self.0 {
            TicketInner::Ready(n) => failed(n, Error::NotSent("connection closed".into())),
            TicketInner::Waiting(rx, n) => rx.await.unwrap_or_else(|_| {
                failed(n, Error::OutcomeUnknown("connection task ended".into()))
            }),
        }
    }
}

fn failed(n: usize, e: Error) -> Replies {
    vec![Err(e); n]
}

/// A batch whose bytes are in the write queue and whose replies are awaited.
struct Pending {
    expected: usize,
    results: Replies,
    tx: oneshot::Sender<Replies>,
}

async fn run(
    addr: String,
    mut rx: mpsc::UnboundedReceiver<Request>,
    connect_timeout: Duration,
    resp3: bool,
) {
    let connected = tokio::time::timeout(connect_timeout, TcpStream::connect(&addr)).await;
    let stream = match connected {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return refuse_queued(&mut rx, &format!("connect {addr}: {e}")),
        Err(_) => return refuse_queued(&mut rx, &format!("connect {addr}: timed out")),
    };
    let _ = stream.set_nodelay(true);
    let stream = match resp3 {
        true => match Dedicated::upgrade(stream, &addr, connect_timeout).await {
            Ok(s) => s,
            Err(e) => return refuse_queued(&mut rx, &e.to_string()),
        },
        false => stream,
    };
    let mut actor = Actor::default();
    if let Err(e) = actor.serve(stream, &mut rx).await {
        let why = format!("{addr}: {e}");
        for p in actor.pending.drain(..) {
            finish_failed(p, &why);
        }
        refuse_queued(&mut rx, &why);
    }
}

/// Closes the queue and fails everything still in it as never sent.
fn refuse_queued(rx: &mut mpsc::UnboundedReceiver<Request>, why: &str) {
    rx.close();
    while let Ok(req) = rx.try_recv() {
        let _ = req.tx.send(failed(req.replies, Error::NotSent(why.into())));
    }
}

fn finish_failed(mut p: Pending, why: &str) {
    let missing = p.expected - p.results.len();
    p.results.extend(std::iter::repeat_n(
        Err(Error::OutcomeUnknown(why.into())),
        missing,
    ));
    // The caller may have given up (timeout); its replies are simply dropped.
    let _ = p.tx.send(p.results);
}

#[derive(Default)]
struct Actor {
    out: VecDeque<Bytes>,
    unwritten: usize,
    pending: VecDeque<Pending>,
    rbuf: BytesMut,
    framer: ReplyFramer,
}

impl Actor {
    /// Runs until the handles are gone and nothing is in flight (`Ok`) or the
    /// connection must be poisoned (`Err`).
    async fn serve(
        &mut self,
        stream: TcpStream,
        rx: &mut mpsc::UnboundedReceiver<Request>,
    ) -> Result<()> {
        let (mut rd, mut wr) = stream.into_split();
        let mut open = true;
        while open || !self.pending.is_empty() {
            if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
                self.rbuf.reserve(READ_CHUNK);
            }
            let take = open && self.unwritten < MAX_UNWRITTEN;
            tokio::select! {
                biased;
                r = rd.read_buf(&mut self.rbuf) => match r {
                    Ok(0) => return Err(Error::Io("connection closed by server".into())),
                    Ok(_) => self.deliver()?,
                    Err(e) => return Err(Error::Io(e.to_string())),
                },
                w = write_some(&mut wr, &self.out), if !self.out.is_empty() => {
                    let n = w.map_err(|e| Error::Io(e.to_string()))?;
                    self.advance(n);
                }
                m = rx.recv(), if take => match m {
                    Some(req) => self.gather(req, rx).await,
                    None => open = false,
                },
            }
        }
        Ok(())
    }

    /// Queues `first`, then lets the callers that are runnable now queue
    /// their batches too, so they all share one `writev`: fewer, larger
    /// writes cost the server less per request (one read, one reply write
    /// and one event-loop turn for many batches instead of one each).
    async fn gather(&mut self, first: Request, rx: &mut mpsc::UnboundedReceiver<Request>) {
        self.accept(first, rx);
        // Runs the tasks already woken before this one writes; no timer, so
        // a lone caller waits for nothing.
        tokio::task::yield_now().await;
        if let Ok(req) = rx.try_recv() {
            self.accept(req, rx);
        }
    }

    /// Queues a batch and whatever else is already waiting, for one `writev`.
    fn accept(&mut self, first: Request, rx: &mut mpsc::UnboundedReceiver<Request>) {
        let mut next = Some(first);
        while let Some(req) = next.take() {
            self.unwritten += req.segments.iter().map(Bytes::len).sum::<usize>();
            self.out.extend(req.segments);
            self.pending.push_back(Pending {
                expected: req.replies,
                results: Vec::with_capacity(req.replies),
                tx: req.tx,
            });
            if self.unwritten < MAX_UNWRITTEN {
                next = rx.try_recv().ok();
            }
        }
    }

    fn advance(&mut self, mut n: usize) {
        self.unwritten -= n;
        while n > 0 {
            let Some(front) = self.out.front_mut() else {
                return;
            };
            let step = n.min(front.len());
            front.advance(step);
            n -= step;
            if front.is_empty() {
                self.out.pop_front();
            }
        }
    }

    /// Frames every complete reply in the read buffer and hands it to the
    /// oldest waiting batch.
    fn deliver(&mut self) -> Result<()> {
        loop {
            let framed = self
                .framer
                .next_frame(&self.rbuf)
                .map_err(|e| Error::Protocol(e.to_string()))?;
            let Some(len) = framed else {
                // A big bulk announced its size: grow once to hold it whole.
                if let Some(total) = self.framer.hint() {
                    self.rbuf.reserve(total.saturating_sub(self.rbuf.len()));
                }
                return Ok(());
            };
            let frame = self.rbuf.split_to(len).freeze();
            if frame.first() == Some(&b'>') {
                // A RESP3 push is out of band: it answers no request, so it
                // must not take a waiting batch's reply slot.
                continue;
            }
            let value = crate::reply::value_of(frame)?;
            let Some(front) = self.pending.front_mut() else {
                return Err(Error::Protocol("reply without a request".into()));
            };
            front.results.push(Ok(value));
            if front.results.len() == front.expected {
                if let Some(done) = self.pending.pop_front() {
                    let _ = done.tx.send(done.results);
                }
            }
        }
    }
}

async fn write_some(wr: &mut OwnedWriteHalf, out: &VecDeque<Bytes>) -> std::io::Result<usize> {
    let slices: SmallVec<[IoSlice<'_>; MAX_IOV]> =
        out.iter().take(MAX_IOV).map(|b| IoSlice::new(b)).collect();
    let n = wr.write_vectored(&slices).await?;
    if n == 0 {
        return Err(std::io::ErrorKind::WriteZero.into());
    }
    Ok(n)
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
