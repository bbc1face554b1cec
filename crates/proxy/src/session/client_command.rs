//! CLIENT LIST, INFO, KILL, NO-EVICT and SETINFO, over the per-worker registries
//! (`registry.rs`); ID, GETNAME and SETNAME stay in `local.rs`.
//!
//! A session registers at connect and publishes its per-request state (buffer sizes, flags,
//! last command) into relaxed atomics once per wake-up, so serving requests costs no lock.
//! CLIENT LIST from any worker reads every worker's registry; CLIENT KILL marks the victim
//! and wakes its task, which closes on its own thread as if the client had left (its
//! in-flight requests are dropped with its reply queue, as on any disconnect).
//!
//! Permissions follow the command table's ACL categories like every local command: LIST,
//! KILL and NO-EVICT are `@admin @dangerous`, so a user without them gets `-NOPERM`.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::admin::client_list::{self, Filter, Kind, ValkeyFilter};
use crate::auth::User;
use crate::context::registry::{flag, ClientHandle, ClientView, Meta};
use crate::context::Shared;
use crate::reply::error;
use crate::route::Local;
use crate::session::local::{self, SessionInfo};
use crate::session::queue::{ClientCell, ReplyMode};
use crate::tls::Stream;
use crate::worker::Worker;

const SYNTAX: &str = "syntax error";

/// Add a new client to its worker's registry: O(1), no allocation once the slab has grown.
pub(crate) async fn register(
    worker: &Worker,
    id: u64,
    addr: SocketAddr,
    stream: &Stream,
    extra: Option<SocketAddr>,
) -> ClientHandle {
    let waker = poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
    let registry = &worker.stats.registry;
    let fixed = match (extra, stream.is_tls()) {
        (Some(addr), _) => (!addr.ip().is_unspecified()).then_some(addr),
        // `proxy.listen` names the plain listener; a TLS client reached the other one.
        (None, true) => None,
        (None, false) => registry.listen_addr(&worker.shared.config.proxy.listen),
    };
    let laddr = match fixed {
        Some(fixed) => Some(fixed),
        // Bound to a wildcard: only the socket knows which address the client reached.
        None => stream.tcp().local_addr().ok(),
    };
    registry.insert(Meta {
        id,
        addr,
        laddr,
        fd: stream.tcp().as_raw_fd(),
        created_ms: 0,
        name: None,
        lib_name: None,
        lib_ver: None,
        waker,
    })
}

/// What the CLIENT subcommands answered here read and change of the session asking.
pub(crate) struct Asker<'a> {
    pub shared: &'a Shared,
    pub users: &'a [User],
    pub client: &'a ClientHandle,
    pub cell: &'a ClientCell,
    pub info: &'a mut SessionInfo,
    pub resp3: bool,
}

/// CLIENT <subcommand>: the registry-backed ones here, the rest in `local.rs`. The caller
/// has published the session's state (`Session::publish_state`), so its own line is fresh.
pub(crate) fn command(req: &Request, me: &mut Asker<'_>) -> Bytes {
    let sub = req.arg(1).to_ascii_lowercase();
    match sub.as_slice() {
        b"list" => list(req, me),
        b"info" => info(req, me),
        b"kill" => kill(req, me),
        b"no-evict" => no_evict(req, me),
        b"no-touch" => no_touch(req, me),
        b"setinfo" => setinfo(req, me),
        b"reply" => reply(req, me.cell),
        b"pause" => match parse_pause(req) {
            Ok(change) => {
                change.apply(me.shared);
                Bytes::from_static(b"+OK\r\n")
            }
            Err(e) => e,
        },
        b"unpause" if req.argc() == 2 => {
            PauseChange::Unpause.apply(me.shared);
            Bytes::from_static(b"+OK\r\n")
        }
        _ => {
            let reply = local::run(Local::Client, req, me.info, me.shared);
            sync_name(me.client, me.info);
            reply
        }
    }
}

/// What CLIENT PAUSE or UNPAUSE does to the proxy's dispatch (`context/pause.rs`).
pub(crate) enum PauseChange {
    Pause {
        timeout_ms: u64,
        kind: crate::context::pause::PauseKind,
    },
    Unpause,
}

impl PauseChange {
    pub(crate) fn apply(&self, shared: &Shared) {
        match *self {
            PauseChange::Pause { timeout_ms, kind } => {
                let now = shared.now_ms();
                shared
                    .pause
                    .pause(now, now.saturating_add(timeout_ms), kind);
            }
            PauseChange::Unpause => {
                shared.pause.unpause();
                // Every paused session re-checks at once, on its own worker.
                for w in &shared.workers {
                    w.registry.wake_all();
                }
            }
        }
    }
}

/// A well-formed CLIENT PAUSE or UNPAUSE (inside MULTI: checked when queued, applied at
/// EXEC, `transaction.rs`); None for anything else.
pub(crate) fn pause_change(req: &Request) -> Option<PauseChange> {
    if req.argc() < 2 {
        return None;
    }
    match req.arg(1).to_ascii_lowercase().as_slice() {
        b"pause" => parse_pause(req).ok(),
        b"unpause" if req.argc() == 2 => Some(PauseChange::Unpause),
        _ => None,
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL], with Redis's checks in Redis's order (the mode, then
/// the timeout).
fn parse_pause(req: &Request) -> Result<PauseChange, Bytes> {
    use crate::context::pause::PauseKind;
    if !(3..=4).contains(&req.argc()) {
        return Err(error(&format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(req.arg(1))
        )));
    }
    let kind = match req.argc() {
        3 => PauseKind::All,
        _ => match req.arg(3).to_ascii_lowercase().as_slice() {
            b"write" => PauseKind::Write,
            b"all" => PauseKind::All,
            _ => return Err(error("CLIENT PAUSE mode must be WRITE or ALL")),
        },
    };
    let timeout = std::str::from_utf8(req.arg(2))
        .ok()
        .and_then(|t| t.parse::<i64>().ok());
    let Some(timeout) = timeout else {
        return Err(error("timeout is not an integer or out of range"));
    };
    if timeout < 0 {
        return Err(error("timeout is negative"));
    }
    Ok(PauseChange::Pause {
        timeout_ms: timeout as u64,
        kind,
    })
}

/// CLIENT REPLY ON|OFF|SKIP, as Redis: OFF and SKIP answer nothing (their own entry is
/// silent), SKIP also silences the next command's reply, ON answers OK. Requests keep
/// running; only the writing of their replies stops (`ClientCell::pop_ready`).
fn reply(req: &Request, cell: &ClientCell) -> Bytes {
    if req.argc() != 3 {
        return Bytes::from_static(
            b"-ERR wrong number of arguments for 'client|reply' command\r\n",
        );
    }
    let mode = match req.arg(2).to_ascii_lowercase().as_slice() {
        b"on" => ReplyMode::On,
        b"off" => ReplyMode::Off,
        // While OFF, SKIP changes nothing (Redis ignores it then).
        b"skip" if cell.reply_mode() == ReplyMode::Off => ReplyMode::Off,
        b"skip" => ReplyMode::Skip(2),
        _ => return Bytes::from_static(b"-ERR syntax error\r\n"),
    };
    cell.set_reply_mode(mode);
    Bytes::from_static(b"+OK\r\n")
}

/// Copy the session's name into its registry entry (after SETNAME, HELLO, RESET).
pub(crate) fn sync_name(client: &ClientHandle, info: &SessionInfo) {
    let name = info.name.clone();
    client.update(|meta| meta.name = name);
}

/// RESET: the name is gone and NO-EVICT is off again, as in Redis.
pub(crate) fn registry_reset(client: &ClientHandle, cell: &ClientCell, info: &SessionInfo) {
    sync_name(client, info);
    client.live.no_evict.store(false, Relaxed);
    cell.no_evict.set(false);
}

/// `CLIENT LIST [TYPE type] [ID id …]`.
fn list(req: &Request, me: &Asker<'_>) -> Bytes {
    let id = me.shared.identity.current();
    let parsed = match client_list::Style::of(&id) {
        client_list::Style::Valkey => client_list::parse_valkey(req, me.users, id.databases, false),
        _ => client_list::parse_list(req),
    };
    let filter = match parsed {
        Ok(filter) => filter,
        Err(reply) => return reply,
    };
    let views = all_clients(me.shared);
    let shown: Vec<&ClientView> = match &filter.ids {
        // By hash: a client may name many ids, and there may be many clients (S10).
        Some(ids) => {
            let by_id: std::collections::HashMap<u64, &ClientView> =
                views.iter().map(|v| (v.meta.id, v)).collect();
            ids.iter().filter_map(|id| by_id.get(id).copied()).collect()
        }
        None => views
            .iter()
            .filter(|v| filter.matches(v, me.users))
            .collect(),
    };
    verbatim(&shown, me, asking(req, me, "client|list"))
}

/// `CLIENT INFO`: this client's line.
fn info(req: &Request, me: &Asker<'_>) -> Bytes {
    let id = me.info.id;
    let views = all_clients(me.shared);
    let mine: Vec<&ClientView> = views.iter().filter(|v| v.meta.id == id).collect();
    verbatim(&mine, me, asking(req, me, "client|info"))
}

fn asking<'a>(req: &Request, me: &Asker<'_>, cmd: &'a str) -> client_list::Asking<'a> {
    client_list::Asking {
        id: me.info.id,
        cmd,
        request_bytes: req.raw().len() as u64,
        style: client_list::Style::of(&me.shared.identity.current()),
    }
}

/// `CLIENT KILL addr` (old form: `+OK` or an error) or `CLIENT KILL <filter> <value> …`
/// (new form: the number killed). Redis's option parsing, errors and SKIPME default.
fn kill(req: &Request, me: &mut Asker<'_>) -> Bytes {
    let old_form = req.argc() == 3;
    let id = me.shared.identity.current();
    let parsed = match client_list::Style::of(&id) {
        client_list::Style::Valkey if !old_form => {
            client_list::parse_valkey(req, me.users, id.databases, true)
        }
        _ => client_list::parse_kill(req, me.users),
    };
    let filter = match parsed {
        Ok(filter) => filter,
        Err(reply) => return reply,
    };
    let mut killed = 0;
    for view in all_clients(me.shared) {
        if !filter.matches(&view, me.users) {
            continue;
        }
        if view.meta.id == me.info.id {
            if filter.skip_me {
                continue;
            }
            // Killing yourself: this reply is written, then the connection closes.
            me.info.quit = true;
            killed += 1;
        } else if me
            .shared
            .workers
            .iter()
            .any(|w| w.registry.kill(view.meta.id))
        {
            killed += 1;
        }
    }
    match (old_form, killed) {
        (true, 0) => error("No such client"),
        (true, _) => Bytes::from_static(b"+OK\r\n"),
        (false, n) => Bytes::from(format!(":{n}\r\n")),
    }
}

/// `CLIENT NO-EVICT on|off`: shown as flag `e`; the memory budget never evicts the client.
fn no_evict(req: &Request, me: &Asker<'_>) -> Bytes {
    let on = match req.arg(2).to_ascii_lowercase().as_slice() {
        b"on" => true,
        b"off" => false,
        _ => return error(SYNTAX),
    };
    me.client.live.no_evict.store(on, Relaxed);
    me.cell.no_evict.set(on);
    Bytes::from_static(b"+OK\r\n")
}

/// `CLIENT NO-TOUCH on|off` (Redis 7.2, Valkey): the client's commands then go to
/// connections with NO-TOUCH on (`Wire::no_touch`), so they leave keys' access times as
/// they were, except TOUCH, which the node still lets touch; shown as flag `T`. A client's
/// earlier requests on the other connections are answered before a later one of the same
/// slot goes (`send::admit`), as after SELECT.
fn no_touch(req: &Request, me: &mut Asker<'_>) -> Bytes {
    me.info.no_touch = match req.arg(2).to_ascii_lowercase().as_slice() {
        b"on" => true,
        b"off" => false,
        _ => return error(SYNTAX),
    };
    Bytes::from_static(b"+OK\r\n")
}

/// `CLIENT SETINFO LIB-NAME|LIB-VER value` (Redis 7.2; redis-py 5 sends it on connect).
fn setinfo(req: &Request, me: &Asker<'_>) -> Bytes {
    if req.argc() != 4 {
        return error("wrong number of arguments for 'client|setinfo' command");
    }
    let attr = req.arg(2).to_ascii_lowercase();
    let value = req.arg_bytes(3);
    let lib_name = match attr.as_slice() {
        b"lib-name" => true,
        b"lib-ver" => false,
        _ => {
            let attr = String::from_utf8_lossy(req.arg(2));
            return error(&format!("Unrecognized option '{attr}'"));
        }
    };
    if !value.iter().all(|&b| (b'!'..=b'~').contains(&b)) {
        let attr = String::from_utf8_lossy(&attr);
        return error(&format!(
            "{attr} cannot contain spaces, newlines or special characters."
        ));
    }
    let value = (!value.is_empty()).then_some(value);
    me.client.update(|meta| match lib_name {
        true => meta.lib_name = value,
        false => meta.lib_ver = value,
    });
    Bytes::from_static(b"+OK\r\n")
}

/// Every worker's clients.
fn all_clients(shared: &Shared) -> Vec<ClientView> {
    let mut views = Vec::new();
    for w in &shared.workers {
        w.registry.snapshot(&mut views);
    }
    views
}

/// CLIENT LIST and INFO reply with a verbatim string under RESP3, as Redis does.
///
/// Written straight into the reply's one buffer, sized beforehand: names may be
/// megabytes each (Redis does not bound them), and a text then copied into a frame
/// would hold each listing three times over while it is built.
fn verbatim(views: &[&ClientView], me: &Asker<'_>, asking: client_list::Asking<'_>) -> Bytes {
    const HEAD: usize = 32;
    let room: usize = views.iter().map(|v| client_list::line_room(v)).sum();
    let mut out = BytesMut::with_capacity(HEAD + room + 2);
    out.resize(HEAD, 0);
    for view in views {
        client_list::write_line(view, me.users, &asking, &mut out);
    }
    let len = out.len() - HEAD;
    let head = match me.resp3 {
        true => format!("={}\r\ntxt:", len + 4),
        false => format!("${len}\r\n"),
    };
    let start = HEAD - head.len();
    out[start..HEAD].copy_from_slice(head.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.split_off(start).freeze()
}

// === impl Filter ===

impl Filter {
    /// Does `view` pass every filter given (ID, ADDR, LADDR, USER, TYPE)?
    fn matches(&self, view: &ClientView, users: &[User]) -> bool {
        let live = &view.live;
        let user = live.user.load(Relaxed) as usize;
        let pubsub = live.flags.load(Relaxed) & flag::PUBSUB != 0;
        let kind_ok = match self.kind {
            None => true,
            Some(Kind::Normal) => !pubsub,
            Some(Kind::PubSub) => pubsub,
            Some(Kind::Replication) => false,
        };
        let user_ok = self
            .user
            .as_ref()
            .is_none_or(|want| client_list::user_name(users, user) == want.as_str());
        let age_s = client_list::seconds_between(view.meta.created_ms, view.now_ms);
        kind_ok
            && user_ok
            && self.valkey.as_ref().is_none_or(|v| v.matches(view, users))
            && self.max_age.is_none_or(|max| age_s > max)
            && self.id.is_none_or(|id| id == view.meta.id)
            && self
                .addr
                .as_ref()
                .is_none_or(|a| *a == view.meta.addr.to_string())
            && self
                .laddr
                .as_ref()
                .is_none_or(|a| view.meta.laddr.is_some_and(|l| *a == l.to_string()))
    }
}

// === impl ValkeyFilter ===

impl ValkeyFilter {
    /// Valkey's `clientMatchesFilter`, for what `Filter::matches` does not check itself.
    fn matches(&self, view: &ClientView, users: &[User]) -> bool {
        let (meta, live) = (&view.meta, &view.live);
        let flags = live.flags.load(Relaxed);
        let pubsub = flags & flag::PUBSUB != 0;
        let is_kind = |k: Kind| match k {
            Kind::Normal => !pubsub,
            Kind::PubSub => pubsub,
            Kind::Replication => false,
        };
        let letters = client_list::flag_letters(flags, live.no_evict.load(Relaxed));
        let has_flags = |want: &str| want.chars().all(|c| letters.contains(c));
        let addr = meta.addr.to_string();
        let laddr = meta.laddr.map(|a| a.to_string());
        let user = client_list::user_name(users, live.user.load(Relaxed) as usize);
        let idle_s = client_list::seconds_between(live.active_ms.load(Relaxed), view.now_ms);
        let db = live.db.load(Relaxed);
        // `r`, the one capability a filter may name (`validateClientCapaFilter`).
        let capa_r = flags & flag::CAPA_REDIRECT != 0;
        let same = |want: &Option<Vec<u8>>, have: &Option<Bytes>| {
            want.as_ref().map(|w| have.as_deref() == Some(w.as_slice()))
        };
        // Valkey's IP filter: the peer's address, with a port that is not 0.
        let ip_is = |ip: &str| meta.addr.ip().to_string() == ip && meta.addr.port() != 0;
        let positive = self
            .ids
            .as_ref()
            .is_none_or(|ids| ids.binary_search(&meta.id).is_ok())
            && self.idle.is_none_or(|idle| idle_s > idle)
            && self.flags.as_deref().is_none_or(has_flags)
            && same(&self.name, &meta.name).unwrap_or(true)
            && same(&self.lib_name, &meta.lib_name).unwrap_or(true)
            && same(&self.lib_ver, &meta.lib_ver).unwrap_or(true)
            && self.db.is_none_or(|d| d == db)
            && self.capa.as_deref().is_none_or(|c| c.is_empty() || capa_r)
            && self.ip.as_deref().is_none_or(ip_is);
        let negative = self
            .not_ids
            .as_ref()
            .is_some_and(|ids| ids.binary_search(&meta.id).is_ok())
            || self.not_addr.as_ref().is_some_and(|a| *a == addr)
            || self
                .not_laddr
                .as_ref()
                .is_some_and(|a| Some(a) == laddr.as_ref())
            || self.not_user.as_deref().is_some_and(|u| u == user)
            || self.not_kind.is_some_and(is_kind)
            || self.not_flags.as_deref().is_some_and(has_flags)
            || same(&self.not_name, &meta.name).unwrap_or(false)
            || same(&self.not_lib_name, &meta.lib_name).unwrap_or(false)
            || same(&self.not_lib_ver, &meta.lib_ver).unwrap_or(false)
            || self.not_db.is_some_and(|d| d == db)
            || self
                .not_capa
                .as_deref()
                .is_some_and(|c| c.is_empty() || capa_r)
            || self.not_ip.as_deref().is_some_and(ip_is);
        positive && !negative
    }
}
