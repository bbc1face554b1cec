//! The verifier: samples keys on both sides and counts those live on both, which the
//! protocol never leaves (docs/migration.md): a key on the source with no mover's lease
//! that the target has too was written on one side by something that bypassed the proxies
//! (or lost its release in a source failover). The copier's next take resolves such a key
//! in the target's favour (BUSYKEY); the verifier makes it visible first
//! (`migration_verify_conflicts`, `migration_last_conflict`).
//!
//! Each second, `verify_samples_per_second` times: a random key of a random source server
//! (RANDOMKEY) is looked for on the target, and a random key of a random target master is
//! looked for on its source server.

use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use resp::Value;
use tokio::sync::watch;

use super::pipes::{Conns, Side};
use super::INTERNAL_PREFIX;
use super::{Migration, Phase};

/// Sample the two sides every second until shutdown or cut-over.
pub(crate) async fn run(
    m: Arc<Migration>,
    conns: Rc<Conns>,
    topology: Arc<topology::Topology>,
    mut shutdown: watch::Receiver<bool>,
) {
    if m.verify_rate == 0 {
        return;
    }
    while !*shutdown.borrow() && m.phase() != Phase::Done {
        for _ in 0..m.verify_rate {
            let found = match rand::random::<bool>() {
                true => from_source(&m, &conns, &topology).await,
                false => from_target(&m, &conns, &topology).await,
            };
            match found {
                Ok(None) => {}
                Ok(Some(conflict)) => {
                    m.stats.verified.fetch_add(1, Relaxed);
                    if conflict {
                        m.stats.conflicts.fetch_add(1, Relaxed);
                    }
                }
                Err(e) => m.note_error(&format!("verifier: {e}")),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// A source key looked for on the target: Some(true) when both have it and no mover holds
/// it; None when the sampled server is empty.
async fn from_source(
    m: &Migration,
    conns: &Conns,
    topology: &topology::Topology,
) -> Result<Option<bool>, String> {
    let servers = m.source_servers();
    let server = &servers[rand::random::<usize>() % servers.len()];
    let Some(key) = random_key(conns, m, Side::Source, server).await? else {
        return Ok(None);
    };
    if key.starts_with(INTERNAL_PREFIX) || m.target_of(topology, &key).as_deref() == Some(server) {
        return Ok(None);
    }
    let both =
        target_has(m, conns, topology, &key).await? && !leased(m, conns, server, &key).await?;
    if both {
        m.note_conflict(&key);
    }
    Ok(Some(both))
}

/// A target key looked for on its source server.
async fn from_target(
    m: &Migration,
    conns: &Conns,
    topology: &topology::Topology,
) -> Result<Option<bool>, String> {
    let masters: Vec<String> = topology
        .current()
        .nodes()
        .iter()
        .map(|n| n.addr.to_string())
        .collect();
    if masters.is_empty() {
        return Ok(None);
    }
    let master = &masters[rand::random::<usize>() % masters.len()];
    let Some(key) = random_key(conns, m, Side::Target, master).await? else {
        return Ok(None);
    };
    if key.starts_with(INTERNAL_PREFIX) {
        return Ok(None);
    }
    let source = m.source_of(&key)?;
    if source == *master {
        // A server in both pools: the same key, not two copies.
        return Ok(None);
    }
    let exists: &[&[u8]] = &[b"EXISTS", &key];
    let on_source = conns.calls(m, Side::Source, &source, &[exists]).await?;
    let both = on_source == Value::Integer(1) && !leased(m, conns, &source, &key).await?;
    if both {
        m.note_conflict(&key);
    }
    Ok(Some(both))
}

async fn random_key(
    conns: &Conns,
    m: &Migration,
    side: Side,
    addr: &str,
) -> Result<Option<Vec<u8>>, String> {
    match conns.calls(m, side, addr, &[&[b"RANDOMKEY"]]).await? {
        Value::BulkString(key) => Ok(Some(key.to_vec())),
        Value::Null => Ok(None),
        other => Err(format!("RANDOMKEY on {addr}: {other:?}")),
    }
}

/// Whether a mover holds `key`'s lease on `server` (it is mid-move: both sides may have it).
async fn leased(m: &Migration, conns: &Conns, server: &str, key: &[u8]) -> Result<bool, String> {
    let lease = m.lease_key(key);
    let exists: &[&[u8]] = &[b"EXISTS", &lease];
    Ok(conns.calls(m, Side::Source, server, &[exists]).await? == Value::Integer(1))
}

/// Whether the target has `key` (asked of its slot's master; a MOVED is followed once).
async fn target_has(
    m: &Migration,
    conns: &Conns,
    topology: &topology::Topology,
    key: &[u8],
) -> Result<bool, String> {
    let map = topology.current();
    let mut addr = map
        .node_of(m.target.slot(key))
        .map(|n| n.addr.to_string())
        .ok_or("no master serves the key's slot")?;
    let exists: &[&[u8]] = &[b"EXISTS", key];
    for _ in 0..2 {
        match conns.calls(m, Side::Target, &addr, &[exists]).await? {
            Value::Integer(n) => return Ok(n == 1),
            Value::Error(e) => match cluster::parse_redirect(&e) {
                Some(cluster::Redirect::Moved { to, .. }) => {
                    addr = map.redirect_addr(to, &addr).ok_or("bad redirect")?;
                }
                // The slot is moving between masters: no claim either way.
                Some(cluster::Redirect::Ask { .. }) => return Ok(false),
                None => return Err(String::from_utf8_lossy(&e).into_owned()),
            },
            other => return Err(format!("EXISTS: {other:?}")),
        }
    }
    Err("EXISTS: too many redirects".into())
}
