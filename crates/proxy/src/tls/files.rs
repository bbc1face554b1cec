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
    /// Its serial number in hex, as Valkey's INFO shows one (OpenSSL's `BN_bn2hex`:
    /// upper case, no leading zeros).
    pub serial: String,
}

impl CertExpiry {
    /// The leaf's notAfter; None when it does not parse (rustls accepted it, so this only
    /// loses the warning, never the connection).
    pub(super) fn of(role: &'static str, path: &str, leaf: &CertificateDer<'_>) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
        let hex: String = cert
            .tbs_certificate
            .raw_serial()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        let serial = match hex.trim_start_matches('0') {
            "" => "0".to_string(),
            digits => digits.to_string(),
        };
        Some(CertExpiry {
            role,
            path: path.to_string(),
            not_after: cert.validity().not_after.timestamp(),
            serial,
        })
    }

    /// The certificate of the CA bundle at `path` that expires first (None if the file
    /// does not load).
    pub(super) fn soonest_in(role: &'static str, path: &str) -> Option<Self> {
        let certs = certs("ca_file", path).ok()?;
        certs
            .iter()
            .filter_map(|c| Self::of(role, path, c))
            .min_by_key(|c| c.not_after)
    }

    /// Seconds left until it expires, 0 once it has (Valkey's INFO).
    pub(crate) fn seconds_left(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        (self.not_after - now).max(0)
    }

    /// Whole days left until it expires, negative once it has.
    pub(crate) fn days_left(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        (self.not_after - now).div_euclid(86_400)
    }
}
