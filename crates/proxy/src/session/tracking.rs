//! CLIENT TRACKING through the proxy, for RESP3 clients: BCAST mode, and the default mode
//! with OPTIN/OPTOUT (`tracking/keys.rs`).
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
//! The default mode tracks the keys the client read. Its reads run on shared connections,
//! which the nodes cannot tell apart, so the masters' connections track every key (BCAST
//! without a prefix) and the session keeps the client's keys itself, passing on only their
//! invalidations, queued behind the replies owed (`tracking/keys.rs`). The connections follow
//! the masters as the keyspace connections do (`follow.rs`). REDIRECT (and so tracking from a
//! RESP2 client) would need invalidations handed to another client, possibly on another
//! worker: refused with a `slotgate:` error. NOLOOP is accepted; the client's own writes
//! still invalidate its keys (one invalidation too many is safe, one too few is not).

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::backend::Outgoing;
use crate::reply::error;
use crate::session::exclusive::Intake;
use crate::session::follow::Followers;
use crate::session::queue::Entry;
use crate::session::tracking::keys::{KeyTable, Mode};
use crate::session::Session;

mod keys;

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
    /// The keys the client read, in the default mode (None: BCAST, everything passes).
    keys: Option<KeyTable>,
}

/// What a `CLIENT TRACKING …` asks for.
enum Ask {
    Off,
    /// On: the setup each master's connection gets, and the key table's mode (None: BCAST).
    On(Bytes, Option<Mode>),
    Refuse(Bytes),
}

/// The options of `CLIENT TRACKING ON|OFF …`.
#[derive(Default)]
struct Options<'a> {
    bcast: bool,
    optin: bool,
    optout: bool,
    redirect: bool,
    prefixes: Vec<&'a [u8]>,
}

fn options(req: &Request) -> Result<Options<'_>, Bytes> {
    let mut o = Options::default();
    let mut i = 3;
    while i < req.argc() {
        let opt = req.arg(i).to_ascii_lowercase();
        match opt.as_slice() {
            b"bcast" => o.bcast = true,
            b"optin" => o.optin = true,
            b"optout" => o.optout = true,
            b"noloop" => {}
            b"prefix" if i + 1 < req.argc() => {
                o.prefixes.push(req.arg(i + 1));
                i += 1;
            }
            b"redirect" if i + 1 < req.argc() => (o.redirect, i) = (true, i + 1),
            _ => return Err(error("syntax error")),
        }
        i += 1;
    }
    Ok(o)
}

/// What `req` asks for, given the mode tracking is in now (`current`: None when off,
/// Some(None) in BCAST mode), with Redis's errors in Redis's order.
fn parse(req: &Request, resp3: bool, current: Option<Option<Mode>>) -> Ask {
    let switch = if req.argc() > 2 { req.arg(2) } else { b"" };
    let on = switch.eq_ignore_ascii_case(b"on");
    if !on && !switch.eq_ignore_ascii_case(b"off") {
        return Ask::Refuse(error("syntax error"));
    }
    let o = match options(req) {
        Ok(o) => o,
        Err(e) => return Ask::Refuse(e),
    };
    if !on {
        return Ask::Off;
    }
    let mode = match (o.optin, o.optout) {
        (true, _) => Mode::OptIn,
        (_, true) => Mode::OptOut,
        _ => Mode::All,
    };
    let refusal = if !o.bcast && !o.prefixes.is_empty() {
        "PREFIX option requires BCAST mode to be enabled"
    } else if current.is_some_and(|c| c.is_none() != o.bcast) {
        "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
    } else if o.bcast && (o.optin || o.optout) {
        "OPTIN and OPTOUT are not compatible with BCAST"
    } else if o.optin && o.optout {
        "You can't specify both OPTIN mode and OPTOUT mode"
    } else if current
        .flatten()
        .is_some_and(|c| c != Mode::All && mode != Mode::All && c != mode)
    {
        "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
    } else if o.redirect || !resp3 {
        "slotgate: CLIENT TRACKING REDIRECT (and so tracking from a RESP2 client) is not \
         supported by the proxy; use RESP3 (HELLO 3)"
    } else {
        ""
    };
    if !refusal.is_empty() {
        return Ask::Refuse(error(refusal));
    }
    let mut args: Vec<&[u8]> = vec![b"CLIENT", b"TRACKING", b"ON", b"BCAST"];
    o.prefixes
        .iter()
        .for_each(|p| args.extend([&b"PREFIX"[..], p]));
    let mut frame = BytesMut::new();
    resp::encode_command(&mut frame, &args);
    Ask::On(frame.freeze(), (!o.bcast).then_some(mode))
}

// === impl Session (client tracking) ===

impl Session {
    /// CLIENT TRACKING: answered once every master's connection answered (or at once).
    pub(crate) fn client_tracking(&mut self, req: &Request) {
        let current = self
            .tracking
            .as_ref()
            .map(|t| t.keys.as_ref().map(KeyTable::mode));
        match parse(req, self.resp3(), current) {
            Ask::Refuse(err) => self.reply_now(err),
            Ask::Off => {
                self.tracking_off();
                self.reply_now(Bytes::from_static(b"+OK\r\n"));
            }
            Ask::On(setup, mode) => {
                self.tracking_off();
                let seq = self.cell.push(Entry::pending_local());
                self.tracking = Some(Box::new(Tracking {
                    conns: Followers::new(self.cell.clone()),
                    setup,
                    reply_seq: Some(seq),
                    refused: None,
                    keys: mode.map(KeyTable::new),
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
            if let Some(keys) = t.keys.as_mut() {
                keys.forget_all();
            }
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
            let Some(keys) = t.keys.as_mut() else {
                return Some(true);
            };
            // Behind every reply owed: the read it invalidates may still be on its way.
            if let Some(push) = keys.filter(frame) {
                self.cell.push(Entry::ready(push));
            }
            return Some(false);
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

impl Session {
    /// CLIENT CACHING yes|no, for the next command (OPTIN/OPTOUT).
    pub(crate) fn client_caching(&mut self, req: &Request) {
        let arg = if req.argc() == 3 { req.arg(2) } else { b"" };
        let answer = match self.tracking.as_mut().map(|t| t.keys.as_mut()) {
            _ if req.argc() != 3 => Err(error("syntax error")),
            None => Err(keys::not_opt()),
            Some(None) => KeyTable::new(Mode::All).caching(arg),
            Some(Some(keys)) => keys.caching(arg),
        };
        self.reply_now(answer.map_or_else(|e| e, |()| Bytes::from_static(b"+OK\r\n")));
    }

    /// A request of a client tracking in the default mode: remember the keys it reads.
    pub(crate) fn track_request(&mut self, req: &Request) {
        let in_tx = self.tx.is_some() || req.arg(0).eq_ignore_ascii_case(b"multi");
        let Some(keys) = self.tracking.as_mut().and_then(|t| t.keys.as_mut()) else {
            return;
        };
        let gone = keys.note_request(req, in_tx);
        if !gone.is_empty() {
            self.cell.push(Entry::ready(keys::invalidation(&gone)));
        }
    }
}
