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
//! invalidations, queued behind the replies owed (`tracking/keys.rs`). REDIRECT hands them
//! to another client, on any worker (`tracking/redirect.rs`): that is how a RESP2 client
//! tracks. The connections follow the masters as the keyspace connections do (`follow.rs`).
//! NOLOOP is accepted; the client's own writes still invalidate its keys (one invalidation
//! too many is safe, one too few is not).

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::backend::Outgoing;
use crate::context::registry::Recipient;
use crate::reply::error;
use crate::session::exclusive::Intake;
use crate::session::follow::Followers;
use crate::session::queue::Entry;
use crate::session::tracking::keys::{KeyTable, Mode};
use crate::session::tracking::redirect::NO_SUCH_CLIENT;
use crate::session::Session;

mod keys;
mod redirect;

/// The RESP3 flush-everything invalidation Redis sends after FLUSHALL.
const FLUSH_ALL: &[u8] = b">2\r\n$10\r\ninvalidate\r\n_\r\n";

/// A session's tracking connections.
pub(crate) struct Tracking {
    /// One per master, each owing the answers to its `setups` until it sent them.
    conns: Followers,
    /// `CLIENT TRACKING ON BCAST [PREFIX p…]` as each master gets it.
    /// `CLIENT TRACKING ON BCAST [PREFIX p…]` as each master gets them: one per CLIENT
    /// TRACKING ON the nodes accepted (in BCAST mode, prefixes add up, as in Redis).
    setups: Vec<Bytes>,
    /// The client's CLIENT TRACKING reply, owed once every master answered.
    reply_seq: Option<u64>,
    /// The first error a master answered the setup with.
    refused: Option<Bytes>,
    /// Tracking was on before the CLIENT TRACKING ON being answered: a refusal keeps it on.
    again: bool,
    /// The keys the client read, in the default mode (None: BCAST, everything passes).
    keys: Option<KeyTable>,
    /// REDIRECT's target: the client that gets the invalidations (`tracking/redirect.rs`).
    redirect: Option<Recipient>,
}

/// What a `CLIENT TRACKING …` asks for.
enum Ask {
    Off,
    /// On: the setup each master's connection gets, the key table's mode (None: BCAST), and
    /// the REDIRECT target's id.
    On(Bytes, Option<Mode>, Option<u64>),
    Refuse(Bytes),
}

/// The options of `CLIENT TRACKING ON|OFF …`.
#[derive(Default)]
struct Options<'a> {
    bcast: bool,
    optin: bool,
    optout: bool,
    redirect: Option<u64>,
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
            b"redirect" if i + 1 < req.argc() => {
                if o.redirect.is_some() {
                    return Err(error("A client can only redirect to a single other client"));
                }
                let id = std::str::from_utf8(req.arg(i + 1)).ok();
                let Some(id) = id.and_then(|id| id.parse::<u64>().ok()) else {
                    return Err(error("value is not an integer or out of range"));
                };
                (o.redirect, i) = (Some(id), i + 1);
            }
            _ => return Err(error("syntax error")),
        }
        i += 1;
    }
    Ok(o)
}

/// What `req` asks for, given the mode tracking is in now (`current`: None when off,
/// Some(None) in BCAST mode), with Redis's errors in Redis's order.
fn parse(req: &Request, current: Option<Option<Mode>>) -> Ask {
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
    Ask::On(frame.freeze(), (!o.bcast).then_some(mode), o.redirect)
}

// === impl Session (client tracking) ===

impl Session {
    /// CLIENT TRACKING: answered once every master's connection answered (or at once).
    pub(crate) fn client_tracking(&mut self, req: &Request) {
        let current = self
            .tracking
            .as_ref()
            .map(|t| t.keys.as_ref().map(KeyTable::mode));
        match parse(req, current) {
            Ask::Refuse(err) => self.reply_now(err),
            Ask::Off => {
                self.tracking_off();
                self.reply_now(Bytes::from_static(b"+OK\r\n"));
            }
            Ask::On(setup, mode, redirect) => {
                let redirect = match redirect.map(|id| self.recipient(id)) {
                    Some(None) => return self.reply_now(error(NO_SUCH_CLIENT)),
                    found => found.flatten(),
                };
                match self.tracking.is_some() {
                    true => self.tracking_again(setup, mode, redirect),
                    false => self.tracking_on(setup, mode, redirect),
                }
            }
        }
    }

    fn tracking_on(&mut self, setup: Bytes, mode: Option<Mode>, redirect: Option<Recipient>) {
        let seq = self.cell.push(Entry::pending_local());
        self.tracking = Some(Box::new(Tracking {
            conns: Followers::new(self.cell.clone()),
            setups: vec![setup],
            reply_seq: Some(seq),
            refused: None,
            again: false,
            keys: mode.map(KeyTable::new),
            redirect,
        }));
        self.intake = Intake::Serial;
        self.follow_tracking();
        self.answer_tracking();
    }

    /// CLIENT TRACKING ON while on: as in Redis, the tracked keys stay, the options are the
    /// new ones, and in BCAST mode the new prefixes add to the old (sent to every master).
    fn tracking_again(&mut self, setup: Bytes, mode: Option<Mode>, redirect: Option<Recipient>) {
        let seq = self.cell.push(Entry::pending_local());
        let Some(t) = self.tracking.as_mut() else {
            return;
        };
        t.redirect = redirect;
        if let (Some(keys), Some(mode)) = (t.keys.as_mut(), mode) {
            keys.set_mode(mode);
            return self.cell.deliver_local(seq, Bytes::from_static(b"+OK\r\n"));
        }
        t.setups.push(setup.clone());
        let sink = t.conns.sink.clone();
        for (conn, owed) in t.conns.conns.iter_mut() {
            conn.send(Outgoing::stream(setup.clone(), sink.clone()));
            *owed += 1;
        }
        (t.reply_seq, t.refused, t.again) = (Some(seq), None, true);
        self.intake = Intake::Serial;
        self.answer_tracking();
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
        let Some(t) = self.tracking.as_mut() else {
            return;
        };
        let topology = self.worker.topology();
        let map = topology.current();
        let Some(followed) = t.conns.follow(&map, None, topology) else {
            return;
        };
        if followed.lost {
            if let Some(keys) = t.keys.as_mut() {
                keys.forget_all();
            }
        }
        // RESP3 whatever the client speaks: a node pushes invalidations only on RESP3.
        for addr in followed.missing {
            let conn = self.worker.new_backend(&addr, true);
            let sink = t.conns.sink.clone();
            conn.stream_to(sink.clone());
            for setup in &t.setups {
                conn.send(Outgoing::stream(setup.clone(), sink.clone()));
            }
            t.conns.conns.push((conn, t.setups.len() as u32));
        }
        if followed.lost {
            self.tracking_deliver(Bytes::from_static(FLUSH_ALL));
        }
        // A master whose connection broke answers with nothing: count it as answered.
        self.answer_tracking();
    }

    /// A frame from `source`: None if that is not a tracking connection, else whether the
    /// frame goes to the client (an invalidation).
    pub(crate) fn tracking_frame(&mut self, source: usize, frame: &Bytes) -> Option<bool> {
        let live = std::sync::Arc::clone(&self.worker.live());
        // A user confined to some keys hears of those only: BCAST would name every key.
        let confined = self
            .user
            .and_then(|i| live.users.get(i))
            .filter(|u| !u.all_keys());
        let t = self.tracking.as_mut()?;
        let (_, owed) = t.conns.find(source)?;
        if frame.first() == Some(&b'>') {
            let push = match (t.keys.as_mut(), confined) {
                (None, Some(user)) => match keys::keep_only(frame, |k| user.may_access(k)) {
                    Some(push) => push,
                    None => return Some(false),
                },
                // BCAST to the client itself: as it comes.
                (None, None) if t.redirect.is_none() && self.info.protocol == 3 => {
                    return Some(true)
                }
                (None, None) => frame.clone(),
                (Some(keys), _) => match keys.filter(frame) {
                    Some(push) => push,
                    None => return Some(false),
                },
            };
            self.tracking_deliver(push);
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
            self.tracking_deliver(Bytes::from_static(FLUSH_ALL));
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
        if refused.is_some() && t.again {
            // As Redis: a refused CLIENT TRACKING ON changes nothing.
            t.setups.pop();
        } else if refused.is_some() || t.conns.conns.is_empty() {
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
