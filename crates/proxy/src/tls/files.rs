//! PEM files: certificate chains, private keys and CA bundles, and the expiry date of
//! each certificate the proxy presents, so INFO and `/metrics` can warn before it lapses.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsError;

/// Every certificate in a PEM file, in order (leaf first for a chain).
pub(super) fn certs(
    key: &'static str,
    path: &str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let file_err = |reason: String| TlsError::File {
        key,
        path: path.to_string(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            key,
            path: path.to_string(),
        });
    }
    Ok(certs)
}

/// The first private key in a PEM file.
pub(super) fn private_key(
    key: &'static str,
    path: &str,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::File {
        key,
        path: path.to_string(),
        reason: e.to_string(),
    })
}

/// A CA bundle as a trust store.
pub(super) fn roots(key: &'static str, path: &str) -> Result<Arc<RootCertStore>, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in certs(key, path)? {
        store.add(cert).map_err(|e| TlsError::Rustls(key, e))?;
    }
    Ok(Arc::new(store))
}

/// When one presented certificate stops being valid.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CertExpiry {
    /// Which certificate: `listener` (shown to clients) or `backend_client` (to nodes).
    pub role: &'static str,
    pub path: String,
    /// Its notAfter, in seconds since the Unix epoch.
    pub not_after: i64,
}

impl CertExpiry {
    /// The leaf's notAfter; None when it does not parse (rustls accepted it, so this only
    /// loses the warning, never the connection).
    pub(super) fn of(role: &'static str, path: &str, leaf: &CertificateDer<'_>) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
        Some(CertExpiry {
            role,
            path: path.to_string(),
            not_after: cert.validity().not_after.timestamp(),
        })
    }

    /// Whole days left until it expires, negative once it has.
    pub(crate) fn days_left(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        (self.not_after - now).div_euclid(86_400)
    }
}
