//! The text side of CLIENT LIST / INFO / KILL: Redis 7's line format and its option parsing,
//! with Redis's exact error texts so clients and tools that parse them keep working. Pure.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use resp::Request;

use crate::auth::User;
use crate::context::registry::{flag, ClientView};
use crate::reply::error;

/// Which clients a LIST or KILL applies to; every filter given must match.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    pub id: Option<u64>,
    /// LIST's `ID id…`: these clients, in this order.
    pub ids: Option<Vec<u64>>,
    pub addr: Option<String>,
    pub laddr: Option<String>,
    pub user: Option<String>,
    pub kind: Option<Kind>,
    /// KILL's `MAXAGE secs` (Redis 7.4): clients connected longer than that.
    pub max_age: Option<u64>,
    /// KILL does not kill the caller unless `SKIPME no` (new form) or the old form.
    pub skip_me: bool,
}

/// Client types of `TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Normal,
    PubSub,
    /// `master`, `replica`, `slave`: the proxy has none of these clients.
    Replication,
}

fn kind(name: &[u8]) -> Result<Kind, Bytes> {
    Ok(match name.to_ascii_lowercase().as_slice() {
        b"normal" => Kind::Normal,
        b"pubsub" => Kind::PubSub,
        b"master" | b"replica" | b"slave" => Kind::Replication,
        _ => {
            let name = String::from_utf8_lossy(name);
            return Err(error(&format!("Unknown client type '{name}'")));
        }
    })
}

/// `CLIENT LIST [TYPE type | ID id [id …]]`.
pub(crate) fn parse_list(req: &Request) -> Result<Filter, Bytes> {
    let mut filter = Filter::default();
    let opt = match req.argc() {
        2 => Vec::new(),
        _ => req.arg(2).to_ascii_lowercase(),
    };
    match (req.argc(), opt.as_slice()) {
        (2, _) => {}
        (4, b"type") => filter.kind = Some(kind(req.arg(3))?),
        (n, b"id") if n > 3 => {
            let ids = (3..n)
                .map(|i| positive(req.arg(i)).ok_or_else(|| error("Invalid client ID")))
                .collect::<Result<_, _>>()?;
            filter.ids = Some(ids);
        }
        _ => return Err(error("syntax error")),
    }
    Ok(filter)
}

/// `CLIENT KILL addr` or `CLIENT KILL <ID|TYPE|ADDR|LADDR|USER|SKIPME> value …`.
pub(crate) fn parse_kill(req: &Request, users: &[User]) -> Result<Filter, Bytes> {
    if req.argc() == 3 {
        return Ok(Filter {
            addr: Some(String::from_utf8_lossy(req.arg(2)).into_owned()),
            ..Filter::default()
        });
    }
    let mut filter = Filter {
        skip_me: true,
        ..Filter::default()
    };
    let mut i = 2;
    while i < req.argc() {
        if i + 1 >= req.argc() {
            return Err(error("syntax error"));
        }
        kill_option(&mut filter, req.arg(i), req.arg(i + 1), users)?;
        i += 2;
    }
    Ok(filter)
}

fn kill_option(filter: &mut Filter, opt: &[u8], value: &[u8], users: &[User]) -> Result<(), Bytes> {
    let text = || String::from_utf8_lossy(value).into_owned();
    match opt.to_ascii_lowercase().as_slice() {
        b"id" => {
            let id = positive(value).ok_or_else(|| error("client-id should be greater than 0"))?;
            filter.id = Some(id);
        }
        b"type" => filter.kind = Some(kind(value)?),
        b"addr" => filter.addr = Some(text()),
        b"laddr" => filter.laddr = Some(text()),
        b"user" => {
            let name = text();
            let known = name == "default" || users.iter().any(|u| u.name == name);
            if !known {
                return Err(error(&format!("No such user '{name}'")));
            }
            filter.user = Some(name);
        }
        b"maxage" => {
            let age = resp::string2ll(value)
                .ok_or_else(|| error("value is not an integer or out of range"))?;
            if age <= 0 {
                return Err(error("maxage should be greater than 0"));
            }
            filter.max_age = Some(age as u64);
        }
        b"skipme" => match value.to_ascii_lowercase().as_slice() {
            b"yes" => filter.skip_me = true,
            b"no" => filter.skip_me = false,
            _ => return Err(error("syntax error")),
        },
        _ => return Err(error("syntax error")),
    }
    Ok(())
}

fn positive(arg: &[u8]) -> Option<u64> {
    resp::string2ll(arg).filter(|&n| n > 0).map(|n| n as u64)
}

/// The name of the user at `index_plus_one` in `users` (0: the default user).
pub(crate) fn user_name(users: &[User], index_plus_one: usize) -> &str {
    match index_plus_one.checked_sub(1).and_then(|i| users.get(i)) {
        Some(user) => &user.name,
        None => "default",
    }
}

/// The client asking (CLIENT LIST or INFO), whose line shows the request being answered as
/// Redis shows it: its command with the subcommand (`client|list`), and its bytes still in
/// the query buffer (`qbuf`), where the registry has the container and what is unread.
pub(crate) struct Asking<'a> {
    pub id: u64,
    pub cmd: &'a str,
    pub request_bytes: u64,
}

/// One CLIENT LIST line, Redis 7.2's fields in Redis's order; what does not apply to a proxy
/// (databases, replication, tracking, argv memory) is 0 or -1, as Redis shows it unused.
pub(crate) fn write_line(
    view: &ClientView,
    users: &[User],
    asking: &Asking<'_>,
    out: &mut impl std::fmt::Write,
) {
    let (meta, live) = (&view.meta, &view.live);
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
    let secs = |since: u64| view.now_ms.saturating_sub(since) / 1000;
    let laddr = meta.laddr.map(|a| a.to_string()).unwrap_or_default();
    let (mut qbuf, rbs, omem) = (load(&live.qbuf), load(&live.rbs), load(&live.omem));
    let flags = live.flags.load(Relaxed);
    let multi = i64::from(live.multi.load(Relaxed)) - 1;
    let mut cmd = last_command(live.last_cmd.load(Relaxed));
    if meta.id == asking.id {
        cmd = asking.cmd;
        qbuf += asking.request_bytes;
    }
    let _ = writeln!(
        out,
        "id={} addr={} laddr={laddr} fd={} name={} age={} idle={} flags={} db={} sub={} psub=0 \
         ssub={} multi={multi} qbuf={qbuf} qbuf-free={} argv-mem=0 multi-mem=0 rbs={rbs} \
         rbp={rbs} obl=0 oll={} omem={omem} tot-mem={} events={} cmd={cmd} user={} redir=-1 \
         resp={} lib-name={} lib-ver={}",
        meta.id,
        meta.addr,
        meta.fd,
        lossy(&meta.name),
        secs(meta.created_ms),
        secs(load(&live.active_ms)),
        flag_letters(flags, live.no_evict.load(Relaxed)),
        live.db.load(Relaxed),
        live.sub.load(Relaxed),
        live.ssub.load(Relaxed),
        rbs.saturating_sub(qbuf),
        load(&live.oll),
        rbs + omem,
        if flags & flag::WRITABLE != 0 {
            "rw"
        } else {
            "r"
        },
        user_name(users, live.user.load(Relaxed) as usize),
        live.resp.load(Relaxed),
        lossy(&meta.lib_name),
        lossy(&meta.lib_ver),
    );
}

/// Bytes a line may take besides the client's own strings (its fields and numbers): what
/// a buffer for `lines` reserves, so a listing of megabyte names is built without regrowing.
pub(crate) fn line_room(view: &ClientView) -> usize {
    let meta = &view.meta;
    let len = |s: &Option<bytes::Bytes>| s.as_ref().map_or(0, |b| b.len());
    // Invalid UTF-8 (only from a lib-name/ver set before a check) may widen threefold.
    512 + 3 * (len(&meta.name) + len(&meta.lib_name) + len(&meta.lib_ver))
}

/// The table name of the last command (its container for a subcommand), or Redis's `NULL`.
fn last_command(index_plus_one: u32) -> &'static str {
    let index = (index_plus_one as usize).checked_sub(1);
    index
        .and_then(cluster::command::at_stats_index)
        .map_or("NULL", |spec| spec.name)
}

fn lossy(b: &Option<Bytes>) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b.as_deref().unwrap_or_default())
}

/// Redis's flag letters, in its order; `N` when none applies.
fn flag_letters(flags: u32, no_evict: bool) -> String {
    let mut s = String::new();
    for (bit, letter) in [
        (flag::PUBSUB, 'P'),
        (flag::MULTI, 'x'),
        (flag::BLOCKED, 'b'),
        (flag::TRACKING, 't'),
    ] {
        if flags & bit != 0 {
            s.push(letter);
        }
    }
    if no_evict {
        s.push('e');
    }
    if flags & flag::NO_TOUCH != 0 {
        s.push('T');
    }
    if s.is_empty() {
        s.push('N');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&str]) -> Request {
        let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
        Request::from_args(&a)
    }

    fn err(r: Result<Filter, Bytes>) -> String {
        String::from_utf8(r.unwrap_err().to_vec()).unwrap()
    }

    #[test]
    fn list_options_and_errors_match_redis() {
        assert_eq!(parse_list(&req(&["CLIENT", "LIST"])), Ok(Filter::default()));
        let f = parse_list(&req(&["CLIENT", "LIST", "TYPE", "pubsub"])).unwrap();
        assert_eq!(f.kind, Some(Kind::PubSub));
        let f = parse_list(&req(&["client", "list", "id", "3", "1"])).unwrap();
        assert_eq!(f.ids, Some(vec![3, 1]));
        let cases: &[(&[&str], &str)] = &[
            (
                &["CLIENT", "LIST", "TYPE", "x"],
                "-ERR Unknown client type 'x'\r\n",
            ),
            (&["CLIENT", "LIST", "ID", "0"], "-ERR Invalid client ID\r\n"),
            (&["CLIENT", "LIST", "TYPE"], "-ERR syntax error\r\n"),
            (&["CLIENT", "LIST", "NAME", "a"], "-ERR syntax error\r\n"),
        ];
        for (args, want) in cases {
            assert_eq!(err(parse_list(&req(args))), *want, "{args:?}");
        }
    }

    #[test]
    fn kill_options_and_errors_match_redis() {
        let old = parse_kill(&req(&["CLIENT", "KILL", "1.2.3.4:5"]), &[]).unwrap();
        assert_eq!(
            (old.addr.as_deref(), old.skip_me),
            (Some("1.2.3.4:5"), false)
        );
        let new = parse_kill(&req(&["CLIENT", "KILL", "ID", "9", "USER", "default"]), &[]);
        let new = new.unwrap();
        assert_eq!((new.id, new.skip_me), (Some(9), true));
        let f = parse_kill(
            &req(&["CLIENT", "KILL", "SKIPME", "no", "TYPE", "normal"]),
            &[],
        );
        assert!(!f.unwrap().skip_me);
        let cases: &[(&[&str], &str)] = &[
            (
                &["CLIENT", "KILL", "ID", "1", "TYPE"],
                "-ERR syntax error\r\n",
            ),
            (
                &["CLIENT", "KILL", "ID", "x", "ADDR"],
                "-ERR client-id should be greater than 0\r\n",
            ),
            (
                &["CLIENT", "KILL", "ID", "-1"],
                "-ERR client-id should be greater than 0\r\n",
            ),
            (
                &["CLIENT", "KILL", "USER", "bob"],
                "-ERR No such user 'bob'\r\n",
            ),
            (
                &["CLIENT", "KILL", "SKIPME", "maybe"],
                "-ERR syntax error\r\n",
            ),
            (&["CLIENT", "KILL", "NAME", "a"], "-ERR syntax error\r\n"),
        ];
        for (args, want) in cases {
            assert_eq!(err(parse_kill(&req(args), &[])), *want, "{args:?}");
        }
    }
}
