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
    pub owed: Owed,
    /// The watchdog's limit for this reply (`Watchdog::owe`), handed back when it comes.
    pub limit: u32,
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
    /// A transaction's MULTI or queued command (`Outgoing::skip`): the reply is dropped, but
    /// a refusal is kept for the EXEC that follows (`backend/refusal.rs`).
    Queued,
}

impl InFlight {
    pub const SET_UP: InFlight = InFlight {
        owed: Owed::SetUp,
        limit: 0,
    };
    pub const QUEUED: InFlight = InFlight {
        owed: Owed::Queued,
        limit: 0,
    };
}

// === impl Conn (requests) ===

impl super::Conn {
    /// Move what sessions queued to the write queue, recording who is owed each reply.
    pub(super) fn take_queued(&mut self) {
        let mut queue = self.backend.queue.borrow_mut();
        for (out, patience) in queue.drain(..) {
            if out.asking {
                self.write_queue
                    .push_back(Bytes::from_static(super::ASKING));
                self.in_flight.push_back(InFlight::SET_UP);
            }
            for _ in 0..out.skip {
                self.in_flight.push_back(InFlight::QUEUED);
            }
            self.write_queue.push_back(out.frame);
            if out.more || self.backend.sink.borrow().is_some() {
                continue;
            }
            let owed = Owed::Client {
                client: out.client,
                seq: out.seq,
                frag: out.frag,
            };
            let limit = self.watchdog.owe(patience);
            self.in_flight.push_back(InFlight { owed, limit });
        }
    }
}
