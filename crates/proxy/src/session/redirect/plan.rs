//! What the session decided to do with a reply that is not the request's answer (a MOVED,
//! an ASK, a "not executed" error, a held request): the records `redirect.rs` decides on and
//! its `hold.rs` and `transaction.rs` refine. A leaf of the redirect folder.

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use crate::backend::{Backend, Wire};
use crate::session::failover_hold::Hold;

/// What following a reply means, and the node it goes to.
pub(super) enum Kind {
    Moved {
        slot: u16,
        to: String,
    },
    Ask {
        slot: u16,
        to: String,
    },
    /// TRYAGAIN: the node refused before running it (a multi-key command during a slot
    /// migration); resend to the same node after this delay.
    Retry {
        delay: Duration,
        to: String,
    },
    /// CLUSTERDOWN, MASTERDOWN, READONLY, LOADING: not executed, and the slot's owner may be
    /// changing (failover). Ask for a refresh, wait, then route by slot again; `fallback`,
    /// the node it was on, if the slot has no owner then. Also a request whose slot had no
    /// owner in the map (`send/mod.rs`), which never had a node (`fallback` None): a hole,
    /// as a refresh taken in the middle of a failover can show one, is the node's
    /// CLUSTERDOWN here.
    Reroute {
        delay: Duration,
        fallback: Option<String>,
    },
    /// Not a redirect: a second-round part (`Fanout::twice`), due now at its master.
    Second {
        to: String,
    },
    /// Never reached its node (`fallback`): routed by slot again after this delay
    /// (`hold.rs`).
    Held {
        delay: Duration,
        fallback: String,
    },
}

/// A redirect or retry the session decided to follow.
pub(super) struct Plan {
    pub(super) kind: Kind,
    /// The slot to route by again (Reroute), when known.
    pub(super) slot: Option<u16>,
    pub(super) frame: Bytes,
    pub(super) map_version: u64,
    /// The slot that orders the request among its client's (None: keyless).
    pub(super) key_slot: Option<u16>,
    /// The protocol and database of the connection it was on, for its resend.
    pub(super) wire: Option<Wire>,
    /// Replies before the one owed (a transaction's), dropped again on the resend.
    pub(super) skip: u32,
    /// A MOVED or ASK past `PACED_AFTER` hops waits this long (and asks for a refresh).
    pub(super) pace: Option<Duration>,
}

/// The redirect-relevant fields of a request or of one part of a split request.
pub(super) struct Hop<'a> {
    pub(super) reply: &'a mut Option<Bytes>,
    pub(super) frame: Option<Bytes>,
    pub(super) sent_to: &'a Option<Rc<Backend>>,
    pub(super) hops: &'a mut u8,
    pub(super) retries: &'a mut u8,
    pub(super) hold: &'a mut Hold,
    /// On one of the session's own connections (never held: `hold.rs`).
    pub(super) own: bool,
}
