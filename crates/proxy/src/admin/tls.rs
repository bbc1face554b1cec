//! TLS as operators watch it: INFO's `tls` section and the `/metrics` lines for the
//! certificates the proxy presents (days until each expires, so an alert fires well
//! before a rotation is missed) and for failed client handshakes.

use std::fmt::Write;

use crate::admin::exposition::{sample, Described};
use crate::context::Shared;
use crate::tls::CertExpiry;

/// The certificates the proxy presents, in a fixed order: the listener's, then the one it
/// shows the nodes.
fn presented(shared: &Shared) -> Vec<CertExpiry> {
    let listener = shared.tls_acceptor.as_ref().and_then(|a| a.expiry());
    let backend = shared.backend_tls.as_ref().and_then(|c| c.expiry());
    listener.into_iter().chain(backend).collect()
}

/// INFO `tls`: whether each side speaks TLS, failed handshakes, and per certificate its
/// file and days left (Redis has no such section; the names follow INFO's style).
pub(crate) fn info(shared: &Shared, out: &mut String) {
    let mut line = |key: &str, value: &dyn std::fmt::Display| {
        let _ = write!(out, "{key}:{value}\r\n");
    };
    let on = |b: bool| if b { "yes" } else { "no" };
    line("tls_listener", &on(shared.tls_acceptor.is_some()));
    line("tls_backend", &on(shared.backend_tls.is_some()));
    line(
        "tls_handshake_failures",
        &shared.totals().tls_handshake_failures,
    );
    for cert in presented(shared) {
        line(&format!("tls_{}_cert_file", cert.role), &cert.path);
        line(
            &format!("tls_{}_cert_days_left", cert.role),
            &cert.days_left(),
        );
    }
    // Valkey 9's fields, by its names: the certificate shown to clients (server), the one
    // shown to nodes (client), and the CA that expires first (the clients' CA bundle, else
    // the nodes'; read when the files were loaded); `none` and 0 where there is none.
    let ca = (shared.tls_acceptor.as_ref().and_then(|a| a.ca_expiry()))
        .or_else(|| shared.backend_tls.as_ref().and_then(|c| c.ca_expiry()));
    let server = shared.tls_acceptor.as_ref().and_then(|a| a.expiry());
    let client = shared.backend_tls.as_ref().and_then(|c| c.expiry());
    for (name, cert) in [("server", server), ("client", client), ("ca", ca)] {
        let serial = cert.as_ref().map_or("none", |c| c.serial.as_str());
        line(&format!("tls_{name}_cert_serial"), &serial);
        let left = cert.as_ref().map_or(0, CertExpiry::seconds_left);
        line(&format!("tls_{name}_cert_expires_in_seconds"), &left);
    }
}

/// The TLS lines of a scrape.
pub(crate) fn metrics(shared: &Shared, out: &mut String, described: &mut Described) {
    sample(
        out,
        described,
        "slotgate_tls_handshake_failures_total",
        "",
        shared.totals().tls_handshake_failures,
    );
    for cert in presented(shared) {
        let labels = format!("role=\"{}\",file=\"{}\"", cert.role, escape(&cert.path));
        sample(
            out,
            described,
            "slotgate_tls_certificate_days_left",
            &labels,
            cert.days_left(),
        );
    }
}

/// A Prometheus label value: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
