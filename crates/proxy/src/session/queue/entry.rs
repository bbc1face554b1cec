//! A reply-queue entry: one request's place in its client's reply order, and, by kind, what
//! following its redirects needs (a local answer has nothing to follow; a whole request its
//! connection and bytes; a fan-out its parts).

use std::rc::Rc;

use bytes::Bytes;

use crate::backend::Backend;
use crate::context::near_cache::Written;
use crate::session::failover_hold::Hold;
use crate::session::fanout::Fanout;

/// One request's place in its client's reply order.
pub(crate) struct Entry {
    /// The reply, once known. A redirect reply stays here until the session follows it.
    pub reply: Option<Bytes>,
    /// Pieces of a streamed reply that arrived before its end (`queue/partial.rs`).
    pub partial: Vec<Bytes>,
    /// For a sampled request: its command index and when it was dispatched.
    pub sampled: Option<(u16, tokio::time::Instant)>,
    /// The request's command, for INFO commandstats.
    pub command: Option<Called>,
    /// What the request is: what a redirect or a retry may do with it.
    pub kind: Kind,
    /// CLIENT REPLY OFF or SKIP was in force when it was read: it runs, and its reply is
    /// dropped when it reaches the head instead of being written.
    pub silent: bool,
    /// `[near_cache]`: a write's mark, bumped again when its reply arrives.
    pub written: Option<Written>,
    /// SLOWLOG and COMMANDLOG: checked when the reply goes to the writer.
    pub slow: Option<Mark>,
}

/// A request's SLOWLOG and COMMANDLOG mark (`slowlog.rs`), carried by its entry: when it
/// was read and its size, and its bytes unless the entry holds them already (a request sent
/// whole keeps its frame to resend: that frame is read only if the request is logged).
pub(crate) struct Mark {
    pub read_us: u64,
    /// None: the entry's own frame (`Resend::Frame`) is the request.
    pub request: Option<Bytes>,
    /// The request's size as it came in (an upload's whole, `request` being its probe).
    pub request_bytes: u64,
}

/// A request's command (its index in the command table), and whether the proxy refused
/// it before it ran: an error reply counts as its rejected or failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Called {
    pub command: u16,
    pub refused: bool,
}

/// A request, by the way it went out.
pub(crate) enum Kind {
    /// Answered by the proxy itself, or refused: nothing went to a node.
    Local,
    /// Sent whole to one node.
    Sent(Sent),
    /// Sent as several parts (split by slot, or one per master), merged as they come.
    Fanout(Box<Fanout>),
}

/// A request sent whole to one node, and what following its redirects needs.
pub(crate) struct Sent {
    /// What a redirect resends.
    pub resend: Resend,
    /// The connection it was last sent on: the host of an empty-host MOVED, loop detection.
    pub sent_to: Option<Rc<Backend>>,
    /// MOVED/ASK hops followed so far.
    pub hops: u8,
    /// Retries ("not executed" errors) so far.
    pub retries: u8,
    /// Slot-map version it was routed with (a MOVED from an older map asks no refresh).
    pub map_version: u64,
    /// The slot its keys hash to, to route it again after a failover (None when keyless).
    pub slot: Option<u16>,
    /// Which kind of connection carries it.
    pub conn: Conn,
    /// Held for a failover: it never reached its node.
    pub hold: Hold,
}

/// The connection a whole request travels on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conn {
    /// A worker's connection shared by every client: a redirect may take any other one.
    Shared,
    /// One of the session's own (dedicated, WATCH): a redirect stays on one, and a retry
    /// from a timer is not possible, so "not executed" errors are passed through.
    Own,
}

/// The bytes a redirect resends.
pub(crate) enum Resend {
    /// The request's own bytes (a refcount, not a copy).
    Frame(Bytes),
    /// A streamed upload's pieces, joined only if a redirect must resend them.
    Pieces(Box<[Bytes]>),
    /// A transaction's `MULTI, cmd…, EXEC`, `skip` replies before EXEC's. Resent whole when
    /// the node refused it before anything ran (`backend/refusal.rs`), unless `watched`: its
    /// WATCH stayed on the node it went to, so EXEC answers nil (`session/redirect.rs`).
    Transaction {
        frame: Bytes,
        skip: u32,
        watched: bool,
    },
    /// Never resent (an upload still arriving).
    Never,
}

impl Sent {
    /// A request just sent on `to` with the map of `map_version`.
    pub(crate) fn new(resend: Resend, to: &Rc<Backend>, slot: Option<u16>, conn: Conn) -> Sent {
        Sent {
            resend,
            sent_to: Some(to.clone()),
            hops: 0,
            retries: 0,
            map_version: 0,
            slot,
            conn,
            hold: Hold::default(),
        }
    }

    /// A request on a shared connection whose slot had no owner when it came: sent when
    /// its turn comes and the map names one (`send/mod.rs`).
    pub(crate) fn unrouted(resend: Resend, slot: u16) -> Sent {
        Sent {
            resend,
            sent_to: None,
            hops: 0,
            retries: 0,
            map_version: 0,
            slot: Some(slot),
            conn: Conn::Shared,
            hold: Hold::default(),
        }
    }

    /// The bytes to resend, if it may be.
    pub(crate) fn resend_frame(&self) -> Option<Bytes> {
        match &self.resend {
            Resend::Frame(frame) => Some(frame.clone()),
            Resend::Pieces(parts) => Some(join(parts)),
            Resend::Transaction { frame, .. } => Some(frame.clone()),
            Resend::Never => None,
        }
    }
}

impl Entry {
    /// An entry whose reply is already known (local commands, refusals).
    pub(crate) fn ready(reply: Bytes) -> Entry {
        Entry {
            reply: Some(reply),
            partial: Vec::new(),
            sampled: None,
            command: None,
            kind: Kind::Local,
            silent: false,
            written: None,
            slow: None,
        }
    }

    /// A request the proxy answers itself later (WAIT): no node owes its reply.
    pub(crate) fn pending_local() -> Entry {
        Entry {
            reply: None,
            partial: Vec::new(),
            sampled: None,
            command: None,
            kind: Kind::Local,
            silent: false,
            written: None,
            slow: None,
        }
    }

    /// A request sent whole, waiting for its reply.
    pub(crate) fn sent(sent: Sent) -> Entry {
        Entry {
            reply: None,
            partial: Vec::new(),
            sampled: None,
            command: None,
            kind: Kind::Sent(sent),
            silent: false,
            written: None,
            slow: None,
        }
    }

    /// A request sent as parts, waiting for them.
    pub(crate) fn fanout(fanout: Fanout) -> Entry {
        Entry {
            reply: None,
            partial: Vec::new(),
            sampled: None,
            command: None,
            kind: Kind::Fanout(Box::new(fanout)),
            silent: false,
            written: None,
            slow: None,
        }
    }

    /// The hold of the request (or of part `frag`); None for a local answer.
    pub(crate) fn hold_mut(&mut self, frag: u32) -> Option<&mut Hold> {
        match &mut self.kind {
            Kind::Local => None,
            Kind::Sent(s) => Some(&mut s.hold),
            Kind::Fanout(f) => f.parts.get_mut(frag as usize).map(|p| &mut p.hold),
        }
    }

    /// The slot of the request (or of part `frag` of a fan-out), if it has one.
    pub(crate) fn slot_of(&self, frag: u32) -> Option<u16> {
        match &self.kind {
            Kind::Local => None,
            Kind::Sent(s) => s.slot,
            Kind::Fanout(f) => f.parts.get(frag as usize).and_then(|p| p.slot),
        }
    }
}

/// A streamed request's pieces as one frame, for the rare redirect that must resend it.
fn join(parts: &[Bytes]) -> Bytes {
    let mut all = bytes::BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
    for p in parts {
        all.extend_from_slice(p);
    }
    all.freeze()
}
