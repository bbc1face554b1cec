//! How a connection to a node is to be set up (protocol, database, AUTH, the mirror user,
//! TLS, timeouts, replica): what a worker decides and `Backend::new` (`handle.rs`) keeps.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::backend::stats::NodeStats;
use crate::topology::ReplicaHealth;

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
    /// `CLIENT NO-TOUCH ON` before any request.
    pub no_touch: bool,
    /// `CLIENT IMPORT-SOURCE ON` before any request (Valkey 8.1's import mode).
    pub import_source: bool,
    /// The NOLOOP tracking client these connections are its own for (`Wire::tracker`).
    pub tracker: u64,
    /// Ask the node its id for the connection (`CLIENT ID` at set-up): a session's own
    /// connection, where a blocking command may wait for CLIENT UNBLOCK.
    pub learn_id: bool,
    /// A pre-encoded `AUTH` for the node, if the nodes require one.
    pub auth: Option<Bytes>,
    /// Set-up commands that make the connection run as a client's mirror ACL user
    /// (`auth/mirror.rs`): nothing else is written until they succeeded.
    pub acting: Option<Bytes>,
    /// `CLIENT TRACKING ON BCAST NOLOOP REDIRECT <id>` before any request: a NOLOOP
    /// tracking client's own connection (`session/tracking/own.rs`).
    pub tracking: Option<Bytes>,
    /// TLS towards the node, when `backend_tls.enabled`.
    pub tls: Option<Arc<crate::tls::Connector>>,
    /// This worker's counters for the node (INFO backends, `/metrics`).
    pub node: Arc<NodeStats>,
    /// Bytes the connection moves per poll before yielding (`proxy.turn_quantum_bytes`).
    pub quantum: usize,
    /// Set for a connection that serves reads as a replica: it sends `READONLY` once at
    /// set-up, and its breaks ask the replica view for a new sample.
    pub replica: Option<Arc<ReplicaHealth>>,
    /// Send `READONLY` at set-up: a cluster replica's, which answers MOVED without it (a
    /// standalone replica, behind Sentinel, serves reads as it is and refuses READONLY).
    pub readonly: bool,
}
