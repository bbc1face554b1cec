//! Who the client is, and what that lets it do: the user AUTH or HELLO logged it in as, the
//! checks a restricted user's requests go through (commands, keys, channels, in Redis's
//! order and words), and how its own connections run as its mirror user on the nodes. An
//! unrestricted user (the `requirepass` default user) costs one compare per request.

use bytes::Bytes;
use resp::Request;

use crate::auth::Denied;
use crate::context::live::Live;
use crate::route::Route;

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
        let Some(found) = cluster::lookup(req.arg(0)) else {
            return hotkeys_denied(user, req);
        };
        let spec = found.resolve(req.argc(), arg);
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

/// HOTKEYS behind servers whose command table lacks it (before Redis 8.6): the proxy answers
/// it itself (`admin/hotkeys.rs`), so its permission is decided here as Redis 8.6 files it:
/// START, STOP, GET and RESET `@admin @slow @dangerous`, HELP `@slow`. Without this any user
/// could read the names of the hottest keys, whatever keys it may access.
fn hotkeys_denied(user: &crate::auth::User, req: &Request) -> Option<Bytes> {
    use cluster::command::acl;
    if !req.arg(0).eq_ignore_ascii_case(b"hotkeys") || req.argc() < 2 {
        return None;
    }
    let sub = req.arg(1).to_ascii_lowercase();
    let (name, categories) = match sub.as_slice() {
        b"start" => ("hotkeys|start", acl::ADMIN | acl::SLOW | acl::DANGEROUS),
        b"stop" => ("hotkeys|stop", acl::ADMIN | acl::SLOW | acl::DANGEROUS),
        b"get" => ("hotkeys|get", acl::ADMIN | acl::SLOW | acl::DANGEROUS),
        b"reset" => ("hotkeys|reset", acl::ADMIN | acl::SLOW | acl::DANGEROUS),
        b"help" => ("hotkeys|help", acl::SLOW),
        _ => return None,
    };
    // A keyless row to shape it on; only its name and categories matter to `may_run`.
    let mut spec = cluster::lookup(b"ping")?.clone();
    spec.name = name;
    spec.acl_categories = categories;
    match user.may_run(&spec) {
        true => None,
        false => Some(Denied::Command.reply(name)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::tests::user;

    #[test]
    fn hotkeys_is_admin_as_redis_8_6_files_it() {
        let get = Request::from_args(&[b"HOTKEYS", b"GET"]);
        let help = Request::from_args(&[b"HOTKEYS", b"HELP"]);
        let reader = user(&["+@read"], &["app:*"]);
        let refused = hotkeys_denied(&reader, &get).expect("refused");
        assert_eq!(
            &refused[..],
            b"-NOPERM this user has no permissions to run the 'hotkeys|get' command\r\n"
        );
        assert!(hotkeys_denied(&reader, &help).is_some(), "HELP is @slow");
        let no_admin = user(&["+@all", "-@admin"], &["*"]);
        assert!(hotkeys_denied(&no_admin, &get).is_some());
        assert!(hotkeys_denied(&no_admin, &help).is_none());
        let admin = user(&["+@all"], &["app:*"]);
        assert!(hotkeys_denied(&admin, &get).is_none());
    }
}
