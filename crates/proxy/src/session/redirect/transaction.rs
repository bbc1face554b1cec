//! A transaction whose refusal is not followed: what its client gets instead.
//!
//! `backend/refusal.rs` hands the session a refused transaction's MOVED/ASK/TRYAGAIN in
//! place of its EXECABORT, so that it can be resent whole like any redirect. When it is not
//! resent, the client must get what one Redis (or the node) would have said, never the bare
//! redirect.

use bytes::Bytes;

use super::plan::Plan;
use crate::backend::is_redirect;
use crate::session::queue::{Resend, Sent};

/// A transaction's refusal that is not followed (`backend/refusal.rs` put it in EXEC's
/// place): after WATCH, EXEC answers nil, as when a watched key was touched (the WATCH is
/// on the node that refused); past the hop or retry budget, the node's own EXECABORT.
pub(super) fn settle(reply: &mut Option<Bytes>, sent: &Sent, watched: bool) -> Option<Plan> {
    let refused = matches!(sent.resend, Resend::Transaction { .. })
        && reply.as_ref().is_some_and(|r| is_redirect(r));
    if refused {
        let resp3 = sent.sent_to.as_ref().is_some_and(|b| b.resp3());
        *reply = Some(Bytes::from_static(match (watched, resp3) {
            (true, true) => b"_\r\n",
            (true, false) => b"*-1\r\n",
            (false, _) => b"-EXECABORT Transaction discarded because of previous errors.\r\n",
        }));
    }
    None
}
