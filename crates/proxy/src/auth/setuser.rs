//! ACL SETUSER's language applied to one of the proxy's users, and how ACL LIST and GETUSER
//! show a user: what a client that manages users through the proxy reads and writes.
//!
//! A SETUSER is all or nothing (the first bad modifier fails it and nothing changes), its
//! errors are Redis 7.0's texts. The rules are kept as a list of tokens, compacted as they
//! are added (a later `+@all`, `resetkeys`, the same token again replaces what it
//! overrides), so a user changed many times keeps a short list; it is also what the user's
//! mirror on the nodes is built from (`mirror.rs`). ACL LIST shows that list, where Redis
//! 7.0 recomputes a minimal one from its command bitmap: the same rights, sometimes in
//! more words.

use super::passwords::{hex, parse_hex, sha256, Passwords};
use super::{parse_token, Token, User};

const ALL_KEYS_FIRST: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const ALL_CHANNELS_FIRST: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";
const NO_SUCH_PASSWORD: &str = "The password you are trying to remove from the user does not exist";
const BAD_HASH: &str = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";

/// Which part of a user a rule token changes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Commands,
    Keys,
    Channels,
}

fn part_of(token: &str) -> Part {
    let lower = token.to_ascii_lowercase();
    if token.starts_with(['~', '%']) || lower == "allkeys" || lower == "resetkeys" {
        Part::Keys
    } else if token.starts_with('&') || lower == "allchannels" || lower == "resetchannels" {
        Part::Channels
    } else {
        Part::Commands
    }
}

/// The user `name` after `ACL SETUSER name <modifiers>`: `current` changed, or a new user
/// (off, no password, no command, key or channel) when there is none. Err: the error text
/// (after `ERR `), and nothing changes.
pub(crate) fn apply(
    current: Option<&User>,
    name: &str,
    modifiers: &[&[u8]],
) -> Result<User, String> {
    if name.contains([' ', '\0']) {
        return Err("Usernames can't contain spaces or null characters".into());
    }
    let (mut passwords, mut rules, mut all_keys, mut all_channels) = match current {
        Some(u) => (
            u.passwords.clone(),
            u.acl.clone(),
            u.every_key(),
            u.every_channel(),
        ),
        None => (Passwords::default(), Vec::new(), false, false),
    };
    for &modifier in modifiers {
        let fail = |why: &str| {
            format!(
                "Error in ACL SETUSER modifier '{}': {why}",
                String::from_utf8_lossy(modifier)
            )
        };
        let (first, rest) = match modifier.split_first() {
            Some((&first, rest)) => (first, rest),
            None => return Err(fail("Syntax error")),
        };
        match first {
            b'>' => {
                passwords.add(sha256(rest));
                continue;
            }
            b'<' if !passwords.remove(&sha256(rest)) => return Err(fail(NO_SUCH_PASSWORD)),
            b'<' => continue,
            b'#' => {
                passwords.add(parse_hex(rest).ok_or_else(|| fail(BAD_HASH))?);
                continue;
            }
            b'!' => {
                let hash = parse_hex(rest).ok_or_else(|| fail(BAD_HASH))?;
                if !passwords.remove(&hash) {
                    return Err(fail(NO_SUCH_PASSWORD));
                }
                continue;
            }
            b'(' => return Err(fail("slotgate: selectors are not supported by the proxy")),
            _ => {}
        }
        let Ok(token) = std::str::from_utf8(modifier) else {
            return Err(fail("Syntax error"));
        };
        match token.to_ascii_lowercase().as_str() {
            "on" => passwords.enabled = true,
            "off" => passwords.enabled = false,
            "nopass" => {
                passwords.nopass = true;
                passwords.hashes.clear();
            }
            "resetpass" => {
                passwords.nopass = false;
                passwords.hashes.clear();
            }
            "sanitize-payload" => passwords.payload = Some("sanitize-payload"),
            "skip-sanitize-payload" => passwords.payload = Some("skip-sanitize-payload"),
            "clearselectors" => {}
            "reset" => {
                passwords = Passwords {
                    payload: Some("sanitize-payload"),
                    ..Passwords::default()
                };
                rules.clear();
                (all_keys, all_channels) = (false, false);
            }
            _ => add_rule(&mut rules, &mut all_keys, &mut all_channels, token).map_err(fail)?,
        }
    }
    User::with_rules(name, passwords, rules).map_err(|e| e.to_string())
}

/// Check one rule token and add it to `rules`, dropping what it overrides.
fn add_rule(
    rules: &mut Vec<String>,
    all_keys: &mut bool,
    all_channels: &mut bool,
    token: &str,
) -> Result<(), &'static str> {
    let parsed = parse_token(token).map_err(|why| match why {
        Some(_) => "Syntax error",
        None if token.starts_with(['+', '-']) => "Unknown command or category name in ACL",
        None => "Syntax error",
    })?;
    let part = part_of(token);
    let drop_part = |rules: &mut Vec<String>| rules.retain(|r| part_of(r) != part);
    match parsed {
        Token::Key(None) => {
            *all_keys = true;
            drop_part(rules);
            rules.push("~*".into());
        }
        Token::ResetKeys => {
            *all_keys = false;
            drop_part(rules);
        }
        Token::Key(Some(_)) if *all_keys => return Err(ALL_KEYS_FIRST),
        Token::Channel(None) => {
            *all_channels = true;
            drop_part(rules);
            rules.push("&*".into());
        }
        Token::ResetChannels => {
            *all_channels = false;
            drop_part(rules);
        }
        Token::Channel(Some(_)) if *all_channels => return Err(ALL_CHANNELS_FIRST),
        Token::Key(Some(_)) | Token::Channel(Some(_)) => {
            rules.retain(|r| r != token);
            rules.push(token.to_string());
        }
        Token::Command(_) => {
            let lower = match token.to_ascii_lowercase() {
                all if all == "allcommands" => "+@all".to_string(),
                none if none == "nocommands" => "-@all".to_string(),
                other => other,
            };
            if lower == "+@all" || lower == "-@all" {
                drop_part(rules);
            } else {
                // The last matching rule wins: an earlier copy of this one decides nothing.
                rules.retain(|r| *r != lower);
            }
            rules.push(lower);
        }
    }
    Ok(())
}

/// The implicit default user of a proxy without `requirepass`: on, nopass, everything.
pub(crate) fn nopass_default() -> User {
    let passwords = Passwords {
        enabled: true,
        nopass: true,
        ..Passwords::default()
    };
    let rules = ["+@all", "~*", "&*"].map(String::from).to_vec();
    User::with_rules("default", passwords, rules).expect("valid rules")
}

/// `on|off`, `nopass`, the payload flag: GETUSER's flags, in Redis's order.
fn flags(user: &User) -> Vec<&'static str> {
    let p = &user.passwords;
    let mut out = vec![if p.enabled { "on" } else { "off" }];
    if p.nopass {
        out.push("nopass");
    }
    out.extend(p.payload);
    out
}

/// The command rules as ACL LIST words: `+@all` or `-@all`, then the rest in order.
fn command_rules(user: &User) -> String {
    let commands: Vec<&str> = user
        .acl
        .iter()
        .filter(|r| part_of(r) == Part::Commands)
        .map(String::as_str)
        .collect();
    let (head, rest) = match commands.split_first() {
        Some((&"+@all", rest)) => ("+@all", rest),
        Some((&"-@all", rest)) => ("-@all", rest),
        _ => ("-@all", &commands[..]),
    };
    std::iter::once(head)
        .chain(rest.iter().copied())
        .collect::<Vec<_>>()
        .join(" ")
}

fn channels_text(user: &User) -> String {
    user.channel_rules().join(" ")
}

/// One line of ACL LIST: `user <name> <flags> <#hashes> <keys> <channels> <commands>`.
pub(crate) fn describe(user: &User) -> String {
    let mut words: Vec<String> = vec!["user".into(), user.name.clone()];
    words.extend(flags(user).into_iter().map(String::from));
    words.extend(user.passwords.hashes.iter().map(|h| format!("#{}", hex(h))));
    words.extend(user.key_rules());
    if !user.every_channel() {
        words.push("resetchannels".into());
    }
    words.extend(user.channel_rules());
    words.push(command_rules(user));
    words.join(" ")
}

/// ACL GETUSER's reply: a map (RESP3) or flat array of flags, passwords, commands, keys,
/// channels, selectors.
pub(crate) fn getuser(user: &User, resp3: bool) -> bytes::Bytes {
    let mut out = bytes::BytesMut::new();
    match resp3 {
        true => resp::write_map_header(&mut out, 6),
        false => resp::write_array_header(&mut out, 12),
    }
    resp::write_bulk(&mut out, b"flags");
    let flags = flags(user);
    resp::write_array_header(&mut out, flags.len());
    flags
        .iter()
        .for_each(|f| resp::write_bulk(&mut out, f.as_bytes()));
    resp::write_bulk(&mut out, b"passwords");
    resp::write_array_header(&mut out, user.passwords.hashes.len());
    for h in &user.passwords.hashes {
        resp::write_bulk(&mut out, hex(h).as_bytes());
    }
    resp::write_bulk(&mut out, b"commands");
    resp::write_bulk(&mut out, command_rules(user).as_bytes());
    resp::write_bulk(&mut out, b"keys");
    resp::write_bulk(&mut out, user.key_rules().join(" ").as_bytes());
    resp::write_bulk(&mut out, b"channels");
    resp::write_bulk(&mut out, channels_text(user).as_bytes());
    resp::write_bulk(&mut out, b"selectors");
    resp::write_array_header(&mut out, 0);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(current: Option<&User>, name: &str, mods: &[&str]) -> Result<User, String> {
        let mods: Vec<&[u8]> = mods.iter().map(|m| m.as_bytes()).collect();
        apply(current, name, &mods)
    }

    #[test]
    fn lines_read_as_redis_writes_them() {
        // Each line as redis-server 7.0.15 prints it for the same SETUSER.
        let bob = set(None, "bob", &["on", ">123", "+@scripting", "+set", "~x*"]).unwrap();
        assert_eq!(
            describe(&bob),
            "user bob on #a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3 ~x* resetchannels -@all +@scripting +set"
        );
        assert_eq!(
            describe(&set(None, "al", &[]).unwrap()),
            "user al off resetchannels -@all"
        );
        let al = set(None, "al", &["reset"]).unwrap();
        assert_eq!(
            describe(&al),
            "user al off sanitize-payload resetchannels -@all"
        );
        let al = set(Some(&al), "al", &["+@all", "~*", "resetkeys", "~a"]).unwrap();
        assert_eq!(
            describe(&al),
            "user al off sanitize-payload ~a resetchannels +@all"
        );
        let dd = set(
            None,
            "dd",
            &[
                "on",
                ">a",
                "allkeys",
                "allchannels",
                "allcommands",
                "-@dangerous",
            ],
        )
        .unwrap();
        let dd = set(Some(&dd), "dd", &["<a", "nopass"]).unwrap();
        assert_eq!(describe(&dd), "user dd on nopass ~* &* +@all -@dangerous");
        let cc = set(
            None,
            "cc",
            &[
                "on", "nopass", "&ch*", "&b", "%R~r*", "%W~w*", "~rw*", "%RW~x",
            ],
        )
        .unwrap();
        assert_eq!(
            describe(&cc),
            "user cc on nopass %R~r* %W~w* ~rw* ~x resetchannels &ch* &b -@all"
        );
        assert_eq!(
            describe(&nopass_default()),
            "user default on nopass ~* &* +@all"
        );
    }

    #[test]
    fn errors_are_redis_texts_and_change_nothing() {
        let err = |mods: &[&str]| set(None, "u", mods).unwrap_err();
        assert_eq!(
            err(&["bogus"]),
            "Error in ACL SETUSER modifier 'bogus': Syntax error"
        );
        assert_eq!(
            err(&["on", "+nosuch"]),
            "Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
        );
        assert_eq!(
            err(&["+config|nope"]),
            "Error in ACL SETUSER modifier '+config|nope': Unknown command or category name in ACL"
        );
        assert!(set(None, "u", &["+get|x", "+config|get"]).is_ok());
        assert!(err(&["allkeys", "%R~foo"]).ends_with(ALL_KEYS_FIRST));
        assert!(err(&["allchannels", "&x"]).ends_with(ALL_CHANNELS_FIRST));
        assert!(err(&["#abc"]).ends_with(BAD_HASH));
        assert!(err(&["<nope"]).ends_with(NO_SUCH_PASSWORD));
        assert!(err(&["(+get ~x)"]).contains("selectors"));
        assert_eq!(
            set(None, "a b", &[]).unwrap_err(),
            "Usernames can't contain spaces or null characters"
        );
    }

    #[test]
    fn repeated_changes_keep_a_short_list() {
        let mut u = set(None, "u", &["on", "nopass"]).unwrap();
        for _ in 0..1000 {
            u = set(
                Some(&u),
                "u",
                &["+get", "-get", "~k", "resetkeys", "~k", "&c"],
            )
            .unwrap();
        }
        assert_eq!(u.acl, ["+get", "-get", "~k", "&c"]);
        assert!(u.password_matches(b"anything"));
    }
}
