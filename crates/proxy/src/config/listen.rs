//! Where clients connect, as the configuration names it: `ip:port` text checked once, at
//! start and at each reload, before anything is bound.

use std::net::SocketAddr;

use super::ConfigError;

/// Where clients connect: the plain listener, the TLS one, or both, and more plain ones.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenAddrs {
    pub plain: Option<SocketAddr>,
    pub tls: Option<SocketAddr>,
    /// `proxy.extra_listen`.
    pub extra: Vec<SocketAddr>,
}

/// An `ip:port` from the config.
pub(super) fn parse_addr(text: &str) -> Result<SocketAddr, ConfigError> {
    text.parse()
        .map_err(|_| ConfigError::Listen(text.to_string()))
}

/// Whether `addr` ends in `:port` (the host is the resolver's to judge): a seed's or a
/// sentinel's address, dialled later.
pub(crate) fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .is_some()
}
