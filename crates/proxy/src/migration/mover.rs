//! Moving one key from its source server to the target pool, the three steps of
//! docs/migration.md: **take** (a Lua script on the source: absent, busy, or a lease and the
//! key's DUMP and PTTL), **put** (RESTORE without REPLACE on the key's master, following
//! MOVED and ASK; BUSYKEY keeps the target's copy), **release** (a script that deletes the
//! key and the lease if the lease is still ours). The key counts as moved once the put is
//! acknowledged; the release runs on its own task, so a request waits two round trips.
//!
//! Both the workers' gates and the copier move keys with this; each thread keeps its own
//! pipelined connections (`pipes.rs`), so the moves of one thread never wait for another's.
//! A key too big to DUMP goes by slices instead (`typed_copy.rs`).

use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use resp::Value;

use super::pipes::{shown, Conns, Side};
use super::typed_copy::{Kind, SliceCopy, Sliced};
use super::Migration;

/// Absent: `{0}`. Another mover's lease: `{1}`. Else the lease is ours and the value
/// follows: `{2, DUMP, PTTL}`, or for a string, list, hash, set or sorted set taking more
/// than `ARGV[3]` bytes (MEMORY USAGE's estimate), `{3, TYPE, PTTL}`: copied by slices
/// (`typed_copy.rs`).
const TAKE: &[u8] = b"if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end \
local holder = redis.call('GET', KEYS[2]) \
if holder and holder ~= ARGV[1] then return {1} end \
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2]) \
local t = redis.call('TYPE', KEYS[1])['ok'] \
if (t == 'string' or t == 'list' or t == 'hash' or t == 'set' or t == 'zset') \
and (redis.call('MEMORY', 'USAGE', KEYS[1]) or 0) > tonumber(ARGV[3]) then \
return {3, t, redis.call('PTTL', KEYS[1])} end \
return {2, redis.call('DUMP', KEYS[1]), redis.call('PTTL', KEYS[1])}";

/// The key and its lease deleted if the lease is still ours: 1, else 0.
const RELEASE: &[u8] = b"if redis.call('GET', KEYS[2]) == ARGV[1] then \
redis.call('DEL', KEYS[1], KEYS[2]) return 1 end return 0";

/// The lease alone dropped if still ours (a RESTORE that failed).
const UNLEASE: &[u8] = b"if redis.call('GET', KEYS[1]) == ARGV[1] then \
redis.call('DEL', KEYS[1]) end return 0";

/// Redirects a RESTORE follows before the move fails.
const MAX_HOPS: usize = 5;

/// What moving a key found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moved {
    /// Not on the source: moved before, or never there.
    Absent,
    /// Restored on the target and deleted from the source.
    Restored,
    /// The target had it already (a mover died after its RESTORE): the target's kept.
    Kept,
    /// The key's source server is its target server too: nothing to move.
    InPlace,
}

/// Move `key` (module doc), counted in the migration's statistics. Err: the key is still
/// on the source (or its lease will expire), in words for the client's TRYAGAIN and the
/// operator's `last_error`.
pub(crate) async fn move_key(
    m: &Arc<Migration>,
    conns: &Rc<Conns>,
    topology: &topology::Topology,
    key: &[u8],
) -> Result<Moved, String> {
    let source = match m.source_of(key) {
        Ok(source) => source,
        Err(e) => {
            m.note_error(&e);
            return Err(e);
        }
    };
    move_key_from(m, conns, topology, key, &source).await
}

/// `move_key` from the source server `source`: where the copier found the key, which may
/// not be where the placement puts it (a key nutcracker's `auto_eject_hosts` left).
pub(crate) async fn move_key_from(
    m: &Arc<Migration>,
    conns: &Rc<Conns>,
    topology: &topology::Topology,
    key: &[u8],
    source: &str,
) -> Result<Moved, String> {
    let outcome = move_uncounted(m, conns, topology, key, source).await;
    let counter = match &outcome {
        Ok(Moved::Absent | Moved::InPlace) => &m.stats.absent,
        Ok(Moved::Restored) => &m.stats.moved,
        Ok(Moved::Kept) => &m.stats.kept,
        Err(e) => {
            m.note_error(e);
            return outcome;
        }
    };
    counter.fetch_add(1, Relaxed);
    outcome
}

async fn move_uncounted(
    m: &Arc<Migration>,
    conns: &Rc<Conns>,
    topology: &topology::Topology,
    key: &[u8],
    source: &str,
) -> Result<Moved, String> {
    if m.target_of(topology, key).as_deref() == Some(source) {
        // A server in both pools (a resharded pool): the key is where it belongs already.
        return Ok(Moved::InPlace);
    }
    let lease = m.lease_key(key);
    let token = m.token();
    let lease_ms = m.lease_ms.to_string();
    let dump_max = m.dump_max_bytes.to_string();
    let take: &[&[u8]] = &[
        b"EVAL",
        TAKE,
        b"2",
        key,
        &lease,
        &token,
        lease_ms.as_bytes(),
        dump_max.as_bytes(),
    ];
    let mut waited = Duration::ZERO;
    let mut pause = Duration::from_millis(1);
    let (value, pttl) = loop {
        let reply = conns.calls(m, Side::Source, source, &[take]).await?;
        match taken(reply)? {
            Taken::Absent => return Ok(Moved::Absent),
            Taken::Value(value, pttl) => break (value, pttl),
            Taken::Busy if waited.as_millis() as u64 > m.lease_ms + 1000 => {
                return Err("another mover holds the key".into())
            }
            Taken::Busy => {
                m.stats.busy.fetch_add(1, Relaxed);
                tokio::time::sleep(pause).await;
                waited += pause;
                pause = (pause * 2).min(Duration::from_millis(20));
            }
        }
    };
    // -1: no TTL (RESTORE's 0). 0: the key's last millisecond (the script's clock stands
    // still, so it existed): 1 keeps it that instant rather than for ever.
    let ttl = match pttl {
        ..=-1 => b"0".to_vec(),
        0 => b"1".to_vec(),
        ms => ms.to_string().into_bytes(),
    };
    let put = match value {
        Carried::Dump(payload) => put(m, conns, topology, key, &ttl, &payload)
            .await
            .map(|outcome| (outcome, payload.len() as u64)),
        Carried::Slices(kind) => {
            let copy = SliceCopy {
                m,
                conns,
                topology,
                key,
                source,
                lease: &lease,
                token: &token,
            };
            copy.run(kind, &ttl).await.map(|sliced| match sliced {
                Sliced::Restored(bytes) => (Moved::Restored, bytes),
                Sliced::Kept => (Moved::Kept, 0),
            })
        }
    };
    let outcome = match put {
        Ok((outcome, bytes)) => {
            m.stats.bytes.fetch_add(bytes, Relaxed);
            outcome
        }
        Err(e) => {
            // The key stays on the source: let the next mover take it at once.
            let unlease: &[&[u8]] = &[b"EVAL", UNLEASE, b"1", &lease, &token];
            let _ = conns.calls(m, Side::Source, source, &[unlease]).await;
            return Err(e);
        }
    };
    // The key is on the target now: the request that asked for it may go (every other
    // mover finds our lease, then the key gone). The release follows on its own; if it
    // never lands, the lease expires and the next mover's RESTORE meets BUSYKEY.
    let (m, conns, key, source) = (m.clone(), conns.clone(), key.to_vec(), source.to_string());
    tokio::task::spawn_local(async move {
        let release: &[&[u8]] = &[b"EVAL", RELEASE, b"2", &key, &lease, &token];
        // Retried while the lease holds: once it expires, a client's DEL of the key on the
        // target could be undone by the next take restoring the source's old copy.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(m.lease_ms / 2);
        let mut pause = Duration::from_millis(10);
        loop {
            match conns.calls(&m, Side::Source, &source, &[release]).await {
                Ok(_) => return,
                Err(e) if tokio::time::Instant::now() + pause >= deadline => {
                    return m.note_error(&format!("release (the key may come back): {e}"));
                }
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
            }
        }
    });
    Ok(outcome)
}

/// What the take script answered.
enum Taken {
    Absent,
    Busy,
    Value(Carried, i64),
}

/// How a taken key's value travels.
enum Carried {
    /// DUMP's payload, RESTOREd at once.
    Dump(Bytes),
    /// Too big for that: copied by slices.
    Slices(Kind),
}

fn taken(reply: Value) -> Result<Taken, String> {
    let Value::Array(parts) = reply else {
        return Err(format!("migration take: {}", shown(&reply)));
    };
    match parts.as_slice() {
        [Value::Integer(0)] => Ok(Taken::Absent),
        [Value::Integer(1)] => Ok(Taken::Busy),
        [Value::Integer(2), Value::BulkString(payload), Value::Integer(pttl)] => {
            Ok(Taken::Value(Carried::Dump(payload.clone()), *pttl))
        }
        [Value::Integer(3), Value::BulkString(kind), Value::Integer(pttl)] => {
            let kind = Kind::parse(kind).ok_or("migration take: unexpected type")?;
            Ok(Taken::Value(Carried::Slices(kind), *pttl))
        }
        _ => Err("migration take: unexpected reply".into()),
    }
}

/// RESTORE on the key's master, following redirects.
async fn put(
    m: &Migration,
    conns: &Conns,
    topology: &topology::Topology,
    key: &[u8],
    ttl: &[u8],
    payload: &[u8],
) -> Result<Moved, String> {
    let restore: &[&[u8]] = &[b"RESTORE", key, ttl, payload];
    let map = topology.current();
    let slot = m.target.slot(key);
    let mut addr = map
        .node_of(slot)
        .map(|n| n.addr.to_string())
        .ok_or("no master serves the key's slot")?;
    let mut asking = false;
    for _ in 0..MAX_HOPS {
        let reply = match asking {
            true => {
                let calls: &[&[&[u8]]] = &[&[b"ASKING"], restore];
                conns.calls(m, Side::Target, &addr, calls).await?
            }
            false => conns.calls(m, Side::Target, &addr, &[restore]).await?,
        };
        let Value::Error(e) = &reply else {
            return Ok(Moved::Restored);
        };
        if e.starts_with(b"BUSYKEY") {
            return Ok(Moved::Kept);
        }
        match cluster::parse_redirect(e) {
            Some(cluster::Redirect::Moved { to, .. }) => {
                topology.request_refresh_now();
                addr = map.redirect_addr(to, &addr).ok_or("bad MOVED")?;
                asking = false;
            }
            Some(cluster::Redirect::Ask { to, .. }) => {
                addr = map.redirect_addr(to, &addr).ok_or("bad ASK")?;
                asking = true;
            }
            None if e.starts_with(b"TRYAGAIN") || e.starts_with(b"CLUSTERDOWN") => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None => return Err(format!("RESTORE on {addr}: {}", String::from_utf8_lossy(e))),
        }
    }
    Err("RESTORE: too many redirects".into())
}
