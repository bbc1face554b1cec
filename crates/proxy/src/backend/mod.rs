//! One worker's connection to one Redis node, shared by all of that worker's clients.
//!
//! ```text
//!  sessions ──send()──▶ queue ──(one writev per loop turn)──▶ socket ──▶ redis node
//!                                  │ in_flight FIFO (client, seq)        │
//!  ReplySink::deliver  ◀── frame ◀─┴──────────── replies ◀───────────────┘
//! ```
//!
//! Requests from every client of the worker are appended to `queue` during a loop turn; the
//! connection task wakes once, moves them all to the socket in one vectored write, and records
//! who is owed each reply in the `in_flight` FIFO. Redis answers a connection in order, so the
//! n-th reply framed belongs to the n-th entry: replies are framed, never decoded, and handed
//! to their client as the very bytes Redis sent.
//!
//! Invariants:
//! - `in_flight` holds exactly one entry per request whose bytes were handed to the socket,
//!   in write order (ASKING counts as a request whose reply is discarded).
//! - Any I/O error or unexpected reply poisons the connection: every in-flight request fails
//!   with an error (its outcome is unknown, so it is never resent), queued ones fail too, and
//!   the next `send` dials a fresh connection. A replica connection carries only read-only
//!   commands: what it owed is handed back as never sent, and its session reruns it on the
//!   master (`replies.rs`).
//! - The socket is always read while writing, so a large request can never deadlock against
//!   a large reply.
//!
//! Files: `handle.rs` the `Backend` sessions hold; `task.rs` the connection task (dial,
//! set-up, redial); `conn.rs` the live connection's state and pump; `requests.rs` what is
//! queued and owed; `replies.rs` what comes back; `refusal.rs` refused transactions;
//! `settings.rs` how a connection is set up; `window.rs`, `watchdog.rs`, `writev.rs`,
//! `bigbuf.rs`, `stats.rs` and `sink.rs` the leaves they share.

use std::rc::Rc;
use std::sync::Arc;

use crate::topology::Topology;

pub(crate) mod bigbuf;
mod conn;
mod handle;
mod refusal;
mod replies;
mod requests;
mod settings;
pub(crate) mod sink;
pub(crate) mod stats;
mod task;
pub(crate) mod watchdog;
mod window;
mod writev;

pub(crate) use handle::{Backend, Wire};
pub(crate) use refusal::is_redirect;
pub(crate) use requests::{Outgoing, Owes};
pub(crate) use settings::Settings;
pub(crate) use sink::{ReplySink, StreamSink};
pub(crate) use writev::{advance, fill_slices, room};

/// A connection to the node at `addr`; its task starts with the first request.
pub(crate) fn open(addr: &str, settings: Settings, topology: Arc<Topology>) -> Rc<Backend> {
    Backend::new(addr, settings, topology, task::start)
}
