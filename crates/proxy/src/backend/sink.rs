//! What a backend connection knows of the clients it serves: a place to deliver each reply.
//!
//! The connection holds no session type. Each request carries a `ReplySink` (in practice a
//! client's reply queue), and the connection hands it the reply's bytes with the request's
//! sequence number, or, on a pub/sub stream, every frame as it comes. This keeps `backend/`
//! below the session layer: it can be read, changed and tested without knowing what a
//! session is.

use bytes::Bytes;

/// The receiving end of a backend's replies.
pub(crate) trait ReplySink {
    /// The reply (or final error) for part `frag` of request `seq`.
    fn deliver(&self, seq: u64, frag: u32, reply: Bytes);
    /// Part `frag` of request `seq` never reached the node (it is down, or could not be
    /// dialled): safe to send elsewhere. `reply` is the error, should the client get it.
    fn not_sent(&self, seq: u64, frag: u32, reply: Bytes);
    /// Whether the reply owed to part `frag` of request `seq` may be passed on in pieces.
    fn may_stream_reply(&self, seq: u64, frag: u32) -> bool;
    /// One piece of a streamed reply; `total` is the reply's length on its last piece, else 0.
    fn deliver_piece(&self, seq: u64, piece: Bytes, total: usize);
    /// A frame from a stream connection (pub/sub); `source` identifies the connection.
    fn push_frame(&self, source: usize, frame: Bytes);
    /// A stream connection broke or a streamed reply was cut: the client must be closed.
    fn stream_lost(&self);
}

/// A sink that is owed nothing by sequence number: a stream connection's (pub/sub, tracking
/// receivers) or a connection's watcher, which hears only its frames and its loss.
pub(crate) trait StreamSink {
    /// A frame from the connection; `source` identifies it.
    fn push_frame(&self, source: usize, frame: Bytes);
    /// The connection broke (or was closed, for a watcher told of that too).
    fn stream_lost(&self);
}

impl<T: StreamSink> ReplySink for T {
    fn deliver(&self, _seq: u64, _frag: u32, _reply: Bytes) {}
    fn not_sent(&self, _seq: u64, _frag: u32, _reply: Bytes) {}
    fn may_stream_reply(&self, _seq: u64, _frag: u32) -> bool {
        false
    }
    fn deliver_piece(&self, _seq: u64, _piece: Bytes, _total: usize) {}
    fn push_frame(&self, source: usize, frame: Bytes) {
        StreamSink::push_frame(self, source, frame)
    }
    fn stream_lost(&self) {
        StreamSink::stream_lost(self)
    }
}
