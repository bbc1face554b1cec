//! WAIT's probe (see `wait.rs`): how many replicas of each master the client wrote to have
//! acknowledged the replication offset its writes reached, over the probe's own
//! connections, until enough have or the timeout passes.

use std::time::Duration;

use bytes::Bytes;
use resp::Value;
use tokio::time::Instant;

use crate::node_query::NodeConn;
use crate::session::queue::ClientCell;

/// What one WAIT asks.
pub(crate) struct Probe {
    /// The masters to count replicas on (those the client wrote to).
    pub masters: Vec<String>,
    /// False: the client wrote nothing, and any replica counts (offset 0), as in Redis.
    pub wrote: bool,
    pub numreplicas: i64,
    /// 0: no limit.
    pub timeout_ms: u64,
    pub auth: Option<Bytes>,
    /// TLS towards the nodes, when configured.
    pub tls: Option<std::sync::Arc<crate::tls::Connector>>,
}

/// The longest pause between two counts.
const MAX_STEP: Duration = Duration::from_millis(100);
/// `WAIT <huge> 1`: blocks 1 ms on the probe's own connection and makes the master ask its
/// replicas for an acknowledgement (REPLCONF GETACK) at once, instead of within a second.
const ASK_ACKS: &[&[u8]] = &[b"WAIT", b"2147483647", b"1"];

/// One master as the probe sees it.
struct Master {
    addr: String,
    conn: Option<NodeConn>,
    /// The offset its replicas must reach: its `master_repl_offset` when first read.
    target: Option<i64>,
}

/// The least number of replicas that acknowledged, over the masters: as soon as it reaches
/// `numreplicas`, else when the timeout passes or the client leaves.
pub(crate) async fn probe(plan: Probe, cell: &ClientCell) -> i64 {
    let deadline =
        (plan.timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(plan.timeout_ms));
    let mut masters: Vec<Master> = plan
        .masters
        .iter()
        .map(|addr| Master {
            addr: addr.clone(),
            conn: None,
            target: (!plan.wrote).then_some(0),
        })
        .collect();
    let mut step = Duration::from_millis(5);
    loop {
        let mut least = if masters.is_empty() { 0 } else { i64::MAX };
        for m in masters.iter_mut() {
            least = least.min(m.acked(plan.auth.as_ref(), plan.tls.as_deref()).await);
        }
        let out_of_time = deadline.is_some_and(|d| Instant::now() >= d);
        if least >= plan.numreplicas || out_of_time || cell.is_closed() {
            return least;
        }
        for m in masters.iter_mut() {
            if let Some(conn) = m.conn.as_mut() {
                let _ = conn.call(ASK_ACKS).await;
            }
        }
        let left = deadline.map_or(step, |d| d.saturating_duration_since(Instant::now()));
        tokio::time::sleep(step.min(left)).await;
        step = (step * 2).min(MAX_STEP);
    }
}

impl Master {
    /// Its online replicas at or past the target; 0 while it cannot be asked.
    async fn acked(&mut self, auth: Option<&Bytes>, tls: Option<&crate::tls::Connector>) -> i64 {
        if self.conn.is_none() {
            self.conn = NodeConn::connect(&self.addr, auth, tls).await.ok();
        }
        let Some(conn) = self.conn.as_mut() else {
            return 0;
        };
        let info = match conn.call(&[b"INFO", b"replication"]).await {
            Ok(Value::BulkString(text)) => text,
            _ => {
                self.conn = None;
                return 0;
            }
        };
        let text = String::from_utf8_lossy(&info);
        let target = *self.target.get_or_insert_with(|| repl_offset(&text));
        count_acked(&text, target)
    }
}

/// `master_repl_offset` from INFO replication.
fn repl_offset(info: &str) -> i64 {
    info.lines()
        .find_map(|l| {
            l.trim_end()
                .strip_prefix("master_repl_offset:")?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The `slaveN:…,state=online,offset=X,…` lines with X at or past `target`.
fn count_acked(info: &str, target: i64) -> i64 {
    let acked = info.lines().filter(|l| {
        let Some((key, fields)) = l.trim_end().split_once(':') else {
            return false;
        };
        let field = |name: &str| {
            fields
                .split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        };
        key.starts_with("slave")
            && field("state") == Some("online")
            && field("offset")
                .and_then(|o| o.parse::<i64>().ok())
                .is_some_and(|o| o >= target)
    });
    acked.count() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_online_replicas_at_or_past_the_target() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
            slave0:ip=127.0.0.1,port=1,state=online,offset=100,lag=0\r\n\
            slave1:ip=127.0.0.1,port=2,state=online,offset=99,lag=0\r\n\
            slave2:ip=127.0.0.1,port=3,state=wait_bgsave,offset=200,lag=0\r\n\
            master_repl_offset:100\r\n";
        assert_eq!(repl_offset(info), 100);
        assert_eq!(count_acked(info, 100), 1);
        assert_eq!(count_acked(info, 0), 2);
        assert_eq!(count_acked("role:master\r\n", 0), 0);
    }
}
