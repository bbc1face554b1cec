//! The crypto provider both sides build their rustls configs with, named explicitly so no
//! process-wide default has to be installed first.

/// The one crypto provider, named explicitly so no process-wide default is needed.
pub(super) fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
