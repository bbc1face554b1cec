//! TLS on both sides, with rustls (no OpenSSL): the listener's acceptor for clients
//! (`server.rs`), the connector towards nodes (`client.rs`), the stream type that is either
//! plain or TLS (`stream.rs`), and the PEM files with their expiry dates (`files.rs`).
//!
//! Settings are built once at start (and again on a reload) into shared rustls configs;
//! a handshake only clones an `Arc`.

mod client;
mod files;
mod server;
mod stream;

pub(crate) use client::{Built as ConnectorBuilt, Connector};
pub(crate) use files::CertExpiry;
pub(crate) use server::{Acceptor, Built as AcceptorBuilt};
pub(crate) use stream::Stream;

/// A TLS setting that cannot be used: a file that does not load, a key that does not fit.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{key}: cannot read {path:?}: {reason}")]
    File {
        key: &'static str,
        path: String,
        reason: String,
    },
    #[error("{key}: {path:?} holds no certificate")]
    Empty { key: &'static str, path: String },
    #[error("{0}: {1}")]
    Rustls(&'static str, rustls::Error),
    #[error("{0}: {1}")]
    Verifier(&'static str, String),
}

/// The one crypto provider, named explicitly so no process-wide default is needed.
fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
