//! The `[group]` section: the other slotgate processes this one presents itself with to
//! cluster-aware clients as one cluster (docs/group.md). Plain data and its checks; the
//! health checks that use it run in the proxy's `group` module.

use std::net::SocketAddr;

use serde::Deserialize;

use super::ConfigError;

/// More members than this would leave some without a slot to advertise.
pub const MAX_GROUP_MEMBERS: usize = 1024;

/// A proxy group. Empty `peers`: no group, the proxy answers CLUSTER as a one-node cluster.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GroupConfig {
    /// Every member's client address (`ip:port`, as clients must dial it), this proxy's own
    /// included: every member can then be given the same list.
    pub peers: Vec<String>,
    /// Which entry of `peers` is this proxy. Empty: `proxy.listen` (it must then be one
    /// of `peers` as written, e.g. not `0.0.0.0:…`).
    #[serde(rename = "self")]
    pub self_addr: String,
    /// How often each other member is sent a PING.
    pub check_interval_ms: u64,
    /// A PING (its connect included) not answered within this counts as failed.
    pub check_timeout_ms: u64,
    /// Consecutive failed checks after which a member is no longer advertised; one answered
    /// check brings it back.
    pub fail_after: u32,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            peers: Vec::new(),
            self_addr: String::new(),
            check_interval_ms: 1000,
            check_timeout_ms: 500,
            fail_after: 2,
        }
    }
}

/// A checked group: its members and which one this proxy is.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupMembers {
    pub peers: Vec<SocketAddr>,
    pub me: SocketAddr,
}

impl GroupConfig {
    /// The members and this proxy's address, or None without a group. `listen` stands for
    /// `self` when that is empty.
    pub fn members(&self, listen: &str) -> Result<Option<GroupMembers>, ConfigError> {
        if self.peers.is_empty() {
            return Ok(None);
        }
        let bad = |why: String| ConfigError::Group(why);
        if self.peers.len() > MAX_GROUP_MEMBERS {
            return Err(bad(format!("more than {MAX_GROUP_MEMBERS} peers")));
        }
        let mut peers = Vec::with_capacity(self.peers.len());
        for text in &self.peers {
            let addr: SocketAddr = text
                .parse()
                .map_err(|_| bad(format!("peer {text:?} is not an ip:port address")))?;
            if peers.contains(&addr) {
                return Err(bad(format!("peer {text} is listed twice")));
            }
            peers.push(addr);
        }
        let me_text = match self.self_addr.is_empty() {
            true => listen,
            false => self.self_addr.as_str(),
        };
        let me = me_text
            .parse::<SocketAddr>()
            .ok()
            .filter(|a| peers.contains(a))
            .ok_or_else(|| {
                bad(format!(
                    "this proxy ({me_text:?}, from group.self or else proxy.listen) is not one of group.peers"
                ))
            })?;
        let zero = [
            (self.check_interval_ms == 0, "check_interval_ms"),
            (self.check_timeout_ms == 0, "check_timeout_ms"),
            (self.fail_after == 0, "fail_after"),
        ];
        if let Some((_, key)) = zero.iter().find(|(z, _)| *z) {
            return Err(bad(format!("{key} must be greater than 0")));
        }
        Ok(Some(GroupMembers { peers, me }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(peers: &[&str], me: &str) -> GroupConfig {
        GroupConfig {
            peers: peers.iter().map(|p| p.to_string()).collect(),
            self_addr: me.into(),
            ..GroupConfig::default()
        }
    }

    #[test]
    fn self_must_be_a_peer_and_peers_addresses() {
        let g = group(&["127.0.0.1:7001", "127.0.0.1:7002"], "");
        let m = g.members("127.0.0.1:7002").unwrap().unwrap();
        assert_eq!(m.me, "127.0.0.1:7002".parse().unwrap());
        assert!(g.members("0.0.0.0:7002").is_err(), "listen is not a peer");
        let named = group(&["127.0.0.1:7001", "127.0.0.1:7002"], "127.0.0.1:7001");
        assert!(named.members("0.0.0.0:7001").unwrap().is_some());
        assert!(group(&["localhost:1"], "").members("x").is_err());
        let twice = group(&["127.0.0.1:1", "127.0.0.1:1"], "127.0.0.1:1");
        assert!(twice.members("").is_err());
        assert_eq!(group(&[], "").members("").unwrap(), None);
    }
}
