//! The client's socket side: the stream, the request buffer and its parser, the replies
//! waiting to be written, and the bytes moved in this turn (the fairness quantum).
//!
//! The request buffer is the worker's while the client is idle (as Redis 7.4's reusable
//! query buffer): a session reads into one of the worker's spare buffers and hands it back
//! at the end of a turn that left nothing unparsed and nothing owed. Only a client with part
//! of a request buffered or replies owed keeps one, so 10,000 idle clients hold no read
//! buffer (16 KiB each before; `scripts/idle_memory.py`), and CLIENT LIST shows an idle
//! client's `qbuf=0 qbuf-free=0`, as Redis 8 does.

use std::cell::RefCell;
use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use resp::RequestParser;

use crate::session::limits::Timer;
use crate::tls::Stream;

/// What one read asks for at least (a big request's upload reads more).
pub(crate) const READ_CHUNK: usize = 16 * 1024;

/// A spare buffer bigger than this (left by a big request) is let go, not kept for reuse.
const SPARE_MAX: usize = 4 * READ_CHUNK;
/// Spare buffers a worker keeps (at most 64 × 64 KiB): as many as clients busy at once
/// need, or each one handed back beyond the first would be freed and another allocated at
/// the next read (measured: 70 more instructions per request at P16 with one spare).
const SPARES: usize = 64;

thread_local! {
    /// The worker's spare request buffers (one pool per worker thread; sessions never move).
    static SPARE: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// Room in `buf` for a read of `chunk`: a session without a buffer takes a spare first.
pub(crate) fn room_for_read(buf: &mut BytesMut, chunk: usize) {
    if buf.capacity() == 0 {
        if let Some(spare) = SPARE.with(|s| s.borrow_mut().pop()) {
            *buf = spare;
        }
    }
    if buf.capacity() - buf.len() < chunk / 2 {
        buf.reserve(chunk);
    }
}

/// End of a turn with nothing owed (an idle client, `Session::poll`): a buffer with nothing
/// left in it, which no request still shares, goes back to the worker's spares (up to
/// `SPARES` of at most `SPARE_MAX`; beyond, it is freed). A client with requests in flight
/// keeps its buffer: it reads again soon.
pub(crate) fn hand_back(buf: &mut BytesMut) {
    if !buf.is_empty() || buf.capacity() == 0 || buf.capacity() > SPARE_MAX {
        return;
    }
    // Made whole again, so its next holder's read does not allocate.
    if !buf.try_reclaim(READ_CHUNK) {
        return;
    }
    let mine = std::mem::take(buf);
    SPARE.with(|s| {
        let mut spares = s.borrow_mut();
        if spares.len() < SPARES {
            spares.push(mine);
        }
    });
}

pub(crate) struct Io {
    pub(crate) stream: Stream,
    pub(crate) parser: RequestParser,
    pub(crate) read_buf: BytesMut,
    pub(crate) out: VecDeque<Bytes>,
    pub(crate) out_bytes: usize,
    /// How many buffers at the front of `out` are the session's own copies (`budget.rs`).
    pub(crate) out_owned: usize,
    /// The big query buffer and big client name charged to the memory budget (`budget.rs`).
    pub(crate) held_charged: usize,
    /// Bytes read and written in the current poll: past `proxy.turn_quantum_bytes` the session
    /// yields to its worker's other clients (ARCHITECTURE.md, "Fairness").
    pub(crate) turn_bytes: usize,
    /// No more requests will be read (EOF, QUIT, protocol error); finish what is in flight.
    pub(crate) draining: bool,
    /// Parsing stopped for backpressure or an exclusive request while `read_buf` may still
    /// hold complete requests: parse them before reading the socket again.
    pub(crate) input_stalled: bool,
    /// Idle timeout or request deadline, armed only when it can fire.
    pub(crate) timer: Timer,
    /// Bytes read and written over the connection's life, and requests read (CLIENT
    /// LIST's `tot-net-in`, `tot-net-out`, `tot-cmds`).
    pub(crate) net_in: u64,
    pub(crate) net_out: u64,
    pub(crate) requests: u64,
}

impl Io {
    pub(crate) fn new(stream: Stream, parser: RequestParser) -> Io {
        Io {
            stream,
            parser,
            read_buf: BytesMut::new(),
            out: VecDeque::new(),
            out_bytes: 0,
            out_owned: 0,
            held_charged: 0,
            turn_bytes: 0,
            draining: false,
            input_stalled: false,
            timer: Timer::default(),
            net_in: 0,
            net_out: 0,
            requests: 0,
        }
    }
}
