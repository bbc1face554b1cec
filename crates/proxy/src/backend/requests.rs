//! What a backend connection carries: the requests sessions queue (`Outgoing`) and, once
//! written, who is owed each reply (`InFlight`, in write order).

use std::rc::Rc;

use bytes::Bytes;

use super::ReplySink;

/// One request waiting to be written to the node.
pub(crate) struct Outgoing {
    pub frame: Bytes,
    pub client: Rc<dyn ReplySink>,
    pub seq: u64,
    /// Which part of a split request this is (0 when unsplit).
    pub frag: u32,
    /// Send `ASKING` right before this request, in the same write (ASK redirection).
    pub asking: bool,
    /// `frame` holds this many commands before the one whose reply the client gets (a
    /// transaction sent as MULTI…EXEC): their replies are read and dropped.
    pub skip: u32,
    /// The request goes on in a later `Outgoing` (a streamed upload): this part is written
    /// but owed no reply; the last part carries `false` and the reply's owner.
    pub more: bool,
}

impl Outgoing {
    /// A whole request, owed one reply: what most requests are.
    pub(crate) fn new(frame: Bytes, client: Rc<dyn ReplySink>, seq: u64) -> Outgoing {
        Outgoing {
            frame,
            client,
            seq,
            frag: 0,
            asking: false,
            skip: 0,
            more: false,
        }
    }
}

/// Who is owed the next reply read from the node.
pub(super) struct InFlight {
    pub client: Option<Rc<dyn ReplySink>>,
    pub seq: u64,
    pub frag: u32,
    /// The watchdog's limit for this reply (`Watchdog::owe`), handed back when it comes.
    pub limit: u32,
}

impl InFlight {
    /// A reply nobody is owed (ASKING, AUTH, HELLO 3, a transaction's QUEUED): read, dropped.
    pub const DISCARD: InFlight = InFlight {
        client: None,
        seq: 0,
        frag: 0,
        limit: 0,
    };
}
