//! The backend side: TLS towards every node (Redis `tls-cluster yes`), checked against a
//! CA file, with an optional client certificate, for the workers' connections and the
//! topology thread's alike.
//!
//! Which name a node's certificate must carry: Redis Cluster announces nodes by IP, so by
//! default the IP itself is checked against the certificate's IP subjectAltNames (and no
//! SNI is sent, as TLS forbids IPs there); `backend_tls.server_name` instead checks every
//! node against one DNS name and sends it as SNI, for clusters whose certificates share it.

use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

use super::provider::provider;
use super::{files, CertExpiry, Stream, TlsError};
use crate::config::BackendTlsConfig;

/// What dials nodes with TLS. Swappable on reload, like the acceptor.
pub(crate) struct Connector {
    config: ArcSwap<ClientConfig>,
    server_name: ArcSwap<Option<ServerName<'static>>>,
    expiry: ArcSwap<Option<CertExpiry>>,
    /// The CA bundle's certificate that expires first, read when loaded.
    ca_expiry: ArcSwap<Option<CertExpiry>>,
}

impl Connector {
    /// Load `[backend_tls]`'s files; None when backend TLS is off.
    pub(crate) fn new(cfg: &BackendTlsConfig) -> Result<Option<Arc<Connector>>, TlsError> {
        if !cfg.enabled {
            return Ok(None);
        }
        let built = build(cfg)?;
        Ok(Some(Arc::new(Connector {
            config: ArcSwap::from_pointee(built.0),
            server_name: ArcSwap::from_pointee(built.1),
            expiry: ArcSwap::from_pointee(built.2),
            ca_expiry: ArcSwap::from_pointee(built.3),
        })))
    }

    /// Load the files again without using them yet (a reload checks everything first).
    pub(crate) fn prepare(cfg: &BackendTlsConfig) -> Result<Built, TlsError> {
        build(cfg)
    }

    /// Use `built` for connections dialled from now on; open ones keep theirs.
    pub(crate) fn install(&self, built: Built) {
        let (config, name, expiry, ca_expiry) = built;
        self.config.store(Arc::new(config));
        self.server_name.store(Arc::new(name));
        self.expiry.store(Arc::new(expiry));
        self.ca_expiry.store(Arc::new(ca_expiry));
    }

    /// The nodes' CA certificate that expires first, if it parsed.
    pub(crate) fn ca_expiry(&self) -> Option<CertExpiry> {
        (**self.ca_expiry.load()).clone()
    }

    /// The client certificate's expiry, when one is configured and parsed.
    pub(crate) fn expiry(&self) -> Option<CertExpiry> {
        (**self.expiry.load()).clone()
    }

    /// The TLS handshake over a fresh connection to `addr` (`host:port`).
    pub(crate) async fn connect(&self, tcp: TcpStream, addr: &str) -> std::io::Result<Stream> {
        let name = match &**self.server_name.load() {
            Some(name) => name.clone(),
            None => name_of(addr)?,
        };
        let connector = tokio_rustls::TlsConnector::from(self.config.load_full());
        let tls = connector.connect(name, tcp).await?;
        Ok(Stream::Client(Box::new(tls)))
    }
}

/// The name to check for a node known only by its address: its IP, or its host name.
fn name_of(addr: &str) -> std::io::Result<ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(host.to_string())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}

/// Loaded settings, not yet in use.
pub(crate) type Built = (
    ClientConfig,
    Option<ServerName<'static>>,
    Option<CertExpiry>,
    Option<CertExpiry>,
);

fn build(cfg: &BackendTlsConfig) -> Result<Built, TlsError> {
    let roots = files::roots("backend_tls.ca_file", &cfg.ca_file)?;
    let ca_expiry = CertExpiry::soonest_in("ca", &cfg.ca_file);
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls("backend_tls", e))?
        .with_root_certificates(roots);
    let (config, expiry) = match cfg.cert_file.as_str() {
        "" => (builder.with_no_client_auth(), None),
        path => {
            let chain = files::certs("backend_tls.cert_file", path)?;
            let key = files::private_key("backend_tls.key_file", &cfg.key_file)?;
            let expiry = CertExpiry::of("backend_client", path, &chain[0]);
            let config = builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Rustls("backend_tls.key_file", e))?;
            (config, expiry)
        }
    };
    let name = match cfg.server_name.as_str() {
        "" => None,
        name => Some(
            ServerName::try_from(name.to_string())
                .map_err(|e| TlsError::Verifier("backend_tls.server_name", e.to_string()))?,
        ),
    };
    Ok((config, name, expiry, ca_expiry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_known_by_ip_are_checked_by_ip() {
        let ip = |s: &str| ServerName::IpAddress(s.parse::<IpAddr>().unwrap().into());
        assert_eq!(name_of("127.0.0.1:7000").unwrap(), ip("127.0.0.1"));
        assert_eq!(name_of("[::1]:7000").unwrap(), ip("::1"));
        assert_eq!(
            name_of("redis-0.example:7000").unwrap(),
            ServerName::try_from("redis-0.example").unwrap()
        );
    }
}
