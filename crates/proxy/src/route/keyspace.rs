//! Which channels and patterns are about keyspace notifications, and the part of a classic
//! (un)subscribe that every master must also receive.
//!
//! Redis publishes keyspace and keyevent notifications (`__keyspace@<db>__:<key>`,
//! `__keyevent@<db>__:<event>`) on the node that holds the key only; the cluster bus does
//! not carry them, while it carries every PUBLISH to every node. So a subscription that can
//! receive a notification is made on every master, and a pattern made on a master other
//! than the home delivers only the notifications from there (`session/keyspace.rs`).

use bytes::Bytes;
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
///
/// The pattern is the client's and may be megabytes long: this walks it once per prefix
/// byte (the prefixes are 11 bytes), keeping the set of pattern positions the prefix read so
/// far can have reached, with no recursion and no backtracking.
fn may_match_prefix(pattern: &[u8], prefix: &[u8]) -> bool {
    // `at[i]`: pattern position i is reachable. A position at a `*` also reaches the next.
    let mut at = vec![false; pattern.len() + 1];
    let mut next = vec![false; pattern.len() + 1];
    at[0] = true;
    close_stars(pattern, &mut at);
    for &want in prefix {
        next.iter_mut().for_each(|b| *b = false);
        let mut any = false;
        for p in 0..pattern.len() {
            if !at[p] {
                continue;
            }
            match step(&pattern[p..], want) {
                // The rest of the pattern can match anything after here.
                Step::Open => return true,
                Step::To(len) => {
                    next[p + len] = true;
                    any = true;
                }
                Step::Stay => {
                    next[p] = true;
                    any = true;
                }
                Step::Fail => {}
            }
        }
        if !any {
            return false;
        }
        std::mem::swap(&mut at, &mut next);
        close_stars(pattern, &mut at);
    }
    // The prefix is consumed with the pattern somewhere: what is left can match something
    // after it (an over-approximation for a pattern that has ended: then the channel must
    // be exactly the prefix, which no notification is, but erring on yes is safe).
    at.iter().any(|&b| b)
}

/// A `*` matches the empty string too: every position reached at a `*` reaches the next.
fn close_stars(pattern: &[u8], at: &mut [bool]) {
    for p in 0..pattern.len() {
        if at[p] && pattern[p] == b'*' {
            at[p + 1] = true;
        }
    }
}

/// What the pattern element at the start of `pat` does with one byte of the prefix.
enum Step {
    /// Consumed it; the pattern goes on this many bytes further.
    To(usize),
    /// A `*` consumed it and stays.
    Stay,
    /// An unclosed class: taken as matching anything from here.
    Open,
    Fail,
}

fn step(pat: &[u8], want: u8) -> Step {
    match pat[0] {
        b'*' => Step::Stay,
        b'?' => Step::To(1),
        // A character class: taken as matching any one character (an over-approximation).
        b'[' => match pat.iter().skip(1).position(|&b| b == b']') {
            Some(end) => Step::To(end + 2),
            None => Step::Open,
        },
        b'\\' if pat.len() >= 2 => match pat[1] == want {
            true => Step::To(2),
            false => Step::Fail,
        },
        c if c == want => Step::To(1),
        _ => Step::Fail,
    }
}

/// What the masters other than the home must (stop) carry for `req` (SUBSCRIBE,
/// PSUBSCRIBE, UNSUBSCRIBE or PUNSUBSCRIBE): only its notification channels or patterns.
/// None when it has none of them; an unsubscribe from everything (no argument) drops all.
pub(crate) fn notification_part(req: &Request) -> Option<Part> {
    let name = req.arg(0).to_ascii_lowercase();
    let (keep, pattern): (fn(&[u8]) -> bool, bool) = match name.as_slice() {
        b"subscribe" | b"unsubscribe" => (is_notification, false),
        b"psubscribe" | b"punsubscribe" => (may_match_notification, true),
        _ => return None,
    };
    let subscribe = !name.ends_with(b"unsubscribe");
    let names: Vec<Bytes> = (1..req.argc())
        .map(|i| req.arg(i))
        .filter(|a| keep(a))
        .map(Bytes::copy_from_slice)
        .collect();
    let all = req.argc() == 1 && !subscribe;
    (all || !names.is_empty()).then_some(Part {
        pattern,
        subscribe,
        names,
    })
}

/// The notification channels (or patterns) of a classic (un)subscribe; an unsubscribe with
/// no names drops them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Part {
    pub pattern: bool,
    pub subscribe: bool,
    pub names: Vec<Bytes>,
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

    /// A client's pattern may be megabytes of `*` or `[` (review S1: the recursive matcher
    /// overflowed the worker's stack and aborted the process).
    #[test]
    fn huge_patterns_are_walked_without_recursion() {
        let stars = vec![b'*'; 1 << 20];
        assert!(may_match_notification(&stars));
        // Matched by `__keyspace@aaaa…`.
        assert!(may_match_notification(&b"*a".repeat(1 << 19)));
        let mut news = b"news".to_vec();
        news.extend(std::iter::repeat_n(b'*', 1 << 20));
        assert!(!may_match_notification(&news));
        let classes = vec![b'['; 1 << 20];
        assert!(may_match_notification(&classes));
        let mut long = b"__keyspace@".to_vec();
        long.extend(std::iter::repeat_n(b'?', 1 << 20));
        assert!(may_match_notification(&long));
    }

    #[test]
    fn the_part_for_the_other_masters() {
        let part = |args: &[&[u8]]| notification_part(&Request::from_args(args));
        let want = |pattern, subscribe, names: &[&[u8]]| {
            Some(Part {
                pattern,
                subscribe,
                names: names.iter().map(|n| Bytes::copy_from_slice(n)).collect(),
            })
        };
        assert_eq!(part(&[b"SUBSCRIBE", b"news"]), None);
        assert_eq!(
            part(&[b"SUBSCRIBE", b"news", b"__keyevent@0__:del"]),
            want(false, true, &[b"__keyevent@0__:del"])
        );
        assert_eq!(
            part(&[b"psubscribe", b"n*", b"*"]),
            want(true, true, &[b"*"])
        );
        assert_eq!(part(&[b"PUNSUBSCRIBE"]), want(true, false, &[]));
        assert_eq!(part(&[b"UNSUBSCRIBE"]), want(false, false, &[]));
        assert_eq!(part(&[b"UNSUBSCRIBE", b"news"]), None);
        assert_eq!(part(&[b"PUBLISH", b"__keyspace@0__:a", b"x"]), None);
    }
}
