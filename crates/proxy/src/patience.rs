//! How long a request may rightly keep its node busy before the proxy calls the node dead
//! (see `watchdog.rs` for how the backend connection uses it).
//!
//! The command table has no flag for "slow": `fast` marks O(1) commands, and its absence
//! covers SET and DEL as well as KEYS. So the slow commands are a short list, commands whose
//! run time grows with the data or is the caller's to choose; blocking commands get the
//! timeout their own arguments name.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use resp::{Parsed, Progress, Request, RequestParser};

/// How long a request's reply may take, as the request's command tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Patience {
    /// `cluster.request_timeout_ms`: almost every command.
    #[default]
    Normal,
    /// `cluster.slow_command_timeout_ms`: a command slow by nature (`Patience::of_request`).
    Slow,
    /// A blocking command's own timeout; the node may stay silent that long plus
    /// `request_timeout_ms`.
    Blocks(Duration),
    /// A blocking command with timeout 0: it may wait for ever (TCP keepalive still
    /// notices a vanished node).
    Unbounded,
}

impl Patience {
    /// The patience one request deserves. Every request passes here: its name is
    /// lowercased on the stack once and matched once (no allocation, no list walked).
    ///
    /// Slow by nature: O(N) over the whole keyspace (KEYS, FLUSHALL and FLUSHDB, even
    /// ASYNC ones for simplicity), user code that runs as long as it likes (EVAL*, FCALL*,
    /// and SCRIPT/FUNCTION, whose LOAD compiles and FLUSH frees), and the admin and data
    /// movers whose run time is the data's (DEBUG, SAVE, MIGRATE, SORT). Blocking commands
    /// get the timeout their own arguments name.
    pub(crate) fn of_request(req: &Request) -> Patience {
        let raw = req.arg(0);
        // The names below have 4 to 10 bytes and start with one of these letters: most
        // requests (GET, SET, HGET, INCR…) are told apart by their first byte alone.
        if raw.len() < 4
            || !matches!(
                raw[0] | 0x20,
                b'b' | b'd' | b'e' | b'f' | b'k' | b'm' | b's' | b'x'
            )
        {
            return Patience::Normal;
        }
        // The longest name below has 10 bytes; anything longer is none of them.
        let mut buf = [0u8; 10];
        let Some(name) = buf.get_mut(..raw.len()) else {
            return Patience::Normal;
        };
        name.copy_from_slice(raw);
        name.make_ascii_lowercase();
        let blocks = match &*name {
            b"keys" | b"flushall" | b"flushdb" | b"eval" | b"evalsha" | b"eval_ro"
            | b"evalsha_ro" | b"fcall" | b"fcall_ro" | b"script" | b"function" | b"debug"
            | b"save" | b"migrate" | b"sort" | b"sort_ro" => return Patience::Slow,
            b"blpop" | b"brpop" | b"brpoplpush" | b"blmove" | b"bzpopmin" | b"bzpopmax"
            | b"blmpop" | b"bzmpop" | b"xread" | b"xreadgroup" => blocking_timeout(name, req),
            _ => return Patience::Normal,
        };
        blocks.map_or(Patience::Normal, |t| match t.is_zero() {
            true => Patience::Unbounded,
            false => Patience::Blocks(t),
        })
    }

    /// The patience for a frame of one or more requests (a dedicated connection's: one
    /// command, or MULTI…EXEC). In a transaction nothing blocks, so it is Slow if any queued
    /// command is slow, else Normal.
    pub(crate) fn of_frame(frame: &Bytes) -> Patience {
        let requests = parse_all(frame);
        match requests.as_slice() {
            [one] => Patience::of_request(one),
            many => match many
                .iter()
                .any(|r| Patience::of_request(r) == Patience::Slow)
            {
                true => Patience::Slow,
                false => Patience::Normal,
            },
        }
    }
}

/// Every complete request in `frame` (the proxy built or checked it: it parses).
fn parse_all(frame: &Bytes) -> Vec<Request> {
    let mut buf = BytesMut::from(&frame[..]);
    let mut parser = RequestParser::default();
    let mut out = Vec::new();
    while let Ok(Progress::Done(parsed)) = parser.parse(&mut buf) {
        if let Parsed::Request(req) = parsed {
            out.push(req);
        }
    }
    out
}

/// A blocking command's timeout (zero: none), or None when `req` does not block or its
/// timeout does not parse (the node then refuses it at once).
fn blocking_timeout(name: &[u8], req: &Request) -> Option<Duration> {
    let last = req.argc().checked_sub(1)?;
    match name {
        b"blmpop" | b"bzmpop" if req.argc() > 1 => seconds(req.arg(1)),
        b"blmpop" | b"bzmpop" => None,
        b"xread" | b"xreadgroup" => {
            let at = (1..last).find(|&i| req.arg(i).eq_ignore_ascii_case(b"block"))?;
            let ms = resp::string2ll(req.arg(at + 1))?;
            Some(Duration::from_millis(u64::try_from(ms).ok()?))
        }
        _ => seconds(req.arg(last)),
    }
}

/// Redis's blocking timeout: seconds, possibly fractional, never negative, at most
/// `LLONG_MAX` milliseconds (past it Redis answers "timeout is out of range" at once). The
/// client chooses it: a value too big for a `Duration` must not panic (the hostile fuzzer's
/// `BLPOP k 1e300`).
fn seconds(arg: &[u8]) -> Option<Duration> {
    let s: f64 = std::str::from_utf8(arg).ok()?.parse().ok()?;
    if !(s.is_finite() && s >= 0.0 && s * 1000.0 <= i64::MAX as f64) {
        return None;
    }
    Duration::try_from_secs_f64(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(args: &[&str]) -> Patience {
        let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
        Patience::of_request(&Request::from_args(&a))
    }

    /// The first-byte filter in `of_request` lets every slow name through, in any case.
    #[test]
    fn every_slow_name_passes_the_first_byte_filter() {
        let slow = [
            "keys",
            "flushall",
            "flushdb",
            "eval",
            "evalsha",
            "eval_ro",
            "evalsha_ro",
            "fcall",
            "fcall_ro",
            "script",
            "function",
            "debug",
            "save",
            "migrate",
            "sort",
            "sort_ro",
        ];
        for name in slow {
            assert_eq!(of(&[name]), Patience::Slow, "{name}");
            assert_eq!(of(&[&name.to_uppercase()]), Patience::Slow, "{name}");
        }
        let blocking = [
            "blpop",
            "brpop",
            "brpoplpush",
            "blmove",
            "bzpopmin",
            "bzpopmax",
            "blmpop",
            "bzmpop",
        ];
        for name in blocking {
            let req = of(&[&name.to_uppercase(), "1", "1", "a", "LEFT", "LEFT", "0"]);
            assert_ne!(req, Patience::Normal, "{name}");
        }
    }

    #[test]
    fn timeouts_out_of_range_do_not_panic() {
        for t in [
            "1e300",
            "18446744073709551616",
            "9223372036854775807",
            "inf",
            "nan",
            "-1",
        ] {
            assert_eq!(of(&["BLPOP", "k", t]), Patience::Normal, "{t}");
        }
        assert_eq!(
            of(&["BLPOP", "k", "1e15"]),
            Patience::Blocks(Duration::from_secs(1_000_000_000_000_000))
        );
    }

    #[test]
    fn commands_get_the_patience_they_need() {
        let secs = |s: f64| Patience::Blocks(Duration::from_secs_f64(s));
        let cases: &[(&[&str], Patience)] = &[
            (&["GET", "k"], Patience::Normal),
            (&["SET", "k", "v"], Patience::Normal),
            (&["KEYS", "*"], Patience::Slow),
            (&["flushall", "ASYNC"], Patience::Slow),
            (&["EVAL", "return 1", "0"], Patience::Slow),
            (&["Script", "LOAD", "return 1"], Patience::Slow),
            (&["BLPOP", "a", "b", "2.5"], secs(2.5)),
            (&["BLPOP", "a", "0"], Patience::Unbounded),
            (&["BLMPOP", "1", "1", "a", "LEFT"], secs(1.0)),
            (&["BZPOPMIN", "z", "x"], Patience::Normal),
            (&["XREAD", "BLOCK", "1500", "STREAMS", "s", "$"], secs(1.5)),
            (&["XREAD", "STREAMS", "s", "0"], Patience::Normal),
            // The longest blocking names, any case; a longer name is never blocking.
            (&["bRpOpLpUsH", "a", "b", "2"], secs(2.0)),
            (&["BRPOPLPUSHX", "a", "b", "2"], Patience::Normal),
            (&["", "a"], Patience::Normal),
            (
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    "c",
                    "BLOCK",
                    "0",
                    "STREAMS",
                    "s",
                    ">",
                ],
                Patience::Unbounded,
            ),
        ];
        for (args, want) in cases {
            assert_eq!(of(args), *want, "{args:?}");
        }
    }

    #[test]
    fn a_transaction_is_slow_if_any_queued_command_is() {
        let mut frame = BytesMut::new();
        resp::encode_command(&mut frame, &[b"MULTI"]);
        resp::encode_command(&mut frame, &[b"BLPOP", b"l", b"0"]);
        resp::encode_command(&mut frame, &[b"EXEC"]);
        assert_eq!(
            Patience::of_frame(&frame.clone().freeze()),
            Patience::Normal
        );
        let mut slow = BytesMut::new();
        resp::encode_command(&mut slow, &[b"MULTI"]);
        resp::encode_command(&mut slow, &[b"KEYS", b"*"]);
        resp::encode_command(&mut slow, &[b"EXEC"]);
        assert_eq!(Patience::of_frame(&slow.freeze()), Patience::Slow);
        let mut one = BytesMut::new();
        resp::encode_command(&mut one, &[b"BRPOP", b"l", b"3"]);
        let want = Patience::Blocks(Duration::from_secs(3));
        assert_eq!(Patience::of_frame(&one.freeze()), want);
    }
}
