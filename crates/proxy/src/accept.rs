//! The front door of a worker: accept clients on its own listeners (`SO_REUSEPORT`), plain
//! and TLS, and start a session task for each, on this thread. Kept apart from `worker.rs`,
//! which holds the per-thread state the sessions use, so the state sits below the sessions
//! and the loop that starts them above.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::context::WorkerStats;
use crate::tls::Stream;
use crate::worker::Worker;

mod bind;
pub(crate) use bind::bind_listeners;
pub(crate) use bind::Listeners;

/// A TLS client that has not finished its handshake by then is dropped: it holds a slot
/// and a task, and a slow handshake is how a slowloris would try it.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accept clients until shutdown; each client becomes a task on this thread.
pub(crate) async fn accept_loop(
    listeners: Listeners<TcpListener>,
    worker: Rc<Worker>,
    mut shutdown: watch::Receiver<bool>,
    mut drain: watch::Receiver<bool>,
) {
    // The registry's coarse clock (CLIENT LIST idle/age) and the big-buffer pool's aging:
    // one tick per worker, not per client.
    let mut clock = tokio::time::interval(crate::context::registry::TICK);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Made once, not per accepted client: a new `changed()` future registers a waiter on
    // its channel (a lock, a list insert, and the same again when dropped) every time.
    let stop = shutdown.changed();
    let drained = drain.changed();
    tokio::pin!(stop, drained);
    loop {
        tokio::select! {
            _ = clock.tick() => {
                worker.stats.registry.tick();
                crate::backend::bigbuf::tick();
            }
            accepted = accept(&listeners.plain) => if let Some((stream, peer)) = accepted {
                setup(&stream, &worker);
                tokio::task::spawn_local(crate::session::serve(
                    Stream::Plain(stream),
                    peer,
                    worker.clone(),
                    None,
                ));
            },
            accepted = accept_extra(&listeners.extra) => {
                if let Some((stream, peer, laddr)) = accepted {
                    setup(&stream, &worker);
                    tokio::task::spawn_local(crate::session::serve(
                        Stream::Plain(stream),
                        peer,
                        worker.clone(),
                        Some(laddr),
                    ));
                }
            },
            accepted = accept(&listeners.tls) => if let Some((stream, peer)) = accepted {
                if let Some(acceptor) = worker.shared.tls_acceptor.clone() {
                    setup(&stream, &worker);
                    tokio::task::spawn_local(handshake(acceptor, stream, peer, worker.clone()));
                }
            },
            _ = &mut stop => return,
            _ = &mut drained => return take_queued(listeners, &worker),
        }
    }
}

/// Draining: serve the clients already waiting in the listeners' queues (closing a
/// listener would reset them), then close the listeners, so new clients reach whoever
/// else listens on the port.
fn take_queued(listeners: Listeners<TcpListener>, worker: &Rc<Worker>) {
    let acceptor = worker.shared.tls_acceptor.clone();
    let extra = listeners
        .extra
        .into_iter()
        .map(|(l, a)| (Some(l), false, Some(a)));
    let main = [(listeners.plain, false, None), (listeners.tls, true, None)];
    for (listener, tls, laddr) in main.into_iter().chain(extra) {
        let Some(listener) = listener.and_then(|l| l.into_std().ok()) else {
            continue;
        };
        // Non-blocking since `bind_one`: stops at the first would-block.
        while let Ok((std_stream, peer)) = listener.accept() {
            // accept(2) does not pass O_NONBLOCK on; tokio needs it.
            let registered = std_stream
                .set_nonblocking(true)
                .and_then(|()| TcpStream::from_std(std_stream));
            let Ok(stream) = registered else {
                continue;
            };
            setup(&stream, worker);
            match (tls, &acceptor) {
                (false, _) => {
                    let session =
                        crate::session::serve(Stream::Plain(stream), peer, worker.clone(), laddr);
                    tokio::task::spawn_local(session);
                }
                (true, Some(acceptor)) => {
                    tokio::task::spawn_local(handshake(
                        acceptor.clone(),
                        stream,
                        peer,
                        worker.clone(),
                    ));
                }
                (true, None) => {}
            }
        }
    }
}

/// After the accept loop: wait until this worker's clients are gone (they close themselves
/// while draining), or until told to stop at once.
pub(crate) async fn wait_for_clients(worker: &Worker, mut shutdown: watch::Receiver<bool>) {
    while worker.stats.registry.len() > 0 && !*shutdown.borrow() {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// The next client of `listener`, set up; pending for ever when there is no listener.
/// None after an error (already logged and backed off).
async fn accept(listener: &Option<TcpListener>) -> Option<(TcpStream, std::net::SocketAddr)> {
    let Some(listener) = listener else {
        return std::future::pending().await;
    };
    match listener.accept().await {
        Ok((stream, peer)) => Some((stream, peer)),
        Err(e) => {
            // EMFILE and friends: back off instead of spinning on the error.
            tracing::warn!(error = %e, "accept failed");
            tokio::time::sleep(Duration::from_millis(10)).await;
            None
        }
    }
}

/// The next client of any of the extra listeners (`proxy.extra_listen`), with the address
/// of the one it came by; pending for ever when there is none.
async fn accept_extra(
    listeners: &[(TcpListener, std::net::SocketAddr)],
) -> Option<(TcpStream, std::net::SocketAddr, std::net::SocketAddr)> {
    if listeners.is_empty() {
        return std::future::pending().await;
    }
    let (accepted, laddr) = std::future::poll_fn(|cx| {
        for (listener, addr) in listeners {
            if let std::task::Poll::Ready(r) = listener.poll_accept(cx) {
                return std::task::Poll::Ready((r, *addr));
            }
        }
        std::task::Poll::Pending
    })
    .await;
    match accepted {
        Ok((stream, peer)) => Some((stream, peer, laddr)),
        Err(e) => {
            tracing::warn!(error = %e, "accept failed");
            tokio::time::sleep(Duration::from_millis(10)).await;
            None
        }
    }
}

/// A TLS client's handshake, then its session. A failed handshake (a plain client on the
/// TLS port, an unknown client certificate) is logged at debug and closes the socket.
async fn handshake(
    acceptor: Arc<crate::tls::Acceptor>,
    tcp: TcpStream,
    peer: std::net::SocketAddr,
    worker: Rc<Worker>,
) {
    // A handshake holds a descriptor and a task: it counts against maxclients from now
    // (review S12), and one over the limit is closed at once (no TLS to say why in).
    let clients = &worker.shared.clients;
    let connected = clients.fetch_add(1, Ordering::Relaxed) + 1;
    if connected > worker.live().config.limits.maxclients {
        clients.fetch_sub(1, Ordering::Relaxed);
        WorkerStats::bump(&worker.stats.rejected_connections);
        return;
    }
    let shaken = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await;
    // The session counts itself again as it starts (`session::serve`).
    clients.fetch_sub(1, Ordering::Relaxed);
    match shaken {
        Ok(Ok(stream)) => crate::session::serve(stream, peer, worker, None).await,
        Ok(Err(e)) => {
            WorkerStats::bump(&worker.stats.tls_handshake_failures);
            tracing::debug!(client.addr = %peer, error = %e, "TLS handshake failed");
        }
        Err(_) => {
            WorkerStats::bump(&worker.stats.tls_handshake_failures);
            tracing::debug!(client.addr = %peer, "TLS handshake timed out");
        }
    }
}

/// Socket options for a client, whichever listener it came from.
fn setup(stream: &TcpStream, worker: &Worker) {
    // TCP_NODELAY is inherited from the listener on Linux (`bind_one`).
    #[cfg(not(target_os = "linux"))]
    let _ = stream.set_nodelay(true);
    crate::budget::size_socket_buffers(stream, &worker.live().config.limits);
}
