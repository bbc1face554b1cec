//! Where a tracking client's invalidations go: to itself (RESP3), to the client REDIRECT
//! named (RESP2 tracking needs one), or nowhere (RESP2 without REDIRECT, as in Redis), and
//! the receiving side: a client that other clients' invalidations are redirected to.
//!
//! The target can be on any worker, so invalidations travel through the registry
//! (`context/registry/mail.rs`). The target writes each as Redis does: a RESP3 client gets
//! the `invalidate` push; a RESP2 client gets a `message` on `__redis__:invalidate`, and only
//! while it is in subscribed mode. A target that left makes a RESP3 tracking client get
//! `tracking-redir-broken`, as from Redis.

use bytes::{BufMut, Bytes, BytesMut};

use crate::context::registry::{ClientHandle, Mail, Recipient};
use crate::context::Shared;
use crate::session::queue::ClientCell;

/// Redis's answer to REDIRECT naming no connected client.
pub(crate) const NO_SUCH_CLIENT: &str = "The client ID you want redirect to does not exist";

/// The head of the push every invalidation arrives as from a node.
const PUSH_HEAD: &[u8] = b">2\r\n$10\r\ninvalidate\r\n";

/// The head of the message a RESP2 subscriber gets.
const MESSAGE_HEAD: &[u8] = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n";

/// The client `id`, on whichever worker serves it.
pub(crate) fn recipient(shared: &Shared, id: u64) -> Option<Recipient> {
    shared.workers.iter().find_map(|w| w.registry.recipient(id))
}

/// Hand on an invalidation push (`>2 invalidate <keys|null>`) to the client REDIRECT named
/// (`to`). False when it is gone (CLIENT TRACKINGINFO's `broken_redirect`): a RESP3 client
/// (`resp3`, `cell`) is told so, behind the replies it is owed, as Redis tells it.
pub(crate) fn deliver(to: &Recipient, push: Bytes, resp3: bool, cell: &ClientCell) -> bool {
    let delivered = to.post(mail_of(&push));
    if !delivered && resp3 {
        let broken = format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{}\r\n", to.id);
        cell.push_out_of_band(Bytes::from(broken));
    }
    delivered
}

/// Write what other clients' tracking redirected to this client (`client`, `cell`), as
/// Redis would to it: a push in RESP3, a message while subscribed in RESP2, else nothing.
pub(crate) fn deliver_mail(
    client: &ClientHandle,
    cell: &ClientCell,
    resp3: bool,
    subscribed_resp2: bool,
) {
    let mut mail = Vec::new();
    client.take_mail(&mut mail);
    if mail.is_empty() || !(resp3 || subscribed_resp2) {
        return;
    }
    for m in mail {
        let mut frame = BytesMut::new();
        frame.put_slice(if resp3 { PUSH_HEAD } else { MESSAGE_HEAD });
        match &m {
            Mail::Keys(keys) => frame.put_slice(keys),
            Mail::Flush if resp3 => frame.put_slice(b"_\r\n"),
            Mail::Flush => frame.put_slice(b"$-1\r\n"),
        }
        cell.push_frame(0, frame.freeze());
    }
}

/// The keys (or the flush) an invalidation push carries.
fn mail_of(push: &Bytes) -> Mail {
    let body = push.slice(PUSH_HEAD.len().min(push.len())..);
    match body.first() {
        Some(b'*') if !body.starts_with(b"*-1") => Mail::Keys(body),
        _ => Mail::Flush,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_becomes_its_keys_or_a_flush() {
        let keys = Bytes::from_static(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n");
        assert_eq!(
            mail_of(&keys),
            Mail::Keys(Bytes::from_static(b"*1\r\n$1\r\na\r\n"))
        );
        for flush in [
            &b">2\r\n$10\r\ninvalidate\r\n_\r\n"[..],
            b">2\r\n$10\r\ninvalidate\r\n*-1\r\n",
        ] {
            assert_eq!(mail_of(&Bytes::copy_from_slice(flush)), Mail::Flush);
        }
    }
}
