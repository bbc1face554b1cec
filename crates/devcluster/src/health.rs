//! Asking a running cluster who serves what, and waiting until it settles
//! again after a test disturbed it (killed a master, moved slots).

use std::net::SocketAddr;
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::form::info_field;
use crate::resp::Reply;
use crate::{key_slot, Cluster};

/// `(first slot, last slot, master)` ranges, sorted, as one node sees them.
type SlotMap = Vec<(i64, i64, SocketAddr)>;

impl Cluster {
    /// The master currently serving `key`'s slot, according to the first
    /// live node that answers `CLUSTER SLOTS`. Right after a failover other
    /// nodes may still be catching up; call [`Cluster::wait_healthy`] first.
    pub fn owner_of(&self, key: &[u8]) -> Result<SocketAddr> {
        let slot = i64::from(key_slot(key));
        let mut last_err = anyhow::anyhow!("no live node in {}", self.dir().display());
        for addr in self.live_addrs() {
            match self.slot_map(addr) {
                Ok(map) => {
                    let hit = map.iter().find(|(a, b, _)| (*a..=*b).contains(&slot));
                    return hit
                        .map(|r| r.2)
                        .with_context(|| format!("slot {slot} unserved per {addr}"));
                }
                Err(e) => last_err = e,
            }
        }
        Err(last_err)
    }

    /// Waits until every node not killed through this handle reports
    /// `cluster_state:ok` and all of them return the same masters for the
    /// same slot ranges. Use after [`Cluster::kill`] to wait out a failover.
    pub fn wait_healthy(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let why = match self.health() {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(why.context(format!(
                    "cluster in {} not healthy after {timeout:?}",
                    self.dir().display()
                )));
            }
            sleep(Duration::from_millis(100));
        }
    }

    fn health(&self) -> Result<()> {
        let mut first: Option<(SocketAddr, SlotMap)> = None;
        for addr in self.live_addrs() {
            let info = self
                .command(addr, &["CLUSTER", "INFO"])?
                .ok()?
                .lines()
                .join("\n");
            let state = info_field(&info, "cluster_state").unwrap_or_default();
            if state != "ok" {
                bail!("node {addr}: cluster_state:{state}");
            }
            let map = self.slot_map(addr)?;
            match &first {
                Some((seen_by, m)) if *m != map => {
                    bail!("nodes {seen_by} and {addr} disagree on the slot map")
                }
                Some(_) => {}
                None => first = Some((addr, map)),
            }
        }
        Ok(())
    }

    fn slot_map(&self, addr: SocketAddr) -> Result<SlotMap> {
        let reply = self.command(addr, &["CLUSTER", "SLOTS"])?.ok()?;
        parse_slots(&reply).with_context(|| format!("CLUSTER SLOTS from {addr}"))
    }
}

/// Extracts the master of each range from a `CLUSTER SLOTS` reply.
fn parse_slots(reply: &Reply) -> Result<SlotMap> {
    let Reply::Array(Some(ranges)) = reply else {
        bail!("unexpected reply: {reply}");
    };
    let mut map = SlotMap::new();
    for range in ranges {
        let Reply::Array(Some(f)) = range else {
            bail!("unexpected range entry: {range}");
        };
        let (Some(Reply::Int(a)), Some(Reply::Int(b)), Some(master)) =
            (f.first(), f.get(1), f.get(2))
        else {
            bail!("unexpected range entry: {range}");
        };
        let lines = master.lines();
        let (Some(ip), Some(port)) = (lines.first(), lines.get(1)) else {
            bail!("bad master entry: {master}");
        };
        map.push((*a, *b, format!("{ip}:{port}").parse()?));
    }
    map.sort();
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Some(s.as_bytes().to_vec()))
    }

    #[test]
    fn parses_cluster_slots() {
        let node =
            |port: i64| Reply::Array(Some(vec![bulk("127.0.0.1"), Reply::Int(port), bulk("id")]));
        let range = |a, b, port| Reply::Array(Some(vec![Reply::Int(a), Reply::Int(b), node(port)]));
        let reply = Reply::Array(Some(vec![range(100, 16383, 7001), range(0, 99, 7000)]));
        let map = parse_slots(&reply).unwrap();
        assert_eq!(map[0], (0, 99, "127.0.0.1:7000".parse().unwrap()));
        assert_eq!(map[1], (100, 16383, "127.0.0.1:7001".parse().unwrap()));
        assert!(parse_slots(&Reply::Int(1)).is_err());
    }
}
