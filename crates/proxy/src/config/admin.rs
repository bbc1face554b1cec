//! The `[admin]` section: where the HTTP admin endpoint listens and the bearer token that
//! guards it. Its own file because the rule that ties them (no unguarded admin port off
//! loopback) is checked at start and at every reload.

use std::net::SocketAddr;

use serde::Deserialize;

use super::{ConfigError, Secret};

/// The admin endpoint (`/metrics`, the status page, probes, `POST /reload`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// `ip:port` to serve on; empty = off. Loopback unless a token is set.
    pub listen: String,
    /// Bearer token (`Authorization: Bearer <token>`) required by `/`, `/status.json`,
    /// `/metrics` and `POST /reload`; the probes stay open. Required off loopback.
    pub token: Secret,
}

impl AdminConfig {
    /// The address, if enabled; refused off loopback without a token, since `/reload` and
    /// `/status.json` would then be anyone's.
    pub fn addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        let addr = match self.listen.as_str() {
            "" => return Ok(None),
            text => text
                .parse::<SocketAddr>()
                .map_err(|_| ConfigError::AdminListen(text.to_string()))?,
        };
        if !addr.ip().is_loopback() && self.token.is_empty() {
            return Err(ConfigError::AdminUnprotected(addr));
        }
        Ok(Some(addr))
    }
}
