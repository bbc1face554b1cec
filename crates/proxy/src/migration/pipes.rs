//! The connections one thread's movers use (a worker's gate, the copier with its
//! verifier): up to `PIPES` pipelined ones per server and side, so a burst of moves to a
//! server goes in a few writes and reads rather than one round trip each, and one key's
//! big DUMP or RESTORE does not hold every other move to that server.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use resp::Value;
use tokio::sync::{oneshot, Notify};

use super::Migration;
use crate::node_query::NodeConn;
use crate::tls::Connector;

/// Connections per server, side and thread: a burst of clients touching keys not moved
/// yet queues on them (pipelined) rather than dialling one each; more than one, so a big
/// key's DUMP or RESTORE does not hold every other move to its server.
const PIPES: usize = 4;

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
        // A retry wants a connection opened after its failure: one that has not answered
        // yet is that (another caller's retry opened it), so a wave of failures (a server
        // restarted) opens one connection, not one per caller.
        let candidate = match fresh {
            true => list.iter().find(|p| !p.served.get()).cloned(),
            false => list
                .iter()
                .min_by_key(|p| p.owed.get())
                .filter(|p| p.owed.get() == 0 || list.len() >= PIPES)
                .cloned(),
        };
        match candidate {
            Some(p) => p,
            None => {
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

/// A reply shown in an error message, short.
pub(super) fn shown(reply: &Value) -> String {
    match reply {
        Value::Error(e) => String::from_utf8_lossy(&e[..e.len().min(200)]).into_owned(),
        _ => "unexpected reply".into(),
    }
}
