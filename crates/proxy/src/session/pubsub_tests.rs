//! Unit tests for `pubsub.rs`: recognising subscribe confirmations and their counts.

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
