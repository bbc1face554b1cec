//! A session during a graceful shutdown (`Proxy::shutdown_gracefully`): first it serves
//! as usual and closes at its first moment with nothing owed (every request read has been
//! answered and written, no partial request buffered), so its client sees the connection
//! close between requests and reconnects, to the new process on the same port. Once the
//! drain timeout has passed, it reads nothing more and closes when what it read is
//! answered. Either way no reply is cut short and no request read is left unanswered.

use crate::context::{DRAIN_STOP_READING, DRAIN_WHEN_IDLE};
use crate::session::Session;

impl Session {
    /// Before a poll: the drain phase, one relaxed load. Past the timeout, stop reading.
    pub(crate) fn drain_phase(&mut self) -> u8 {
        let phase = self
            .worker
            .shared
            .drain
            .load(std::sync::atomic::Ordering::Relaxed);
        if phase == DRAIN_STOP_READING {
            self.draining = true;
        }
        phase
    }

    /// After a poll that did not end the session: end it now if it is draining and idle.
    pub(crate) fn drain_done(&self, phase: u8) -> bool {
        phase == DRAIN_WHEN_IDLE
            && self.out.is_empty()
            && self.cell.in_flight() == 0
            && self.read_buf.is_empty()
            && self.upload.is_none()
    }
}
