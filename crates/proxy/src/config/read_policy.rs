//! `cluster.read_policy`: where read-only commands may be served. Its own file because the
//! session, the worker and the admin side all name it, and the rule that combines it with a
//! client's `READONLY` belongs next to it.

use serde::Deserialize;

/// Where the proxy sends a command the command table flags read-only.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum ReadPolicy {
    /// Every command goes to the slot's master (the default: what a client of the nodes gets
    /// without `READONLY`).
    #[default]
    Master,
    /// A usable replica of the slot's master, else the master.
    PreferReplica,
    /// A usable replica only; none usable: `-CLUSTERDOWN` (see `docs/replicas.md`).
    Replica,
    /// The node with the lowest measured round trip among the master and its usable replicas.
    Nearest,
}

/// Every policy, in the order INFO and `/metrics` list them.
pub const ALL: [ReadPolicy; 4] = [
    ReadPolicy::Master,
    ReadPolicy::PreferReplica,
    ReadPolicy::Replica,
    ReadPolicy::Nearest,
];

impl ReadPolicy {
    /// The policy for a client: the proxy's, or `prefer-replica` when the client sent
    /// `READONLY` and the proxy's is `master` (a stricter proxy policy wins).
    pub fn for_client(self, readonly: bool) -> ReadPolicy {
        match (self, readonly) {
            (ReadPolicy::Master, true) => ReadPolicy::PreferReplica,
            (policy, _) => policy,
        }
    }

    /// The name as the config file and INFO spell it.
    pub fn name(self) -> &'static str {
        match self {
            ReadPolicy::Master => "master",
            ReadPolicy::PreferReplica => "prefer-replica",
            ReadPolicy::Replica => "replica",
            ReadPolicy::Nearest => "nearest",
        }
    }

    /// Position in `ALL` (counter arrays are indexed by it).
    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::ReadPolicy::*;

    #[test]
    fn readonly_opts_in_unless_the_proxy_is_stricter() {
        assert_eq!(Master.for_client(false), Master);
        assert_eq!(Master.for_client(true), PreferReplica);
        assert_eq!(Replica.for_client(true), Replica);
        assert_eq!(Nearest.for_client(false), Nearest);
        assert_eq!(PreferReplica.for_client(false), PreferReplica);
    }
}
