//! ACL WHOAMI, CAT, DRYRUN and GENPASS, answered from the proxy's own users: a client asks
//! about the users it authenticates as here, not about the nodes' (the backend user and the
//! mirrors). Replies and errors are Redis 7.0's. Managing users is `acl_users.rs`.

use bytes::{Bytes, BytesMut};
use cluster::command::CommandSpec;
use resp::Request;

use crate::auth::{category, Denied, CATEGORIES};
use crate::context::live::Live;
use crate::reply::error;

/// `ACL WHOAMI | CAT [category] | DRYRUN user command [arg …]`, for a client
/// authenticated as `user` (an index in `live.users`; None: the default user).
pub(crate) fn command(req: &Request, live: &Live, user: Option<usize>) -> Bytes {
    let sub = req.arg(1).to_ascii_lowercase();
    match (sub.as_slice(), req.argc()) {
        (b"whoami", 2) => {
            let name = user.and_then(|i| live.users.get(i));
            let mut out = BytesMut::new();
            resp::write_bulk(&mut out, name.map_or(b"default", |u| u.name.as_bytes()));
            out.freeze()
        }
        (b"cat", 2) => {
            let mut out = BytesMut::new();
            resp::write_array_header(&mut out, CATEGORIES.len());
            CATEGORIES
                .iter()
                .for_each(|(n, _)| resp::write_bulk(&mut out, n.as_bytes()));
            out.freeze()
        }
        (b"cat", 3) => match category(&String::from_utf8_lossy(req.arg(2))) {
            Some(bits) => commands_in(bits),
            None => error(&format!(
                "Unknown category '{}'",
                String::from_utf8_lossy(&req.arg(2)[..req.arg(2).len().min(128)])
            )),
        },
        (b"dryrun", n) if n >= 4 => dryrun(req, live),
        (b"genpass", 2 | 3) => genpass(req),
        _ => error(&format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            String::from_utf8_lossy(&req.arg(1)[..req.arg(1).len().min(128)])
        )),
    }
}

/// `ACL GENPASS [bits]`: that many random bits (256 by default) as hex, rounded up to a
/// whole digit, as Redis gives them.
fn genpass(req: &Request) -> Bytes {
    let bits = match req.argc() {
        2 => 256,
        _ => match std::str::from_utf8(req.arg(2)).ok().and_then(|t| t.parse::<i64>().ok()) {
            Some(n @ 1..=4096) => n as usize,
            _ => {
                return error(
                    "ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
                )
            }
        },
    };
    let mut bytes = vec![0u8; bits.div_ceil(8)];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
    let mut text = crate::auth::passwords::hex(&bytes);
    text.truncate(bits.div_ceil(4));
    let mut out = BytesMut::new();
    resp::write_bulk(&mut out, text.as_bytes());
    out.freeze()
}

/// `ACL DRYRUN user command [arg …]`: Redis's checks in its order, its texts.
fn dryrun(req: &Request, live: &Live) -> Bytes {
    let name = req.arg(2);
    let found = live
        .users
        .iter()
        .find(|u| !u.is_removed() && u.name.as_bytes() == name);
    let nopass_default = name == b"default" && !live.users.iter().any(|u| u.name == "default");
    if found.is_none() && !nopass_default {
        return error(&format!(
            "User '{}' not found",
            String::from_utf8_lossy(name)
        ));
    }
    let argc = req.argc() - 3;
    let arg = |i: usize| req.arg(i + 3);
    let Some(spec) = lookup(argc, arg) else {
        return error(&format!(
            "Command '{}' not found",
            String::from_utf8_lossy(req.arg(3))
        ));
    };
    if !spec.arity_ok(argc) {
        return error(&format!(
            "wrong number of arguments for '{}' command",
            spec.name
        ));
    }
    let verdict = match found {
        Some(user) => user.check(spec, argc, arg),
        None => Ok(()),
    };
    let text = match verdict {
        Ok(()) => return Bytes::from_static(b"+OK\r\n"),
        Err(Denied::Command) => format!(
            "This user has no permissions to run the '{}' command",
            spec.name
        ),
        Err(Denied::Key(i)) => format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(arg(i))
        ),
        Err(Denied::Channel(i)) => format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(arg(i))
        ),
    };
    let mut out = BytesMut::new();
    resp::write_bulk(&mut out, text.as_bytes());
    out.freeze()
}

/// Redis's `lookupCommand`: a container with subcommands needs a known one.
fn lookup<'a>(argc: usize, arg: impl Fn(usize) -> &'a [u8]) -> Option<&'static CommandSpec> {
    let base = cluster::lookup(arg(0))?;
    if base.subcommands.is_empty() || argc == 1 {
        return Some(base);
    }
    let sub = base.resolve(argc, &arg);
    (!std::ptr::eq(sub, base)).then_some(sub)
}

/// Every command and subcommand in a category, subcommands as `container|sub`.
fn commands_in(bits: u64) -> Bytes {
    let mut names: Vec<&str> = Vec::new();
    for spec in cluster::command::every() {
        if spec.acl_categories & bits != 0 {
            names.push(spec.name);
        }
        names.extend(
            spec.subcommands
                .iter()
                .filter(|s| s.acl_categories & bits != 0)
                .map(|s| s.name),
        );
    }
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, names.len());
    names
        .iter()
        .for_each(|n| resp::write_bulk(&mut out, n.as_bytes()));
    out.freeze()
}
