//! ACL SETUSER, DELUSER, GETUSER, USERS and LIST on the proxy's own users: the users
//! clients AUTH as here, as one Redis's ACL commands manage the users of its clients. The
//! nodes' users (the backend user, the mirrors) are the proxy's business and are not shown.
//!
//! Served only with `proxy.allow_admin_commands` (they are `@admin` in Redis, and a
//! proxy's users are its operator's), and then decided by the caller's own ACL like any
//! command. A change is installed for every worker at once (`reload::change_users`) and
//! lasts until the next reload or restart, which go back to the configuration file.

use bytes::{Bytes, BytesMut};
use resp::Request;

use crate::auth::setuser;
use crate::auth::User;
use crate::context::live::Live;
use crate::context::Shared;
use crate::reply::error;

/// Most users (with the tombstones of deleted ones, whose index is never reused) a proxy
/// keeps: SETUSER of a new name beyond it is refused.
const MAX_USERS: usize = 10_000;

/// `CONFIG SET requirepass <password>` (alone: `route/mod.rs` refuses it among other
/// parameters) as Redis applies it, to the default user: its passwords reset, then the new
/// one, or `nopass` for an empty one (`ACLUpdateDefaultUserPassword`), and `auth.requirepass`
/// in force, so clients that connect from now on must AUTH (connected ones stay logged in,
/// as in Redis). It sets the password the proxy's clients give; the nodes' stays the
/// backend's (`backend_password`), so an admin client cannot lock the proxy out of its own
/// nodes. Until the next reload or restart, like ACL SETUSER.
pub(crate) fn config_set_requirepass(req: &Request, shared: &Shared) -> Option<Bytes> {
    let alone = req.argc() == 4
        && req.arg(1).eq_ignore_ascii_case(b"set")
        && req.arg(2).eq_ignore_ascii_case(b"requirepass");
    if !alone {
        return None;
    }
    let Ok(password) = std::str::from_utf8(req.arg(3)) else {
        return Some(error(
            "slotgate: the proxy's requirepass must be valid UTF-8 (its configuration's is)",
        ));
    };
    let rule = match password.is_empty() {
        true => "nopass".to_string(),
        false => format!(">{password}"),
    };
    let modifiers: [&[u8]; 2] = [b"resetpass", rule.as_bytes()];
    let changed = crate::reload::change_live(shared, |live| -> Result<Live, String> {
        let mut config = live.config.clone();
        config.auth.requirepass = password.to_string();
        let mut users = live.users.clone();
        let at = users
            .iter()
            .position(|u| !u.is_removed() && u.name == "default");
        match at {
            Some(i) => users[i] = setuser::apply(Some(&users[i]), "default", &modifiers)?,
            // Appended: the other users keep their indexes, which sessions hold.
            None if !password.is_empty() => users.push(setuser::apply(
                Some(&setuser::nopass_default()),
                "default",
                &modifiers,
            )?),
            None => {}
        }
        Ok(Live { config, users })
    });
    Some(match changed {
        Ok(()) => Bytes::from_static(b"+OK\r\n"),
        Err(why) => error(&why),
    })
}

/// One of the five subcommands (route checked the name and arity).
pub(crate) fn command(req: &Request, shared: &Shared, resp3: bool) -> Bytes {
    let sub = req.arg(1).to_ascii_lowercase();
    match sub.as_slice() {
        b"setuser" => setuser(req, shared),
        b"deluser" => deluser(req, shared),
        b"getuser" => {
            let live = shared.live.load();
            match find(&live, req.arg(2)).map(|u| as_shown(u, shared)) {
                Some(user) => setuser::getuser(&user, resp3),
                None if resp3 => Bytes::from_static(b"_\r\n"),
                None => Bytes::from_static(b"$-1\r\n"),
            }
        }
        b"users" => {
            let users = everyone(&shared.live.load());
            let mut out = BytesMut::new();
            resp::write_array_header(&mut out, users.len());
            users
                .iter()
                .for_each(|u| resp::write_bulk(&mut out, u.name.as_bytes()));
            out.freeze()
        }
        _ => {
            let users = everyone(&shared.live.load()).into_iter();
            let users: Vec<User> = users.map(|u| as_shown(u, shared)).collect();
            let mut out = BytesMut::new();
            resp::write_array_header(&mut out, users.len());
            users
                .iter()
                .for_each(|u| resp::write_bulk(&mut out, setuser::describe(u).as_bytes()));
            out.freeze()
        }
    }
}

/// `user` as the servers behind show it: without the payload flag behind Valkey 9.1+.
fn as_shown(mut user: User, shared: &Shared) -> User {
    if !shared.identity.current().shows_payload_flags() {
        user.passwords.payload = None;
    }
    user
}

/// The users in force, by name (as Redis lists them), the implicit `nopass` default user
/// of a proxy without `requirepass` among them.
fn everyone(live: &Live) -> Vec<User> {
    let mut users: Vec<User> = live
        .users
        .iter()
        .filter(|u| !u.is_removed())
        .cloned()
        .collect();
    if !users.iter().any(|u| u.name == "default") {
        users.push(setuser::nopass_default());
    }
    users.sort_by(|a, b| a.name.cmp(&b.name));
    users
}

fn find(live: &Live, name: &[u8]) -> Option<User> {
    everyone(live)
        .into_iter()
        .find(|u| u.name.as_bytes() == name)
}

/// `ACL SETUSER name [modifier …]`: all or nothing.
fn setuser(req: &Request, shared: &Shared) -> Bytes {
    let name = String::from_utf8_lossy(req.arg(2)).into_owned();
    let modifiers: Vec<&[u8]> = (3..req.argc()).map(|i| req.arg(i)).collect();
    let changed = crate::reload::change_users(shared, |live| {
        let at = live
            .users
            .iter()
            .position(|u| !u.is_removed() && u.name == name);
        if at.is_none() && name == "default" {
            return Err(error(
                "slotgate: the default user of this proxy has no password (auth.requirepass is empty); set requirepass in the configuration to manage it",
            ));
        }
        if at.is_none() && live.users.len() >= MAX_USERS {
            return Err(error(&format!(
                "slotgate: this proxy keeps at most {MAX_USERS} users, deleted ones included; reload the configuration to start afresh"
            )));
        }
        let user = setuser::apply(at.map(|i| &live.users[i]), &name, &modifiers)
            .map_err(|why| error(&why))?;
        let mut users = live.users.clone();
        match at {
            Some(i) => users[i] = user,
            None => users.push(user),
        }
        Ok(users)
    });
    match changed {
        Ok(()) => Bytes::from_static(b"+OK\r\n"),
        Err(reply) => reply,
    }
}

/// `ACL DELUSER name [name …]`: how many existed; their clients are disconnected.
fn deluser(req: &Request, shared: &Shared) -> Bytes {
    let names: Vec<&[u8]> = (2..req.argc()).map(|i| req.arg(i)).collect();
    if names.contains(&&b"default"[..]) {
        return error("The 'default' user cannot be removed");
    }
    let mut deleted = 0;
    let changed = crate::reload::change_users(shared, |live| {
        let mut users = live.users.clone();
        for user in users.iter_mut() {
            if !user.is_removed() && names.contains(&user.name.as_bytes()) {
                *user = User::removed(&user.name);
                deleted += 1;
            }
        }
        Ok::<_, Bytes>(users)
    });
    match changed {
        Ok(()) => Bytes::from(format!(":{deleted}\r\n")),
        Err(reply) => reply,
    }
}
