//! TLS on both sides, with rustls (no OpenSSL): the listener's acceptor for clients
//! (`server.rs`), the connector towards nodes (`client.rs`), the stream type that is either
//! plain or TLS (`stream.rs`), the PEM files with their expiry dates (`files.rs`), their
//! errors (`error.rs`) and the one crypto provider (`provider.rs`).
//!
//! Settings are built once at start (and again on a reload) into shared rustls configs;
//! a handshake only clones an `Arc`.

mod client;
mod error;
mod files;
mod provider;
mod server;
mod stream;

pub(crate) use client::{Built as ConnectorBuilt, Connector};
pub use error::TlsError;
pub(crate) use files::CertExpiry;
pub(crate) use server::{Acceptor, Built as AcceptorBuilt};
pub(crate) use stream::Stream;
