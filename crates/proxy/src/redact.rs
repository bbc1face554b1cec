//! Secrets in commands and replies, hidden as Redis hides them: which arguments SLOWLOG
//! must show as `(redacted)` (Redis's `redactClientCommandArgument` call sites), and the
//! configuration values a `CONFIG GET` through the proxy must not hand out (the nodes'
//! passwords). A leaf: SLOWLOG (`context`) and the reply merge (`route`) both use it.

use bytes::{Bytes, BytesMut};
use resp::{ReplyFramer, Request, Value};

/// What a hidden value reads as, in SLOWLOG and in CONFIG GET.
pub(crate) const REDACTED: &[u8] = b"(redacted)";

/// Parameters whose value is a secret: Redis 7's `SENSITIVE_CONFIG` ones (`requirepass`,
/// `masterauth`, `masteruser`, and Valkey's names for the last two, `primaryauth` and
/// `primaryuser`), and the TLS key passphrases, which Redis 7.0 does not mark but which are
/// passwords all the same.
const SENSITIVE_CONFIGS: &[&[u8]] = &[
    b"requirepass",
    b"masterauth",
    b"masteruser",
    b"primaryauth",
    b"primaryuser",
    b"tls-key-file-pass",
    b"tls-client-key-file-pass",
];

fn sensitive(name: &[u8]) -> bool {
    SENSITIVE_CONFIGS
        .iter()
        .any(|s| s.eq_ignore_ascii_case(name))
}

/// Whether argument `i` of `req` is a secret that a log must not keep. As Redis 7.0:
/// `AUTH` (every argument; Redis spares a malformed AUTH's extra ones, this does not),
/// `HELLO … AUTH user pass`, `CONFIG SET` values of sensitive parameters, `ACL SETUSER`
/// (the user name and every rule), `MIGRATE … AUTH pass` and `AUTH2 user pass`; and, as
/// Redis 7.2 and Valkey, `ACL GETUSER` and `ACL DELUSER`'s user names (Redis 7.0 shows
/// them: hiding a name is the safe side of that difference).
pub(crate) fn argument(req: &Request, i: usize) -> bool {
    let name = req.arg(0);
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    let sub = |n: &[u8]| req.argc() > 1 && req.arg(1).eq_ignore_ascii_case(n);
    if is(b"auth") {
        i >= 1
    } else if is(b"hello") {
        hello(req, i)
    } else if is(b"acl") && (sub(b"setuser") || sub(b"getuser") || sub(b"deluser")) {
        i >= 2
    } else if is(b"config") && sub(b"set") {
        // CONFIG SET name value [name value …]: values sit at odd offsets from 2.
        i >= 3 && (i - 3).is_multiple_of(2) && sensitive(req.arg(i - 1))
    } else if is(b"migrate") {
        migrate(req, i)
    } else {
        false
    }
}

/// HELLO's options walked as HELLO walks them: `AUTH user pass`, `SETNAME name`.
fn hello(req: &Request, i: usize) -> bool {
    let mut opt = 2;
    while opt < req.argc() && opt < i {
        if req.arg(opt).eq_ignore_ascii_case(b"auth") {
            if i <= opt + 2 {
                return true;
            }
            opt += 3;
        } else {
            opt += 2;
        }
    }
    false
}

/// MIGRATE host port key db timeout [COPY] [REPLACE] [AUTH pass | AUTH2 user pass]
/// [KEYS key …], its options walked as `migrateCommand` does.
fn migrate(req: &Request, i: usize) -> bool {
    let mut j = 6;
    while j < req.argc() && j < i {
        let opt = req.arg(j);
        if opt.eq_ignore_ascii_case(b"auth") {
            if i == j + 1 {
                return true;
            }
            j += 2;
        } else if opt.eq_ignore_ascii_case(b"auth2") {
            if i <= j + 2 {
                return true;
            }
            j += 3;
        } else if opt.eq_ignore_ascii_case(b"keys") {
            return false;
        } else {
            j += 1;
        }
    }
    false
}

/// A `CONFIG GET` reply (RESP2 flat array or RESP3 map of names and values) with the
/// value of every sensitive parameter replaced by `(redacted)`. Anything else (an error,
/// a shape it does not know) passes as it came.
pub(crate) fn config_reply(reply: &Bytes) -> Bytes {
    let Some((pairs, body)) = pairs_header(reply) else {
        return reply.clone();
    };
    let mut frames = Vec::with_capacity(pairs * 2);
    let mut pos = body;
    for _ in 0..pairs * 2 {
        let Ok(Some(len)) = ReplyFramer::new().next_frame(&reply[pos..]) else {
            return reply.clone();
        };
        frames.push(reply.slice(pos..pos + len));
        pos += len;
    }
    if !frames.chunks(2).any(|p| sensitive(&name_of(&p[0]))) {
        return reply.clone();
    }
    let mut out = BytesMut::with_capacity(reply.len());
    out.extend_from_slice(&reply[..body]);
    for pair in frames.chunks(2) {
        out.extend_from_slice(&pair[0]);
        // An empty value hides nothing, and tools save CONFIG GET * to set it back (Redis's
        // own test framework does): "(redacted)" there would become the nodes' password.
        let empty = pair[1].as_ref() == b"$0\r\n\r\n";
        match sensitive(&name_of(&pair[0])) && !empty {
            true => resp::write_bulk(&mut out, REDACTED),
            false => out.extend_from_slice(&pair[1]),
        }
    }
    out.freeze()
}

/// CONFIG SET giving a secret parameter the placeholder CONFIG GET shows for it: a client
/// setting back what it read would make `(redacted)` the nodes' password. Refused, with
/// the reason.
pub(crate) fn sets_placeholder(req: &Request) -> bool {
    if req.argc() < 4 || !req.arg(1).eq_ignore_ascii_case(b"set") {
        return false;
    }
    (2..req.argc() - 1)
        .step_by(2)
        .any(|i| sensitive(req.arg(i)) && req.arg(i + 1) == REDACTED)
}

/// The number of name/value pairs and where they start: `*2n` or `%n`.
fn pairs_header(reply: &Bytes) -> Option<(usize, usize)> {
    let end = reply.windows(2).position(|w| w == b"\r\n")?;
    let n: usize = std::str::from_utf8(reply.get(1..end)?).ok()?.parse().ok()?;
    match reply.first()? {
        b'*' if n.is_multiple_of(2) => Some((n / 2, end + 2)),
        b'%' => Some((n, end + 2)),
        _ => None,
    }
}

fn name_of(frame: &Bytes) -> Bytes {
    match resp::decode(frame) {
        Ok(Some((Value::BulkString(b) | Value::SimpleString(b), _))) => b,
        _ => Bytes::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&str]) -> Request {
        let mut buf = BytesMut::new();
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        resp::encode_command(&mut buf, &argv);
        match resp::RequestParser::new(resp::Limits::default()).parse(&mut buf) {
            Ok(resp::Progress::Done(resp::Parsed::Request(r))) => r,
            other => panic!("{other:?}"),
        }
    }

    /// The positions hidden, as Redis 7.0.15's SLOWLOG showed them for the same commands.
    fn hidden(args: &[&str]) -> Vec<usize> {
        let r = req(args);
        (0..r.argc()).filter(|&i| argument(&r, i)).collect()
    }

    #[test]
    fn as_redis_redacts() {
        assert_eq!(hidden(&["AUTH", "pw"]), [1]);
        assert_eq!(hidden(&["auth", "user", "pw"]), [1, 2]);
        assert_eq!(
            hidden(&["HELLO", "3", "AUTH", "u", "p", "SETNAME", "x"]),
            [3, 4]
        );
        assert_eq!(
            hidden(&["HELLO", "3", "SETNAME", "auth", "AUTH", "u", "p"]),
            [5, 6]
        );
        assert_eq!(
            hidden(&["ACL", "SETUSER", "foo", "on", ">pw", "~*"]),
            [2, 3, 4, 5]
        );
        assert_eq!(hidden(&["ACL", "GETUSER", "foo"]), vec![2]);
        assert_eq!(hidden(&["ACL", "DELUSER", "a", "b"]), vec![2, 3]);
        assert_eq!(hidden(&["ACL", "WHOAMI"]), Vec::<usize>::new());
        let set = [
            "CONFIG",
            "SET",
            "masterauth",
            "a",
            "maxmemory",
            "1",
            "requirepass",
            "b",
            "masteruser",
            "c",
        ];
        assert_eq!(hidden(&set), [3, 7, 9]);
        assert_eq!(hidden(&["config", "set", "REQUIREPASS", "x"]), [3]);
        // Valkey's names for masterauth and masteruser.
        assert_eq!(
            hidden(&["CONFIG", "SET", "primaryauth", "x", "primaryuser", "y"]),
            [3, 5]
        );
        assert_eq!(
            hidden(&["CONFIG", "GET", "requirepass"]),
            Vec::<usize>::new()
        );
        let m = [
            "MIGRATE", "h", "1", "", "0", "10", "COPY", "AUTH", "pw", "KEYS", "a",
        ];
        assert_eq!(hidden(&m), [8]);
        let m2 = [
            "MIGRATE", "h", "1", "", "0", "10", "AUTH2", "u", "pw", "KEYS", "auth",
        ];
        assert_eq!(hidden(&m2), [7, 8]);
        let k = ["MIGRATE", "h", "1", "auth", "0", "10", "KEYS", "auth", "x"];
        assert_eq!(hidden(&k), Vec::<usize>::new(), "a key named auth is a key");
        assert_eq!(hidden(&["SET", "requirepass", "x"]), Vec::<usize>::new());
    }

    #[test]
    fn config_get_replies_hide_passwords() {
        let resp2 = Bytes::from_static(
            b"*6\r\n$11\r\nrequirepass\r\n$4\r\nnode\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n$10\r\nmasterauth\r\n$2\r\nmm\r\n",
        );
        let want = b"*6\r\n$11\r\nrequirepass\r\n$10\r\n(redacted)\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n$10\r\nmasterauth\r\n$10\r\n(redacted)\r\n";
        assert_eq!(&config_reply(&resp2)[..], &want[..]);
        let resp3 = Bytes::from_static(b"%1\r\n$11\r\nrequirepass\r\n$4\r\nnode\r\n");
        let want3 = b"%1\r\n$11\r\nrequirepass\r\n$10\r\n(redacted)\r\n";
        assert_eq!(&config_reply(&resp3)[..], &want3[..]);
        for same in [
            &b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"[..],
            b"*0\r\n",
            b"-ERR no\r\n",
            b"*2\r\n$9\r\nmaxmem",
        ] {
            let b = Bytes::copy_from_slice(same);
            assert_eq!(config_reply(&b), b);
        }
    }

    #[test]
    fn an_empty_secret_is_shown_and_the_placeholder_is_never_set() {
        let none = Bytes::from_static(
            b"*4\r\n$11\r\nrequirepass\r\n$0\r\n\r\n$10\r\nmasterauth\r\n$2\r\nmm\r\n",
        );
        let want =
            b"*4\r\n$11\r\nrequirepass\r\n$0\r\n\r\n$10\r\nmasterauth\r\n$10\r\n(redacted)\r\n";
        assert_eq!(&config_reply(&none)[..], &want[..]);
        assert!(sets_placeholder(&req(&[
            "CONFIG",
            "SET",
            "maxmemory",
            "1",
            "requirepass",
            "(redacted)"
        ])));
        assert!(!sets_placeholder(&req(&[
            "CONFIG",
            "SET",
            "requirepass",
            ""
        ])));
        assert!(!sets_placeholder(&req(&[
            "CONFIG",
            "SET",
            "save",
            "(redacted)"
        ])));
        assert!(!sets_placeholder(&req(&[
            "CONFIG",
            "GET",
            "requirepass",
            "(redacted)"
        ])));
    }
}
