//! The proxy group's health checks (docs/group.md): every `group.check_interval_ms`, this
//! proxy sends a PING to each other member over a connection it keeps, all members at once,
//! each bounded by `group.check_timeout_ms` (its connect included). A member failing
//! `group.fail_after` checks in a row is no longer advertised in CLUSTER SLOTS/SHARDS/NODES;
//! one answered check brings it back. Any reply counts as an answer, an error included (a
//! member that requires AUTH answers `-NOAUTH`): it proves the member's event loop serves.
//!
//! A member that refuses the connection is dropped at once: nothing listens there any more
//! (killed, or stopped accepting to drain). And a kept connection that closes between two
//! checks starts a round at once, so a killed member, whose kernel closes its sockets,
//! leaves what the others advertise within milliseconds: a cluster-aware client that
//! reloads its slots after its first refused request already finds it gone.
//!
//! ```text
//!   slotgate-group thread ── PING ──▶ each peer's client listener
//!        │ outcome per peer (up after 1 answer, down after fail_after failures)
//!        ▼
//!   GroupState (ArcSwap) ──▶ sessions answer CLUSTER SLOTS from it; INFO group; /metrics
//! ```
//!
//! It runs on its own thread with its own runtime, so a slow or silent peer never delays a
//! worker, and it re-reads `[group]` from the live configuration every round, so a reload
//! changes the members (a reload also wakes it at once).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::{GroupConfig, GroupMembers};
use crate::context::group::{GroupStatus, MemberStatus};
use crate::context::Shared;
use crate::node_query::NodeConn;

/// How often a proxy without a group looks whether a reload gave it one (a reload also
/// wakes it at once).
const IDLE_INTERVAL: Duration = Duration::from_secs(1);

/// One other member and what its checks found.
struct Peer {
    addr: SocketAddr,
    /// Kept between checks: a check is then one round trip, and the peer sees one client.
    conn: Option<NodeConn>,
    up: bool,
    /// Failed checks since the latest answer.
    failing: u32,
    checks_ok: u64,
    checks_failed: u64,
    last_error: String,
}

/// Run the checks on their own thread until `shutdown` turns true.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("slotgate-group".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return tracing::error!(error = %e, "group health checks cannot start"),
            };
            rt.block_on(async move {
                tokio::select! {
                    _ = run(&shared) => {}
                    _ = shutdown.changed() => {}
                }
            });
        })
}

/// Round after round, for ever (the caller stops it).
async fn run(shared: &Shared) {
    let mut peers: Vec<Peer> = Vec::new();
    let mut kept = Kept::default();
    // When the last round started early, on a kept connection's closing.
    let mut last_early: Option<tokio::time::Instant> = None;
    loop {
        let live = shared.live.load_full();
        let cfg: &GroupConfig = &live.config.group;
        let members = kept.members(cfg, &live.config.proxy.listen);
        let interval = match members {
            None => {
                peers.clear();
                shared.group.publish(GroupStatus::default());
                IDLE_INTERVAL
            }
            Some(members) => {
                reconcile(&mut peers, &members);
                let timeout = Duration::from_millis(cfg.check_timeout_ms);
                check_all(&mut peers, timeout, cfg.fail_after).await;
                shared.group.publish(status(&peers, members.me));
                let interval = Duration::from_millis(cfg.check_interval_ms);
                // An advertised member that just failed a check is suspect: clients are
                // still sent to it, so it is checked again after a quarter interval rather
                // than a whole one (HAProxy's `fastinter`), which settles it either way.
                match peers.iter().any(|p| p.up && p.failing > 0) {
                    true => interval / 4,
                    false => interval,
                }
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shared.group.wake.notified() => {}
            _ = any_closed(&mut peers) => {
                // A kill is seen as a close: check at once, since clients reloading their
                // slots meanwhile are sent to the dead member. But a member that answers
                // and then closes (one at its maxclients) would be dialled again at once,
                // round after round, so early rounds come no closer than a quarter
                // interval apart (review S13).
                if let Some(last) = last_early {
                    tokio::time::sleep_until(last + interval / 4).await;
                }
                last_early = Some(tokio::time::Instant::now());
            }
        }
    }
}

/// The last membership that checked out. `Config::validate` checks `[group]` against the
/// running `proxy.listen` before anything is installed, so a bad one should never arrive
/// here; if one does, it is logged (once per configuration) and the group goes on as it
/// was, rather than silently ceasing to advertise its members.
#[derive(Default)]
struct Kept {
    members: Option<GroupMembers>,
    /// The configuration last refused, so it is logged once, not every round.
    refused: Option<(GroupConfig, String)>,
}

impl Kept {
    fn members(&mut self, cfg: &GroupConfig, listen: &str) -> Option<GroupMembers> {
        match cfg.members(listen) {
            Ok(members) => {
                self.refused = None;
                self.members.clone_from(&members);
                members
            }
            Err(e) => {
                let key = (cfg.clone(), listen.to_string());
                if self.refused.as_ref() != Some(&key) {
                    tracing::error!(error = %e, "group configuration unusable; keeping the previous members");
                    self.refused = Some(key);
                }
                self.members.clone()
            }
        }
    }
}

/// Keep what is known of members still configured, in the configured order; new members
/// start unadvertised until they answer.
fn reconcile(peers: &mut Vec<Peer>, members: &GroupMembers) {
    let mut kept: Vec<Peer> = Vec::with_capacity(members.peers.len());
    for addr in members.peers.iter().filter(|a| **a != members.me) {
        let known = peers.iter().position(|p| p.addr == *addr);
        kept.push(match known {
            Some(i) => peers.swap_remove(i),
            None => Peer {
                addr: *addr,
                conn: None,
                up: false,
                failing: 0,
                checks_ok: 0,
                checks_failed: 0,
                last_error: String::new(),
            },
        });
    }
    *peers = kept;
}

/// One check of every peer, concurrently; returns when all are answered or timed out.
async fn check_all(peers: &mut [Peer], timeout: Duration, fail_after: u32) {
    let mut checks = JoinSet::new();
    for (i, peer) in peers.iter_mut().enumerate() {
        let (addr, conn) = (peer.addr, peer.conn.take());
        checks.spawn(async move {
            let outcome = tokio::time::timeout(timeout, ping(addr, conn))
                .await
                .unwrap_or_else(|_| Err(Failure::other(format!("no answer within {timeout:?}"))));
            (i, outcome)
        });
    }
    while let Some(joined) = checks.join_next().await {
        if let Ok((i, outcome)) = joined {
            if let Some(peer) = peers.get_mut(i) {
                record(peer, outcome, fail_after);
            }
        }
    }
}

/// Why a check failed; `refused` when nothing serves at the member's address (the connect
/// is refused, or a new connection closes before its PING is answered).
struct Failure {
    refused: bool,
    text: String,
}

impl Failure {
    fn other(text: String) -> Failure {
        Failure {
            refused: false,
            text,
        }
    }
}

/// PING over the kept connection; if it broke since (its closing may be what started this
/// round), over a new one. The peers get no AUTH: PONG, or NOAUTH from a member that
/// requires a password, proves it serves clients; any other error (`-ERR max number of
/// clients reached`, `-LOADING`…) means a client sent there now would be refused, so the
/// member is not healthy (review S13).
async fn ping(addr: SocketAddr, conn: Option<NodeConn>) -> Result<NodeConn, Failure> {
    if let Some(mut conn) = conn {
        if let Ok(reply) = conn.call_unbounded(&[b"PING"]).await {
            return serving(reply).map(|()| conn);
        }
    }
    // Reset and aborted are refusals too: a SYN that reaches a killed process's listening
    // socket while its kernel tears it down can be answered by a reset, not a refusal (the
    // likely cause of a CI run where a killed member stayed advertised one whole interval).
    let tcp = TcpStream::connect(addr).await.map_err(|e| Failure {
        refused: matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
        ),
        text: e.to_string(),
    })?;
    let mut conn = NodeConn::plain(tcp);
    // A member that accepts a new connection and closes it unanswered serves nobody: it
    // is most likely exiting (a killed process's kernel closes the connections it holds,
    // which starts this round, before its listening socket), so it goes at once, as when
    // it refuses. Waiting for `fail_after` rounds would leave clients that reload their
    // slots meanwhile routing to it (JedisCluster then backs off for seconds).
    let reply = conn.call_unbounded(&[b"PING"]).await.map_err(|e| Failure {
        refused: true,
        text: format!("closed before answering: {e}"),
    })?;
    serving(reply).map(|()| conn)
}

/// Whether a PING's answer shows a member that serves clients.
fn serving(reply: resp::Value) -> Result<(), Failure> {
    match reply {
        resp::Value::Error(e) if !e.starts_with(b"NOAUTH") => Err(Failure::other(
            String::from_utf8_lossy(&e[..e.len().min(120)]).into_owned(),
        )),
        _ => Ok(()),
    }
}

/// Resolves when a kept connection closes (or never, with none kept).
async fn any_closed(peers: &mut [Peer]) {
    let mut waits: Vec<_> = peers
        .iter_mut()
        .filter_map(|p| p.conn.as_mut())
        .map(|c| Box::pin(c.closed()))
        .collect();
    std::future::poll_fn(
        |cx| match waits.iter_mut().any(|w| w.as_mut().poll(cx).is_ready()) {
            true => std::task::Poll::Ready(()),
            false => std::task::Poll::Pending,
        },
    )
    .await
}

/// Count the outcome and move the peer in or out of what is advertised.
fn record(peer: &mut Peer, outcome: Result<NodeConn, Failure>, fail_after: u32) {
    match outcome {
        Ok(conn) => {
            peer.conn = Some(conn);
            peer.checks_ok += 1;
            peer.failing = 0;
            if !peer.up {
                peer.up = true;
                tracing::info!(peer = %peer.addr, "group member answers its checks: advertised");
            }
        }
        Err(failure) => {
            peer.conn = None;
            peer.checks_failed += 1;
            peer.failing = peer.failing.saturating_add(1);
            if peer.up && (failure.refused || peer.failing >= fail_after) {
                peer.up = false;
                tracing::warn!(peer = %peer.addr, error = %failure.text, failed = peer.failing, "group member fails its checks: no longer advertised");
            }
            peer.last_error = failure.text;
        }
    }
}

/// This round's outcome, this proxy included.
fn status(peers: &[Peer], me: SocketAddr) -> GroupStatus {
    let mut members = vec![MemberStatus {
        addr: me,
        me: true,
        up: true,
        checks_ok: 0,
        checks_failed: 0,
        last_error: String::new(),
    }];
    members.extend(peers.iter().map(|p| MemberStatus {
        addr: p.addr,
        me: false,
        up: p.up,
        checks_ok: p.checks_ok,
        checks_failed: p.checks_failed,
        last_error: p.last_error.clone(),
    }));
    GroupStatus { members }
}
