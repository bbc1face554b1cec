//! Authentication and permissions of one client session.
//!
//! Until a client authenticates (when the proxy requires it), only AUTH, HELLO … AUTH and
//! QUIT are served, Redis's pre-auth limits apply (10 arguments, 16 KiB each, 1 MiB of
//! buffered input), and everything else gets `-NOAUTH`. Afterwards a user with restrictions
//! has each command and each key checked against its rules; an unrestricted user (the
//! `requirepass` default user) costs nothing per request.

use bytes::Bytes;
use resp::Request;

use crate::auth::Denied;
use crate::context::live::Live;
use crate::route::Route;
use crate::session::local::Hello;
use crate::session::Session;

const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
const HELLO_NOAUTH: &[u8] = b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n";

/// Most bytes an unauthenticated client may have buffered (Redis: 1 MiB).
pub(crate) const PRE_AUTH_BUFFER: usize = 1024 * 1024;

/// Who the client is: what AUTH, HELLO … AUTH and RESET change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Login {
    /// The proxy requires a password and none was given yet: only AUTH, HELLO and QUIT run.
    Required,
    /// No password is required: Redis's `nopass` default user, unrestricted.
    Default,
    /// Authenticated as the user at this index of `Live::users`.
    User(usize),
}

impl Login {
    /// A new connection's (or a RESET one's).
    pub(crate) fn at_connect(auth_required: bool) -> Login {
        match auth_required {
            true => Login::Required,
            false => Login::Default,
        }
    }

    pub(crate) fn authenticated(self) -> bool {
        self != Login::Required
    }

    /// The user's index in `Live::users`; None for the default user (and before AUTH).
    pub(crate) fn user(self) -> Option<usize> {
        match self {
            Login::User(index) => Some(index),
            Login::Required | Login::Default => None,
        }
    }

    /// Whether a reload removed this user: then the client is closed, as Redis's ACL
    /// DELUSER closes its clients (the reload wakes every session to look).
    pub(crate) fn removed(self, live: &Live) -> bool {
        self.user()
            .and_then(|index| live.users.get(index))
            .is_some_and(|u| u.is_removed())
    }

    /// For a restricted user: the set-up that makes the session's own connections run as
    /// the user's mirror on the nodes (`auth/mirror.rs`); None for an unrestricted one.
    pub(crate) fn acting_setup(self, live: &Live) -> Option<Bytes> {
        let user = live.users.get(self.user()?)?;
        if user.unrestricted {
            return None;
        }
        let secret = &live.config.cluster.backend_password;
        Some(crate::auth::mirror::setup(&user.name, &user.acl, secret))
    }

    /// Where a restricted user's script or function call runs: on the session's own
    /// connection, as its mirror user, so the node checks every key and command inside it
    /// as Redis would (review S2). `Some(slot)` (None: any master) for such a call.
    pub(crate) fn mirror_slot(
        self,
        live: &Live,
        req: &Request,
        route: &Route,
    ) -> Option<Option<u16>> {
        let index = self.user()?;
        let slot = match route {
            Route::Slot(slot) | Route::Read(slot) => Some(*slot),
            Route::AnyNode => None,
            _ => return None,
        };
        if live.users.get(index)?.unrestricted {
            return None;
        }
        let spec = cluster::lookup(req.arg(0))?;
        spec.runs_code().then_some(slot)
    }

    /// For a restricted user: the NOPERM reply if `req` may not run, else None. A user
    /// that cannot be found (a reload in between) may run nothing.
    pub(crate) fn denied(self, live: &Live, req: &Request) -> Option<Bytes> {
        let index = self.user()?;
        let Some(user) = live.users.get(index) else {
            let name = &req.arg(0)[..req.arg(0).len().min(128)];
            return Some(Denied::Command.reply(&String::from_utf8_lossy(name)));
        };
        if user.unrestricted {
            return None;
        }
        let arg = |i: usize| req.arg(i);
        // An unknown command or subcommand, or a wrong arity, is answered first (`route`),
        // as Redis checks them before permissions.
        let spec = cluster::lookup(req.arg(0))?.resolve(req.argc(), arg);
        if !spec.subcommands.is_empty() || !spec.arity_ok(req.argc()) {
            return None;
        }
        if let Err(denied) = user.check(spec, req.argc(), arg) {
            return Some(denied.reply(spec.name));
        }
        match spec.name {
            "sort" | "sort_ro" if !user.all_keys() => sort_patterns_denied(req),
            _ => None,
        }
    }
}

// === impl Session (authentication) ===

impl Session {
    /// What an unauthenticated client may do. Returns the request back when it may run
    /// (QUIT, and HELLO, which checks its own AUTH option when it runs: `hello`).
    pub(crate) fn gate_unauthenticated(&mut self, req: Request) -> Option<Request> {
        let name = req.arg(0).to_ascii_lowercase();
        match name.as_slice() {
            b"auth" => {
                let reply = self.auth_command(&req);
                self.cell.push_ready(reply);
                None
            }
            b"hello" | b"quit" => Some(req),
            _ => {
                self.cell.push_ready(Bytes::from_static(NOAUTH));
                None
            }
        }
    }

    /// `AUTH [user] password`, before or after a first login, as Redis answers it: a right
    /// pair switches the connection to that user, a wrong one leaves it as it was.
    pub(crate) fn auth_command(&mut self, req: &Request) -> Bytes {
        match req.argc() {
            2 if !self.worker.live().config.auth_required() => crate::reply::error(
                "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ),
            2 => self.authenticate(b"default", req.arg(1)),
            3 => self.authenticate(req.arg(1), req.arg(2)),
            _ => crate::reply::error("syntax error"),
        }
    }

    /// HELLO, once everything before it is answered: its arguments checked first, then its
    /// AUTH option (as AUTH), then, if the connection is authenticated, the switch.
    pub(crate) fn hello(&mut self, req: &Request) -> Bytes {
        let hello = match Hello::parse(req) {
            Ok(hello) => hello,
            Err(reply) => return reply,
        };
        if let Some((user, pass)) = &hello.auth {
            let reply = self.authenticate(user, pass);
            if reply.first() == Some(&b'-') {
                return reply;
            }
        }
        if !self.login.authenticated() {
            return Bytes::from_static(HELLO_NOAUTH);
        }
        let id = self.worker.shared.identity.current();
        hello.apply(&mut self.info, &id)
    }

    /// Check a user's password; on success the session is authenticated as that user, on
    /// failure it keeps the user it had (if any). With no client password configured,
    /// Redis's default user is `nopass`: any password is right for it, and only for it.
    pub(crate) fn authenticate(&mut self, user: &[u8], pass: &[u8]) -> Bytes {
        // A snapshot, not a borrow: dropping connections below may look at the live config.
        let live = std::sync::Arc::clone(&self.worker.live());
        if !live.config.auth_required() {
            return match user {
                b"default" => Bytes::from_static(b"+OK\r\n"),
                _ => Bytes::from_static(WRONGPASS),
            };
        }
        let found = live
            .users
            .iter()
            .position(|u| u.name.as_bytes() == user && u.password_matches(pass));
        match found {
            Some(idx) => {
                let acting_before = self.login.acting_setup(&live);
                if self.login.user().is_some_and(|old| old != idx) {
                    // Its own connections run as the old user's mirror (`acting_setup`).
                    self.drop_dedicated();
                }
                self.login = Login::User(idx);
                if self.login.acting_setup(&live) != acting_before {
                    // A WATCH's connection runs as the former user (its mirror, or the
                    // backend user): an EXEC there would run the new user's transaction
                    // with the old rights. The WATCH is dropped, so EXEC answers nil, as
                    // when a watched key was touched, and nothing runs.
                    self.lose_watch();
                }
                self.parser.set_unauthenticated(false);
                Bytes::from_static(b"+OK\r\n")
            }
            None => {
                tracing::debug!(client.id = self.info.id, "authentication failed");
                Bytes::from_static(WRONGPASS)
            }
        }
    }
}

/// SORT's BY (with a pattern) and GET read keys the command does not name: Redis refuses
/// them to a user without access to every key, in its option parser's order.
fn sort_patterns_denied(req: &Request) -> Option<Bytes> {
    let mut j = 2;
    while j < req.argc() {
        let left = req.argc() - j - 1;
        let opt = req.arg(j).to_ascii_lowercase();
        match opt.as_slice() {
            b"asc" | b"desc" | b"alpha" => {}
            b"limit" if left >= 2 => j += 2,
            b"store" if left >= 1 => j += 1,
            b"by" if left >= 1 => {
                if req.arg(j + 1).contains(&b'*') {
                    return Some(crate::reply::error(
                        "BY option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                j += 1;
            }
            b"get" if left >= 1 => {
                return Some(crate::reply::error(
                    "GET option of SORT denied due to insufficient ACL permissions.",
                ))
            }
            // A syntax error: the node answers it.
            _ => return None,
        }
        j += 1;
    }
    None
}
