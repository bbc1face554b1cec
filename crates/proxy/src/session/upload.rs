//! Streamed uploads: a request whose last argument is big (a 100 MB SET) goes to its node
//! while it arrives, in the pieces it arrives in, instead of being buffered whole first.
//!
//! ```text
//!   client ─read─▶ read_buf ─split─▶ piece ─▶ the session's dedicated connection ─▶ node
//!                                      └────▶ kept (a refcount) until the reply, so that
//!                                             a redirect can resend the whole request
//! ```
//!
//! Why: framed whole, a 100 MB value is written to memory and read back cold (it is three
//! times the L3 cache) and the node starts on it only once the proxy has all of it, so
//! 100 MB took 17x the time of 10 MB. Streamed, each piece leaves while it is still in
//! cache, as nutcracker's 16 KB buffers do.
//!
//! The rules that keep the client's order and the node's byte stream sound:
//! - Only a plain single-slot request whose keys come before the big value (SET, APPEND,
//!   RPUSH…), from an authenticated client without ACL rules, outside WATCH, MULTI and
//!   subscribed mode (their state lives on the dedicated connection), and only once every
//!   earlier request of the client is answered. It runs on the
//!   session's dedicated connection (as blocking commands do, `exclusive.rs`) and nothing
//!   else is read until its reply. Anything else is framed whole, as before.
//! - Pieces go out only while that connection's task lives. A lost connection takes the
//!   partial command with it (the node discards it): the request is answered with an error,
//!   and the rest of its body is read and dropped, never sent on another connection.
//! - The CRLF after the value is checked before the last piece goes out: a client that
//!   gets it wrong gets Redis's protocol error, and the node never executes the command.

use std::rc::Rc;

use bytes::Bytes;

use crate::backend::{Backend, Outgoing};
use crate::context::WorkerStats;
use crate::route::Route;
use crate::session::client::Client;
use crate::session::held::Intake;
use crate::session::io::Io;
use crate::session::login::Login;
use crate::session::queue::{Conn, Entry, Kind, Resend, Sent};

/// Last arguments at least this big are streamed; smaller ones are cheap to frame whole.
pub(crate) const UPLOAD_MIN: usize = crate::backend::bigbuf::BIG;

/// A streamed request in progress.
pub(crate) struct Upload {
    backend: Rc<Backend>,
    seq: u64,
    /// Payload bytes not yet read from the client (its CRLF comes after them).
    left: usize,
    /// Everything forwarded so far; moved into the entry once the request is complete.
    parts: Vec<Bytes>,
    /// The connection was lost: read and drop the rest of the body.
    dropping: bool,
}

/// What `try_start_upload` did.
pub(crate) enum Start {
    Started,
    /// It qualifies, but requests before it are in flight: parse nothing until they are
    /// answered, then try again.
    Wait,
    /// It does not qualify: frame it whole as usual.
    No,
}

/// What `pump_upload` left for the caller to do.
pub(crate) enum Step {
    /// More of the body is still to come.
    Wait,
    /// The request is complete: parse what follows.
    Done,
    /// Protocol error (no CRLF after the value): close after the replies.
    Close,
}

/// The client's streamed upload, while one is in progress.
#[derive(Default)]
pub(crate) struct Uploads(Option<Upload>);

/// A big request waits to be streamed (or a streamed one for its reply).
pub(crate) fn waiting(intake: &Intake) -> bool {
    matches!(intake, Intake::UploadWaiting)
}

impl Uploads {
    /// Part of a request has been streamed and the rest is still to come.
    pub(crate) fn active(&self) -> bool {
        self.0.is_some()
    }

    /// Start streaming the request being parsed, if it qualifies.
    /// `others_idle`: no MULTI, WATCH or subscription, whose state lives on the dedicated
    /// connection.
    pub(crate) fn try_start(
        &mut self,
        io: &mut Io,
        client: &mut Client,
        intake: &mut Intake,
        others_idle: bool,
    ) -> Start {
        if !(others_idle && may_stream(io, client, intake)) {
            return Start::No;
        }
        let Some(tail) = io.parser.pending_tail(&io.read_buf, UPLOAD_MIN) else {
            return Start::No;
        };
        let allow_admin = client.worker.live().config.proxy.allow_admin_commands;
        let placement = &client.worker.shared.placement;
        let (route, command) = crate::route::route_counted(&tail.probe, allow_admin, placement);
        let (Route::Slot(slot) | Route::Read(slot)) = route else {
            return Start::No;
        };
        if !value_is_not_routed(&tail.probe, slot, allow_admin, placement) {
            return Start::No;
        }
        let map = client.worker.map();
        let Some(addr) = map.node_of(slot).map(|n| n.addr.clone()) else {
            return Start::No;
        };
        if client.cell.in_flight() > 0 {
            // Framing it instead would let the next big request wait for this one in turn:
            // stop reading until the requests before it are answered (`exclusive_busy`).
            *intake = Intake::UploadWaiting;
            io.input_stalled = true;
            return Start::Wait;
        }
        WorkerStats::bump(&client.worker.stats.commands_processed);
        client.count_command(command.index, command.sub, false);
        if command.replicates {
            client.written.note(&route, &client.worker.map()); // a later WAIT must count this write (review S6)
        }
        let size = tail.head_len + tail.payload_len + 2;
        client
            .slowlog
            .arm_upload(&client.cell, &tail.probe, command, size);
        let backend = client.dedicated_for(&addr);
        // Never resent until its last piece is out (then its pieces are, `finish_upload`).
        let mut sent = Sent::new(Resend::Never, &backend, Some(slot), Conn::Own);
        sent.map_version = map.version();
        let seq = client.cell.push(Entry::sent(sent));
        let head = io.parser.take_head(&mut io.read_buf, tail.head_len);
        self.0 = Some(Upload {
            backend,
            seq,
            left: tail.payload_len,
            parts: Vec::new(),
            dropping: false,
        });
        self.send_piece(client, head, true);
        Start::Started
    }

    /// The request the parser stopped at waited for the ones before it: stream it now if
    /// they are answered. True when it started (or still waits).
    pub(crate) fn resume_waiting(
        &mut self,
        io: &mut Io,
        client: &mut Client,
        intake: &mut Intake,
        others_idle: bool,
    ) -> bool {
        if !waiting(intake) {
            return false;
        }
        *intake = Intake::Open;
        !matches!(self.try_start(io, client, intake, others_idle), Start::No)
    }

    /// Forward what arrived of the body. Call whenever `read_buf` may hold more of it.
    pub(crate) fn pump(&mut self, io: &mut Io, client: &mut Client, intake: &mut Intake) -> Step {
        let Some(up) = self.0.as_mut() else {
            return Step::Done;
        };
        if up.left > 0 {
            let n = up.left.min(io.read_buf.len());
            if n == 0 {
                return self.wait_or_give_up(io, client);
            }
            up.left -= n;
            let piece = io.read_buf.split_to(n).freeze();
            self.send_piece(client, piece, true);
            if self.0.as_ref().is_some_and(|up| up.left > 0) {
                return Step::Wait;
            }
        }
        self.finish(io, client, intake)
    }

    /// The value is in: check its CRLF, then send the last piece, owed the reply.
    fn finish(&mut self, io: &mut Io, client: &mut Client, intake: &mut Intake) -> Step {
        let Some(crlf) = io.read_buf.get(..2) else {
            return self.wait_or_give_up(io, client);
        };
        let good = crlf == b"\r\n";
        let _ = io.read_buf.split_to(2);
        let Some(up) = self.0.take() else {
            return Step::Done;
        };
        io.timer
            .reset(crate::session::limits::TimerKind::RequestDeadline);
        if !good {
            Self::abort(
                client,
                up,
                resp::ProtocolError::MissingCrlfAfterBulk.to_resp(),
            );
            return Step::Close;
        }
        if up.dropping {
            return Step::Done;
        }
        if !up.backend.is_running() {
            let err = lost(&up.backend);
            Self::abort(client, up, err);
            return Step::Done;
        }
        let last = Bytes::from_static(b"\r\n");
        let mut parts = up.parts;
        parts.push(last.clone());
        client.cell.with_entry(up.seq, |e| {
            if let Kind::Sent(sent) = &mut e.kind {
                sent.resend = Resend::Pieces(parts.into_boxed_slice());
            }
        });
        up.backend.send(Self::outgoing(client, up.seq, last, false));
        // Nothing else may run before its reply. Wait as a waiting upload does, reading
        // only a little, so that a big request right behind it is streamed too.
        *intake = Intake::UploadWaiting;
        io.input_stalled = true;
        Step::Done
    }

    /// Wait for more of the body, unless the client has stopped sending (EOF): then the
    /// request can never complete, and the node must not keep its beginning.
    fn wait_or_give_up(&mut self, io: &Io, client: &mut Client) -> Step {
        if !io.draining {
            return Step::Wait;
        }
        if let Some(up) = self.0.take() {
            let err = Bytes::from_static(b"-ERR slotgate: the client closed mid-request\r\n");
            Self::abort(client, up, err);
        }
        Step::Done
    }

    /// Send one piece on the upload's connection, or switch to dropping the body when that
    /// connection is gone.
    fn send_piece(&mut self, client: &mut Client, piece: Bytes, more: bool) {
        let Some(up) = self.0.as_mut() else {
            return;
        };
        if up.dropping {
            return;
        }
        let first = up.parts.is_empty();
        if !first && !up.backend.is_running() {
            let err = lost(&up.backend);
            let seq = up.seq;
            up.dropping = true;
            up.parts.clear();
            client.cell.deliver(seq, 0, err);
            client.drop_dedicated();
            return;
        }
        up.parts.push(piece.clone());
        let (backend, seq) = (up.backend.clone(), up.seq);
        backend.send(Self::outgoing(client, seq, piece, more));
    }

    /// Give up on the upload: the node discards the partial command when its connection
    /// closes, and the client gets `reply` in the request's place.
    fn abort(client: &mut Client, up: Upload, reply: Bytes) {
        client.drop_dedicated();
        if !up.dropping {
            client.cell.deliver(up.seq, 0, reply);
        }
    }

    fn outgoing(client: &Client, seq: u64, frame: Bytes, more: bool) -> Outgoing {
        Outgoing {
            more,
            ..Outgoing::new(frame, client.cell.clone(), seq)
        }
    }
}

/// The conditions under which streaming keeps the client's order and checks intact (with
/// no MULTI, WATCH or subscription, which the caller knows).
fn may_stream(io: &Io, client: &Client, intake: &Intake) -> bool {
    client.login == Login::Default && !matches!(intake, Intake::Held(_)) && !io.draining
}

/// Whether the probe's empty last argument stands for a value, not for a key: another
/// placeholder must route the same. A 4 MiB key (Redis allows them) would route by the part
/// not yet arrived, so its request is framed whole instead.
fn value_is_not_routed(
    probe: &resp::Request,
    slot: u16,
    allow_admin: bool,
    placement: &cluster::Placement,
) -> bool {
    let mut args: Vec<&[u8]> = probe.args().collect();
    let Some(last) = args.last_mut() else {
        return false;
    };
    *last = b"x";
    let other = resp::Request::from_args(&args);
    let (route, _) = crate::route::route_counted(&other, allow_admin, placement);
    matches!(route, Route::Slot(s) | Route::Read(s) if s == slot)
}

/// The reply for an upload whose connection went away before the request was complete.
fn lost(backend: &Backend) -> Bytes {
    Bytes::from(format!(
        "-ERR slotgate: node {} connection lost while the request was arriving (not executed)\r\n",
        backend.addr
    ))
}
