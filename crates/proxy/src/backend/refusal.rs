//! Why a transaction's EXEC answered EXECABORT, when the reason is the cluster's and not the
//! client's.
//!
//! A transaction goes to its node as one write, `MULTI, cmd…, EXEC`; the node's replies to
//! MULTI and the queued commands are read and dropped (`Owed::Queued`). If the slot moved or
//! is migrating, or the cluster is down, the node refuses a queued command (MOVED, ASK,
//! TRYAGAIN, CLUSTERDOWN…) and EXEC answers `-EXECABORT`: nothing ran. The client would see
//! an abort that one Redis never gives, so the connection hands the session the refusal
//! instead of the EXECABORT, and the session follows it like any redirect, resending the
//! whole transaction (`session/redirect.rs`). Any other EXECABORT (a queued command the
//! node rejected on its own) is passed on unchanged.
//!
//! ```text
//!   MULTI ─ +OK ───────────────┐ dropped
//!   SET k v ─ -MOVED 12 b:7001 ┤ dropped, kept as `refusal`
//!   EXEC ─ -EXECABORT … ───────┴▶ the client's entry gets `-MOVED 12 b:7001`
//! ```

use bytes::Bytes;

use super::conn::Conn;

/// Replies the proxy acts on instead of forwarding: redirects (MOVED, ASK), and errors that
/// mean "not executed, try again" (TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY, LOADING,
/// and the UNBLOCKED of a blocked command whose master was demoted).
pub(crate) fn is_redirect(frame: &[u8]) -> bool {
    if frame.first() != Some(&b'-') {
        return false;
    }
    // With the space: a MOVED or ASK without its arguments is passed through, not retried.
    frame.starts_with(b"-MOVED ")
        || frame.starts_with(b"-ASK ")
        || ::topology::not_executed(cluster::error_kind(frame))
}

impl Conn {
    /// A reply to a transaction's MULTI or queued command: keep the first refusal.
    pub(super) fn note_queued_reply(&mut self, frame: Bytes) {
        if self.refusal.is_none() && is_redirect(&frame) {
            self.refusal = Some(frame);
        }
    }

    /// The reply a client is owed: an EXECABORT caused by a kept refusal becomes that
    /// refusal. Every client reply ends the transaction's window, so nothing is kept longer.
    pub(super) fn owed_reply(&mut self, frame: Bytes) -> Bytes {
        match self.refusal.take() {
            Some(refusal) if frame.starts_with(b"-EXECABORT") => refusal,
            _ => frame,
        }
    }
}
