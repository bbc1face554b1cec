//! What a node sends back: each complete reply goes to whoever is owed it (a client's
//! entry, a subscriber's stream, or nobody for set-up commands); a big bulk string reply
//! goes piece by piece; a broken connection fails everything it owed.
//!
//! Streaming: a bulk string reply of 4 MiB or more goes to its client as it arrives,
//! instead of being framed whole first.
//!
//! ```text
//!   node ─read─▶ read_buf ─split─▶ piece ─▶ client's entry ─▶ writer (while still in cache)
//! ```
//!
//! Why: framed whole, a 100 MB reply is written to memory and read back cold, and its
//! client gets nothing until the last byte is in. Only a top-level bulk string owed to a
//! whole request streams (`ReplySink::may_stream_reply`); replies inside aggregates or for
//! parts of split requests are framed as before. The node is trusted to end the bulk with
//! its CRLF: the bytes are counted, not checked. If the connection breaks mid-reply, the
//! client has part of a reply it can never complete, so its connection is closed.

use std::rc::Rc;

use super::conn::{Conn, ReplyStream};
use super::handle::node_error;
use super::refusal::is_redirect;
use super::requests::{Gate, InFlight, Owed};

/// Bulk replies at least this big are streamed.
const STREAM_MIN: usize = crate::backend::bigbuf::BIG;

impl Conn {
    /// Pass on what has arrived of the reply being streamed. True when none is (any more).
    fn pump_stream(&mut self) -> bool {
        let Some(s) = self.streaming.as_mut() else {
            return true;
        };
        let n = s.left.min(self.read_buf.len());
        if n == 0 {
            return false;
        }
        s.left -= n;
        let piece = self.read_buf.split_to(n).freeze();
        self.watchdog.progress();
        let total = if s.left == 0 { s.total } else { 0 };
        if total > 0 {
            self.window.observe(total);
        }
        s.client.deliver_piece(s.seq, piece, total);
        if total > 0 {
            self.streaming = None;
        }
        total > 0
    }

    /// At a frame the framer could not complete yet: stream it if it qualifies.
    fn try_stream(&mut self) -> bool {
        let Some(total) = self.stream_candidate() else {
            return false;
        };
        let Some(owner) = self.pop_owner() else {
            return false;
        };
        let Owed::Client { client, seq, .. } = owner.owed else {
            return false;
        };
        self.refusal = None;
        self.framer.take_over();
        self.streaming = Some(ReplyStream {
            client,
            seq,
            left: total,
            total,
        });
        true
    }

    /// The frame's length, when the pending frame is a big bulk string owed to a whole
    /// request whose client may take it in pieces.
    fn stream_candidate(&self) -> Option<usize> {
        let total = self.framer.pending_top_bulk()?;
        let Owed::Client { client, seq, frag } = &self.in_flight.front()?.owed else {
            return None;
        };
        (total >= STREAM_MIN && client.may_stream_reply(*seq, *frag)).then_some(total)
    }

    /// Who is owed the reply that just arrived; the watchdog forgets its deadline.
    fn pop_owner(&mut self) -> Option<InFlight> {
        let owner = self.in_flight.pop_front()?;
        self.watchdog.paid(owner.limit);
        self.slow_owed -= usize::from(owner.slow);
        Some(owner)
    }

    /// The connection broke: a client holding part of a reply must be closed.
    fn abandon_stream(&mut self) {
        if let Some(s) = self.streaming.take() {
            s.client.stream_lost();
        }
    }

    /// Deliver every complete reply to whoever is owed it, streaming big bulks.
    pub(super) fn deliver_replies(&mut self) -> Result<(), String> {
        loop {
            if !self.pump_stream() {
                return Ok(());
            }
            let len = match self.framer.next_frame(&self.read_buf) {
                Ok(Some(len)) => len,
                Ok(None) if self.try_stream() => continue,
                Ok(None) => return Ok(()),
                Err(e) => return Err(format!("bad reply from node: {e}")),
            };
            let frame = self.read_buf.split_to(len).freeze();
            crate::backend::bigbuf::retire(&mut self.read_buf, len);
            self.watchdog.progress();
            if frame.first() == Some(&b'>') && self.backend.wire().tracker != 0 {
                // A push on a tracking client's own connection (`tracking-redir-broken`)
                // answers no request: its owner's feed decides (`session/tracking/own.rs`).
                if let Some(feed) = self.backend.feed.borrow().as_ref() {
                    feed.push_frame(Rc::as_ptr(&self.backend) as usize, frame);
                }
                continue;
            }
            let Some(owner) = self.pop_owner() else {
                match self.backend.sink.borrow().as_ref() {
                    Some(client) => client.push_frame(Rc::as_ptr(&self.backend) as usize, frame),
                    None => return Err("reply without a request (stream out of step)".into()),
                }
                continue;
            };
            match owner.owed {
                Owed::Client { client, seq, frag } => {
                    self.window.observe(frame.len());
                    client.deliver(seq, frag, self.owed_reply(frame))
                }
                Owed::Queued => self.note_queued_reply(frame),
                Owed::Queuing { client, seq } => match is_redirect(&frame) {
                    // The node flagged its transaction; EXEC's EXECABORT becomes this.
                    true => {
                        self.note_queued_reply(frame);
                        client.deliver(seq, 0, bytes::Bytes::from_static(b"+QUEUED\r\n"));
                    }
                    false => client.deliver(seq, 0, frame),
                },
                Owed::SetUp if resp::is_error_frame(&frame) => {
                    let text = String::from_utf8_lossy(&frame[..frame.len().min(120)])
                        .trim_end()
                        .to_string();
                    tracing::warn!(node = %self.backend.addr, error = %text, "connection set-up command failed");
                }
                Owed::SetUp => {}
                Owed::NodeId => {
                    let id = frame
                        .strip_prefix(b":")
                        .and_then(|rest| resp::string2ll(rest.strip_suffix(b"\r\n")?));
                    let id = id.and_then(|id| u64::try_from(id).ok()).unwrap_or(0);
                    self.backend
                        .node_id
                        .store(id, std::sync::atomic::Ordering::Relaxed);
                }
                Owed::Gate(gate) if resp::is_error_frame(&frame) => {
                    let text = String::from_utf8_lossy(&frame[1..frame.len().min(200)]);
                    let what = match gate {
                        Gate::Mirror => "the ACL user that runs this client's scripts",
                        Gate::Database => "this client's database",
                        Gate::Tracking => "this client's tracking",
                    };
                    let why = format!("refused {what} ({})", text.trim_end());
                    self.setup_failed = Some(node_error(&self.backend.addr, &why));
                    return Err(why);
                }
                Owed::Gate(gate) => {
                    self.gate -= 1;
                    if matches!(gate, Gate::Tracking) {
                        // The node tracks for its client from now on: its feed may count on it.
                        if let Some(feed) = self.backend.feed.borrow().as_ref() {
                            feed.push_frame(Rc::as_ptr(&self.backend) as usize, frame);
                        }
                    }
                }
            }
        }
    }

    /// Fail everything this connection owes: sent requests have an unknown outcome.
    pub(super) fn poison(&mut self, reason: &str) {
        self.abandon_stream();
        // Closed on purpose (end of subscribed mode) is not a loss.
        if !self.backend.closed.get() {
            if let Some(client) = self.backend.sink.borrow().as_ref() {
                client.stream_lost();
            }
            if let Some(feed) = self.backend.feed.borrow().as_ref() {
                feed.stream_lost();
            }
        }
        let lost = node_error(
            &self.backend.addr,
            &format!("connection lost ({reason}); the command may or may not have run"),
        );
        self.refusal = None;
        self.slow_owed = 0;
        // A replica connection carries only read-only commands: running one again on the
        // master changes nothing, so its client need not see the loss (`hold.rs`).
        let rerun = self.backend.replica.is_some();
        for owner in self.in_flight.drain(..) {
            if let Owed::Queuing { client, seq } = owner.owed {
                client.deliver(seq, 0, lost.clone());
                continue;
            }
            if let Owed::Client { client, seq, frag } = owner.owed {
                match rerun {
                    true => client.not_sent(seq, frag, lost.clone()),
                    false => client.deliver(seq, frag, lost.clone()),
                }
            }
        }
        self.write_queue.clear();
    }
}
