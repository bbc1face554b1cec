//! How a frame from a subscription connection is shown to the client, so that it reads as
//! one Redis's: a shard (un)subscribe confirmation carries the client's total of shard
//! subscriptions (each node only counts its own), and a frame from a connection opened in
//! the other protocol (the client switched with HELLO while subscribed) gets the client's
//! array type (`*` in RESP2, `>` for a RESP3 push). Pub/sub frames hold only bulk strings
//! and integers, which both protocols encode alike, so the type byte is the whole change.

use bytes::{Bytes, BytesMut};

use super::pubsub::PubSub;
use super::pubsub_frame::Confirmation;

impl PubSub {
    /// A shard confirmation with the client's total count, as Redis counts it.
    pub(super) fn shard_total(&mut self, c: &Confirmation, frame: Bytes) -> Bytes {
        let known = &mut self.shard_confirmed;
        match c.kind.as_ref() {
            b"ssubscribe" => {
                known.insert(c.channel.clone());
            }
            b"sunsubscribe" => {
                known.remove(&c.channel);
            }
            _ => return frame,
        }
        let total = known.len() as i64;
        if total == c.count || c.channel.is_empty() {
            return frame;
        }
        let mut out = BytesMut::with_capacity(frame.len() + 4);
        out.extend_from_slice(&frame[..1]);
        out.extend_from_slice(b"3\r\n");
        resp::write_bulk(&mut out, &c.kind);
        resp::write_bulk(&mut out, &c.channel);
        resp::write_int(&mut out, total);
        out.freeze()
    }

    /// The frame with the array type of the client's protocol (`client_resp3`), when its
    /// connection speaks the other one (only after a HELLO switched protocol while
    /// subscribed).
    pub(super) fn in_client_protocol(
        &self,
        source: usize,
        frame: Bytes,
        client_resp3: bool,
    ) -> Bytes {
        if !self.switched {
            return frame;
        }
        let from_resp3 = self.connection_resp3(source).unwrap_or(client_resp3);
        let want = match (from_resp3, client_resp3) {
            (true, false) if frame.first() == Some(&b'>') => b'*',
            (false, true) if frame.first() == Some(&b'*') => b'>',
            _ => return frame,
        };
        let mut out = BytesMut::from(&frame[..]);
        out[0] = want;
        out.freeze()
    }
}
