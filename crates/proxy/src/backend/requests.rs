//! What a backend connection carries: the requests sessions queue (`Outgoing`) and, once
//! written, who is owed each reply (`InFlight`, in write order).

use std::rc::Rc;

use bytes::Bytes;

use super::sink::ReplySink;

/// One request waiting to be written to the node.
pub(crate) struct Outgoing {
    pub frame: Bytes,
    pub client: Rc<dyn ReplySink>,
    /// Where its reply goes.
    pub owes: Owes,
    /// Send `ASKING` right before this request, in the same write (ASK redirection).
    pub asking: bool,
    /// `frame` holds this many commands before the one whose reply the client gets (a
    /// transaction sent as MULTI…EXEC): their replies are read and dropped.
    pub skip: u32,
    /// A command queued in a transaction the node holds (`session/transaction.rs`): a
    /// redirect or "not executed" reply is kept for its EXEC, as for `skip`'s, and the
    /// client is answered `+QUEUED`; any other reply (QUEUED, OOM…) is the client's.
    pub queued: bool,
    /// The request goes on in a later `Outgoing` (a streamed upload): this part is written
    /// but owed no reply; the last part carries `false` and the reply's owner.
    pub more: bool,
}

/// Where the reply to an `Outgoing` goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owes {
    /// Into the client's reply queue: entry `seq`, part `frag` of a split request (0 when
    /// unsplit).
    Entry { seq: u64, frag: u32 },
    /// Nowhere in particular: a command on a pub/sub or notification stream, whose
    /// confirmations come back as pushes like the messages, to the stream's sink.
    Stream,
}

impl Outgoing {
    /// A whole request, owed one reply: what most requests are.
    pub(crate) fn new(frame: Bytes, client: Rc<dyn ReplySink>, seq: u64) -> Outgoing {
        Outgoing::with(frame, client, Owes::Entry { seq, frag: 0 })
    }

    /// A command on a stream connection (`Backend::stream_to`).
    pub(crate) fn stream(frame: Bytes, client: Rc<dyn ReplySink>) -> Outgoing {
        Outgoing::with(frame, client, Owes::Stream)
    }

    fn with(frame: Bytes, client: Rc<dyn ReplySink>, owes: Owes) -> Outgoing {
        Outgoing {
            frame,
            client,
            owes,
            asking: false,
            skip: 0,
            queued: false,
            more: false,
        }
    }
}

/// Who is owed the next reply read from the node.
pub(super) struct InFlight {
    pub owed: Owed,
    /// The watchdog's limit for this reply (`Watchdog::owe`), handed back when it comes.
    pub limit: u32,
    /// A slow command (`Patience::Slow`: a script, KEYS…), counted while owed so that
    /// PING knows the node may be busy (`session/side_call.rs`).
    pub slow: bool,
}

/// The owner of a reply, by kind.
pub(super) enum Owed {
    /// A client's request, or one part of a split one.
    Client {
        client: Rc<dyn ReplySink>,
        seq: u64,
        frag: u32,
    },
    /// A command the connection sent for itself (AUTH, HELLO 3, ASKING): the reply is
    /// dropped, an error logged.
    SetUp,
    /// A set-up command that must succeed before any request is written (a mirror user's
    /// ACL SETUSER and AUTH, a database's SELECT): an error fails the connection and what
    /// waits for it.
    Gate(Gate),
    /// A transaction's MULTI or queued command (`Outgoing::skip`): the reply is dropped, but
    /// a refusal is kept for the EXEC that follows (`backend/refusal.rs`).
    Queued,
    /// A command queued in the node's transaction (`Outgoing::queued`).
    Queuing { client: Rc<dyn ReplySink>, seq: u64 },
    /// CLIENT ID at set-up: the node's id for this connection, kept in `Backend::node_id`
    /// (CLIENT UNBLOCK of a client blocked on it names it to the node).
    NodeId,
}

/// What a gate command sets up, for the error that fails the connection.
#[derive(Debug, Clone, Copy)]
pub(super) enum Gate {
    /// The mirror user that runs a restricted client's scripts (`auth/mirror.rs`).
    Mirror,
    /// The client's database (`Wire::db`).
    Database,
    /// A NOLOOP tracking client's tracking (`Settings::tracking`).
    Tracking,
}

impl InFlight {
    pub const SET_UP: InFlight = InFlight {
        owed: Owed::SetUp,
        limit: 0,
        slow: false,
    };
    pub const fn gate(gate: Gate) -> InFlight {
        InFlight {
            owed: Owed::Gate(gate),
            limit: 0,
            slow: false,
        }
    }
    pub const NODE_ID: InFlight = InFlight {
        owed: Owed::NodeId,
        limit: 0,
        slow: false,
    };
    pub const QUEUED: InFlight = InFlight {
        owed: Owed::Queued,
        limit: 0,
        slow: false,
    };
}
