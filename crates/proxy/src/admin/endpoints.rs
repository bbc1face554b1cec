//! What each admin path answers, with which methods, and how it is guarded
//! (`access.rs`). The HTTP server itself is `http.rs`.

use std::sync::Arc;

use hyper::{Method, StatusCode};

use crate::admin::access::Guard;
use crate::context::Shared;

/// The admin endpoint's paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    StatusPage,
    StatusJson,
    Metrics,
    Live,
    Ready,
    Reload,
    /// `POST /migration/<action>` (`migration.rs`).
    Migration(&'static str),
    NotFound,
}

/// An answer: status, content type and body.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub kind: &'static str,
    pub body: String,
}

const TEXT: &str = "text/plain; charset=utf-8";

impl Answer {
    pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> Answer {
        Answer {
            status,
            kind: TEXT,
            body: body.into(),
        }
    }
}

impl Endpoint {
    /// A probe may add a query string (`/readyz?verbose`): the path alone decides.
    pub(crate) fn of(path: &str) -> Endpoint {
        match path {
            "/" => Endpoint::StatusPage,
            "/status.json" => Endpoint::StatusJson,
            "/metrics" => Endpoint::Metrics,
            "/healthz" | "/livez" => Endpoint::Live,
            "/readyz" => Endpoint::Ready,
            "/reload" => Endpoint::Reload,
            "/migration/pause" => Endpoint::Migration("pause"),
            "/migration/resume" => Endpoint::Migration("resume"),
            "/migration/cutover" => Endpoint::Migration("cutover"),
            _ => Endpoint::NotFound,
        }
    }

    pub(crate) fn guard(self) -> Guard {
        match self {
            Endpoint::Live | Endpoint::Ready => Guard::Open,
            Endpoint::Reload | Endpoint::Migration(_) => Guard::Action,
            _ => Guard::Read,
        }
    }

    /// The methods it answers (for `405` and its `Allow` header). A state change is POST
    /// only, so a crawler or a prefetch cannot trigger it.
    pub(crate) fn allow(self) -> &'static str {
        match self {
            Endpoint::Reload | Endpoint::Migration(_) => "POST",
            _ => "GET, HEAD",
        }
    }

    pub(crate) fn allows(self, method: &Method) -> bool {
        match self {
            Endpoint::Reload | Endpoint::Migration(_) => method == Method::POST,
            _ => method == Method::GET || method == Method::HEAD,
        }
    }

    /// The answer; a reload runs on the blocking pool (it reads files and waits for the
    /// reload lock), so a slow one never holds the probes.
    pub(crate) async fn answer(self, shared: &Arc<Shared>) -> Answer {
        let health = |(ok, body): (bool, String)| match ok {
            true => Answer::text(StatusCode::OK, body),
            false => Answer::text(StatusCode::SERVICE_UNAVAILABLE, body),
        };
        match self {
            Endpoint::Metrics => Answer {
                status: StatusCode::OK,
                kind: "text/plain; version=0.0.4",
                body: crate::admin::metrics::render(shared),
            },
            Endpoint::StatusPage => Answer {
                status: StatusCode::OK,
                kind: "text/html; charset=utf-8",
                body: crate::admin::status::PAGE.to_string(),
            },
            Endpoint::StatusJson => Answer {
                status: StatusCode::OK,
                kind: "application/json",
                body: crate::admin::status::json(shared),
            },
            Endpoint::Live => health(crate::admin::health::live()),
            Endpoint::Ready => health(crate::admin::health::ready(shared)),
            Endpoint::Reload => {
                let shared = shared.clone();
                let outcome =
                    tokio::task::spawn_blocking(move || crate::reload::from_source(&shared)).await;
                match outcome {
                    Ok(Ok(report)) => Answer::text(StatusCode::OK, format!("{report:#?}\n")),
                    // The error names keys and positions, never a value (config/error.rs).
                    Ok(Err(e)) => Answer::text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
                    Err(_) => Answer::text(StatusCode::INTERNAL_SERVER_ERROR, "reload failed\n"),
                }
            }
            Endpoint::Migration(action) => match crate::admin::migration::act(shared, action).await
            {
                Ok(body) => Answer::text(StatusCode::OK, body),
                Err((true, why)) => Answer::text(StatusCode::CONFLICT, why),
                Err((false, why)) => Answer::text(StatusCode::NOT_FOUND, why),
            },
            Endpoint::NotFound => Answer::text(
                StatusCode::NOT_FOUND,
                "try /, /status.json, /metrics, /healthz, /readyz, POST /reload or POST \
                 /migration/<pause|resume|cutover>\n",
            ),
        }
    }
}
