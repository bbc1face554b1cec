//! The ACL user a node runs a restricted client's scripts and functions as.
//!
//! The proxy checks a command's name and declared keys itself, but a script or function
//! names its keys inside its code, where only the node sees them. So a restricted user's
//! EVAL, EVALSHA, FCALL (and their `_RO` forms) run on a connection of its own that is
//! authenticated as a **mirror** of the user on the node: an ACL user with the same command
//! rules, key patterns and channel patterns. The node then makes every decision inside the
//! script as redis-server makes it for that user (review S2), with its own error texts.
//!
//! ```text
//!   connection set-up (must succeed before any request is written, else the connection
//!   fails and so do its requests: never run as the backend user by mistake)
//!     [AUTH backend]  ─▶ ACL SETUSER slotgate-<user>-<hash> on resetpass #<sha256(pw)>
//!                          resetkeys resetchannels -@all <rules> +asking
//!                     ─▶ AUTH slotgate-<user>-<hash> <pw>
//! ```
//!
//! The name carries a hash of the rules, so proxies with different rules for one user name
//! never overwrite each other's mirror, and the set-up is idempotent: every new connection
//! sends it, which also recreates the user on a node that restarted. The password is derived
//! from the backend password and the name (HMAC-SHA256), so every proxy of one deployment
//! computes the same one and none is stored; the node keeps only its SHA-256.

use bytes::{Bytes, BytesMut};
use ring::{digest, hmac};

/// Set-up commands for a connection that runs as `rules`' mirror user: `ACL SETUSER`, then
/// `AUTH`. `name` is the proxy user's; `secret` the backend password (may be empty).
pub(crate) fn setup(name: &str, rules: &[String], secret: &str) -> Bytes {
    let rules_text = rules.join(" ");
    let rules_hash = hex(digest::digest(&digest::SHA256, rules_text.as_bytes()).as_ref());
    let mirror = format!("slotgate-{}-{}", printable(name), &rules_hash[..16]);
    let key = hmac::Key::new(hmac::HMAC_SHA256, format!("slotgate:{secret}").as_bytes());
    let password = hex(hmac::sign(&key, mirror.as_bytes()).as_ref());
    let hashed = format!(
        "#{}",
        hex(digest::digest(&digest::SHA256, password.as_bytes()).as_ref())
    );
    let mut args: Vec<&[u8]> = vec![b"ACL", b"SETUSER", mirror.as_bytes(), b"on"];
    args.extend([&b"resetpass"[..], hashed.as_bytes(), b"resetkeys"]);
    args.extend([&b"resetchannels"[..], b"-@all"]);
    args.extend(rules.iter().map(|r| r.as_bytes()));
    // The proxy sends ASKING before a request it resends after ASK (a migrating slot).
    args.push(b"+asking");
    let mut frames = BytesMut::new();
    resp::encode_command(&mut frames, &args);
    resp::encode_command(
        &mut frames,
        &[b"AUTH", mirror.as_bytes(), password.as_bytes()],
    );
    frames.freeze()
}

/// How many commands `setup` sends (each owes a reply).
pub(crate) const SETUP_COMMANDS: usize = 2;

/// The user's name as part of an ACL user name: Redis refuses spaces and control bytes.
fn printable(name: &str) -> String {
    name.chars()
        .map(|c| match c.is_ascii_graphic() {
            true => c,
            false => '_',
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mirror_per_rule_set_with_a_derived_password() {
        let rules = vec!["+@all".to_string(), "~app:*".to_string()];
        let a = setup("app", &rules, "backendpw");
        assert_eq!(a, setup("app", &rules, "backendpw"), "idempotent");
        let text = String::from_utf8_lossy(&a);
        assert!(text.contains("slotgate-app-"), "{text}");
        assert!(
            !text.contains("backendpw"),
            "the backend password never leaves"
        );
        let other = setup("app", &["+@read".to_string()], "backendpw");
        let name = |f: &Bytes| String::from_utf8_lossy(f).lines().nth(6).map(String::from);
        assert_ne!(name(&a), name(&other), "other rules, another mirror");
        assert!(String::from_utf8_lossy(&setup("a b\n", &rules, "")).contains("slotgate-a_b_-"));
    }
}
