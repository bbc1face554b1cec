//! The text side of CLIENT LIST / INFO / KILL: the line format and the option parsing of
//! the server the proxy stands for (`Style`: Redis 7, Redis 8, Valkey), with its exact
//! error texts so clients and tools that parse them keep working. Pure.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use resp::Request;

use crate::auth::User;
use crate::context::registry::{flag, ClientView};
use crate::identity::ServerIdentity;
use crate::reply::error;

/// Which server's CLIENT LIST the proxy speaks: the fields and the filters differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// Redis 7: up to `resp`, then Redis 7.2's `lib-name` and `lib-ver`; LIST takes TYPE or
    /// IDs, KILL Redis's filters.
    Redis7,
    /// Redis 8: also `watch` after `multi`, then `io-thread`, `tot-net-in`, `tot-net-out`
    /// and `tot-cmds`.
    Redis8,
    /// Valkey 8+: `capa` after `flags`, `watch`, an idle query buffer shown as 0, and the
    /// `tot-*` counters; LIST and KILL take Valkey's filters (`parse_valkey`).
    Valkey,
}

impl Style {
    pub(crate) fn of(id: &ServerIdentity) -> Style {
        match (id.valkey_version.is_some(), id.redis_major()) {
            (true, _) => Style::Valkey,
            (false, major) if major >= 8 => Style::Redis8,
            _ => Style::Redis7,
        }
    }
}

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
    /// Valkey's filters (`parse_valkey`): each `not_` one excludes the clients it matches.
    pub valkey: Option<Box<ValkeyFilter>>,
}

/// Valkey's filters beyond Redis's: an id set (not LIST's ordered ids), idle time, flags,
/// name, library, database, capabilities, IP, and the `NOT-` form of each.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ValkeyFilter {
    pub ids: Option<Vec<u64>>,
    pub not_ids: Option<Vec<u64>>,
    pub not_addr: Option<String>,
    pub not_laddr: Option<String>,
    pub not_user: Option<String>,
    pub not_kind: Option<Kind>,
    /// Clients idle at least this long, minus one (so `idle > this` matches).
    pub idle: Option<u64>,
    pub flags: Option<String>,
    pub not_flags: Option<String>,
    pub name: Option<Vec<u8>>,
    pub not_name: Option<Vec<u8>>,
    pub lib_name: Option<Vec<u8>>,
    pub not_lib_name: Option<Vec<u8>>,
    pub lib_ver: Option<Vec<u8>>,
    pub not_lib_ver: Option<Vec<u8>>,
    pub db: Option<u32>,
    pub not_db: Option<u32>,
    pub capa: Option<String>,
    pub not_capa: Option<String>,
    pub ip: Option<String>,
    pub not_ip: Option<String>,
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

/// Valkey's `CLIENT LIST [filter …]` and `CLIENT KILL <filter> …` (from argument `start`),
/// in its order, with its errors (`parseClientFiltersOrReply`). `databases`: how many
/// SELECT may choose. KILL skips the caller unless `SKIPME no`.
pub(crate) fn parse_valkey(
    req: &Request,
    users: &[User],
    databases: u32,
    kill: bool,
) -> Result<Filter, Bytes> {
    let mut f = Filter {
        skip_me: kill,
        ..Filter::default()
    };
    let mut v = ValkeyFilter::default();
    let text = |i: usize| String::from_utf8_lossy(req.arg(i)).into_owned();
    let user = |i: usize| {
        let name = text(i);
        match name == "default" || users.iter().any(|u| u.name == name) {
            true => Ok(name),
            false => Err(error(&format!("No such user '{name}'"))),
        }
    };
    let number = |i: usize, why: &str| resp::string2ll(req.arg(i)).ok_or_else(|| error(why));
    let letters = |i: usize, valid: &str, what: &str| {
        let s = text(i);
        match s.chars().all(|c| valid.contains(c)) {
            true => Ok(s),
            false => Err(error(&format!("Unknown {what}: {s}"))),
        }
    };
    const FLAGS: &str = "OSMPxbtRBdcuAUreTIiEN";
    let mut i = 2;
    while i < req.argc() {
        let opt = req.arg(i).to_ascii_lowercase();
        let more = i + 1 < req.argc();
        if opt == b"id" || opt == b"not-id" {
            i += 1;
            let mut ids = Vec::new();
            while i < req.argc() {
                let Some(id) = resp::string2ll(req.arg(i)) else {
                    break;
                };
                if id < 1 {
                    return Err(error("client-id should be greater than 0"));
                }
                ids.push(id as u64);
                i += 1;
            }
            let set = if opt == b"id" {
                &mut v.ids
            } else {
                &mut v.not_ids
            };
            set.get_or_insert_with(Vec::new).extend(ids);
            continue;
        }
        if !more {
            return Err(error("syntax error"));
        }
        match opt.as_slice() {
            b"maxage" => {
                let age = number(i + 1, "maxage is not an integer or out of range")?;
                if age <= 0 {
                    return Err(error("maxage should be greater than 0"));
                }
                f.max_age = Some(age as u64 - 1);
            }
            b"type" => f.kind = Some(kind(req.arg(i + 1))?),
            b"not-type" => v.not_kind = Some(kind(req.arg(i + 1))?),
            b"addr" => f.addr = Some(text(i + 1)),
            b"not-addr" => v.not_addr = Some(text(i + 1)),
            b"laddr" => f.laddr = Some(text(i + 1)),
            b"not-laddr" => v.not_laddr = Some(text(i + 1)),
            b"user" => f.user = Some(user(i + 1)?),
            b"not-user" => v.not_user = Some(user(i + 1)?),
            b"skipme" => match req.arg(i + 1).to_ascii_lowercase().as_slice() {
                b"yes" => f.skip_me = true,
                b"no" => f.skip_me = false,
                _ => return Err(error("syntax error")),
            },
            b"idle" => {
                let idle = number(i + 1, "idle is not an integer or out of range")?;
                if idle <= 0 {
                    return Err(error("idle should be greater than 0"));
                }
                v.idle = Some(idle as u64 - 1);
            }
            b"flags" => {
                v.flags = Some(letters(i + 1, FLAGS, "flags found in the provided filter")?)
            }
            b"not-flags" => {
                v.not_flags = Some(letters(
                    i + 1,
                    FLAGS,
                    "flags found in the NOT-FLAGS filter",
                )?)
            }
            b"name" => v.name = Some(req.arg(i + 1).to_vec()),
            b"not-name" => v.not_name = Some(req.arg(i + 1).to_vec()),
            b"lib-name" => v.lib_name = Some(req.arg(i + 1).to_vec()),
            b"not-lib-name" => v.not_lib_name = Some(req.arg(i + 1).to_vec()),
            b"lib-ver" => v.lib_ver = Some(req.arg(i + 1).to_vec()),
            b"not-lib-ver" => v.not_lib_ver = Some(req.arg(i + 1).to_vec()),
            b"db" | b"not-db" => {
                let not = opt.starts_with(b"not-");
                let why = match not {
                    true => "NOT-DB is not an integer or out of range",
                    false => "DB is not an integer or out of range",
                };
                let db = number(i + 1, why)?;
                if i32::try_from(db).is_err() {
                    return Err(error(why));
                }
                if db < 0 || db >= i64::from(databases) {
                    let which = if not { "NOT-DB" } else { "DB" };
                    let last = databases.saturating_sub(1);
                    return Err(error(&format!(
                        "{which} number should be between 0 and {last}"
                    )));
                }
                *(if not { &mut v.not_db } else { &mut v.db }) = Some(db as u32);
            }
            b"capa" => v.capa = Some(letters(i + 1, "r", "capa found in the provided filter")?),
            b"not-capa" => {
                v.not_capa = Some(letters(i + 1, "r", "capa found in the NOT-CAPA filter")?)
            }
            b"ip" => v.ip = Some(text(i + 1)),
            b"not-ip" => v.not_ip = Some(text(i + 1)),
            _ => return Err(error("syntax error")),
        }
        i += 2;
    }
    // Sorted once, searched per client: a client may name a million ids and there may be
    // many clients (review S10's class).
    for ids in [&mut v.ids, &mut v.not_ids].into_iter().flatten() {
        ids.sort_unstable();
        ids.dedup();
    }
    f.valkey = Some(Box::new(v));
    Ok(f)
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
    /// Whose fields the lines have.
    pub style: Style,
}

/// One CLIENT LIST line, with the fields of the server the proxy stands for (`Style`), in
/// its order; what does not apply to a proxy (replication, argv memory, I/O threads) is 0
/// or -1, as a server shows it unused.
pub(crate) fn write_line(
    view: &ClientView,
    users: &[User],
    asking: &Asking<'_>,
    out: &mut impl std::fmt::Write,
) {
    let style = asking.style;
    let (meta, live) = (&view.meta, &view.live);
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
    let secs = |since: u64| seconds_between(since, view.now_ms);
    let laddr = meta.laddr.map(|a| a.to_string()).unwrap_or_default();
    let (mut qbuf, rbs, omem) = (load(&live.qbuf), load(&live.rbs), load(&live.omem));
    let flags = live.flags.load(Relaxed);
    let multi = i64::from(live.multi.load(Relaxed)) - 1;
    let mut cmd = last_command(live.last_cmd.load(Relaxed));
    if meta.id == asking.id {
        cmd = asking.cmd;
        // Redis shows the asking request still in its query buffer; Valkey has handed
        // its buffer back by then.
        if style != Style::Valkey {
            qbuf += asking.request_bytes;
        }
    }
    let qbuf_free = match (style, qbuf) {
        (Style::Valkey, 0) => 0,
        _ => rbs.saturating_sub(qbuf),
    };
    let _ = write!(
        out,
        "id={} addr={} laddr={laddr} fd={} name={} age={} idle={} flags={}",
        meta.id,
        meta.addr,
        meta.fd,
        lossy(&meta.name),
        secs(meta.created_ms),
        secs(load(&live.active_ms)),
        flag_letters(flags, live.no_evict.load(Relaxed)),
    );
    if style == Style::Valkey {
        let capa = if flags & flag::CAPA_REDIRECT != 0 {
            "r"
        } else {
            ""
        };
        let _ = write!(out, " capa={capa}");
    }
    let _ = write!(
        out,
        " db={} sub={} psub=0 ssub={} multi={multi}",
        live.db.load(Relaxed),
        live.sub.load(Relaxed),
        live.ssub.load(Relaxed),
    );
    if style != Style::Redis7 {
        let _ = write!(out, " watch={}", live.watch.load(Relaxed));
    }
    let _ = write!(
        out,
        " qbuf={qbuf} qbuf-free={qbuf_free} argv-mem=0 multi-mem=0 rbs={rbs} rbp={rbs} obl=0 \
         oll={} omem={omem} tot-mem={} events={} cmd={cmd} user={} redir=-1 resp={} \
         lib-name={} lib-ver={}",
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
    if style == Style::Redis8 {
        let _ = write!(out, " io-thread=0");
    }
    if style != Style::Redis7 {
        let _ = write!(
            out,
            " tot-net-in={} tot-net-out={} tot-cmds={}",
            load(&live.net_in),
            load(&live.net_out),
            load(&live.cmds),
        );
    }
    let _ = writeln!(out);
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
/// `Registry`'s packed last command (`note_command`): the command's name, or its
/// subcommand's (`client|setname`) as Redis shows it.
fn last_command(packed: u32) -> &'static str {
    let index = ((packed & 0xffff) as usize).checked_sub(1);
    let sub = ((packed >> 16) as usize).checked_sub(1);
    let Some(spec) = index.and_then(cluster::command::at_stats_index) else {
        return "NULL";
    };
    sub.and_then(|i| spec.subcommands.get(i))
        .map_or(spec.name, |sub| sub.name)
}

fn lossy(b: &Option<Bytes>) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b.as_deref().unwrap_or_default())
}

/// Redis's flag letters, in its order; `N` when none applies.
pub(crate) fn flag_letters(flags: u32, no_evict: bool) -> String {
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
    if flags & flag::READONLY != 0 {
        s.push('r');
    }
    if no_evict {
        s.push('e');
    }
    if flags & flag::NO_TOUCH != 0 {
        s.push('T');
    }
    if flags & flag::IMPORT_SOURCE != 0 {
        s.push('I');
    }
    if s.is_empty() {
        s.push('N');
    }
    s
}

/// Whole seconds from `since` to `now` (milliseconds of the registry's clock) as Redis counts
/// `age` and `idle`: the difference of the two times in seconds, each cut to its second
/// (Redis subtracts `time_t`s), so a client idle for a full second always shows `idle=1`
/// and matches `CLIENT KILL … IDLE 1` however the coarse clock's ticks fell.
pub(crate) fn seconds_between(since: u64, now: u64) -> u64 {
    (now / 1000).saturating_sub(since / 1000)
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
    fn idle_and_age_count_whole_seconds_as_redis_does() {
        // A second boundary crossed counts, as a difference of `time_t`s does.
        assert_eq!(seconds_between(999, 1000), 1);
        assert_eq!(seconds_between(1000, 1999), 0);
        assert_eq!(seconds_between(500, 2400), 2);
        assert_eq!(seconds_between(3000, 1000), 0);
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

    #[test]
    fn valkey_filters_parse_as_valkey_parses_them() {
        let users: &[User] = &[];
        let parse = |args: &[&str]| parse_valkey(&req(args), users, 16, false);
        let f = parse(&["CLIENT", "LIST", "ID", "3", "1", "NAME", "a", "NOT-DB", "2"]).unwrap();
        let v = f.valkey.as_deref().unwrap();
        assert_eq!(v.ids, Some(vec![1, 3]), "sorted, to be searched");
        assert_eq!(v.name.as_deref(), Some(&b"a"[..]));
        assert_eq!(v.not_db, Some(2));
        let f = parse(&[
            "client", "list", "maxage", "10", "idle", "5", "skipme", "no",
        ])
        .unwrap();
        assert_eq!(
            (f.max_age, f.valkey.unwrap().idle, f.skip_me),
            (Some(9), Some(4), false)
        );
        // As valkey-server 9.1.2 answers them.
        let cases: &[(&[&str], &str)] = &[
            (
                &["CLIENT", "LIST", "ID", "0"],
                "-ERR client-id should be greater than 0\r\n",
            ),
            (&["CLIENT", "LIST", "NAME"], "-ERR syntax error\r\n"),
            (&["CLIENT", "LIST", "BOGUS", "x"], "-ERR syntax error\r\n"),
            (&["CLIENT", "LIST", "ID", "x"], "-ERR syntax error\r\n"),
            (
                &["CLIENT", "LIST", "USER", "bob"],
                "-ERR No such user 'bob'\r\n",
            ),
            (
                &["CLIENT", "LIST", "TYPE", "x"],
                "-ERR Unknown client type 'x'\r\n",
            ),
            (
                &["CLIENT", "LIST", "MAXAGE", "0"],
                "-ERR maxage should be greater than 0\r\n",
            ),
            (
                &["CLIENT", "LIST", "IDLE", "x"],
                "-ERR idle is not an integer or out of range\r\n",
            ),
            (
                &["CLIENT", "LIST", "FLAGS", "NZ"],
                "-ERR Unknown flags found in the provided filter: NZ\r\n",
            ),
            (
                &["CLIENT", "LIST", "NOT-FLAGS", "Q"],
                "-ERR Unknown flags found in the NOT-FLAGS filter: Q\r\n",
            ),
            (
                &["CLIENT", "LIST", "DB", "16"],
                "-ERR DB number should be between 0 and 15\r\n",
            ),
            (
                &["CLIENT", "LIST", "CAPA", "x"],
                "-ERR Unknown capa found in the provided filter: x\r\n",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(err(parse(args)), *want, "{args:?}");
        }
        let kill = parse_valkey(&req(&["CLIENT", "KILL", "NOT-NAME", "x"]), users, 1, true);
        assert!(
            kill.unwrap().skip_me,
            "KILL spares the caller unless SKIPME no"
        );
    }
}
