//! The requests that wait for their turn (`Held`), what the session does with the next
//! ones meanwhile (`Intake`), and an exclusive request's shape: plain data, so the features
//! that make them (transactions, pub/sub, KEYS, the mode changes) and the code that runs
//! them (`exclusive.rs`) share it without depending on each other.

use std::rc::Rc;

use bytes::Bytes;
use resp::Request;

use crate::backend::Backend;
use crate::route::{Local, PubSubTarget};
use crate::session::queue::Resend;

/// What the session does with the requests its client sends next: one state, not a flag
/// per reason to stop. (`draining`, the input being finished, and `input_stalled`, complete
/// requests left unparsed, are facts about the socket and the buffer, kept beside it.)
#[derive(Default)]
pub(crate) enum Intake {
    /// Parse and dispatch as they come, within backpressure.
    #[default]
    Open,
    /// This request waits until every earlier one is answered and every pub/sub command
    /// confirmed; nothing after it is parsed meanwhile.
    Held(Held),
    /// A request that has a connection to itself is in flight (EXEC, WATCH, KEYS' rounds):
    /// nothing more is parsed until it is answered, as Redis runs a client's commands one
    /// at a time. Its reply is owed even to a client that has stopped sending (review S7).
    Serial,
    /// As `Serial`, for a request that may never be answered (BLPOP, XREAD BLOCK, WAIT): a
    /// client that leaves does not keep it, and CLIENT LIST shows the `b` flag.
    Blocked,
    /// The big request at the parser's head is streamed once the requests before it are
    /// answered (or a streamed one's reply is awaited): it must not be framed meanwhile.
    UploadWaiting,
    /// CLIENT PAUSE holds this request (`context/pause.rs`): nothing after it is parsed
    /// until the pause ends or is lifted; CLIENT LIST shows `b`, INFO counts it blocked.
    Paused(Box<Paused>),
    /// `[migration]` holds this request until its keys left the source
    /// (`migration_gate.rs`): nothing after it is parsed meanwhile.
    Migrating(Box<Migrating>),
}

/// A request waiting for its keys to move, already checked, routed and past any pause.
pub(crate) struct Migrating {
    pub req: Request,
    pub route: crate::route::Route,
    pub command: crate::route::Counted,
    /// Ok: the keys moved. Err: the reply (TRYAGAIN) instead of running it.
    pub moved: tokio::sync::oneshot::Receiver<Result<(), Bytes>>,
}

/// A request held by CLIENT PAUSE, already checked (AUTH, ACL) and routed, and the timer
/// that wakes the session when the pause is due to end.
pub(crate) struct Paused {
    pub req: Request,
    pub route: crate::route::Route,
    pub command: crate::route::Counted,
    pub wake: std::pin::Pin<Box<tokio::time::Sleep>>,
}

/// A request waiting for its turn, by kind.
pub(crate) enum Held {
    /// Sent alone on one of the session's own connections.
    Exclusive(Exclusive),
    /// A pub/sub command, for the subscription connection(s).
    PubSub(Request, PubSubTarget),
    /// EXEC of a transaction of (un)subscribe commands (and PINGs): `MULTI`, the `queued`
    /// commands and `EXEC`, for the subscription bus (`pubsub.rs`, `exec_on_bus`).
    BusExec { frame: Bytes, queued: u32 },
    /// A local command that changes the connection's mode (QUIT, RESET, HELLO).
    Local(Request, Local),
    /// KEYS, read in two rounds (`Fanout::twice`): the client's later requests must not run
    /// between them, nor its earlier ones after.
    Keys(Request),
    /// A transaction the node holds, ended without EXEC (DISCARD, a queue-time refusal of
    /// the proxy's, or one replayed command by command): once what was queued on it is
    /// answered, `conn` closes, so the node drops the transaction and any WATCH, and the
    /// client gets `reply` (None: the replay goes on).
    Discard {
        conn: Rc<Backend>,
        reply: Option<&'static [u8]>,
    },
}

/// The connection that holds a transaction on its node (`transaction.rs`), and its break
/// count when MULTI was written there: a change means the node forgot it.
pub(crate) struct OnNode {
    pub conn: Rc<Backend>,
    pub breaks: u32,
}

/// Which of the session's own connections an exclusive request uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// The dedicated connection to the slot's owner (blocking commands, EXEC without WATCH).
    Dedicated,
    /// The connection that holds the session's WATCH (WATCH itself).
    Watch,
    /// EXEC after WATCH: on the WATCH's connection if the WATCH still holds, else nil.
    WatchedExec,
}

/// An exclusive request: one command, or MULTI…EXEC for a transaction.
pub(crate) struct Exclusive {
    /// The bytes to send.
    pub frame: Bytes,
    /// A blocking command, which may never be answered (`Intake::Blocked`).
    pub blocks: bool,
    /// Commands in `frame` before the one whose reply the client gets.
    pub skip: u32,
    /// The slot that decides the node; None for any master.
    pub slot: Option<u16>,
    /// What a redirect resends.
    pub resend: Resend,
    pub via: Via,
    /// An EXEC whose commands are already queued on this connection: EXEC alone goes
    /// there, or `frame` whole if the slot's node is another now.
    pub on_node: Option<OnNode>,
}

impl Held {
    /// A restricted user's script or function call, on the dedicated connection that runs
    /// as its mirror user (`session/auth.rs`): answered, unlike a blocking command.
    pub(crate) fn script(req: Request, slot: Option<u16>) -> Held {
        Held::Exclusive(Exclusive::one(req, slot, false))
    }

    /// One blocking command on the dedicated connection.
    pub(crate) fn single(req: Request, slot: Option<u16>) -> Held {
        Held::Exclusive(Exclusive::one(req, slot, true))
    }
}

impl Exclusive {
    /// One command on the dedicated connection.
    pub(crate) fn one(req: Request, slot: Option<u16>, blocks: bool) -> Exclusive {
        let frame = req.raw().clone();
        Exclusive {
            resend: Resend::Frame(frame.clone()),
            frame,
            blocks,
            skip: 0,
            slot,
            via: Via::Dedicated,
            on_node: None,
        }
    }
}
