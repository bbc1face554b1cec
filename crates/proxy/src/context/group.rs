//! The proxy group as this proxy sees it, published for every reader: the CLUSTER replies
//! advertising the healthy members (read by sessions), and each member's state (INFO
//! `group`, `/metrics`). The health-check thread (`group.rs`) is the only writer; readers
//! load an `ArcSwap` pointer, never a lock, and a reply is built only when the healthy set
//! changes.

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::context::cluster_view::ClusterView;

/// What the workers and the admin side read of the group.
pub(crate) struct GroupState {
    view: ArcSwap<ClusterView>,
    status: ArcSwap<GroupStatus>,
    /// The bound client address: this proxy in the view when no group is configured.
    bound: SocketAddr,
    /// Rings when a reload may have changed `[group]`, so the checks start at once.
    pub(crate) wake: tokio::sync::Notify,
}

/// The members and their health, as of the latest round of checks.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupStatus {
    /// Every configured member, this proxy included; empty without a group.
    pub(crate) members: Vec<MemberStatus>,
}

/// One member as this proxy's checks see it.
#[derive(Debug, Clone)]
pub(crate) struct MemberStatus {
    pub(crate) addr: SocketAddr,
    /// This proxy: never checked, always advertised.
    pub(crate) me: bool,
    /// Advertised: it answered its latest checks (fewer than `fail_after` failed since).
    pub(crate) up: bool,
    pub(crate) checks_ok: u64,
    pub(crate) checks_failed: u64,
    /// Why its latest failed check failed; empty if none did.
    pub(crate) last_error: String,
}

impl GroupState {
    /// No group yet: the one-node view of the proxy bound at `bound`.
    pub(crate) fn new(bound: SocketAddr) -> GroupState {
        GroupState {
            view: ArcSwap::from_pointee(ClusterView::new(&[], bound)),
            status: ArcSwap::from_pointee(GroupStatus::default()),
            bound,
            wake: tokio::sync::Notify::new(),
        }
    }

    /// The CLUSTER replies in force.
    pub(crate) fn view(&self) -> arc_swap::Guard<Arc<ClusterView>> {
        self.view.load()
    }

    pub(crate) fn status(&self) -> Arc<GroupStatus> {
        self.status.load_full()
    }

    /// Install a round's outcome; the replies are rebuilt only if the advertised set moved.
    pub(crate) fn publish(&self, status: GroupStatus) {
        let me = status
            .members
            .iter()
            .find(|m| m.me)
            .map_or(self.bound, |m| m.addr);
        let mut healthy: Vec<SocketAddr> = status
            .members
            .iter()
            .filter(|m| m.up || m.me)
            .map(|m| m.addr)
            .collect();
        if healthy.is_empty() {
            healthy.push(me);
        }
        healthy.sort();
        if !self.view.load().is(&healthy, me) {
            self.view.store(Arc::new(ClusterView::new(&healthy, me)));
        }
        self.status.store(Arc::new(status));
    }
}
