//! A session during a graceful shutdown (`Proxy::shutdown_gracefully`): first it serves
//! as usual and closes at its first moment with nothing owed (every request read has been
//! answered and written, no partial request buffered), so its client sees the connection
//! close between requests and reconnects, to the new process on the same port. Once the
//! drain timeout has passed, it reads nothing more and closes when what it read is
//! answered. Either way no reply is cut short and no request read is left unanswered.

use std::sync::atomic::Ordering::Relaxed;

use crate::context::{Shared, DRAIN_STOP_READING, DRAIN_WHEN_IDLE};

/// Where the drain stands, read once per poll (one relaxed load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Phase(u8);

impl Phase {
    pub(crate) fn now(shared: &Shared) -> Phase {
        Phase(shared.drain.load(Relaxed))
    }

    /// Past the drain timeout: read nothing more.
    pub(crate) fn stops_reading(self) -> bool {
        self.0 == DRAIN_STOP_READING
    }

    /// Close at the first moment the session owes nothing.
    pub(crate) fn ends_when_idle(self) -> bool {
        self.0 == DRAIN_WHEN_IDLE
    }
}
