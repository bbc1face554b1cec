//! Free port selection for cluster nodes. Every node needs its client port
//! `p` and its cluster bus port `p + 10000`; parallel tests in one process and
//! several test processes must not hand out the same pair.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, OnceLock};

use anyhow::{bail, Result};
use rand::Rng;

/// Redis derives the cluster bus port from the client port with this offset.
pub const BUS_OFFSET: u16 = 10000;

/// Never hand these out, even if they look free: the system Redis may be
/// installed but stopped, and would then come back on them.
const RESERVED: [u16; 2] = [6379, 6379 + BUS_OFFSET];
/// Below this, ports are privileged or commonly used by system services.
const LOWEST: u16 = 10000;
const HIGHEST: u16 = u16::MAX - BUS_OFFSET;
const RANDOM_PROBES: usize = 4000;

/// Ports handed out by this process (both halves of each pair). They are
/// never released: the candidate space is large and reuse would race with
/// nodes that are still shutting down.
fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static SET: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    SET.get_or_init(|| Mutex::new(HashSet::new()))
}

/// The kernel's ephemeral range; ports in it can be grabbed at any moment by
/// outgoing connections (the cluster bus opens many), so we avoid it.
fn ephemeral_range() -> (u16, u16) {
    let parsed = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|x| x.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        });
    parsed.unwrap_or((32768, 60999))
}

/// Client ports `p` whose pair stays clear of the ephemeral range. Falls back
/// to the whole range when the system's ephemeral range leaves too little.
fn candidates() -> Vec<u16> {
    let (lo, hi) = ephemeral_range();
    let outside = |p: u16| p < lo || p > hi;
    let all = LOWEST..=HIGHEST;
    let good: Vec<u16> = all
        .clone()
        .filter(|&p| outside(p) && outside(p + BUS_OFFSET))
        .collect();
    if good.len() >= 1000 {
        good
    } else {
        all.collect()
    }
}

fn bindable(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// Find a port `p` such that `p` and `p + 10000` are both free right now.
///
/// Safe to call from parallel tests (a process-wide set remembers what was
/// handed out) and from several processes (random probing makes clashes
/// unlikely, and both ports are bind-checked). A pair can still be taken by
/// someone else before the node binds it; [`crate::Cluster::start`] retries
/// such nodes on a new pair when it picked the ports itself.
pub fn free_port_pair() -> Result<u16> {
    let cands = candidates();
    let mut rng = rand::thread_rng();
    let mut set = handed_out()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for _ in 0..RANDOM_PROBES {
        let p = cands[rng.gen_range(0..cands.len())];
        let bus = p + BUS_OFFSET;
        if RESERVED.contains(&p) || RESERVED.contains(&bus) {
            continue;
        }
        if set.contains(&p) || set.contains(&bus) {
            continue;
        }
        if bindable(p) && bindable(bus) {
            set.insert(p);
            set.insert(bus);
            return Ok(p);
        }
    }
    bail!("no free port pair (p, p+{BUS_OFFSET}) found after {RANDOM_PROBES} probes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_distinct_and_free() {
        let mut seen = HashSet::new();
        for _ in 0..50 {
            let p = free_port_pair().unwrap();
            assert!((LOWEST..=HIGHEST).contains(&p));
            assert!(!RESERVED.contains(&p));
            assert!(seen.insert(p));
            assert!(seen.insert(p + BUS_OFFSET));
        }
    }

    #[test]
    fn parallel_callers_never_collide() {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    (0..20)
                        .map(|_| free_port_pair().unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all = HashSet::new();
        for h in handles {
            for p in h.join().unwrap() {
                assert!(all.insert(p));
                assert!(all.insert(p + BUS_OFFSET));
            }
        }
    }
}
