//! Who may talk to the proxy, and what each user may run: a `requirepass`-style password for
//! the default user, and named users with Redis-ACL-like rules. Pure: no I/O.
//!
//! Rules are read left to right and the last one that matches a command wins, as in Redis
//! ACLs: `+@all`/`allcommands`, `-@all`, `+@<category>`, `-@<category>`, `+<command>`,
//! `-<command>` (subcommands as `config|get`). Key patterns (`~pattern`, `allkeys`) are
//! Redis glob patterns; a command may run only if every key it names matches one of them.
//!
//! Client credentials are separate from the backend credentials (`cluster.backend_*`), which
//! the proxy never shows to clients.

use cluster::command::{acl, CommandSpec};
use serde::Deserialize;

pub(crate) mod mirror;

/// One user as configured.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    pub password: String,
    /// ACL-style command rules, e.g. `["+@all", "-@dangerous"]`.
    #[serde(default = "all_commands")]
    pub commands: Vec<String>,
    /// Key patterns, e.g. `["app:*"]`; `["*"]` allows every key.
    #[serde(default = "all_keys")]
    pub keys: Vec<String>,
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
}

/// A checked user, ready for per-request decisions.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub name: String,
    password: String,
    rules: Vec<Rule>,
    keys: Vec<Vec<u8>>,
    /// The user's rules in `ACL SETUSER`'s language, for its mirror on the nodes
    /// (`auth/mirror.rs`).
    pub acl: Vec<String>,
    /// Every command and every key: no per-request check needed.
    pub unrestricted: bool,
    /// Removed by a reload: a tombstone keeping its index (`context/live.rs`).
    removed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    AllowCategory(u64),
    DenyCategory(u64),
    AllowCommand(String),
    DenyCommand(String),
}

/// Why a request was refused, with Redis's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Denied {
    Command,
    Key,
}

// === impl User ===

impl User {
    pub(crate) fn from_config(cfg: &UserConfig) -> Result<User, AuthConfigError> {
        let rules = cfg
            .commands
            .iter()
            .map(|r| {
                parse_rule(r).ok_or_else(|| AuthConfigError::Rule {
                    user: cfg.name.clone(),
                    rule: r.clone(),
                })
            })
            .collect::<Result<_, _>>()?;
        let keys: Vec<Vec<u8>> = cfg.keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let unrestricted = rules == [Rule::AllowCategory(u64::MAX)] && keys == [b"*".to_vec()];
        let acl = cfg
            .commands
            .iter()
            .cloned()
            .chain(cfg.keys.iter().map(|k| format!("~{k}")))
            .collect();
        Ok(User {
            name: cfg.name.clone(),
            password: cfg.password.clone(),
            rules,
            keys,
            acl,
            unrestricted,
            removed: false,
        })
    }

    /// The default user of `requirepass`: every command, every key.
    pub(crate) fn default_with_password(password: &str) -> User {
        User {
            name: "default".into(),
            password: password.into(),
            rules: vec![Rule::AllowCategory(u64::MAX)],
            keys: vec![b"*".to_vec()],
            acl: vec!["+@all".into(), "~*".into()],
            unrestricted: true,
            removed: false,
        }
    }

    /// What a user removed by a reload leaves in its place: no password matches, nothing
    /// may run, so its index is never reused by someone else.
    pub(crate) fn removed(name: &str) -> User {
        User {
            name: name.into(),
            password: String::new(),
            rules: Vec::new(),
            keys: Vec::new(),
            acl: Vec::new(),
            unrestricted: false,
            removed: true,
        }
    }

    /// Whether this is a removed user's tombstone.
    pub(crate) fn is_removed(&self) -> bool {
        self.removed
    }

    /// Constant-time-ish comparison, so a wrong password's timing reveals little.
    pub(crate) fn password_matches(&self, given: &[u8]) -> bool {
        if self.removed {
            return false;
        }
        let want = self.password.as_bytes();
        let mut diff = want.len() ^ given.len();
        for (i, b) in given.iter().enumerate() {
            diff |= usize::from(b ^ want.get(i).copied().unwrap_or(0));
        }
        diff == 0
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

    /// May this user touch `key`?
    pub(crate) fn may_access(&self, key: &[u8]) -> bool {
        self.keys.iter().any(|pattern| glob_match(pattern, key))
    }
}

impl Denied {
    /// Redis 7.0's NOPERM texts.
    pub(crate) fn reply(self, command: &str) -> bytes::Bytes {
        bytes::Bytes::from(match self {
            Denied::Command => format!("-NOPERM this user has no permissions to run the '{command}' command\r\n"),
            Denied::Key => "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n".into(),
        })
    }
}

fn parse_rule(rule: &str) -> Option<Rule> {
    let rule = rule.to_ascii_lowercase();
    match rule.as_str() {
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
        None if cluster::lookup(rest.split('|').next()?.as_bytes()).is_some() => {
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

fn category(name: &str) -> Option<u64> {
    Some(match name {
        "keyspace" => acl::KEYSPACE,
        "read" => acl::READ,
        "write" => acl::WRITE,
        "set" => acl::SET,
        "sortedset" => acl::SORTEDSET,
        "list" => acl::LIST,
        "hash" => acl::HASH,
        "string" => acl::STRING,
        "bitmap" => acl::BITMAP,
        "hyperloglog" => acl::HYPERLOGLOG,
        "geo" => acl::GEO,
        "stream" => acl::STREAM,
        "pubsub" => acl::PUBSUB,
        "admin" => acl::ADMIN,
        "fast" => acl::FAST,
        "slow" => acl::SLOW,
        "blocking" => acl::BLOCKING,
        "dangerous" => acl::DANGEROUS,
        "connection" => acl::CONNECTION,
        "transaction" => acl::TRANSACTION,
        "scripting" => acl::SCRIPTING,
        _ => return None,
    })
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
mod tests {
    use super::*;

    fn user(commands: &[&str], keys: &[&str]) -> User {
        let cfg = UserConfig {
            name: "alice".into(),
            password: "pw".into(),
            commands: commands.iter().map(|s| s.to_string()).collect(),
            keys: keys.iter().map(|s| s.to_string()).collect(),
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
        };
        assert!(User::from_config(&bad).is_err());
    }
}
