//! The background copier: one thread per proxy that SCANs every source server and moves
//! each key it meets with the gate's own mover, `copy_keys_per_second` at most (less the
//! keys the gates moved meanwhile: clients' keys first), a few at a time. Since a moved key leaves the source, resuming (after a pause or a restart) is a
//! new SCAN: what is left is what remains to move. A pass that meets no key records
//! `left = 0`, which cut-over waits for. It also adopts the phase the target holds every
//! second, so an operator's action on any proxy reaches this one, follows the source (a
//! Sentinel master's failovers, a cluster source's slot map) and runs the verifier
//! (`verifier.rs`) beside it.

use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use resp::Value;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::mover;
use super::pipes::{Conns, Side};
use super::{Migration, Phase, INTERNAL_PREFIX};
use crate::topology::sentinel::SentinelSource;

/// Moves under way at once.
const PARALLEL: usize = 16;
/// Keys one SCAN step asks for.
const SCAN_COUNT: &[u8] = b"100";
/// How often the phase is read from the target.
const PHASE_EVERY: Duration = Duration::from_secs(1);

/// Start the copier's thread; it ends when `shutdown` turns true.
pub(crate) fn spawn(
    m: Arc<Migration>,
    topology: Arc<topology::Topology>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("slotgate-migration".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build_local(tokio::runtime::LocalOptions::default())
            {
                Ok(rt) => rt,
                Err(e) => return tracing::error!(error = %e, "migration copier cannot start"),
            };
            rt.block_on(run(m, topology, shutdown));
        })
}

async fn run(
    m: Arc<Migration>,
    topology: Arc<topology::Topology>,
    mut shutdown: watch::Receiver<bool>,
) {
    let conns = Rc::new(Conns::default());
    tokio::task::spawn_local(super::verifier::run(
        m.clone(),
        conns.clone(),
        topology.clone(),
        shutdown.clone(),
    ));
    let mut sentinels = m
        .sentinel
        .as_ref()
        .map(|cfg| SentinelSource::new(cfg, m.target_tls.clone()));
    let mut logged = None;
    while !*shutdown.borrow() {
        if let Some(sentinels) = sentinels.as_mut() {
            follow_master(&m, sentinels).await;
        }
        if let Err(e) = m.learn_source_slots().await {
            m.note_error(&e);
        }
        if let Err(e) = m.load_phase(&topology).await {
            m.note_error(&format!("reading the phase: {e}"));
        }
        let phase = m.phase();
        if logged != Some(phase) {
            tracing::info!(
                migration = m.name(),
                phase = phase.name(),
                "migration phase"
            );
            logged = Some(phase);
        }
        if phase == Phase::Copying && m.copy_rate > 0 {
            if let Some(found) = pass(&m, &conns, &topology, &shutdown).await {
                m.left.store(found, Relaxed);
                m.stats.passes.fetch_add(1, Relaxed);
                if found > 0 {
                    continue;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(PHASE_EVERY) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// A Sentinel source's master, or a cluster source's slots, learned once before the proxy
/// serves (a pool needs nothing).
pub(crate) fn learn_source(m: &Migration) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(m.learn_source_slots())?;
    let Some(cfg) = m.sentinel.as_ref() else {
        return Ok(());
    };
    let mut sentinels = SentinelSource::new(cfg, m.target_tls.clone());
    let master = rt.block_on(sentinels.master())?;
    m.set_master(master);
    Ok(())
}

/// A Sentinel source's master as the sentinels name it now: after a failover, the moves
/// go to the promoted replica within a second of the sentinels' switch.
pub(crate) async fn follow_master(m: &Migration, sentinels: &mut SentinelSource) {
    match sentinels.master().await {
        Ok(addr) => {
            if m.set_master(addr.clone()) {
                tracing::info!(migration = m.name(), master = %addr, "migration source master");
            }
        }
        Err(e) => m.note_error(&format!("asking the sentinels: {e}")),
    }
}

/// One pass over every source server: the keys met (each moved, or found gone). None when
/// a pause, the cut-over or shutdown stopped it before the end.
async fn pass(
    m: &Arc<Migration>,
    conns: &Rc<Conns>,
    topology: &Arc<topology::Topology>,
    shutdown: &watch::Receiver<bool>,
) -> Option<u64> {
    let servers = m.source_servers();
    let every = Duration::from_secs(1) / m.copy_rate.max(1);
    let mut ticker = tokio::time::interval(every);
    // A copier behind its schedule does not catch up in a burst: the servers' spare
    // capacity, not the copier's, is what the clients share.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut gate_moves_seen = m.stats.gate_moves.load(Relaxed);
    // At most a tenth of a second's ticks given up per key: a pass still reaches its next
    // SCAN step (where it notices a pause, a shutdown, a dead source) within seconds.
    let most_owed = u64::from(m.copy_rate / 10);
    let mut moves = JoinSet::new();
    let mut phase_read = Instant::now();
    let mut found = 0u64;
    for addr in servers {
        let mut cursor = b"0".to_vec();
        loop {
            if *shutdown.borrow() {
                return None;
            }
            if phase_read.elapsed() >= PHASE_EVERY {
                let _ = m.load_phase(topology).await;
                let _ = m.learn_source_slots().await;
                phase_read = Instant::now();
            }
            if m.phase() != Phase::Copying {
                return None;
            }
            let scan: &[&[u8]] = &[b"SCAN", &cursor, b"COUNT", SCAN_COUNT];
            let keys = match conns.calls(m, Side::Source, &addr, &[scan]).await {
                Ok(reply) => match scanned(reply) {
                    Some((next, keys)) => {
                        cursor = next;
                        keys
                    }
                    None => {
                        m.note_error(&format!("SCAN on {addr}: unexpected reply"));
                        return None;
                    }
                },
                Err(e) => {
                    m.note_error(&format!("SCAN: {e}"));
                    return None;
                }
            };
            for key in keys {
                // Leases and states, and keys already on their target server (a server in
                // both pools), are not the source's to move.
                if key.starts_with(INTERNAL_PREFIX)
                    || m.target_of(topology, &key).as_deref() == Some(addr.as_str())
                {
                    continue;
                }
                found += 1;
                m.stats.scanned.fetch_add(1, Relaxed);
                // Clients first: each key this process's gates moved since the last key
                // costs the copier one tick, so while clients touch keys not moved yet (a
                // migration's first seconds) the copier steps aside and both together stay
                // near `copy_keys_per_second`, rather than adding to the gates' burst.
                let gate_moves = m.stats.gate_moves.load(Relaxed);
                let owed = gate_moves.saturating_sub(gate_moves_seen).min(most_owed);
                gate_moves_seen = gate_moves;
                for _ in 0..=owed {
                    ticker.tick().await;
                }
                while moves.len() >= PARALLEL {
                    moves.join_next().await;
                }
                let (m, conns, topology) = (m.clone(), conns.clone(), topology.clone());
                let source = addr.clone();
                moves.spawn_local(async move {
                    // Counted, and a failure noted, by the mover; the key stays for the next
                    // pass. From where it is, even if the placement puts it elsewhere.
                    let _ = mover::move_key_from(&m, &conns, &topology, &key, &source).await;
                });
            }
            if cursor == b"0" {
                break;
            }
        }
    }
    while moves.join_next().await.is_some() {}
    Some(found)
}

/// SCAN's reply: the next cursor and the keys.
fn scanned(reply: Value) -> Option<(Vec<u8>, Vec<bytes::Bytes>)> {
    let Value::Array(mut parts) = reply else {
        return None;
    };
    if parts.len() != 2 {
        return None;
    }
    let Value::Array(keys) = parts.pop()? else {
        return None;
    };
    let Value::BulkString(cursor) = parts.pop()? else {
        return None;
    };
    let keys = keys
        .into_iter()
        .filter_map(|k| match k {
            Value::BulkString(k) => Some(k),
            _ => None,
        })
        .collect();
    Some((cursor.to_vec(), keys))
}
