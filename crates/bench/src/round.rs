//! One send/receive round of a client's batch: every node's share leaves in one write, then
//! each node's replies are framed in order. Redirects found here are followed in the next
//! round; connection failures and timeouts are counted per unanswered request, never retried
//! blindly (a request whose outcome is unknown is an error, not a second chance).

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use cluster::{parse_redirect, Host, Redirect};

use crate::client::{Client, Route, ASKING};
use crate::conn::Conn;

const ASKING_CMD: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

/// Why a node's in-flight requests were lost.
#[derive(Clone, Copy)]
enum Loss {
    Timeout,
    Connection,
}

impl Client {
    /// Sends `todo`, reads every reply, and fills `redirects` when `follow` is set.
    pub(crate) async fn send_round(&mut self, follow: bool) {
        let todo = std::mem::take(&mut self.todo);
        // A node that refused once this round is not dialled again for each of its requests
        // (a black-holed node would otherwise cost one connect timeout per request). Nodes 64
        // indexes apart share a bit: at worst a request fails fast once, in big clusters.
        let mut unreachable: u64 = 0;
        for &(req, node, ask) in &todo {
            let bit = 1u64 << (node % 64);
            if unreachable & bit != 0 || !self.ensure_conn(node).await {
                unreachable |= bit;
                self.lose(req, Loss::Connection);
                continue;
            }
            let (a, b, _) = self.spans[req as usize];
            let nd = &mut self.nodes[node];
            let Some(conn) = nd.conn.as_mut() else {
                continue;
            };
            if ask {
                conn.wbuf.extend_from_slice(ASKING_CMD);
                nd.sent.push(ASKING);
            }
            conn.wbuf.extend_from_slice(&self.batch[a..b]);
            nd.sent.push(req);
        }
        self.todo = todo;
        self.todo.clear();
        for i in 0..self.nodes.len() {
            if self.nodes[i].sent.is_empty() {
                continue;
            }
            let flushed = match self.nodes[i].conn.as_mut() {
                Some(c) => c.flush().await.is_ok(),
                None => false,
            };
            if !flushed {
                self.fail_node(i, 0, Loss::Connection);
            }
        }
        for i in 0..self.nodes.len() {
            if !self.nodes[i].sent.is_empty() {
                self.receive(i, follow).await;
            }
        }
    }

    /// Frames node `i`'s replies within the timeout and accounts for each.
    async fn receive(&mut self, i: usize, follow: bool) {
        let timeout = self.plan.timeout;
        let mut got = 0;
        let result = {
            let nd = &mut self.nodes[i];
            let Some(conn) = nd.conn.as_mut() else { return };
            let sent = &nd.sent;
            let ctx = ReplyCtx {
                run: None,
                batch: self.plan.verify.then_some(self.batch.as_slice()),
                t_send: &self.t_send,
                spans: &self.spans,
                redirects: &mut self.redirects,
                stats: &self.stats,
                t0: self.t0,
                from: nd.addr.ip(),
                follow,
            };
            let mut ctx = ctx;
            let n = sent.len();
            let read = conn.read_replies(n, |k, frame, now| {
                got = k + 1;
                ctx.on_reply(sent[k], frame, now);
            });
            let result = tokio::time::timeout(timeout, read).await;
            ctx.flush();
            result
        };
        match result {
            Ok(Ok(())) => self.nodes[i].sent.clear(),
            Ok(Err(_)) => self.fail_node(i, got, Loss::Connection),
            Err(_) => self.fail_node(i, got, Loss::Timeout),
        }
    }

    /// Counts node `i`'s requests from `answered` on as lost and drops the connection.
    fn fail_node(&mut self, i: usize, answered: usize, why: Loss) {
        let sent = std::mem::take(&mut self.nodes[i].sent);
        for &req in &sent[answered.min(sent.len())..] {
            if req != ASKING {
                self.lose(req, why);
            }
        }
        self.nodes[i].sent = sent;
        self.nodes[i].sent.clear();
        self.nodes[i].conn = None;
        self.backoff = true;
        if let Route::Cluster(topo) = &self.route {
            topo.kick(&mut self.rng);
        }
    }

    fn lose(&mut self, _req: u32, why: Loss) {
        let at = self.t0.elapsed();
        let mut st = self.stats.borrow_mut();
        match why {
            Loss::Timeout => st.errors.timeout += 1,
            Loss::Connection => st.errors.connection += 1,
        }
        st.error_at(at);
    }

    /// Connects node `i` if it has no connection; false when that fails.
    async fn ensure_conn(&mut self, i: usize) -> bool {
        if self.nodes[i].conn.is_some() {
            return true;
        }
        let addr = self.nodes[i].addr;
        match tokio::time::timeout(self.plan.timeout, Conn::connect(addr)).await {
            Ok(Ok(c)) => {
                self.nodes[i].conn = Some(c);
                true
            }
            _ => {
                self.backoff = true;
                // The node may be gone for good (failover): learn the new owner.
                if let Route::Cluster(topo) = &self.route {
                    topo.kick(&mut self.rng);
                }
                false
            }
        }
    }

    /// Turns this round's redirects into the next round's `todo`, updating the topology.
    pub(crate) async fn plan_redirects(&mut self) {
        let redirects = std::mem::take(&mut self.redirects);
        for &(req, addr, ask, slot) in &redirects {
            {
                let mut st = self.stats.borrow_mut();
                if ask {
                    st.followed_ask += 1;
                } else {
                    st.followed_moved += 1;
                }
            }
            if let (false, Route::Cluster(topo)) = (ask, &self.route) {
                let topo = topo.clone();
                topo.on_moved(slot, &addr.to_string(), &mut self.rng).await;
            }
            let node = self.node_index(addr);
            self.todo.push((req, node, ask));
        }
        self.redirects = redirects;
        self.redirects.clear();
    }
}

/// What reply accounting needs, borrowed from the client while a read is in progress.
struct ReplyCtx<'a> {
    /// A run of successes not yet recorded: (sent, arrived, count).
    run: Option<(Instant, Instant, u64)>,
    /// The batch's request bytes when replies are verified.
    batch: Option<&'a [u8]>,
    t_send: &'a [Instant],
    spans: &'a [(usize, usize, u16)],
    redirects: &'a mut Vec<(u32, SocketAddr, bool, u16)>,
    stats: &'a std::cell::RefCell<crate::stats::Stats>,
    t0: Instant,
    from: IpAddr,
    follow: bool,
}

impl ReplyCtx<'_> {
    /// Records the pending run of successes.
    fn flush(&mut self) {
        if let Some((s, n, count)) = self.run.take() {
            let at = n.saturating_duration_since(self.t0);
            self.stats
                .borrow_mut()
                .ok_n(n.saturating_duration_since(s), at, count);
        }
    }

    fn on_reply(&mut self, req: u32, frame: &[u8], now: Instant) {
        if req == ASKING {
            return;
        }
        let at = now.saturating_duration_since(self.t0);
        let mut st = self.stats.borrow_mut();
        if !resp::is_error_frame(frame) {
            if let Some(batch) = self.batch {
                let (a, b, _) = self.spans[req as usize];
                if !crate::workload::reply_matches(&batch[a..b], frame) {
                    st.crossed += 1;
                }
            }
            let sent = self.t_send[req as usize];
            // Replies framed from one read share `now`, and a closed-loop batch shares `sent`:
            // count runs of equal latency and record each run once.
            match &mut self.run {
                Some((s, n, count)) if *s == sent && *n == now => *count += 1,
                run => {
                    if let Some((s, n, count)) = run.replace((sent, now, 1)) {
                        st.ok_n(
                            n.saturating_duration_since(s),
                            n.saturating_duration_since(self.t0),
                            count,
                        );
                    }
                }
            }
            return;
        }
        if self.follow {
            if let Some((to, ask)) = redirect_target(frame, self.from) {
                let slot = self.spans[req as usize].2;
                self.redirects.push((req, to, ask, slot));
                return;
            }
        }
        st.errors.count_frame(frame);
        st.error_at(at);
    }
}

/// The target of a `-MOVED`/`-ASK` frame; `None` for other errors or unusable endpoints.
fn redirect_target(frame: &[u8], from: IpAddr) -> Option<(SocketAddr, bool)> {
    let line = frame.get(1..frame.len().checked_sub(2)?)?;
    let (to, ask) = match parse_redirect(line)? {
        Redirect::Moved { to, .. } => (to, false),
        Redirect::Ask { to, .. } => (to, true),
    };
    let ip = match to.host {
        Host::Same => from,
        Host::Name(h) => h.parse().ok()?,
        Host::Unknown => return None,
    };
    Some((SocketAddr::new(ip, to.port), ask))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_targets() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let (a, ask) = redirect_target(b"-MOVED 3999 127.0.0.1:7001\r\n", ip).unwrap();
        assert_eq!((a.port(), ask), (7001, false));
        let (a, ask) = redirect_target(b"-ASK 1 :7002\r\n", ip).unwrap();
        assert_eq!((a, ask), ("127.0.0.1:7002".parse().unwrap(), true));
        assert!(redirect_target(b"-ERR nope\r\n", ip).is_none());
        assert!(redirect_target(b"-", ip).is_none());
    }
}
