//! MONITOR: a client that ran it gets a line for every command any client of the proxy
//! runs (`context/monitor.rs` carries the lines across workers), in Redis's format:
//! `+<seconds>.<microseconds> [<db> <client address>] "arg" "arg" …`, each argument quoted
//! and escaped as Redis's `sdscatrepr`, secrets `(redacted)` as Redis redacts them.
//!
//! Lines are the proxy's view: commands as the proxy admitted them (past AUTH, ACL and the
//! shape checks, so refused ones are not shown, as Redis does not show them), with the
//! clients' own addresses. Admin commands are left out, as Redis leaves them out.
//!
//! What a script or function runs inside a node comes from the masters' own MONITOR, which
//! one task follows while anyone monitors (`follow_nodes`): only the scripts' lines.
//!
//! While monitoring, the client may run what does not touch the keyspace (PING, CLIENT,
//! INFO, QUIT, RESET: RESET ends it); a command that reads or writes keys gets Redis's
//! `-ERR Replica can't interact with the keyspace`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::task::Waker;

use bytes::{BufMut, Bytes, BytesMut};
use cluster::command::{flags, CommandSpec};
use resp::Request;

use crate::context::monitor::Feed;
use crate::context::Shared;
use crate::session::queue::{ClientCell, Entry};

const KEYSPACE: &[u8] = b"-ERR Replica can't interact with the keyspace\r\n";

/// A session's MONITOR state: its feed while it monitors.
#[derive(Default)]
pub(crate) struct ClientMonitor {
    feed: Option<Arc<Feed>>,
}

impl ClientMonitor {
    pub(crate) fn is_on(&self) -> bool {
        self.feed.is_some()
    }

    /// MONITOR: start receiving lines (again MONITOR: nothing changes). `+OK` once the
    /// masters' own MONITOR answered (at most `FOLLOW_WAIT`), so that what a script runs
    /// right after is seen.
    pub(crate) fn start(&mut self, shared: &Arc<Shared>, cell: &Rc<ClientCell>) {
        if self.feed.is_none() {
            self.feed = Some(shared.monitors.subscribe());
            follow_nodes(shared);
        }
        let seq = cell.push(Entry::pending_local());
        let (shared, cell) = (shared.clone(), cell.clone());
        tokio::task::spawn_local(async move {
            let deadline = tokio::time::Instant::now() + FOLLOW_WAIT;
            while shared.monitors.nodes_pending.load(SeqCst) > 0
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            cell.deliver_local(seq, Bytes::from_static(b"+OK\r\n"));
        });
    }

    /// RESET, or the session ends.
    pub(crate) fn stop(&mut self, shared: &Shared) {
        if let Some(feed) = self.feed.take() {
            shared.monitors.unsubscribe(&feed);
        }
    }

    /// The lines waiting, moved to `out`; their bytes, or None when the monitor fell too
    /// far behind and must be closed.
    pub(crate) fn take(&self, out: &mut VecDeque<Bytes>, waker: &Waker) -> Option<usize> {
        match &self.feed {
            Some(feed) => feed.take(out, waker),
            None => Some(0),
        }
    }

    /// A monitoring client's command that touches keys: Redis's refusal.
    pub(crate) fn refusal(&self, spec: &CommandSpec) -> Option<Bytes> {
        let keyspace = flags::WRITE | flags::READONLY | flags::MAY_REPLICATE;
        (self.feed.is_some() && spec.flags & keyspace != 0).then(|| Bytes::from_static(KEYSPACE))
    }
}

/// Give every monitor the line for `req`, run by the client at `peer` in database `db`.
/// The caller checked `shared.monitors.active()`.
pub(crate) fn feed(shared: &Shared, req: &Request, db: u16, peer: Option<SocketAddr>) {
    let Some(spec) = cluster::lookup(req.arg(0)) else {
        return;
    };
    let spec = spec.resolve(req.argc(), |i| req.arg(i));
    // `skip_monitor` marks only the scripts, which Redis feeds from their own code before
    // they run: fed here like the rest.
    if spec.has(flags::ADMIN) {
        return;
    }
    shared.monitors.feed(&line(req, db, peer));
}

/// The line, as Redis's `replicationFeedMonitors` writes it.
fn line(req: &Request, db: u16, peer: Option<SocketAddr>) -> Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let addr = peer.map_or_else(|| "?:0".to_string(), |p| p.to_string());
    let mut out = BytesMut::new();
    out.put_slice(
        format!(
            "+{}.{:06} [{db} {addr}]",
            now.as_secs(),
            now.subsec_micros()
        )
        .as_bytes(),
    );
    for i in 0..req.argc() {
        out.put_u8(b' ');
        match crate::redact::argument(req, i) {
            true => repr(&mut out, b"(redacted)"),
            false => repr(&mut out, req.arg(i)),
        }
    }
    out.put_slice(b"\r\n");
    out.freeze()
}

/// Redis's `sdscatrepr`: quoted, `\\ \" \n \r \t \a \b` escaped, other bytes that are not
/// printable as `\xHH`.
fn repr(out: &mut BytesMut, arg: &[u8]) {
    out.put_u8(b'"');
    for &b in arg {
        match b {
            b'\\' => out.put_slice(b"\\\\"),
            b'"' => out.put_slice(b"\\\""),
            b'\n' => out.put_slice(b"\\n"),
            b'\r' => out.put_slice(b"\\r"),
            b'\t' => out.put_slice(b"\\t"),
            7 => out.put_slice(b"\\a"),
            8 => out.put_slice(b"\\b"),
            0x20..=0x7e => out.put_u8(b),
            _ => out.put_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.put_u8(b'"');
}

/// The longest a new monitor's `+OK` waits for the masters' MONITOR.
const FOLLOW_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How often the nodes' follower looks whether anyone still monitors.
const FOLLOW_TICK: std::time::Duration = std::time::Duration::from_millis(200);

/// The commands a script or function runs happen inside a node, where the proxy does not
/// see them: while anyone monitors, one task per proxy runs MONITOR on every master (on its
/// own connections, as the backend user) and passes on only the lines of scripts
/// (`[<db> lua]`), which follow the EVAL or FCALL line the proxy wrote. Masters that join
/// later are followed from the next time monitoring starts.
pub(crate) fn follow_nodes(shared: &Arc<Shared>) {
    let following = &shared.monitors.following_nodes;
    if following
        .compare_exchange(false, true, SeqCst, SeqCst)
        .is_err()
    {
        return;
    }
    let shared = shared.clone();
    // Counted now, before the task runs: the monitor's `+OK` waits for these.
    let mut map = shared.topology.current();
    shared
        .monitors
        .nodes_pending
        .store(map.nodes().len(), SeqCst);
    tokio::task::spawn_local(async move {
        loop {
            let stop = std::rc::Rc::new(std::cell::Cell::new(false));
            for node in map.nodes() {
                let task = follow_node(shared.clone(), node.addr.clone(), stop.clone());
                tokio::task::spawn_local(task);
            }
            while shared.monitors.active() {
                tokio::time::sleep(FOLLOW_TICK).await;
            }
            stop.set(true);
            shared.monitors.following_nodes.store(false, SeqCst);
            // A monitor that came just now found the flag still set: follow for it.
            let following = &shared.monitors.following_nodes;
            if !shared.monitors.active()
                || following
                    .compare_exchange(false, true, SeqCst, SeqCst)
                    .is_err()
            {
                return;
            }
            map = shared.topology.current();
            shared
                .monitors
                .nodes_pending
                .store(map.nodes().len(), SeqCst);
        }
    });
}

async fn follow_node(shared: Arc<Shared>, addr: String, stop: std::rc::Rc<std::cell::Cell<bool>>) {
    let auth = shared.backend_auth.clone();
    let tls = shared.backend_tls.clone();
    let conn = crate::node_query::NodeConn::connect(&addr, auth.as_ref(), tls.as_deref());
    let conn = match conn.await {
        Ok(mut conn) => conn.call(&[b"MONITOR"]).await.map(|_| conn),
        Err(e) => Err(e),
    };
    shared.monitors.nodes_pending.fetch_sub(1, SeqCst);
    let Ok(mut conn) = conn else {
        return;
    };
    while !stop.get() {
        match tokio::time::timeout(FOLLOW_TICK, conn.next_reply()).await {
            Err(_) => continue,
            Ok(Err(_)) => return,
            Ok(Ok(resp::Value::SimpleString(line))) => {
                if line.windows(6).any(|w| w == b" lua] ") {
                    let mut out = BytesMut::with_capacity(line.len() + 3);
                    out.put_u8(b'+');
                    out.put_slice(&line);
                    out.put_slice(b"\r\n");
                    shared.monitors.feed(&out.freeze());
                }
            }
            Ok(Ok(_)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_read_as_redis_writes_them() {
        let mut out = BytesMut::new();
        repr(&mut out, "a\"b\\c\n\x01é".as_bytes());
        // As redis-server 7.0.15 printed the same argument.
        assert_eq!(&out[..], br#""a\"b\\c\n\x01\xc3\xa9""#);
    }
}
