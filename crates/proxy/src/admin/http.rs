//! The admin endpoint: `GET /metrics` in Prometheus's text format, the status page (`/`,
//! refreshed from `/status.json`), `/healthz` and `/readyz` for probes, `POST /reload` to re-read the config file, on its own address and its own thread, so scrapes never touch a worker's
//! event loop. Off unless `admin.listen` is set; loopback is the sensible choice.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use crate::context::Shared;

/// Bind `addr` and serve scrapes on a background thread. Returns the bound address.
pub(crate) fn spawn(addr: SocketAddr, shared: Arc<Shared>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("slotgate-admin".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Err(e) = serve(stream, &shared) {
                    tracing::debug!(error = %e, "admin request failed");
                }
            }
        })?;
    Ok(bound)
}

/// One HTTP/1.0-style exchange: read the request line, answer, close.
fn serve(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut line = String::new();
    let mut reader = BufReader::new(&stream);
    reader.take_line(&mut line)?;
    // Read the headers too: closing a socket with unread bytes sends a reset, and the
    // scraper may then lose the answer before it reads it.
    let mut header = String::new();
    for _ in 0..64 {
        header.clear();
        if reader.take_line(&mut header)? == 0 || header.trim_end().is_empty() {
            break;
        }
    }
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or("");
    let path = words.next().unwrap_or("");
    let (status, body) = route(method, path, shared);
    let kind = match path.split('?').next() {
        Some("/") => "text/html; charset=utf-8",
        Some("/status.json") => "application/json",
        _ => "text/plain; version=0.0.4",
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.shutdown(std::net::Shutdown::Write)
}

/// The answer to `GET path`: status line and body.
fn route(method: &str, path: &str, shared: &Shared) -> (&'static str, String) {
    let health = |(ok, body): (bool, String)| match ok {
        true => ("200 OK", body),
        false => ("503 Service Unavailable", body),
    };
    // A probe may add a query string (`/readyz?verbose`): the path alone decides.
    match path.split('?').next().unwrap_or("") {
        "/metrics" => ("200 OK", crate::admin::metrics::render(shared)),
        "/" => ("200 OK", crate::admin::status::PAGE.to_string()),
        "/status.json" => ("200 OK", crate::admin::status::json(shared)),
        "/healthz" | "/livez" => health(crate::admin::health::live()),
        "/readyz" => health(crate::admin::health::ready(shared)),
        // A state change: POST only, so a crawler or a prefetch cannot trigger it.
        "/reload" if method == "POST" => match crate::reload::from_source(shared) {
            Ok(report) => ("200 OK", format!("{report:#?}\n")),
            Err(e) => ("500 Internal Server Error", format!("{e}\n")),
        },
        "/reload" => ("405 Method Not Allowed", "use POST /reload\n".into()),
        _ => (
            "404 Not Found",
            "try /, /status.json, /metrics, /healthz, /readyz or POST /reload\n".to_string(),
        ),
    }
}

/// Read one line, at most 8 KiB.
trait TakeLine {
    fn take_line(&mut self, into: &mut String) -> std::io::Result<usize>;
}

impl<R: BufRead> TakeLine for R {
    fn take_line(&mut self, into: &mut String) -> std::io::Result<usize> {
        std::io::Read::take(self, 8192).read_line(into)
    }
}
