//! Turning a set of empty cluster-enabled nodes into a working cluster:
//! epochs, slots, MEET, REPLICATE, then waiting until every node agrees on
//! the same picture. This is what `redis-cli --cluster create` does, minus
//! one process per command, so 100 masters form in seconds.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::resp::Conn;

/// Total hash slots in Redis Cluster.
pub const SLOTS: u16 = 16384;
const POLL: Duration = Duration::from_millis(50);

/// Who is what: nodes `0..masters` are masters, the rest are replicas laid
/// out master by master (`replicas` per master).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub masters: usize,
    pub replicas: usize,
}

impl Layout {
    pub fn total(&self) -> usize {
        self.masters * (1 + self.replicas)
    }

    /// Index of the master a node replicates, `None` for masters.
    pub fn master_index(&self, node: usize) -> Option<usize> {
        (node >= self.masters).then(|| (node - self.masters) / self.replicas.max(1))
    }

    /// Contiguous, near-equal slot ranges, one per master; the first
    /// `SLOTS % masters` masters get one extra slot.
    pub fn slot_range(&self, master: usize) -> (u16, u16) {
        let m = self.masters;
        let (base, extra) = (usize::from(SLOTS) / m, usize::from(SLOTS) % m);
        let start = master * base + master.min(extra);
        let len = base + usize::from(master < extra);
        // Masters are capped at SLOTS, so both ends fit in u16.
        (start as u16, (start + len - 1) as u16)
    }
}

/// Forms the cluster over already-connected nodes and returns their ids.
pub(crate) fn form(
    conns: &mut [Conn],
    addrs: &[SocketAddr],
    layout: Layout,
    deadline: Instant,
) -> Result<Vec<String>> {
    let ids = conns
        .iter_mut()
        .map(|c| c.call_text(&["CLUSTER", "MYID"]))
        .collect::<Result<Vec<_>>>()?;
    for (m, conn) in conns.iter_mut().enumerate().take(layout.masters) {
        // Distinct epochs up front spare the cluster a long round of
        // config-epoch collision resolution; must happen before MEET.
        let epoch = (m + 1).to_string();
        conn.call_text(&["CLUSTER", "SET-CONFIG-EPOCH", &epoch])?;
        let (a, b) = layout.slot_range(m);
        conn.call_text(&["CLUSTER", "ADDSLOTSRANGE", &a.to_string(), &b.to_string()])?;
    }
    let (seed_ip, seed_port) = (addrs[0].ip().to_string(), addrs[0].port().to_string());
    for c in conns.iter_mut().skip(1) {
        c.call_text(&["CLUSTER", "MEET", &seed_ip, &seed_port])?;
    }
    replicate(conns, addrs, &ids, layout, deadline)?;
    wait_converged(conns, addrs, &ids, layout, deadline)?;
    Ok(ids)
}

/// Issues CLUSTER REPLICATE on every replica, retrying while the replica has
/// not yet learned about its master through gossip.
fn replicate(
    conns: &mut [Conn],
    addrs: &[SocketAddr],
    ids: &[String],
    layout: Layout,
    deadline: Instant,
) -> Result<()> {
    let mut pending: Vec<usize> = (layout.masters..layout.total()).collect();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for &i in &pending {
            let Some(m) = layout.master_index(i) else {
                continue;
            };
            let reply = conns[i].call(&["CLUSTER", "REPLICATE", &ids[m]])?;
            if let Some(err) = reply.is_error().then(|| reply.to_string()) {
                if Instant::now() >= deadline {
                    bail!(
                        "replica {} could not REPLICATE master {}: {err}",
                        addrs[i],
                        addrs[m]
                    );
                }
                still.push(i);
            }
        }
        pending = still;
        if !pending.is_empty() {
            sleep(POLL);
        }
    }
    Ok(())
}

/// Polls nodes until each one, checked in the same final pass, reports a
/// healthy cluster that matches the plan.
fn wait_converged(
    conns: &mut [Conn],
    addrs: &[SocketAddr],
    ids: &[String],
    layout: Layout,
    deadline: Instant,
) -> Result<()> {
    let expect = Expect::new(ids, layout);
    let mut pending: Vec<usize> = (0..conns.len()).collect();
    loop {
        let mut failing = Vec::new();
        let mut last = String::new();
        for &i in &pending {
            if let Err(why) = check_node(&mut conns[i], i, &expect)? {
                last = format!("node {} ({}): {why}", addrs[i], ids[i]);
                failing.push(i);
            }
        }
        match (failing.is_empty(), pending.len() == conns.len()) {
            (true, true) => return Ok(()),
            // Everyone passed at least once; confirm with one full pass.
            (true, false) => pending = (0..conns.len()).collect(),
            (false, _) => pending = failing,
        }
        if Instant::now() >= deadline {
            bail!(
                "cluster did not converge in time; {} node(s) not ready, e.g. {last}",
                pending.len()
            );
        }
        sleep(POLL);
    }
}

/// What every node should see: each id's role.
struct Expect {
    roles: HashMap<String, Role>,
    ids: Vec<String>,
}

enum Role {
    Master(String),
    Replica(String),
}

impl Expect {
    fn new(ids: &[String], layout: Layout) -> Expect {
        let roles = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let role = match layout.master_index(i) {
                    Some(m) => Role::Replica(ids[m].clone()),
                    None => {
                        let (a, b) = layout.slot_range(i);
                        Role::Master(if a == b {
                            a.to_string()
                        } else {
                            format!("{a}-{b}")
                        })
                    }
                };
                (id.clone(), role)
            })
            .collect();
        Expect {
            roles,
            ids: ids.to_vec(),
        }
    }
}

/// `Ok(Err(why))` means "not converged yet"; `Err` means the node is broken
/// (I/O failure, protocol error) and waiting will not help.
fn check_node(conn: &mut Conn, i: usize, expect: &Expect) -> Result<Result<(), String>> {
    let info = conn.call_text(&["CLUSTER", "INFO"])?;
    let field = |k: &str| info_field(&info, k).unwrap_or_default();
    if field("cluster_state") != "ok" {
        return Ok(Err(format!("cluster_state:{}", field("cluster_state"))));
    }
    if field("cluster_slots_assigned") != SLOTS.to_string() {
        return Ok(Err(format!(
            "cluster_slots_assigned:{}",
            field("cluster_slots_assigned")
        )));
    }
    let nodes = conn.call_text(&["CLUSTER", "NODES"])?;
    if let Err(why) = check_view(&nodes, expect) {
        return Ok(Err(why));
    }
    if matches!(expect.roles.get(&expect.ids[i]), Some(Role::Replica(_))) {
        let repl = conn.call_text(&["INFO", "replication"])?;
        let link = info_field(&repl, "master_link_status").unwrap_or_default();
        if link != "up" {
            return Ok(Err(format!("master_link_status:{link}")));
        }
    }
    Ok(Ok(()))
}

/// Compares one node's `CLUSTER NODES` output with the plan.
fn check_view(nodes: &str, expect: &Expect) -> Result<(), String> {
    let lines: Vec<&str> = nodes.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != expect.roles.len() {
        return Err(format!(
            "knows {} nodes, want {}",
            lines.len(),
            expect.roles.len()
        ));
    }
    for line in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(id), Some(flags), Some(master)) = (f.first(), f.get(2), f.get(3)) else {
            return Err(format!("unparsable line {line:?}"));
        };
        let Some(role) = expect.roles.get(*id) else {
            return Err(format!("unknown node {id}"));
        };
        let unhealthy = |x: &str| matches!(x, "handshake" | "fail" | "fail?" | "noaddr");
        if flags.split(',').any(unhealthy) {
            return Err(format!("sees {id} as {flags}"));
        }
        let ok = match role {
            Role::Master(slots) => {
                flags.contains("master") && f.get(8..).unwrap_or_default().join(" ") == *slots
            }
            Role::Replica(m) => flags.contains("slave") && master == m,
        };
        if !ok {
            return Err(format!(
                "sees {id} as {flags} of {master} with slots {:?}",
                f.get(8..).unwrap_or_default()
            ));
        }
    }
    Ok(())
}

/// Value of `key:value` in an INFO-style text.
pub(crate) fn info_field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim_end().split_once(':'))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_ranges_cover_everything_once() {
        for masters in [1, 2, 3, 7, 100, 16384] {
            let l = Layout {
                masters,
                replicas: 0,
            };
            let mut next = 0u32;
            for m in 0..masters {
                let (a, b) = l.slot_range(m);
                assert_eq!(u32::from(a), next);
                assert!(b >= a);
                next = u32::from(b) + 1;
            }
            assert_eq!(next, u32::from(SLOTS));
        }
    }

    #[test]
    fn replicas_map_to_masters() {
        let l = Layout {
            masters: 3,
            replicas: 2,
        };
        assert_eq!(l.total(), 9);
        let got: Vec<_> = (0..9).map(|i| l.master_index(i)).collect();
        let want = [
            None,
            None,
            None,
            Some(0),
            Some(0),
            Some(1),
            Some(1),
            Some(2),
            Some(2),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn info_fields() {
        let text = "cluster_state:ok\r\ncluster_slots_assigned:16384\r\n";
        assert_eq!(info_field(text, "cluster_state").as_deref(), Some("ok"));
        assert_eq!(info_field(text, "nope"), None);
    }
}
