//! A worker: one thread, one single-threaded event loop, its own listener (SO_REUSEPORT), its
//! own clients and its own backend connections.
//!
//! Nothing a worker touches per request is shared with another thread except the slot map,
//! which is read through an atomic pointer. Backend connections are found by slot through a
//! small vector indexed like the map's masters, rebuilt lazily when a new map is installed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use cluster::slot_map::SlotMap;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::backend::Backend;
use crate::stats::{Shared, WorkerStats};
use crate::topology::Topology;

/// Per-worker state shared by its sessions (single-threaded: `Rc` and `Cell`).
pub(crate) struct Worker {
    pub shared: Arc<Shared>,
    pub stats: Arc<WorkerStats>,
    backends: RefCell<HashMap<Rc<str>, Rc<Backend>>>,
    /// `by_index[i]` is the backend of the map's i-th master, for `indexed_version`.
    by_index: RefCell<Vec<Option<Rc<Backend>>>>,
    indexed_version: Cell<u64>,
    round_robin: Cell<usize>,
}

// === impl Worker ===

impl Worker {
    pub(crate) fn new(shared: Arc<Shared>, stats: Arc<WorkerStats>) -> Rc<Worker> {
        Rc::new(Worker {
            shared,
            stats,
            backends: RefCell::new(HashMap::new()),
            by_index: RefCell::new(Vec::new()),
            indexed_version: Cell::new(0),
            round_robin: Cell::new(0),
        })
    }

    pub(crate) fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// The connection to the master of `slot` in `map`, or None when the slot has no owner.
    pub(crate) fn backend_for_slot(&self, map: &SlotMap, slot: u16) -> Option<Rc<Backend>> {
        let idx = usize::from(map.node_index(slot)?);
        if self.indexed_version.get() != map.version() {
            self.by_index.borrow_mut().clear();
            self.indexed_version.set(map.version());
        }
        if let Some(Some(b)) = self.by_index.borrow().get(idx) {
            return Some(b.clone());
        }
        let backend = self.backend_for_addr(&map.nodes().get(idx)?.addr);
        let mut by_index = self.by_index.borrow_mut();
        if by_index.len() <= idx {
            by_index.resize(idx + 1, None);
        }
        by_index[idx] = Some(backend.clone());
        Some(backend)
    }

    /// Some master, rotating, for keyless commands.
    pub(crate) fn any_backend(&self, map: &SlotMap) -> Option<Rc<Backend>> {
        let n = map.nodes().len();
        if n == 0 {
            return None;
        }
        let i = self.round_robin.get().wrapping_add(1);
        self.round_robin.set(i);
        Some(self.backend_for_addr(&map.nodes()[i % n].addr))
    }

    /// The connection to `addr`, created on first use (redirect targets may be new nodes).
    pub(crate) fn backend_for_addr(&self, addr: &str) -> Rc<Backend> {
        if let Some(b) = self.backends.borrow().get(addr) {
            return b.clone();
        }
        let timeout = Duration::from_millis(self.shared.config.cluster.connect_timeout_ms);
        let backend = Backend::new(addr, timeout, self.shared.topology.clone());
        self.backends
            .borrow_mut()
            .insert(backend.addr.clone(), backend.clone());
        backend
    }
}

/// Accept clients until shutdown; each client becomes a task on this thread.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    worker: Rc<Worker>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
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
