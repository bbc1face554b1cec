//! Who may talk to the proxy, and what each user may run: a `requirepass`-style password for
//! the default user, and named users with Redis ACL rules. Pure: no I/O.
//!
//! A user's rules are the ones `ACL SETUSER` takes, for what a proxy can enforce: command
//! rules read left to right, the last that matches winning (`+@all`/`allcommands`,
//! `-@all`/`nocommands`, `+@<category>`, `-@<category>`, `+<command>`, `-<command>`,
//! subcommands as `config|get`); key patterns (`~pattern`, `%R~pattern` for reads only,
//! `%W~pattern` for writes only, `allkeys`, `resetkeys`); channel patterns (`&pattern`,
//! `allchannels`, `resetchannels`). A user starts with no channel, as with Redis 7's default
//! `acl-pubsub-default resetchannels`. A command may run only if every key it names matches
//! a key pattern that grants what the command does to that key (read, write, both or
//! neither: the flags of the key spec that found the key, `CommandSpec::key_need`), and
//! every channel it publishes or subscribes to matches a channel pattern (a PSUBSCRIBE
//! pattern must equal one, as Redis compares them).
//! Decisions are made in Redis's order: the command, then its keys, then its channels.
//!
//! Scripts and functions name keys the proxy cannot see: they run on the nodes as the
//! user's mirror ACL user (`auth/mirror.rs`), built from the same rules.
//!
//! Client credentials are separate from the backend credentials (`cluster.backend_*`), which
//! the proxy never shows to clients.

use cluster::command::{access, acl, flags, CommandSpec};
use serde::Deserialize;

pub(crate) mod mirror;
pub(crate) mod passwords;
pub(crate) mod setuser;

use passwords::Passwords;

/// One user as configured.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    pub password: String,
    /// ACL command rules, e.g. `["+@all", "-@dangerous"]`.
    #[serde(default = "all_commands")]
    pub commands: Vec<String>,
    /// Key patterns, e.g. `["app:*"]`; `["*"]` allows every key.
    #[serde(default = "all_keys")]
    pub keys: Vec<String>,
    /// Channel patterns, e.g. `["news.*"]`; none by default (Redis 7's `resetchannels`),
    /// `["*"]` for every channel.
    #[serde(default)]
    pub channels: Vec<String>,
    /// Rules in `ACL SETUSER`'s words, applied after the three lists above, e.g.
    /// `"+@all -@dangerous ~app:* &news.*"`. The password stays in `password`.
    #[serde(default)]
    pub acl: String,
}

fn all_commands() -> Vec<String> {
    vec!["+@all".into()]
}

fn all_keys() -> Vec<String> {
    vec!["*".into()]
}

/// Why a rule or user could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthConfigError {
    #[error("user {user:?}: unknown ACL rule {rule:?}")]
    Rule { user: String, rule: String },
    #[error("user {user:?}: ACL rule {rule:?} is not supported by the proxy: {why}")]
    Unsupported {
        user: String,
        rule: String,
        why: &'static str,
    },
}

/// A checked user, ready for per-request decisions.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub name: String,
    pub(crate) passwords: Passwords,
    rules: Vec<Rule>,
    /// Key patterns; None: every key (`allkeys`).
    keys: Patterns,
    /// Channel patterns; None: every channel (`allchannels`).
    channels: Patterns,
    /// The user's rules in `ACL SETUSER`'s language, for its mirror on the nodes
    /// (`auth/mirror.rs`).
    pub acl: Vec<String>,
    /// Every command, key and channel: no per-request check needed.
    pub unrestricted: bool,
    /// Removed by a reload: a tombstone keeping its index (`context/live.rs`).
    removed: bool,
}

/// Glob patterns, or everything.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Patterns {
    All,
    Some(Vec<Pattern>),
}

/// One glob and what it grants (bits from `access`); a channel pattern grants both.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    glob: Vec<u8>,
    grants: u8,
}

const READ_WRITE: u8 = access::READ | access::WRITE;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    AllowCategory(u64),
    DenyCategory(u64),
    AllowCommand(String),
    DenyCommand(String),
}

/// Why a request was refused, with the argument at fault (for ACL DRYRUN's wording).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

/// What one rule token changes.
enum Token {
    Command(Rule),
    Key(Option<Pattern>),
    ResetKeys,
    Channel(Option<Pattern>),
    ResetChannels,
}

// === impl User ===

impl User {
    pub(crate) fn from_config(cfg: &UserConfig) -> Result<User, AuthConfigError> {
        let mut tokens: Vec<String> = cfg.commands.clone();
        tokens.extend(cfg.keys.iter().map(|k| format!("~{k}")));
        tokens.extend(cfg.channels.iter().map(|c| format!("&{c}")));
        tokens.extend(cfg.acl.split_ascii_whitespace().map(String::from));
        User::with_rules(&cfg.name, Passwords::one(&cfg.password), tokens)
    }

    /// A user with `rules` (ACL SETUSER's command, key and channel rules, applied in order
    /// to a user that starts with none).
    pub(crate) fn with_rules(
        name: &str,
        passwords: Passwords,
        rules: Vec<String>,
    ) -> Result<User, AuthConfigError> {
        let mut user = User {
            name: name.to_string(),
            passwords,
            rules: Vec::new(),
            keys: Patterns::Some(Vec::new()),
            channels: Patterns::Some(Vec::new()),
            acl: rules,
            unrestricted: false,
            removed: false,
        };
        for token in &user.acl {
            match parse_token(token).map_err(|why| match why {
                None => AuthConfigError::Rule {
                    user: name.to_string(),
                    rule: token.clone(),
                },
                Some(why) => AuthConfigError::Unsupported {
                    user: name.to_string(),
                    rule: token.clone(),
                    why,
                },
            })? {
                Token::Command(rule) => user.rules.push(rule),
                Token::Key(p) => user.keys.add(p),
                Token::ResetKeys => user.keys = Patterns::Some(Vec::new()),
                Token::Channel(p) => user.channels.add(p),
                Token::ResetChannels => user.channels = Patterns::Some(Vec::new()),
            }
        }
        user.unrestricted = user.rules.last() == Some(&Rule::AllowCategory(u64::MAX))
            && !user
                .rules
                .iter()
                .any(|r| matches!(r, Rule::DenyCommand(_) | Rule::DenyCategory(_)))
            && user.keys == Patterns::All
            && user.channels == Patterns::All;
        Ok(user)
    }

    /// The default user of `requirepass`: every command, every key, every channel.
    pub(crate) fn default_with_password(password: &str) -> User {
        User {
            name: "default".into(),
            passwords: Passwords::one(password),
            rules: vec![Rule::AllowCategory(u64::MAX)],
            keys: Patterns::All,
            channels: Patterns::All,
            acl: vec!["+@all".into(), "allkeys".into(), "allchannels".into()],
            unrestricted: true,
            removed: false,
        }
    }

    /// What a user removed by a reload leaves in its place: no password matches, nothing
    /// may run, so its index is never reused by someone else.
    pub(crate) fn removed(name: &str) -> User {
        User {
            name: name.into(),
            passwords: Passwords::default(),
            rules: Vec::new(),
            keys: Patterns::Some(Vec::new()),
            channels: Patterns::Some(Vec::new()),
            acl: Vec::new(),
            unrestricted: false,
            removed: true,
        }
    }

    /// Whether this is a removed user's tombstone.
    pub(crate) fn is_removed(&self) -> bool {
        self.removed
    }

    /// Whether `given` logs in as this user (on, and nopass or one of its passwords).
    pub(crate) fn password_matches(&self, given: &[u8]) -> bool {
        !self.removed && self.passwords.matches(given)
    }

    /// May this user run `spec` with arguments `arg(0..argc)`? Redis's order: the command,
    /// then each key it names, then each channel it publishes or subscribes to. A request
    /// whose keys cannot be found (bad numkeys) is refused by the node before it runs.
    pub(crate) fn check<'a>(
        &self,
        spec: &CommandSpec,
        argc: usize,
        arg: impl Fn(usize) -> &'a [u8] + Copy,
    ) -> Result<(), Denied> {
        // AUTH and HELLO stay available to every user, as in Redis.
        if spec.has(flags::NO_AUTH) {
            return Ok(());
        }
        if !self.may_run(spec) {
            return Err(Denied::Command);
        }
        // Shard channels sit where keys would: they are channels to ACLs, not keys.
        if !spec.has(flags::SHARD_CHANNEL) && self.keys != Patterns::All {
            if let Ok(keys) = spec.key_positions(argc, arg) {
                let need = |i: usize| spec.key_need(i, argc, arg);
                let denied = |&i: &usize| !self.keys.matches(arg(i), need(i));
                if let Some(i) = keys.iter().find(denied) {
                    return Err(Denied::Key(i));
                }
            }
        }
        match self.channels {
            Patterns::All => Ok(()),
            Patterns::Some(ref list) => channel_check(list, spec, argc, arg),
        }
    }

    /// May this user run `spec`? Last matching rule wins; nothing matching means no.
    pub(crate) fn may_run(&self, spec: &CommandSpec) -> bool {
        let container = spec.name.split('|').next().unwrap_or(spec.name);
        let mut allowed = false;
        for rule in &self.rules {
            match rule {
                Rule::AllowCategory(bits)
                    if spec.acl_categories & bits != 0 || *bits == u64::MAX =>
                {
                    allowed = true
                }
                Rule::DenyCategory(bits)
                    if spec.acl_categories & bits != 0 || *bits == u64::MAX =>
                {
                    allowed = false
                }
                Rule::AllowCommand(name) if name == spec.name || name == container => {
                    allowed = true
                }
                Rule::DenyCommand(name) if name == spec.name || name == container => {
                    allowed = false
                }
                _ => {}
            }
        }
        allowed
    }

    /// Whether the user has every key (`allkeys`, `~*`).
    pub(crate) fn every_key(&self) -> bool {
        self.keys == Patterns::All
    }

    /// Whether the user has every channel (`allchannels`, `&*`).
    pub(crate) fn every_channel(&self) -> bool {
        self.channels == Patterns::All
    }

    /// The key patterns in ACL LIST's words: `~*`, else each one (`~`, `%R~`, `%W~`).
    pub(crate) fn key_rules(&self) -> Vec<String> {
        match &self.keys {
            Patterns::All => vec!["~*".into()],
            Patterns::Some(list) => list
                .iter()
                .map(|p| {
                    let prefix = match p.grants {
                        READ_WRITE => "~",
                        access::READ => "%R~",
                        _ => "%W~",
                    };
                    format!("{prefix}{}", String::from_utf8_lossy(&p.glob))
                })
                .collect(),
        }
    }

    /// The channel patterns in ACL LIST's words: `&*`, else each one.
    pub(crate) fn channel_rules(&self) -> Vec<String> {
        match &self.channels {
            Patterns::All => vec!["&*".into()],
            Patterns::Some(list) => list
                .iter()
                .map(|p| format!("&{}", String::from_utf8_lossy(&p.glob)))
                .collect(),
        }
    }

    /// May this user read `key` (an invalidation or a notification about it)?
    pub(crate) fn may_access(&self, key: &[u8]) -> bool {
        self.keys.matches(key, access::READ)
    }

    /// Whether this user may read every key: `allkeys`, or a `*` pattern that grants reads
    /// (SORT's BY and GET need it, as Redis's `ACLSelectorHasUnrestrictedKeyAccess`).
    pub(crate) fn all_keys(&self) -> bool {
        match &self.keys {
            Patterns::All => true,
            Patterns::Some(list) => list
                .iter()
                .any(|p| p.glob == b"*" && p.grants & access::READ != 0),
        }
    }
}

/// The channels of PUBLISH, SPUBLISH, (S|P)SUBSCRIBE, checked as Redis's
/// `ACLCheckChannelAgainstList`: a channel matched as a glob, a pattern compared literally.
fn channel_check<'a>(
    list: &[Pattern],
    spec: &CommandSpec,
    argc: usize,
    arg: impl Fn(usize) -> &'a [u8],
) -> Result<(), Denied> {
    let (positions, is_pattern) = match spec.name {
        "publish" | "spublish" => (1..2.min(argc), false),
        "subscribe" | "ssubscribe" => (1..argc, false),
        "psubscribe" => (1..argc, true),
        _ => return Ok(()),
    };
    for i in positions {
        let channel = arg(i);
        let ok = list.iter().any(|p| match is_pattern {
            true => p.glob.as_slice() == channel,
            false => glob_match(&p.glob, channel),
        });
        if !ok {
            return Err(Denied::Channel(i));
        }
    }
    Ok(())
}

impl Patterns {
    /// Redis's `ACLSetSelector`: the same glob again adds its grants to the first one.
    fn add(&mut self, pattern: Option<Pattern>) {
        match (pattern, &mut *self) {
            (None, _) => *self = Patterns::All,
            (Some(_), Patterns::All) => {}
            (Some(p), Patterns::Some(list)) => match list.iter_mut().find(|q| q.glob == p.glob) {
                Some(known) => known.grants |= p.grants,
                None => list.push(p),
            },
        }
    }

    /// Does a pattern granting at least `need` match `text`?
    fn matches(&self, text: &[u8], need: u8) -> bool {
        match self {
            Patterns::All => true,
            Patterns::Some(list) => list
                .iter()
                .any(|p| p.grants & need == need && glob_match(&p.glob, text)),
        }
    }
}

impl Denied {
    /// Redis 7.0's NOPERM texts.
    pub(crate) fn reply(self, command: &str) -> bytes::Bytes {
        bytes::Bytes::from(match self {
            Denied::Command => format!("-NOPERM this user has no permissions to run the '{command}' command\r\n"),
            Denied::Key(_) => "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n".into(),
            Denied::Channel(_) => "-NOPERM this user has no permissions to access one of the channels used as arguments\r\n".into(),
        })
    }
}

/// One rule token. Err(None): not a rule; Err(Some(why)): a rule the proxy cannot enforce.
fn parse_token(token: &str) -> Result<Token, Option<&'static str>> {
    if let Some(p) = token.strip_prefix('~') {
        let all = p == "*";
        return Ok(Token::Key((!all).then(|| Pattern::new(p, READ_WRITE))));
    }
    if let Some(p) = token.strip_prefix('&') {
        let all = p == "*";
        return Ok(Token::Channel((!all).then(|| Pattern::new(p, READ_WRITE))));
    }
    if let Some(rest) = token.strip_prefix('%') {
        return key_permission(rest)
            .map(|p| Token::Key(Some(p)))
            .ok_or(None);
    }
    let lower = token.to_ascii_lowercase();
    match lower.as_str() {
        "allkeys" => return Ok(Token::Key(None)),
        "resetkeys" => return Ok(Token::ResetKeys),
        "allchannels" => return Ok(Token::Channel(None)),
        "resetchannels" => return Ok(Token::ResetChannels),
        "on" | "off" | "nopass" | "resetpass" | "reset" => {
            return Err(Some(
                "set the user's password with `password`; users are always on",
            ))
        }
        _ if token.starts_with(['>', '<', '#', '!', '(']) => {
            return Err(Some(
                "set the user's password with `password`; selectors are not supported",
            ))
        }
        _ => {}
    }
    parse_rule(&lower).map(Token::Command).ok_or(None)
}

/// `%R~glob`, `%W~glob`, `%RW~glob` (after the `%`), as Redis reads them: each letter once,
/// in either case, then `~`. `%RW~*` is a pattern, not `allkeys`, as in Redis.
fn key_permission(rest: &str) -> Option<Pattern> {
    let (letters, glob) = rest.split_once('~')?;
    let mut grants = 0;
    for c in letters.chars() {
        let bit = match c.to_ascii_uppercase() {
            'R' => access::READ,
            'W' => access::WRITE,
            _ => return None,
        };
        if grants & bit != 0 {
            return None;
        }
        grants |= bit;
    }
    (grants != 0).then(|| Pattern::new(glob, grants))
}

impl Pattern {
    fn new(glob: &str, grants: u8) -> Pattern {
        Pattern {
            glob: glob.as_bytes().to_vec(),
            grants,
        }
    }
}

fn parse_rule(rule: &str) -> Option<Rule> {
    match rule {
        "allcommands" | "+@all" => return Some(Rule::AllowCategory(u64::MAX)),
        "nocommands" | "-@all" => return Some(Rule::DenyCategory(u64::MAX)),
        _ => {}
    }
    let (allow, rest) = match rule.split_at_checked(1)? {
        ("+", rest) => (true, rest),
        ("-", rest) => (false, rest),
        _ => return None,
    };
    match rest.strip_prefix('@') {
        Some(cat) => {
            let bits = category(cat)?;
            Some(if allow {
                Rule::AllowCategory(bits)
            } else {
                Rule::DenyCategory(bits)
            })
        }
        None if known_command(rest) => {
            let name = rest.to_string();
            Some(if allow {
                Rule::AllowCommand(name)
            } else {
                Rule::DenyCommand(name)
            })
        }
        None => None,
    }
}

/// A command rule's name: a command, `container|sub` of a known subcommand, or
/// `command|first-arg` for a command without subcommands (as Redis 7.0 allows).
fn known_command(name: &str) -> bool {
    let (container, sub) = match name.split_once('|') {
        Some((c, s)) => (c, Some(s)),
        None => (name, None),
    };
    let Some(spec) = cluster::lookup(container.as_bytes()) else {
        return false;
    };
    match sub {
        Some(_) if !spec.subcommands.is_empty() => spec.subcommands.iter().any(|s| s.name == name),
        _ => true,
    }
}

/// Redis 7.0's categories, in `ACL CAT`'s order.
pub(crate) const CATEGORIES: [(&str, u64); 21] = [
    ("keyspace", acl::KEYSPACE),
    ("read", acl::READ),
    ("write", acl::WRITE),
    ("set", acl::SET),
    ("sortedset", acl::SORTEDSET),
    ("list", acl::LIST),
    ("hash", acl::HASH),
    ("string", acl::STRING),
    ("bitmap", acl::BITMAP),
    ("hyperloglog", acl::HYPERLOGLOG),
    ("geo", acl::GEO),
    ("stream", acl::STREAM),
    ("pubsub", acl::PUBSUB),
    ("admin", acl::ADMIN),
    ("fast", acl::FAST),
    ("slow", acl::SLOW),
    ("blocking", acl::BLOCKING),
    ("dangerous", acl::DANGEROUS),
    ("connection", acl::CONNECTION),
    ("transaction", acl::TRANSACTION),
    ("scripting", acl::SCRIPTING),
];

/// The category named `name` (any case), as ACL rules spell it.
pub(crate) fn category(name: &str) -> Option<u64> {
    CATEGORIES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, bits)| *bits)
}

/// Redis-style glob: `*`, `?`, `[abc]`, `[^a-z]`, `\x`. Iterative with one backtrack point
/// for `*`, so it is linear-ish and cannot blow up on pathological patterns.
pub(crate) fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(&c) => {
                if let Some(len) = match_one(&pattern[p..], c, text[t]) {
                    p += len;
                    t += 1;
                    continue;
                }
            }
            None => {}
        }
        match star {
            Some((sp, st)) => {
                p = sp + 1;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// If the pattern element at the start of `pat` matches `ch`, its length in the pattern.
fn match_one(pat: &[u8], first: u8, ch: u8) -> Option<usize> {
    match first {
        b'?' => Some(1),
        b'\\' => (pat.get(1) == Some(&ch)).then_some(2),
        b'[' => {
            let end = pat.iter().skip(1).position(|&c| c == b']')? + 1;
            let class = &pat[1..end];
            let (negate, class) = match class.first() {
                Some(b'^') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    hit |= (class[i]..=class[i + 2]).contains(&ch);
                    i += 3;
                } else {
                    hit |= class[i] == ch;
                    i += 1;
                }
            }
            (hit != negate).then_some(end + 1)
        }
        c => (c == ch).then_some(1),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A configured user with these command rules and key patterns, for tests here and in
    /// the session's login.
    pub(crate) fn user(commands: &[&str], keys: &[&str]) -> User {
        let cfg = UserConfig {
            name: "alice".into(),
            password: "pw".into(),
            commands: commands.iter().map(|s| s.to_string()).collect(),
            keys: keys.iter().map(|s| s.to_string()).collect(),
            channels: Vec::new(),
            acl: String::new(),
        };
        User::from_config(&cfg).unwrap()
    }

    fn spec(name: &str) -> &'static CommandSpec {
        let (container, sub) = name
            .split_once('|')
            .map_or((name, None), |(c, s)| (c, Some(s)));
        let spec = cluster::lookup(container.as_bytes()).unwrap();
        match sub {
            Some(sub) => spec.resolve(2, |i| {
                if i == 0 {
                    container.as_bytes()
                } else {
                    sub.as_bytes()
                }
            }),
            None => spec,
        }
    }

    #[test]
    fn last_matching_rule_wins() {
        let u = user(&["+@all", "-@dangerous", "+flushall"], &["*"]);
        assert!(u.may_run(spec("get")));
        assert!(!u.may_run(spec("keys")), "keys is @dangerous");
        assert!(u.may_run(spec("flushall")));
        let read_only = user(&["+@read"], &["*"]);
        assert!(read_only.may_run(spec("get")) && !read_only.may_run(spec("set")));
        assert!(
            !user(&[], &["*"]).may_run(spec("get")),
            "no rule, no access"
        );
    }

    #[test]
    fn key_patterns_are_redis_globs() {
        let u = user(&["+@all"], &["app:*", "cache:?", "x[0-9]"]);
        assert!(u.may_access(b"app:1") && u.may_access(b"cache:a") && u.may_access(b"x5"));
        assert!(!u.may_access(b"other") && !u.may_access(b"cache:ab") && !u.may_access(b"xa"));
        assert!(glob_match(b"*a*b*c*", b"xxaxxbxxc") && !glob_match(b"*a*b*c*d", b"abc"));
        assert!(
            glob_match(b"[^a]", b"b") && !glob_match(b"[^a]", b"a") && glob_match(b"\\*", b"*")
        );
        let long = vec![b'a'; 10_000];
        assert!(!glob_match(
            &[b'*'; 50].iter().chain(b"b").copied().collect::<Vec<_>>(),
            &long
        ));
    }

    #[test]
    fn passwords_and_bad_rules() {
        let u = user(&["+@all"], &["*"]);
        assert!(
            u.password_matches(b"pw") && !u.password_matches(b"pwx") && !u.password_matches(b"p")
        );
        let bad = UserConfig {
            name: "b".into(),
            password: "x".into(),
            commands: vec!["+@nope".into()],
            keys: vec![],
            channels: vec![],
            acl: String::new(),
        };
        assert!(User::from_config(&bad).is_err());
        for unsupported in [">pw", "on", "(~x +get)"] {
            let cfg = UserConfig {
                acl: unsupported.into(),
                ..bad.clone()
            };
            let cfg = UserConfig {
                commands: vec!["+@all".into()],
                ..cfg
            };
            assert!(
                matches!(
                    User::from_config(&cfg),
                    Err(AuthConfigError::Unsupported { .. })
                ),
                "{unsupported}"
            );
        }
    }

    #[test]
    fn read_and_write_key_patterns_follow_each_keys_spec() {
        let cfg = |acl: &str| UserConfig {
            name: "rw".into(),
            password: "pw".into(),
            commands: vec!["+@all".into()],
            keys: vec![],
            channels: vec![],
            acl: acl.into(),
        };
        let u = User::from_config(&cfg("%R~src* %W~dst* ~both*")).unwrap();
        let run = |cmd: &[&str]| {
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            let spec = cluster::lookup(args[0]).unwrap();
            u.check(spec, args.len(), |i| args[i])
        };
        assert_eq!(run(&["GET", "src1"]), Ok(()));
        assert_eq!(run(&["GET", "dst1"]), Err(Denied::Key(1)));
        assert_eq!(run(&["SET", "src1", "v"]), Err(Denied::Key(1)));
        assert_eq!(
            run(&["SET", "dst1", "v"]),
            Ok(()),
            "SET without GET only writes"
        );
        assert_eq!(run(&["SET", "dst1", "v", "get"]), Err(Denied::Key(1)));
        assert_eq!(run(&["SET", "both1", "v", "GET"]), Ok(()));
        assert_eq!(run(&["BITFIELD", "src1", "GET", "u8", "0"]), Ok(()));
        assert_eq!(
            run(&["BITFIELD", "src1", "GET", "u8", "0", "SET", "u8", "0", "1"]),
            Err(Denied::Key(1))
        );
        assert_eq!(run(&["COPY", "src1", "dst1"]), Ok(()));
        assert_eq!(run(&["COPY", "dst1", "src1"]), Err(Denied::Key(1)));
        assert_eq!(run(&["LMOVE", "both1", "dst1", "LEFT", "LEFT"]), Ok(()));
        assert_eq!(
            run(&["LMOVE", "src1", "dst1", "LEFT", "LEFT"]),
            Err(Denied::Key(1)),
            "LMOVE's source is read and written"
        );
        assert_eq!(run(&["ZUNIONSTORE", "dst1", "2", "src1", "src2"]), Ok(()));
        assert_eq!(
            run(&["ZUNIONSTORE", "dst1", "2", "src1", "dst2"]),
            Err(Denied::Key(4))
        );
        assert_eq!(run(&["SORT", "src1", "STORE", "dst1"]), Ok(()));
        assert_eq!(run(&["SORT", "src1", "STORE", "src2"]), Err(Denied::Key(3)));
        assert_eq!(
            run(&["EXISTS", "dst1"]),
            Ok(()),
            "EXISTS's spec names no access"
        );
        assert!(u.may_access(b"src1") && !u.may_access(b"dst1"));
        assert!(!u.all_keys());
        assert!(User::from_config(&cfg("%R~*")).unwrap().all_keys());
        assert!(!User::from_config(&cfg("%W~*")).unwrap().all_keys());
        for bad in ["%~x", "%RR~x", "%X~x", "%R", "%"] {
            assert!(
                matches!(
                    User::from_config(&cfg(bad)),
                    Err(AuthConfigError::Rule { .. })
                ),
                "{bad}"
            );
        }
        let merged = User::from_config(&cfg("%R~k* %W~k*")).unwrap();
        let args: [&[u8]; 3] = [b"SET", b"k1", b"v"];
        let spec = cluster::lookup(b"set").unwrap();
        assert_eq!(merged.check(spec, 3, |i| args[i]), Ok(()));
    }
}
