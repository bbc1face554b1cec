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
