//! The `[tls]` (clients) and `[backend_tls]` (nodes) sections: which files to load and
//! how to check the other side. Plain data; the proxy's `tls` module turns it into rustls settings.

use std::net::SocketAddr;

use serde::Deserialize;

use super::ConfigError;

/// TLS for clients: a second listener beside `proxy.listen`, or instead of it when
/// `proxy.listen` is empty. Clients get exactly the RESP behaviour of the plain listener.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// `ip:port` to accept TLS clients on; empty = no TLS listener.
    pub listen: String,
    /// The proxy's certificate chain (PEM), leaf first.
    pub cert_file: String,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_file: String,
    /// CA certificates (PEM). Set: every client must present a certificate signed by one
    /// of them (mutual TLS), and such clients count as authenticated for the purpose of
    /// listening on a non-loopback address. Empty: no client certificate is asked for.
    pub client_ca_file: String,
}

/// TLS towards the cluster's nodes (Redis `tls-port`, `tls-cluster yes`): every
/// connection, the workers' and the topology thread's, is then TLS.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BackendTlsConfig {
    /// Speak TLS to every node.
    pub enabled: bool,
    /// CA certificates (PEM) the nodes' certificates must chain to. Required when enabled.
    pub ca_file: String,
    /// A client certificate chain (PEM) for nodes that check clients (Redis's default
    /// `tls-auth-clients yes`); empty = none.
    pub cert_file: String,
    /// The client certificate's private key (PEM).
    pub key_file: String,
    /// The name every node's certificate is checked against and sent as SNI. Empty: the
    /// host of the node's address as the cluster announces it; for an IP address (what
    /// Redis announces) the certificate must then hold that IP in its subjectAltName.
    pub server_name: String,
}

/// The TLS listener's address, if any, once every file it and the backend side need is
/// named (whether the files load is checked when the proxy starts).
pub(super) fn check(
    t: &TlsConfig,
    b: &BackendTlsConfig,
) -> Result<Option<SocketAddr>, ConfigError> {
    if b.enabled && b.ca_file.is_empty() {
        return Err(ConfigError::Missing(
            "backend_tls.ca_file",
            "the nodes' certificates are checked against it",
        ));
    }
    if b.cert_file.is_empty() != b.key_file.is_empty() {
        return Err(ConfigError::Missing(
            "backend_tls.cert_file and backend_tls.key_file",
            "a client certificate needs both",
        ));
    }
    if t.listen.is_empty() {
        return Ok(None);
    }
    if t.cert_file.is_empty() || t.key_file.is_empty() {
        return Err(ConfigError::Missing(
            "tls.cert_file and tls.key_file",
            "the TLS listener presents them",
        ));
    }
    super::listen::parse_addr(&t.listen).map(Some)
}
