//! Holding a request whose node is down: the mark a request (or a fan-out's part) carries
//! while it waits for its slot's next master. A leaf: the in-flight record (`entry.rs`) and
//! the fan-out plan (`fanout.rs`) both carry one.

/// A request (or part) that never reached its node, because the node is down or cannot be
/// dialled: held for the slot's next master, within `cluster.failover_hold_ms` of `since`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Hold {
    /// When it was first turned back; None while it is not held.
    pub since: Option<tokio::time::Instant>,
    /// Its latest answer is "not sent" (the session has not acted on it yet).
    pub pending: bool,
}
