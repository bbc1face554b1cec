//! What can be wrong with a TLS setting, for the start-up and reload errors that name it.

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
