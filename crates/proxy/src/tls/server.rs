//! The client side: the TLS listener's settings (certificate, key, optional client
//! certificate check) and the handshake of a newly accepted client.

use arc_swap::ArcSwap;
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use tokio::net::TcpStream;

use super::provider::provider;
use super::{files, CertExpiry, Stream, TlsError};
use crate::config::TlsConfig;

/// What accepts TLS clients. The settings sit behind an `ArcSwap` so a reload can swap
/// the certificate: connected clients keep their session, new ones get the new one.
pub(crate) struct Acceptor {
    config: ArcSwap<ServerConfig>,
    expiry: ArcSwap<Option<CertExpiry>>,
    /// The client CA bundle's certificate that expires first, read when loaded.
    ca_expiry: ArcSwap<Option<CertExpiry>>,
}

impl Acceptor {
    /// Load `[tls]`'s files. Called only when `tls.listen` is set.
    pub(crate) fn new(cfg: &TlsConfig) -> Result<Acceptor, TlsError> {
        let (config, expiry, ca_expiry) = build(cfg)?;
        Ok(Acceptor {
            config: ArcSwap::from_pointee(config),
            expiry: ArcSwap::from_pointee(expiry),
            ca_expiry: ArcSwap::from_pointee(ca_expiry),
        })
    }

    /// Load the files again without using them yet (a reload checks everything first).
    pub(crate) fn prepare(cfg: &TlsConfig) -> Result<Built, TlsError> {
        build(cfg)
    }

    /// Use `built` for the clients that connect from now on; connected ones keep theirs.
    pub(crate) fn install(&self, built: Built) {
        self.config.store(std::sync::Arc::new(built.0));
        self.expiry.store(std::sync::Arc::new(built.1));
        self.ca_expiry.store(std::sync::Arc::new(built.2));
    }

    /// The client CA certificate that expires first, if one is configured and parsed.
    pub(crate) fn ca_expiry(&self) -> Option<CertExpiry> {
        (**self.ca_expiry.load()).clone()
    }

    /// The presented certificate's expiry, if it parsed.
    pub(crate) fn expiry(&self) -> Option<CertExpiry> {
        (**self.expiry.load()).clone()
    }

    /// The TLS handshake with a client that just connected.
    pub(crate) async fn accept(&self, tcp: TcpStream) -> std::io::Result<Stream> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config.load_full());
        let tls = acceptor.accept(tcp).await?;
        Ok(Stream::Server(Box::new(tls)))
    }
}

/// Loaded settings, not yet in use.
pub(crate) type Built = (ServerConfig, Option<CertExpiry>, Option<CertExpiry>);

fn build(cfg: &TlsConfig) -> Result<Built, TlsError> {
    let chain = files::certs("tls.cert_file", &cfg.cert_file)?;
    let key = files::private_key("tls.key_file", &cfg.key_file)?;
    let expiry = CertExpiry::of("listener", &cfg.cert_file, &chain[0]);
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls("tls", e))?;
    let ca_expiry = match cfg.client_ca_file.as_str() {
        "" => None,
        path => CertExpiry::soonest_in("ca", path),
    };
    let builder = match cfg.client_ca_file.as_str() {
        "" => builder.with_no_client_auth(),
        path => {
            let roots = files::roots("tls.client_ca_file", path)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider())
                .build()
                .map_err(|e| TlsError::Verifier("tls.client_ca_file", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Rustls("tls.key_file", e))?;
    Ok((config, expiry, ca_expiry))
}
