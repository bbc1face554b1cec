//! Moving one key from its source server to the target pool, the three steps of
//! docs/migration.md: **take** (a Lua script on the source: absent, busy, or a lease and the
//! key's DUMP and PTTL), **put** (RESTORE without REPLACE on the key's master, following
//! MOVED and ASK; BUSYKEY keeps the target's copy), **release** (a script that deletes the
//! key and the lease if the lease is still ours). The key counts as moved once the put is
//! acknowledged; the release runs on its own task, so a request waits two round trips.
//!
//! Both the workers' gates and the copier move keys with this; each thread keeps its own
//! pipelined connections (`Conns`), so the moves of one thread never wait for another's.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use resp::Value;
use tokio::sync::{oneshot, Notify};

use super::Migration;
use crate::node_query::NodeConn;
use crate::tls::Connector;

/// Absent: `{0}`. Another mover's lease: `{1}`. Else the lease is ours and the value
/// follows: `{2, DUMP, PTTL}`.
const TAKE: &[u8] = b"if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end \
local holder = redis.call('GET', KEYS[2]) \
if holder and holder ~= ARGV[1] then return {1} end \
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2]) \
return {2, redis.call('DUMP', KEYS[1]), redis.call('PTTL', KEYS[1])}";

/// The key and its lease deleted if the lease is still ours: 1, else 0.
const RELEASE: &[u8] = b"if redis.call('GET', KEYS[2]) == ARGV[1] then \
redis.call('DEL', KEYS[1], KEYS[2]) return 1 end return 0";

/// The lease alone dropped if still ours (a RESTORE that failed).
const UNLEASE: &[u8] = b"if redis.call('GET', KEYS[1]) == ARGV[1] then \
redis.call('DEL', KEYS[1]) end return 0";

/// Connections per server, side and thread: a burst of clients touching keys not moved
/// yet queues on them (pipelined) rather than dialling one each; more than one, so a big
/// key's DUMP or RESTORE does not hold every other move to its server.
const PIPES: usize = 4;

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

/// Connections to the source servers and the target masters, of one thread: up to
/// `PIPES` pipelined ones per server and side.
#[derive(Default)]
pub(crate) struct Conns {
    pipes: RefCell<HashMap<PipeKey, Vec<Rc<Pipe>>>>,
}

/// Whether a pipe goes to the source, and to which server.
type PipeKey = (bool, String);

/// Which side a call goes to: it decides the password and TLS.
#[derive(Clone, Copy)]
pub(crate) enum Side {
    Source,
    Target,
}

impl Conns {
    /// `calls` in order on one connection to `addr` (the least busy pipe, or a new one
    /// while there are fewer than `PIPES`): its last reply.
    pub(crate) async fn calls(
        &self,
        m: &Migration,
        side: Side,
        addr: &str,
        calls: &[&[&[u8]]],
    ) -> Result<Value, String> {
        let pipe = self.pipe(m, side, addr, false);
        match pipe.call(calls).await {
            Ok(last) => Ok(last),
            // A connection the server closed meanwhile (a restart, a timeout): once more on
            // a new one. Every step may run twice: the take renews our own lease, a second
            // RESTORE meets BUSYKEY (ours), the release finds nothing.
            Err(_) if pipe.served.get() => self.pipe(m, side, addr, true).call(calls).await,
            Err(e) => Err(e),
        }
        .map_err(|e| format!("{addr}: {e}"))
    }

    fn pipe(&self, m: &Migration, side: Side, addr: &str, fresh: bool) -> Rc<Pipe> {
        let mut pipes = self.pipes.borrow_mut();
        let list = pipes
            .entry((matches!(side, Side::Source), addr.to_string()))
            .or_default();
        list.retain(|p| !p.dead.get());
        let idlest = list.iter().min_by_key(|p| p.owed.get()).cloned();
        match idlest {
            Some(p) if !fresh && (p.owed.get() == 0 || list.len() >= PIPES) => p,
            _ => {
                let (auth, tls) = match side {
                    Side::Source => (m.source_auth.clone(), None),
                    Side::Target => (m.target_auth.clone(), m.target_tls.clone()),
                };
                let pipe = Pipe::start(addr.to_string(), auth, tls);
                if list.len() >= PIPES {
                    // Its task ends once the calls already queued on it are answered.
                    let old = list.remove(0);
                    old.retired.set(true);
                    old.wake.notify_one();
                }
                list.push(pipe.clone());
                pipe
            }
        }
    }
}

/// One connection carrying a thread's calls to one server, pipelined: callers queue their
/// calls, and the pipe's task writes every queued call in one write, then hands each its
/// last reply in order. When many clients touch keys not moved yet (a migration's first
/// seconds), their takes and RESTOREs to a server go in a few writes and reads instead of
/// one round trip each: the syscalls, on this side and the server's, were most of a
/// move's cost.
pub(crate) struct Pipe {
    queue: RefCell<Vec<Queued>>,
    wake: Notify,
    /// Calls queued or written and not answered yet.
    owed: Cell<usize>,
    /// Answered a call once (a later failure may be the server closing it while idle).
    served: Cell<bool>,
    dead: Cell<bool>,
    /// Replaced by a fresh pipe: closes once nothing is queued.
    retired: Cell<bool>,
}

/// One call counted in `Pipe::owed` while its caller waits, even if the caller is dropped
/// (a copier's move aborted by a pause).
struct Owing<'a>(&'a Cell<usize>);

impl Drop for Owing<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

struct Queued {
    bytes: BytesMut,
    replies: usize,
    done: oneshot::Sender<Result<Value, String>>,
}

impl Pipe {
    /// A pipe whose task connects (and authenticates) first; calls queue meanwhile.
    fn start(addr: String, auth: Option<Bytes>, tls: Option<Arc<Connector>>) -> Rc<Pipe> {
        let pipe = Rc::new(Pipe {
            queue: RefCell::new(Vec::new()),
            wake: Notify::new(),
            owed: Cell::new(0),
            served: Cell::new(false),
            dead: Cell::new(false),
            retired: Cell::new(false),
        });
        let task = pipe.clone();
        tokio::task::spawn_local(async move {
            let error = match NodeConn::connect(&addr, auth.as_ref(), tls.as_deref()).await {
                Ok(conn) => task.serve(conn).await,
                Err(e) => e,
            };
            task.dead.set(true);
            for q in task.queue.borrow_mut().drain(..) {
                let _ = q.done.send(Err(error.clone()));
            }
        });
        pipe
    }

    async fn call(&self, calls: &[&[&[u8]]]) -> Result<Value, String> {
        if self.dead.get() {
            return Err("connection closed".into());
        }
        let mut bytes = BytesMut::new();
        for args in calls {
            resp::encode_command(&mut bytes, args);
        }
        let (done, answer) = oneshot::channel();
        self.queue.borrow_mut().push(Queued {
            bytes,
            replies: calls.len(),
            done,
        });
        self.owed.set(self.owed.get() + 1);
        let _owing = Owing(&self.owed);
        self.wake.notify_one();
        answer
            .await
            .unwrap_or_else(|_| Err("connection closed".into()))
    }

    /// Until the connection fails: its error.
    async fn serve(&self, mut conn: NodeConn) -> String {
        loop {
            let batch = std::mem::take(&mut *self.queue.borrow_mut());
            if batch.is_empty() {
                if self.retired.get() {
                    return "connection retired".into();
                }
                tokio::select! {
                    _ = self.wake.notified() => continue,
                    _ = conn.closed() => return "connection closed".into(),
                }
            }
            let mut out = BytesMut::new();
            for q in &batch {
                out.extend_from_slice(&q.bytes);
            }
            let total = batch.iter().map(|q| q.replies).sum();
            match conn.call_many(&out, total).await {
                Ok(replies) => {
                    self.served.set(true);
                    let mut replies = replies.into_iter();
                    for q in batch {
                        let last = replies.by_ref().take(q.replies).last();
                        let _ = q.done.send(Ok(last.unwrap_or(Value::Null)));
                    }
                }
                Err(e) => {
                    for q in batch {
                        let _ = q.done.send(Err(e.clone()));
                    }
                    return e;
                }
            }
        }
    }
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
    let take: &[&[u8]] = &[
        b"EVAL",
        TAKE,
        b"2",
        key,
        &lease,
        &token,
        lease_ms.as_bytes(),
    ];
    let mut waited = Duration::ZERO;
    let mut pause = Duration::from_millis(1);
    let (payload, pttl) = loop {
        let reply = conns.calls(m, Side::Source, source, &[take]).await?;
        match taken(reply)? {
            Taken::Absent => return Ok(Moved::Absent),
            Taken::Value(payload, pttl) => break (payload, pttl),
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
    let outcome = match put(m, conns, topology, key, &ttl, &payload).await {
        Ok(outcome) => outcome,
        Err(e) => {
            // The key stays on the source: let the next mover take it at once.
            let unlease: &[&[u8]] = &[b"EVAL", UNLEASE, b"1", &lease, &token];
            let _ = conns.calls(m, Side::Source, source, &[unlease]).await;
            return Err(e);
        }
    };
    m.stats.bytes.fetch_add(payload.len() as u64, Relaxed);
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
    Value(Bytes, i64),
}

fn taken(reply: Value) -> Result<Taken, String> {
    let Value::Array(parts) = reply else {
        return Err(format!("migration take: {}", shown(&reply)));
    };
    match parts.as_slice() {
        [Value::Integer(0)] => Ok(Taken::Absent),
        [Value::Integer(1)] => Ok(Taken::Busy),
        [Value::Integer(2), Value::BulkString(payload), Value::Integer(pttl)] => {
            Ok(Taken::Value(payload.clone(), *pttl))
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

/// A reply shown in an error message, short.
fn shown(reply: &Value) -> String {
    match reply {
        Value::Error(e) => String::from_utf8_lossy(&e[..e.len().min(200)]).into_owned(),
        _ => "unexpected reply".into(),
    }
}
