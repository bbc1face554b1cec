//! Reading the frames a subscription connection sends: subscribe/unsubscribe
//! confirmations (whose counts decide when subscribed mode ends), messages (whose channel
//! or pattern decides whether a keyspace connection's frame reaches the client), and the
//! sync marker the proxy sends itself to learn when a connection has caught up.

use bytes::Bytes;

use crate::route::frames::array_elements;

/// A subscribe/unsubscribe confirmation: `[kind, channel, count]`.
pub(crate) struct Confirmation {
    pub kind: Bytes,
    pub channel: Bytes,
    pub count: i64,
}

/// Parse `frame` as a confirmation, if it is one.
pub(crate) fn confirmation(frame: &Bytes) -> Option<Confirmation> {
    if !matches!(frame.first(), Some(b'*' | b'>')) {
        return None;
    }
    let parts = array_elements(frame)?;
    const KINDS: &[&[u8]] = &[
        b"subscribe",
        b"psubscribe",
        b"ssubscribe",
        b"unsubscribe",
        b"punsubscribe",
        b"sunsubscribe",
    ];
    if parts.len() != 3 {
        return None;
    }
    let kind = bulk_text(&parts[0])?;
    if !KINDS.contains(&kind.as_ref()) {
        return None;
    }
    let count = std::str::from_utf8(parts[2].strip_prefix(b":")?.strip_suffix(b"\r\n")?)
        .ok()?
        .parse()
        .ok()?;
    let channel = bulk_text(&parts[1]).unwrap_or_default();
    Some(Confirmation {
        kind,
        channel,
        count,
    })
}

/// The payload of a bulk string frame (a slice, no copy).
fn bulk_text(frame: &Bytes) -> Option<Bytes> {
    if !frame.starts_with(b"$") {
        return None;
    }
    let start = frame.iter().position(|&b| b == b'\n')? + 1;
    let end = frame.len().checked_sub(2)?.max(start);
    Some(frame.slice(start..end))
}

/// A `message` or `pmessage` frame's pattern (None for `message`) and channel.
pub(crate) fn message_source(frame: &Bytes) -> Option<(Option<Bytes>, Bytes)> {
    if !matches!(frame.first(), Some(b'*' | b'>')) {
        return None;
    }
    let parts = array_elements(frame)?;
    let kind = bulk_text(parts.first()?)?;
    match (kind.as_ref(), parts.len()) {
        (b"message", 3) => Some((None, bulk_text(&parts[1])?)),
        (b"pmessage", 4) => Some((Some(bulk_text(&parts[1])?), bulk_text(&parts[2])?)),
        _ => None,
    }
}

/// The sync marker, and its answers in and out of RESP2 subscribed mode.
pub(crate) const SYNC_PING: &[u8] = b"*2\r\n$4\r\nPING\r\n$13\r\nslotgate:sync\r\n";
const SYNC_PONG: &[u8] = b"*2\r\n$4\r\npong\r\n$13\r\nslotgate:sync\r\n";
const SYNC_BULK: &[u8] = b"$13\r\nslotgate:sync\r\n";

pub(crate) fn is_sync(frame: &[u8]) -> bool {
    frame == SYNC_PONG || frame == SYNC_BULK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_confirmations_and_their_counts() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let count = |f: &str| confirmation(&b(f)).map(|c| c.count);
        assert_eq!(count("*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"), Some(1));
        assert_eq!(
            count(">3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n"),
            Some(0)
        );
        assert_eq!(count("*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"), Some(0));
        assert_eq!(count("*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nx\r\n"), None);
        assert_eq!(count("+PONG\r\n"), None);
        let c = confirmation(&b("*3\r\n$12\r\nsunsubscribe\r\n$3\r\n{s}\r\n:0\r\n")).unwrap();
        assert_eq!(
            (&c.kind[..], &c.channel[..]),
            (&b"sunsubscribe"[..], &b"{s}"[..])
        );
    }

    #[test]
    fn reads_the_source_of_messages() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let m = message_source(&b("*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nx\r\n"));
        assert_eq!(m, Some((None, b("a"))));
        let p = message_source(&b(
            ">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$1\r\nb\r\n$0\r\n\r\n",
        ));
        assert_eq!(p, Some((Some(b("*")), b("b"))));
        assert_eq!(
            message_source(&b("*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n")),
            None
        );
    }
}
