//! The admin endpoint's HTTP server (hyper): `GET /metrics`, the status page (`/`,
//! refreshed from `/status.json`), `/healthz` and `/readyz` for probes, `POST /reload`.
//! Off unless `admin.listen` is set; off loopback only with `admin.token`
//! (`config/admin.rs`). Which path answers what is `endpoints.rs`, who may ask `access.rs`.
//!
//! It runs on its own thread with its own runtime, so a scrape never touches a worker's
//! event loop, and serves connections concurrently, each under deadlines: a client that
//! sends its head a byte at a time, or never reads a large `/metrics` body, holds only its
//! own connection, never `/healthz` (a kubelet would restart a healthy proxy).
//!
//! ```text
//!   accept ─▶ (at most MAX_CONNECTIONS) task per connection, one request each
//!     head within HEAD_TIMEOUT ─▶ access check ─▶ body within BODY_TIMEOUT ─▶ answer
//!     └──── the whole exchange, the answer's writing included, within EXCHANGE_DEADLINE
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{watch, Semaphore};

use crate::admin::access;
use crate::admin::endpoints::{Answer, Endpoint};
use crate::context::Shared;

/// A request's head (request line and headers) must arrive within this.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Its body (only `POST /reload` may have one, and needs none) within this; else 408.
const BODY_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole exchange, from accept to the last byte of the answer written: also the
/// write deadline of a client that does not read what it asked for.
const EXCHANGE_DEADLINE: Duration = Duration::from_secs(15);
/// Connections served at once; more are closed as soon as accepted.
const MAX_CONNECTIONS: usize = 64;
/// A larger body is refused (413): no endpoint reads one.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// Read buffer, and so the largest request head (hyper's minimum is 8 KiB).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Bind `addr` and serve on a background thread until `shutdown` turns true. Returns the
/// bound address and the thread.
pub(crate) fn spawn(
    addr: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, std::thread::JoinHandle<()>)> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let thread = std::thread::Builder::new()
        .name("slotgate-admin".into())
        .spawn(move || {
            shared.identity.route_this_thread();
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => return tracing::error!(error = %e, "admin endpoint cannot listen"),
                };
                tokio::select! {
                    _ = crate::admin::status::sample_history(&shared) => {}
                    _ = accept_loop(listener, shared.clone()) => {}
                    _ = shutdown.changed() => {}
                }
            });
        })?;
    Ok((bound, thread))
}

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, most likely: let some close before trying again.
                tracing::debug!(error = %e, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("admin endpoint busy: connection closed");
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            serve(stream, shared).await;
            drop(slot);
        });
    }
}

/// One connection, one request, under the deadlines above.
async fn serve(stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let service = service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(respond(req, &shared).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(EXCHANGE_DEADLINE, conn).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "admin connection failed"),
        Err(_) => tracing::debug!("admin connection closed at its deadline"),
    }
}

/// Check, read the body, answer.
async fn respond(req: Request<Incoming>, shared: &Arc<Shared>) -> Response<Full<Bytes>> {
    let endpoint = Endpoint::of(req.uri().path());
    let token = shared.live.load().config.admin.token.clone();
    if let Err(refusal) = access::check(endpoint.guard(), req.headers(), &token) {
        let mut answer = reply(Answer::text(refusal.status, format!("{}\n", refusal.why)));
        if refusal.status == StatusCode::UNAUTHORIZED {
            let bearer = HeaderValue::from_static("Bearer");
            answer.headers_mut().insert("www-authenticate", bearer);
        }
        return answer;
    }
    if !endpoint.allows(req.method()) {
        let text = format!("use {}\n", endpoint.allow());
        let mut answer = reply(Answer::text(StatusCode::METHOD_NOT_ALLOWED, text));
        let allow = HeaderValue::from_static(endpoint.allow());
        answer.headers_mut().insert(ALLOW, allow);
        return answer;
    }
    if let Err(status) = drain_body(req).await {
        let why = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "request body too large\n",
            _ => "request body not received in time\n",
        };
        return reply(Answer::text(status, why));
    }
    reply(endpoint.answer(shared).await)
}

/// Read and drop the body, so the answer is not lost to a reset when the socket closes
/// with unread bytes; bounded in size (413) and time (408).
async fn drain_body(req: Request<Incoming>) -> Result<(), StatusCode> {
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(StatusCode::PAYLOAD_TOO_LARGE);
    }
    let body = Limited::new(req.into_body(), MAX_BODY_BYTES);
    match tokio::time::timeout(BODY_TIMEOUT, body.collect()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(StatusCode::PAYLOAD_TOO_LARGE)
        }
        Ok(Err(_)) => Err(StatusCode::BAD_REQUEST),
        Err(_) => Err(StatusCode::REQUEST_TIMEOUT),
    }
}

fn reply(answer: Answer) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(answer.body)));
    *response.status_mut() = answer.status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(answer.kind));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
