//! The front door of a worker: accept clients on its own listener (`SO_REUSEPORT`) and
//! start a session task for each, on this thread. Kept apart from `worker.rs`, which holds
//! the per-thread state the sessions use, so the state sits below the sessions and the
//! loop that starts them above.

use std::rc::Rc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::worker::Worker;

/// Accept clients until shutdown; each client becomes a task on this thread.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    worker: Rc<Worker>,
    mut shutdown: watch::Receiver<bool>,
) {
    // The registry's coarse clock (CLIENT LIST idle/age) and the big-buffer pool's aging:
    // one tick per worker, not per client.
    let mut clock = tokio::time::interval(crate::context::registry::TICK);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = clock.tick() => {
                worker.stats.registry.tick();
                crate::backend::bigbuf::tick();
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // TCP_NODELAY is inherited from the listener on Linux (`bind_one`).
                    #[cfg(not(target_os = "linux"))]
                    let _ = stream.set_nodelay(true);
                    crate::budget::size_socket_buffers(&stream, &worker.shared.config.limits);
                    tokio::task::spawn_local(crate::session::serve(stream, peer, worker.clone()));
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning on the error.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}
