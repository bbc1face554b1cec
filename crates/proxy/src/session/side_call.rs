//! Commands sent over connections of their own, for what must not wait behind a node's
//! shared connections: a script or function runs on a node from one of them, and the node
//! reads nothing more from that connection until it ends.
//!
//! - **SCRIPT KILL, FUNCTION KILL** go to every master this way (on a shared connection,
//!   one behind the running script, they would wait for the script they are meant to stop);
//!   the answer is `+OK` from the master that ran one, else the first master's error
//!   (`-NOTBUSY …`), as one Redis answers.
//! - **FUNCTION STATS** goes to every master the same way (Redis answers it while a
//!   function runs, to show which): the master whose `running_script` is set answers, else
//!   the first (the libraries are the same on every master when loaded through the proxy).
//! - **PING**, while some node owes a slow command (a script, KEYS…: counted by the
//!   backend connections, `NodeStats::report_slow`), goes to that node: Redis answers PING
//!   with `-BUSY` while a script runs past `busy-reply-threshold`, and after the command
//!   ends with `+PONG`, so a client sees what it would see from one Redis. Otherwise (the
//!   common case, one relaxed load per worker) the proxy answers PING itself.
//!
//! - **CLIENT UNBLOCK** of a client waiting on a blocking command on its own connection
//!   goes to that connection's node, naming the node's id for it (learned by `CLIENT ID` at
//!   its set-up): the node ends the command as a timeout or with `-UNBLOCKED`, and its
//!   answer (`:1`, or `:0` if the command ended meanwhile) is the answer. A client not
//!   waiting so (idle, paused, in WAIT) gets `:0` from the proxy.
//!
//! At most `MAX_IN_FLIGHT` side calls run at once in the proxy (each opens a connection per
//! node asked).
//!
//! ```text
//!   request ─▶ entry pushed in the reply queue (order kept)
//!           ─▶ task: NodeConn per master (backend AUTH, TLS) ─▶ replies merged ─▶ entry
//! ```

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use resp::{Request, Value};

use crate::context::Shared;
use crate::node_query::NodeConn;
use crate::session::queue::{ClientCell, Entry};

/// Most side calls in flight in the whole proxy: each opens a connection per node asked, so a
/// client pipelining PINGs while a script runs must not open thousands. Past it, PING is
/// answered by the proxy (as while no node is busy) and the KILLs and STATS get
/// `TRY_AGAIN`.
const MAX_IN_FLIGHT: usize = 64;

/// The answer to SCRIPT KILL, FUNCTION KILL or FUNCTION STATS past `MAX_IN_FLIGHT`.
pub(crate) const TRY_AGAIN: &[u8] =
    b"-ERR slotgate: too many requests on connections of their own in flight; try again\r\n";

/// Whether another side call may start.
pub(crate) fn room(shared: &Shared) -> bool {
    shared.side_calls.load(Ordering::Relaxed) < MAX_IN_FLIGHT
}

/// How a side call reaches a node: the backend's AUTH and TLS, as the proxy's own
/// connections use them.
pub(crate) struct Dial {
    pub auth: Option<Bytes>,
    pub tls: Option<Arc<crate::tls::Connector>>,
}

/// Run a side call: a place in the client's replies is taken now (order kept) and one
/// among the proxy's side calls while `call`, given how to dial, runs on its own task;
/// its answer fills that place.
pub(crate) fn spawn<F, Fut>(shared: &Arc<Shared>, cell: &Rc<ClientCell>, call: F)
where
    F: FnOnce(Dial) -> Fut,
    Fut: std::future::Future<Output = Bytes> + 'static,
{
    let dial = Dial {
        auth: shared.backend_auth.clone(),
        tls: shared.backend_tls.clone(),
    };
    let seq = cell.push(Entry::pending_local());
    let cell = cell.clone();
    shared.side_calls.fetch_add(1, Ordering::Relaxed);
    let shared = shared.clone();
    let answer = call(dial);
    tokio::task::spawn_local(async move {
        cell.deliver_local(seq, answer.await);
        shared.side_calls.fetch_sub(1, Ordering::Relaxed);
    });
}

/// The masters that owe slow commands now (empty, at the cost of one load per worker,
/// when none does, or when no side call may start).
pub(crate) fn busy_nodes(shared: &Shared) -> Vec<String> {
    let mut nodes = Vec::new();
    if shared.workers.iter().all(|w| w.nodes.slow_owed() == 0) || !room(shared) {
        return nodes;
    }
    for worker in &shared.workers {
        worker.nodes.slow_nodes(&mut nodes);
    }
    nodes
}

/// Send `req` to each of `nodes` on its own connection (speaking the client's protocol);
/// the merged answer goes to the entry pushed now.
pub(crate) fn start(
    req: &Request,
    nodes: Vec<String>,
    resp3: bool,
    shared: &Arc<Shared>,
    cell: &Rc<ClientCell>,
) {
    let args: Vec<Bytes> = (0..req.argc())
        .map(|i| Bytes::copy_from_slice(req.arg(i)))
        .collect();
    spawn(shared, cell, |Dial { auth, tls }| async move {
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
        let mut replies = Vec::with_capacity(nodes.len());
        for addr in &nodes {
            let reply = match NodeConn::connect(addr, auth.as_ref(), tls.as_deref()).await {
                Ok(mut conn) if resp3 => match conn.call(&[b"HELLO", b"3"]).await {
                    Ok(_) => conn.call_unbounded(&argv).await,
                    Err(e) => Err(e),
                },
                Ok(mut conn) => conn.call_unbounded(&argv).await,
                Err(e) => Err(e),
            };
            replies.push((addr.as_str(), reply));
        }
        merge(&replies, resp3)
    });
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR] (module doc), with Redis's checks in its order.
pub(crate) fn unblock(req: &Request, shared: &Arc<Shared>, cell: &Rc<ClientCell>) {
    use crate::reply::error;
    if !(3..=4).contains(&req.argc()) {
        let err = "unknown subcommand or wrong number of arguments for 'unblock'. Try CLIENT HELP.";
        return cell.push_ready(error(err));
    }
    let reason = match req.argc() {
        4 if req.arg(3).eq_ignore_ascii_case(b"timeout") => Some(&b"TIMEOUT"[..]),
        4 if req.arg(3).eq_ignore_ascii_case(b"error") => Some(&b"ERROR"[..]),
        4 => return cell.push_ready(error("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")),
        _ => None,
    };
    let Some(id) = resp::string2ll(req.arg(2)) else {
        return cell.push_ready(error("value is not an integer or out of range"));
    };
    let target = u64::try_from(id).ok().and_then(|id| {
        shared
            .workers
            .iter()
            .find_map(|w| w.registry.blocked_on(id))
    });
    let Some((addr, node_id)) = target else {
        return cell.push_ready(Bytes::from_static(b":0\r\n"));
    };
    if !room(shared) {
        return cell.push_ready(Bytes::from_static(TRY_AGAIN));
    }
    spawn(shared, cell, |Dial { auth, tls }| async move {
        // The id comes with the connection's set-up, long before anyone can ask, except
        // right after a first blocking command opened it: then it is a round trip away.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut id = node_id.load(Ordering::Relaxed);
        while id == 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            id = node_id.load(Ordering::Relaxed);
        }
        match id {
            0 => Bytes::from_static(b":0\r\n"),
            id => {
                let id = id.to_string();
                let mut argv: Vec<&[u8]> = vec![b"CLIENT", b"UNBLOCK", id.as_bytes()];
                argv.extend(reason);
                let answer = match NodeConn::connect(&addr, auth.as_ref(), tls.as_deref()).await {
                    Ok(mut conn) => conn.call(&argv).await,
                    Err(e) => Err(e),
                };
                match answer {
                    Ok(Value::Integer(n)) => Bytes::from(format!(":{n}\r\n")),
                    Ok(_) => Bytes::from_static(b":0\r\n"),
                    Err(e) => crate::reply::error(&format!("slotgate: node {addr}: {e}")),
                }
            }
        }
    });
}

/// `+OK` if any node answered it (the one that ran the script), else a FUNCTION STATS
/// reply showing a running function, else the first answer; a node that could not be asked
/// reports why, as other node errors do.
fn merge(replies: &[(&str, Result<Value, String>)], resp3: bool) -> Bytes {
    let ok = replies
        .iter()
        .any(|(_, r)| matches!(r, Ok(Value::SimpleString(s)) if s.as_ref() == b"OK"));
    if ok && replies.len() > 1 {
        return Bytes::from_static(b"+OK\r\n");
    }
    let running = replies
        .iter()
        .find(|(_, r)| r.as_ref().is_ok_and(runs_something));
    match running.or(replies.first()) {
        Some((_, Ok(value))) => {
            let mut out = BytesMut::new();
            match resp3 {
                true => value.encode(&mut out),
                false => value.encode_resp2(&mut out),
            }
            out.freeze()
        }
        Some((addr, Err(e))) => crate::reply::error(&format!("slotgate: node {addr}: {e}")),
        None => crate::reply::error("slotgate: no master to ask"),
    }
}

/// Whether a FUNCTION STATS reply (a map, or in RESP2 a flat array of names and values)
/// shows a running function.
fn runs_something(reply: &Value) -> bool {
    let running = |name: &Value, value: &Value| {
        matches!(name, Value::BulkString(n) if n.as_ref() == b"running_script")
            && !matches!(value, Value::Null | Value::NullArray)
    };
    match reply {
        Value::Map(pairs) => pairs.iter().any(|(n, v)| running(n, v)),
        Value::Array(items) => items
            .chunks(2)
            .any(|p| p.len() == 2 && running(&p[0], &p[1])),
        _ => false,
    }
}
