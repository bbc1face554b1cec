//! Why a configuration is refused: one error per mistake, in words an operator can act on.
//! Its own file so `config.rs` keeps to the sections and their checks.

use std::net::SocketAddr;

/// A configuration that cannot be used, with the reason in words an operator can act on.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Never quotes the file: the line at fault may hold a password (`requirepass =
    /// hunter2`, unquoted). Built by `ConfigError::parse`.
    #[error("cannot parse config at line {line}, column {column}: {reason}")]
    Parse {
        line: usize,
        column: usize,
        reason: String,
    },
    #[error("proxy.listen: {0:?} is not an ip:port address")]
    Listen(String),
    #[error("nothing to listen on: set proxy.listen, tls.listen or both")]
    NoListener,
    #[error("{0} must be set: {1}")]
    Missing(&'static str, &'static str),
    #[error("cluster.seeds: at least one seed node is required")]
    NoSeeds,
    #[error("cluster.seeds: {0:?} is not a host:port address")]
    Seed(String),
    #[error("sharded: {0}")]
    Sharded(String),
    #[error("routes: {0}")]
    Routes(String),
    #[error("nutcracker file: {0}")]
    Nutcracker(String),
    #[error("cluster.seeds, sharded.servers and sentinel.sentinels are exclusive: the proxy serves one pool")]
    TwoPools,
    #[error("sentinel.sentinels: {0:?} is not a host:port address")]
    Sentinel(String),
    #[error("migration: {0}")]
    Migration(String),
    #[error("mirror: {0}")]
    Mirror(String),
    #[error("hotkeys: {0}")]
    Hotkeys(String),
    #[error("near_cache: {0}")]
    NearCache(String),
    #[error("{0} must be greater than 0")]
    Zero(&'static str),
    #[error("group: {0}")]
    Group(String),
    #[error(transparent)]
    User(#[from] crate::auth::AuthConfigError),
    #[error("cluster.topology_command: {0:?} is not \"auto\", \"slots\" or \"shards\"")]
    TopologyCommand(String),
    #[error(
        "refusing to listen on {0} without client authentication: set auth.requirepass or auth.users, or listen on a loopback address"
    )]
    Unprotected(SocketAddr),
    #[error("admin.listen: {0:?} is not an ip:port address")]
    AdminListen(String),
    #[error(
        "refusing the admin endpoint on {0} without admin.token: set a token, or listen on a loopback address"
    )]
    AdminUnprotected(SocketAddr),
}

impl ConfigError {
    /// A TOML error without the text it came from: the position, and toml's reason with
    /// every quoted fragment (a value, a key, the file's own text) left out.
    pub(crate) fn parse(text: &str, e: &toml::de::Error) -> ConfigError {
        let at = e.span().map_or(0, |span| span.start).min(text.len());
        let before = text.get(..at).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let reason = e.message().lines().next().unwrap_or("").trim();
        ConfigError::Parse {
            line,
            column,
            reason: unquoted(reason),
        }
    }
}

/// `text` with whatever stands between quotes or backticks replaced by `…`; an unmatched
/// quote hides the rest of the line.
fn unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut open: Option<char> = None;
    for c in text.chars() {
        match open {
            Some(q) if c == q => open = None,
            Some(_) => {}
            None if matches!(c, '"' | '`' | '\'') => {
                open = Some(c);
                out.push('…');
            }
            None => out.push(c),
        }
    }
    out
}
