//! Who may use the admin endpoint, decided from a request's headers alone.
//!
//! The probes (`/healthz`, `/livez`, `/readyz`) are open: kubelets and load balancers send
//! no token and may name the host any way. Everything else must come from something that
//! is not a browser tricked by another site:
//!
//! - `Host` must be an IP literal or `localhost` (or absent, as from HTTP/1.0 tools): a
//!   page served under an attacker's name that re-resolves to this address (DNS
//!   rebinding) sends its own name, so it cannot read `/status.json` or `/metrics`;
//! - `Origin`, when present, must be this endpoint's own (`http://<Host>`), and
//!   `Sec-Fetch-Site`, when present, `same-origin` or `none`;
//! - with `admin.token` set, `Authorization: Bearer <token>`, compared in constant time;
//! - `POST /reload` also refuses the bodies a cross-site form can send without a CORS
//!   preflight (`application/x-www-form-urlencoded`, `multipart/form-data`, `text/plain`).
//!
//! Refusals are plain statuses whose text names no header value and no secret.

use std::net::{Ipv4Addr, Ipv6Addr};

use hyper::header::{HeaderMap, AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN};
use hyper::StatusCode;
use subtle::ConstantTimeEq;

use crate::config::Secret;

/// How an endpoint is guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guard {
    /// Probes: no check at all.
    Open,
    /// Reads (`/`, `/status.json`, `/metrics`, unknown paths): Host, Origin, token.
    Read,
    /// `POST /reload` and `POST /migration/*`: as `Read`, and no form-like body.
    Action,
}

/// A refused request: its status and a fixed reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub why: &'static str,
}

const fn refuse(status: StatusCode, why: &'static str) -> Refusal {
    Refusal { status, why }
}

/// The content types a cross-site `<form>` or a "simple" fetch may send.
const FORM_TYPES: &[&str] = &[
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "text/plain",
];

/// Whether `headers` may reach an endpoint guarded by `guard`.
pub(crate) fn check(guard: Guard, headers: &HeaderMap, token: &Secret) -> Result<(), Refusal> {
    if guard == Guard::Open {
        return Ok(());
    }
    let host = single(headers, HOST.as_str())?;
    if let Some(host) = host {
        if !local_host(host) {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "the Host header must be an IP address or localhost",
            ));
        }
    }
    if let Some(origin) = single(headers, ORIGIN.as_str())? {
        let own = host.is_some_and(|h| {
            origin
                .strip_prefix("http://")
                .is_some_and(|o| o.eq_ignore_ascii_case(h))
        });
        if !own {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "cross-origin request refused",
            ));
        }
    }
    if let Some(site) = single(headers, "sec-fetch-site")? {
        if !matches!(site, "same-origin" | "none") {
            return Err(refuse(StatusCode::FORBIDDEN, "cross-site request refused"));
        }
    }
    if !token.is_empty() && !bearer_matches(single(headers, AUTHORIZATION.as_str())?, token) {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "this endpoint needs Authorization: Bearer <admin.token>",
        ));
    }
    if guard == Guard::Action {
        for value in headers.get_all(CONTENT_TYPE) {
            let essence = value
                .to_str()
                .unwrap_or("")
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if FORM_TYPES.contains(&essence.as_str()) {
                return Err(refuse(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "form and text bodies are refused: POST with no body",
                ));
            }
        }
    }
    Ok(())
}

/// The one value of `name`, as text; a repeated or non-ASCII header is refused outright.
fn single<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, Refusal> {
    let mut values = headers.get_all(name).iter();
    let bad = refuse(StatusCode::BAD_REQUEST, "malformed or repeated header");
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(bad);
    }
    first.to_str().map(Some).map_err(|_| bad)
}

/// `ip`, `ip:port`, `[v6]`, `[v6]:port`, or `localhost[:port]`.
fn local_host(host: &str) -> bool {
    let port_ok = |p: &str| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = host.strip_prefix('[') {
        let Some((ip, after)) = rest.split_once(']') else {
            return false;
        };
        let port = after.strip_prefix(':').map_or(after.is_empty(), port_ok);
        return port && ip.parse::<Ipv6Addr>().is_ok();
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port_ok(port) => name,
        Some(_) => return false,
        None => host,
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<Ipv4Addr>().is_ok()
}

/// `Bearer <token>`, compared through SHA-256 digests in constant time, so neither the
/// token's bytes nor its length show in the time an answer takes.
fn bearer_matches(header: Option<&str>, token: &Secret) -> bool {
    let Some((scheme, given)) = header.and_then(|h| h.trim().split_once(' ')) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    let digest = |s: &str| ring::digest::digest(&ring::digest::SHA256, s.as_bytes());
    let (given, want) = (digest(given.trim()), digest(token.expose()));
    bool::from(given.as_ref().ct_eq(want.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    fn status(guard: Guard, pairs: &[(&'static str, &str)], token: &str) -> u16 {
        match check(guard, &headers(pairs), &Secret::new(token)) {
            Ok(()) => 200,
            Err(r) => r.status.as_u16(),
        }
    }

    #[test]
    fn hosts() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:9121",
            "10.1.2.3:80",
            "[::1]:9121",
            "[::1]",
            "localhost",
            "LOCALHOST:9121",
        ] {
            assert!(local_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:9121",
            "127.0.0.1.evil.example",
            "",
            "[::1",
            "[::1]x",
            "127.0.0.1:",
            "127.0.0.1:99999x",
            "localhost.evil:1",
        ] {
            assert!(!local_host(bad), "{bad}");
        }
    }

    #[test]
    fn probes_are_open_and_the_rest_guarded() {
        let evil = [("host", "evil.example")];
        assert_eq!(status(Guard::Open, &evil, "t"), 200);
        assert_eq!(status(Guard::Read, &evil, ""), 403);
        assert_eq!(status(Guard::Read, &[], ""), 200, "HTTP/1.0 without Host");
        assert_eq!(status(Guard::Read, &[("host", "127.0.0.1:1")], ""), 200);
        let twice = [("host", "127.0.0.1"), ("host", "127.0.0.1")];
        assert_eq!(status(Guard::Read, &twice, ""), 400);
    }

    #[test]
    fn origins() {
        let own = [
            ("host", "127.0.0.1:9121"),
            ("origin", "http://127.0.0.1:9121"),
        ];
        assert_eq!(status(Guard::Action, &own, ""), 200);
        for origin in ["http://evil.example", "null", "https://127.0.0.1:9121"] {
            let h = [("host", "127.0.0.1:9121"), ("origin", origin)];
            assert_eq!(status(Guard::Action, &h, ""), 403, "{origin}");
        }
        assert_eq!(status(Guard::Action, &[("origin", "http://x")], ""), 403);
        let site = [("sec-fetch-site", "cross-site")];
        assert_eq!(status(Guard::Read, &site, ""), 403);
        let same = [("sec-fetch-site", "same-origin")];
        assert_eq!(status(Guard::Read, &same, ""), 200);
    }

    #[test]
    fn tokens() {
        assert_eq!(status(Guard::Read, &[], "s3cret"), 401);
        let h = |v: &'static str| [("authorization", v)];
        assert_eq!(status(Guard::Read, &h("Bearer s3cret"), "s3cret"), 200);
        assert_eq!(status(Guard::Read, &h("bearer s3cret"), "s3cret"), 200);
        assert_eq!(status(Guard::Read, &h("Bearer s3cre"), "s3cret"), 401);
        assert_eq!(status(Guard::Read, &h("Bearer s3cretx"), "s3cret"), 401);
        assert_eq!(status(Guard::Read, &h("Basic s3cret"), "s3cret"), 401);
        assert_eq!(status(Guard::Read, &h("s3cret"), "s3cret"), 401);
        assert_eq!(status(Guard::Open, &[], "s3cret"), 200);
    }

    #[test]
    fn form_bodies_are_refused_on_actions_only() {
        for kind in [
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "TEXT/PLAIN;charset=utf-8",
        ] {
            let h = [("content-type", kind)];
            assert_eq!(status(Guard::Action, &h, ""), 415, "{kind}");
            assert_eq!(status(Guard::Read, &h, ""), 200, "{kind}");
        }
        let json = [("content-type", "application/json")];
        assert_eq!(status(Guard::Action, &json, ""), 200);
    }
}
