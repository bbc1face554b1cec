//! How a connection to a node is set up, and the `Backend` built from it: kept apart from
//! the pump in `mod.rs`, which only moves bytes.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::Backend;
use crate::backend::stats::NodeStats;
use crate::topology::{ReplicaHealth, Topology};

/// How a connection to a node is set up.
pub(crate) struct Settings {
    pub connect_timeout: Duration,
    /// No reply for this long while requests are owed poisons the connection (0: never).
    pub request_timeout: Duration,
    /// The same while a slow command is owed (`watchdog.rs`).
    pub slow_timeout: Duration,
    pub resp3: bool,
    /// The database (`SELECT` before any request when not 0).
    pub db: u16,
    /// A pre-encoded `AUTH` for the node, if the nodes require one.
    pub auth: Option<Bytes>,
    /// Set-up commands that make the connection run as a client's mirror ACL user
    /// (`auth/mirror.rs`): nothing else is written until they succeeded.
    pub acting: Option<Bytes>,
    /// TLS towards the node, when `backend_tls.enabled`.
    pub tls: Option<Arc<crate::tls::Connector>>,
    /// This worker's counters for the node (INFO backends, `/metrics`).
    pub node: Arc<NodeStats>,
    /// Bytes the connection moves per poll before yielding (`proxy.turn_quantum_bytes`).
    pub quantum: usize,
    /// Set for a connection that serves reads as a replica: it sends `READONLY` once at
    /// set-up, and its breaks ask the replica view for a new sample.
    pub replica: Option<Arc<ReplicaHealth>>,
}

// === impl Backend ===

impl Backend {
    pub(crate) fn new(addr: &str, settings: Settings, topology: Arc<Topology>) -> Rc<Backend> {
        let Settings {
            connect_timeout,
            request_timeout,
            slow_timeout,
            resp3,
            db,
            auth,
            acting,
            tls,
            node,
            quantum,
            replica,
        } = settings;
        Rc::new(Backend {
            addr: addr.into(),
            queue: RefCell::new(VecDeque::new()),
            waker: RefCell::new(None),
            running: Cell::new(false),
            closed: Cell::new(false),
            down_until: Cell::new(None),
            connect_timeout,
            request_timeout,
            slow_timeout,
            topology,
            wire: Cell::new(super::Wire { resp3, db }),
            auth,
            acting,
            tls,
            sink: RefCell::new(None),
            node,
            quantum,
            replica,
            breaks: Cell::new(0),
            keeps_state: Cell::new(false),
        })
    }
}
