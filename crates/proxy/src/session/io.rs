//! The client's socket side: the stream, the request buffer and its parser, the replies
//! waiting to be written, and the bytes moved in this turn (the fairness quantum).

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use resp::RequestParser;

use crate::session::limits::Timer;
use crate::tls::Stream;

/// What one read asks for at least (a big request's upload reads more).
pub(crate) const READ_CHUNK: usize = 16 * 1024;

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
            read_buf: BytesMut::with_capacity(READ_CHUNK),
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
