//! Why a configuration is refused: one error per mistake, in words an operator can act on.
//! Its own file so `config.rs` keeps to the sections and their checks.

use std::net::SocketAddr;

/// A configuration that cannot be used, with the reason in words an operator can act on.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot parse config: {0}")]
    Parse(#[from] toml::de::Error),
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
    #[error("{0} must be greater than 0")]
    Zero(&'static str),
    #[error("group: {0}")]
    Group(String),
    #[error(transparent)]
    User(#[from] crate::auth::AuthConfigError),
    #[error("cluster.topology_command: {0:?} is neither \"slots\" nor \"shards\"")]
    TopologyCommand(String),
    #[error(
        "refusing to listen on {0} without client authentication: set auth.requirepass or auth.users, or listen on a loopback address"
    )]
    Unprotected(SocketAddr),
}
