//! The connection task of a `Backend`: dial, send the set-up commands (AUTH, HELLO 3),
//! pump the connection until it breaks, then fail what it owed and redial if more waits.
//!
//! The pump (`Conn`, in `conn.rs`) only moves bytes; timeouts on dial (TCP and TLS), the
//! set-up commands and the backoff after a failed dial live here.

use std::future::poll_fn;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::tls::Stream;

use super::conn::Conn;
use super::handle::{node_error, Backend};
use super::requests::{Gate, InFlight};

/// How long a node that refused a connection is failed fast before the next dial.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(100);

static HELLO3: &[u8] = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n";
static READONLY: &[u8] = b"*1\r\n$8\r\nREADONLY\r\n";
/// CLIENT ID, for a connection a blocking command may wait on.
static CLIENT_ID: &[u8] = b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n";
/// CLIENT NO-TOUCH ON, for a connection made for clients in that mode.
static NO_TOUCH: &[u8] = b"*3\r\n$6\r\nCLIENT\r\n$8\r\nNO-TOUCH\r\n$2\r\nON\r\n";
/// CLIENT IMPORT-SOURCE ON, for a connection made for clients in that mode.
static IMPORT_SOURCE: &[u8] = b"*3\r\n$6\r\nCLIENT\r\n$13\r\nIMPORT-SOURCE\r\n$2\r\nON\r\n";

/// Start the connection task of `backend` on this thread (its first request is queued).
pub(super) fn start(backend: Rc<Backend>) {
    tokio::task::spawn_local(run(backend));
}

/// The connection task: dial, then pump until the connection breaks.
pub(super) async fn run(backend: Rc<Backend>) {
    backend.node.dialing();
    let stream = match tokio::time::timeout(backend.connect_timeout, dial(&backend)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return connect_failed(&backend, &e.to_string()),
        Err(_) => return connect_failed(&backend, "connect timed out"),
    };
    backend.node.connected();
    tracing::debug!(node = %backend.addr, "backend connected");
    let mut conn = Conn::new(backend.clone(), stream);
    if let Some(auth) = &backend.auth {
        // First of all; its reply is dropped (a failure is logged, without the password).
        conn.write_queue.push_back(auth.clone());
        conn.in_flight.push_back(InFlight::SET_UP);
    }
    let wire = backend.wire();
    if wire.resp3 {
        // Before anything else on this connection; its reply (a map) is dropped.
        conn.write_queue.push_back(Bytes::from_static(HELLO3));
        conn.in_flight.push_back(InFlight::SET_UP);
    }
    if wire.db != 0 {
        // Before any request: one that ran in database 0 instead would read or write
        // another keyspace. A node that refuses it (fewer databases than the others) fails
        // the connection and what waits for it.
        let mut select = bytes::BytesMut::new();
        resp::encode_command(&mut select, &[b"SELECT", wire.db.to_string().as_bytes()]);
        conn.write_queue.push_back(select.freeze());
        conn.in_flight.push_back(InFlight::gate(Gate::Database));
        conn.gate += 1;
    }
    backend
        .node_id
        .store(0, std::sync::atomic::Ordering::Relaxed);
    if backend.learn_id {
        // Its reply (`:id`) is kept, not passed on.
        conn.write_queue.push_back(Bytes::from_static(CLIENT_ID));
        conn.in_flight.push_back(InFlight::NODE_ID);
    }
    if wire.no_touch {
        // Before any request: a client's CLIENT NO-TOUCH (Redis 7.2, Valkey) holds for the
        // requests it sends next, all of which come here. Its reply (+OK) is dropped.
        conn.write_queue.push_back(Bytes::from_static(NO_TOUCH));
        conn.in_flight.push_back(InFlight::SET_UP);
    }
    if wire.import_source {
        // Likewise for CLIENT IMPORT-SOURCE ON, which the masters accepted for the client
        // (`session/import_source.rs`). A node whose import-mode was turned off since
        // refuses it (logged): the connection then serves as any client's, which is what
        // Valkey's import source gets while import-mode is off (the flag needs both).
        conn.write_queue
            .push_back(Bytes::from_static(IMPORT_SOURCE));
        conn.in_flight.push_back(InFlight::SET_UP);
    }
    if let Some(tracking) = &backend.tracking {
        // A NOLOOP tracking client's own connection: the node tracks for it from the first
        // request on, and leaves out what this connection writes. Refused (the receiver
        // named is gone), the connection fails: untracked, it would hide invalidations.
        conn.write_queue.push_back(tracking.clone());
        conn.in_flight.push_back(InFlight::gate(Gate::Tracking));
        conn.gate += 1;
    }
    if backend.readonly {
        // Once per connection: the replica then serves reads of its master's slots instead
        // of answering MOVED. Its reply (+OK) is dropped.
        conn.write_queue.push_back(Bytes::from_static(READONLY));
        conn.in_flight.push_back(InFlight::SET_UP);
    }
    if let Some(acting) = &backend.acting {
        // Then the mirror user (`auth/mirror.rs`); no request is written before it is in
        // force, so none can run as the backend user instead. Last: HELLO, SELECT and READONLY
        // are the backend user's to run (the mirror has the client's rules, which may lack
        // them), and all three outlast the AUTH that switches users.
        conn.write_queue.push_back(acting.clone());
        for _ in 0..crate::auth::mirror::SETUP_COMMANDS {
            conn.in_flight.push_back(InFlight::gate(Gate::Mirror));
        }
        conn.gate += crate::auth::mirror::SETUP_COMMANDS;
    }
    let reason = poll_fn(|cx| conn.poll(cx)).await;
    tracing::info!(node = %backend.addr, %reason, "backend connection closed");
    conn.poison(&reason);
    if let Some(refused) = conn.setup_failed.take() {
        // Nothing queued here may run on another connection as someone else: it fails.
        backend.fail_queued(&refused, false);
    }
    backend.note_break();
    backend.node.report_inflight(&mut conn.reported_inflight, 0);
    backend.node.report_slow(&mut conn.reported_slow, 0);
    backend.node.closed(!backend.closed.get());
    if !backend.closed.get() {
        backend.topology.request_refresh_now();
    }
    backend.running.set(false);
    if backend.keeps_state.get() {
        // What was queued relied on this connection's state (a WATCH): on a new one it
        // would run without it. Fail it; the session decides what to tell its client.
        let lost = node_error(&backend.addr, "connection lost before the request was sent");
        return backend.fail_queued(&lost, false);
    }
    // Requests queued after the last turn still deserve a connection.
    if !backend.closed.get() && !backend.queue.borrow().is_empty() && !backend.running.replace(true)
    {
        tokio::task::spawn_local(run(backend.clone()));
    }
}

/// TCP, then TLS when configured: the whole set-up under one connect timeout.
async fn dial(backend: &Backend) -> std::io::Result<Stream> {
    let tcp = TcpStream::connect(&*backend.addr).await?;
    let _ = tcp.set_nodelay(true);
    // Every kind of backend connection comes through here: shared, dedicated and pub/sub.
    crate::keepalive::enable(&tcp);
    match &backend.tls {
        None => Ok(Stream::Plain(tcp)),
        Some(tls) => tls.connect(tcp, &backend.addr).await,
    }
}

/// Fail fast for a while: the queued requests now, later ones until the backoff ends.
fn connect_failed(backend: &Rc<Backend>, why: &str) {
    backend.node.connect_failed();
    backend.note_break();
    tracing::warn!(node = %backend.addr, why, "cannot connect to backend");
    backend.topology.request_refresh_now();
    backend
        .down_until
        .set(Some(Instant::now() + RECONNECT_BACKOFF));
    backend.running.set(false);
    let err = node_error(&backend.addr, &format!("is unreachable: {why}"));
    backend.fail_queued(&err, true);
}
