//! Which channels and patterns are about keyspace notifications, and the part of a classic
//! (un)subscribe that every master must also receive.
//!
//! Redis publishes keyspace and keyevent notifications (`__keyspace@<db>__:<key>`,
//! `__keyevent@<db>__:<event>`) on the node that holds the key only; the cluster bus does
//! not carry them, while it carries every PUBLISH to every node. So a subscription that can
//! receive a notification is made on every master, and a pattern made on a master other
//! than the home delivers only the notifications from there (`session/keyspace.rs`).

use bytes::{Bytes, BytesMut};
use resp::Request;

/// The two channel prefixes Redis's `notifyKeyspaceEvent` publishes under.
const PREFIXES: [&[u8]; 2] = [b"__keyspace@", b"__keyevent@"];

/// Whether `channel` is a keyspace or keyevent notification channel.
pub(crate) fn is_notification(channel: &[u8]) -> bool {
    PREFIXES.iter().any(|p| channel.starts_with(p))
}

/// Whether the glob `pattern` (Redis's `stringmatchlen` syntax) can match some notification
/// channel. Errs on the side of yes: a needless subscription costs a connection, a missed
/// one loses events.
pub(crate) fn may_match_notification(pattern: &[u8]) -> bool {
    PREFIXES.iter().any(|p| may_match_prefix(pattern, p))
}

/// Whether some string that starts with `prefix` matches `pattern`.
fn may_match_prefix(pattern: &[u8], prefix: &[u8]) -> bool {
    let (Some(&c), Some(&want)) = (pattern.first(), prefix.first()) else {
        // The prefix is consumed (the rest of the pattern can match something after it),
        // or the pattern ended first (it matches only strings shorter than the prefix).
        return prefix.is_empty();
    };
    match c {
        b'*' => may_match_prefix(&pattern[1..], prefix) || may_match_prefix(pattern, &prefix[1..]),
        b'?' => may_match_prefix(&pattern[1..], &prefix[1..]),
        // A character class: taken as matching any one character (an over-approximation).
        b'[' => match pattern.iter().skip(1).position(|&b| b == b']') {
            Some(end) => may_match_prefix(&pattern[end + 2..], &prefix[1..]),
            None => true,
        },
        b'\\' if pattern.len() >= 2 => {
            pattern[1] == want && may_match_prefix(&pattern[2..], &prefix[1..])
        }
        _ => c == want && may_match_prefix(&pattern[1..], &prefix[1..]),
    }
}

/// The command the masters other than the home receive for `req` (SUBSCRIBE, PSUBSCRIBE,
/// UNSUBSCRIBE or PUNSUBSCRIBE): the same command with only the notification channels or
/// patterns. None when it has none of them. An unsubscribe from everything (no argument)
/// goes as it is: it is hidden from the client anyway.
pub(crate) fn notification_part(req: &Request) -> Option<Bytes> {
    let name = req.arg(0).to_ascii_lowercase();
    let keep: fn(&[u8]) -> bool = match name.as_slice() {
        b"subscribe" | b"unsubscribe" => is_notification,
        b"psubscribe" | b"punsubscribe" => may_match_notification,
        _ => return None,
    };
    let unsubscribe_all = req.argc() == 1 && name.ends_with(b"unsubscribe");
    let mut args: Vec<&[u8]> = vec![req.arg(0)];
    args.extend((1..req.argc()).map(|i| req.arg(i)).filter(|a| keep(a)));
    if args.len() == 1 && !unsubscribe_all {
        return None;
    }
    let mut frame = BytesMut::new();
    resp::encode_command(&mut frame, &args);
    Some(frame.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_and_patterns_that_can_carry_notifications() {
        assert!(is_notification(b"__keyspace@0__:user:1"));
        assert!(is_notification(b"__keyevent@0__:set"));
        assert!(!is_notification(b"news"));
        for yes in [
            &b"*"[..],
            b"__key*",
            b"__keyspace@*",
            b"__keyspace@0__:user:*",
            b"__key?vent@*",
            b"__[k]eyspace@0__:*",
            b"[",
            b"_\\_keyspace@*",
            b"*:user:*",
        ] {
            assert!(
                may_match_notification(yes),
                "{:?}",
                String::from_utf8_lossy(yes)
            );
        }
        for no in [&b"news*"[..], b"__keyspace", b"__keyspace_", b"a*", b"_\\*"] {
            assert!(
                !may_match_notification(no),
                "{:?}",
                String::from_utf8_lossy(no)
            );
        }
    }

    #[test]
    fn the_part_for_the_other_masters() {
        let part = |args: &[&[u8]]| notification_part(&Request::from_args(args));
        let cmd = |args: &[&[u8]]| {
            let mut f = BytesMut::new();
            resp::encode_command(&mut f, args);
            Some(f.freeze())
        };
        assert_eq!(part(&[b"SUBSCRIBE", b"news"]), None);
        assert_eq!(
            part(&[b"SUBSCRIBE", b"news", b"__keyevent@0__:del"]),
            cmd(&[b"SUBSCRIBE", b"__keyevent@0__:del"])
        );
        assert_eq!(
            part(&[b"psubscribe", b"n*", b"*"]),
            cmd(&[b"psubscribe", b"*"])
        );
        assert_eq!(part(&[b"PUNSUBSCRIBE"]), cmd(&[b"PUNSUBSCRIBE"]));
        assert_eq!(part(&[b"UNSUBSCRIBE"]), cmd(&[b"UNSUBSCRIBE"]));
        assert_eq!(part(&[b"UNSUBSCRIBE", b"news"]), None);
        assert_eq!(part(&[b"PUBLISH", b"__keyspace@0__:a", b"x"]), None);
    }
}
