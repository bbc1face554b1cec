//! CLIENT TRACKING through the proxy, in broadcasting mode (BCAST) for RESP3 clients.
//!
//! In BCAST mode Redis invalidates every key that matches the client's prefixes, whoever
//! wrote it and whichever connection read it: so one connection per master, with tracking
//! on in BCAST mode, carries every invalidation the client is owed, and the proxy passes
//! each `invalidate` push on as it comes:
//!
//! ```text
//!   CLIENT TRACKING ON BCAST [PREFIX p…] ─▶ each master: CLIENT TRACKING ON BCAST [PREFIX p…]
//!        every master answered +OK ─▶ the client's +OK (nothing later is read before it)
//!   >2 invalidate [keys] from any master ─▶ the client
//!   a connection breaks ─▶ >2 invalidate (null): flush everything; a new master's
//!        connection, once it answers +OK ─▶ another flush (what changed in the gap)
//! ```
//!
//! The connections follow the masters as the keyspace connections do (`follow.rs`). The
//! default mode, OPTIN, OPTOUT, NOLOOP and REDIRECT need the reads and writes of the client
//! to run on the connection that tracks them, which the shared connections cannot give: they
//! are refused with a `slotgate:` error, as is tracking from a RESP2 client (which needs
//! REDIRECT).

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::backend::Outgoing;
use crate::reply::error;
use crate::session::exclusive::Intake;
use crate::session::follow::Followers;
use crate::session::queue::Entry;
use crate::session::Session;

/// The RESP3 flush-everything invalidation Redis sends after FLUSHALL.
const FLUSH_ALL: &[u8] = b">2\r\n$10\r\ninvalidate\r\n_\r\n";

/// A session's tracking connections.
pub(crate) struct Tracking {
    /// One per master, each owing the answer to its `setup` until it sent it.
    conns: Followers,
    /// `CLIENT TRACKING ON BCAST [PREFIX p…]` as each master gets it.
    setup: Bytes,
    /// The client's CLIENT TRACKING reply, owed once every master answered.
    reply_seq: Option<u64>,
    /// The first error a master answered the setup with.
    refused: Option<Bytes>,
}

/// What a `CLIENT TRACKING …` asks for.
enum Ask {
    Off,
    Bcast(Bytes),
    Refuse(Bytes),
}

fn parse(req: &Request, resp3: bool) -> Ask {
    let switch = if req.argc() > 2 { req.arg(2) } else { b"" };
    let on = switch.eq_ignore_ascii_case(b"on");
    if !on && !switch.eq_ignore_ascii_case(b"off") {
        return Ask::Refuse(error("syntax error"));
    }
    let mut args: Vec<&[u8]> = vec![b"CLIENT", b"TRACKING", b"ON"];
    let (mut bcast, mut prefixes, mut other) = (false, false, false);
    let mut i = 3;
    while i < req.argc() {
        let opt = req.arg(i).to_ascii_lowercase();
        match opt.as_slice() {
            b"bcast" => bcast = true,
            b"prefix" if i + 1 < req.argc() => {
                prefixes = true;
                args.extend([&b"PREFIX"[..], req.arg(i + 1)]);
                i += 1;
            }
            b"optin" | b"optout" | b"noloop" => other = true,
            b"redirect" if i + 1 < req.argc() => (other, i) = (true, i + 1),
            _ => return Ask::Refuse(error("syntax error")),
        }
        i += 1;
    }
    if !on {
        return Ask::Off;
    }
    if prefixes && !bcast {
        return Ask::Refuse(error("PREFIX option requires BCAST mode to be enabled"));
    }
    if !bcast || other || !resp3 {
        return Ask::Refuse(error(
            "slotgate: CLIENT TRACKING supports only ON BCAST [PREFIX prefix …] from a RESP3 \
             client (default mode, OPTIN, OPTOUT, NOLOOP and REDIRECT are not supported)",
        ));
    }
    args.insert(3, b"BCAST");
    let mut frame = BytesMut::new();
    resp::encode_command(&mut frame, &args);
    Ask::Bcast(frame.freeze())
}

// === impl Session (client tracking) ===

impl Session {
    /// CLIENT TRACKING: answered once every master's connection answered (or at once).
    pub(crate) fn client_tracking(&mut self, req: &Request) {
        match parse(req, self.resp3()) {
            Ask::Refuse(err) => self.reply_now(err),
            Ask::Off => {
                self.tracking_off();
                self.reply_now(Bytes::from_static(b"+OK\r\n"));
            }
            Ask::Bcast(setup) => {
                self.tracking_off();
                let seq = self.cell.push(Entry::pending_local());
                self.tracking = Some(Box::new(Tracking {
                    conns: Followers::new(self.cell.clone()),
                    setup,
                    reply_seq: Some(seq),
                    refused: None,
                }));
                self.intake = Intake::Serial;
                self.follow_tracking();
                self.answer_tracking();
            }
        }
    }

    /// Close the tracking connections (CLIENT TRACKING OFF, RESET, the session's end).
    pub(crate) fn tracking_off(&mut self) {
        if let Some(t) = self.tracking.take() {
            t.conns.close();
        }
    }

    /// Match the tracking connections to the masters; flush the client's cache when one
    /// broke, since what it carried may be lost.
    pub(crate) fn follow_tracking(&mut self) {
        let resp3 = self.resp3();
        let Some(t) = self.tracking.as_mut() else {
            return;
        };
        let topology = self.worker.topology();
        let map = topology.current();
        let Some(followed) = t.conns.follow(&map, None, topology) else {
            return;
        };
        if followed.lost {
            self.cell.push_frame(0, Bytes::from_static(FLUSH_ALL));
        }
        for addr in followed.missing {
            let conn = self.worker.new_backend(&addr, resp3);
            let sink = t.conns.sink.clone();
            conn.stream_to(sink.clone());
            conn.send(Outgoing::stream(t.setup.clone(), sink));
            t.conns.conns.push((conn, 1));
        }
        // A master whose connection broke answers with nothing: count it as answered.
        self.answer_tracking();
    }

    /// A frame from `source`: None if that is not a tracking connection, else whether the
    /// frame goes to the client (an invalidation).
    pub(crate) fn tracking_frame(&mut self, source: usize, frame: &Bytes) -> Option<bool> {
        let t = self.tracking.as_mut()?;
        let (_, owed) = t.conns.find(source)?;
        if frame.first() == Some(&b'>') {
            return Some(true);
        }
        if *owed == 0 {
            return Some(false);
        }
        *owed -= 1;
        if frame.first() == Some(&b'-') {
            t.refused.get_or_insert_with(|| frame.clone());
        } else if t.reply_seq.is_none() {
            // A connection opened since the client's +OK: flush what changed in the gap.
            self.cell.push_frame(0, Bytes::from_static(FLUSH_ALL));
        }
        self.answer_tracking();
        Some(false)
    }

    /// The client's CLIENT TRACKING reply, once no master owes its answer.
    fn answer_tracking(&mut self) {
        let Some(t) = self.tracking.as_mut() else {
            return;
        };
        if t.conns.conns.iter().any(|(_, owed)| *owed > 0) {
            return;
        }
        let Some(seq) = t.reply_seq.take() else {
            return;
        };
        let refused = t.refused.take();
        if refused.is_some() || t.conns.conns.is_empty() {
            self.tracking_off();
        }
        let reply = refused.unwrap_or_else(|| Bytes::from_static(b"+OK\r\n"));
        self.cell.deliver_local(seq, reply);
    }
}
