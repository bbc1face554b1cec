//! The identity sampler: every master's `INFO server`, the lowest published
//! (`crate::identity`), on the topology thread beside the refresher. A master seen for the
//! first time, or restarted (a new `run_id`), is also asked `COMMAND INFO`, and once every
//! master has answered, what they all know is installed as the command table's learned part
//! (`cluster::command::learn`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ::topology::Topology;

use crate::identity::{Identity, ServerIdentity};
use crate::node_query::NodeConn;
use crate::tls::Connector;

/// Pause between two rounds once a master answered; a rolling upgrade is seen this late.
const EVERY: Duration = Duration::from_secs(5);
/// Pause while no master answered yet (start-up).
const FIRST: Duration = Duration::from_millis(200);
/// A master that does not answer this fast is skipped for the round.
const TIMEOUT: Duration = Duration::from_millis(500);

/// Sample the masters for ever (the caller drops it at shutdown).
pub(crate) async fn run_sampler(
    identity: Arc<Identity>,
    topology: Arc<Topology>,
    auth: Option<bytes::Bytes>,
    tls: Option<Arc<Connector>>,
) {
    let mut conns: HashMap<String, NodeConn> = HashMap::new();
    let mut commands = Commands::default();
    // Each master's `cluster-databases`, with the `run_id` it was read under (immutable
    // config: a node changes it only by restarting).
    let mut databases: HashMap<String, (String, u32)> = HashMap::new();
    let mut first = true;
    loop {
        let map = topology.current();
        let mut lowest: Option<ServerIdentity> = None;
        for master in map.nodes() {
            let Some((mut id, run_id)) =
                sample(&mut conns, &master.addr, auth.as_ref(), tls.as_deref()).await
            else {
                continue;
            };
            if id.numbered_databases() {
                let known = databases.get(&master.addr).filter(|(r, _)| *r == run_id);
                let count = match known {
                    Some((_, n)) => Some(*n),
                    None => match conns.get_mut(&master.addr) {
                        Some(conn) => cluster_databases(conn, &master.addr).await,
                        None => None,
                    },
                };
                match count {
                    Some(n) => {
                        databases.insert(master.addr.clone(), (run_id.clone(), n));
                        id.databases = n;
                    }
                    // Not known yet (a timeout): the master is left out of this round.
                    None => {
                        conns.remove(&master.addr);
                        continue;
                    }
                }
            }
            if commands.stale(&master.addr, &run_id) {
                let fetched = match conns.get_mut(&master.addr) {
                    Some(conn) => commands.fetch(conn, &master.addr, run_id).await,
                    None => false,
                };
                if !fetched {
                    // A timed-out call leaves its reply on the way: start afresh.
                    conns.remove(&master.addr);
                }
            }
            lowest = Some(match lowest {
                None => id,
                Some(l) => l.lowest(id),
            });
        }
        conns.retain(|addr, _| map.nodes().iter().any(|n| n.addr == *addr));
        databases.retain(|addr, _| map.nodes().iter().any(|n| n.addr == *addr));
        commands.install_if_complete(
            &map.nodes()
                .iter()
                .map(|n| n.addr.as_str())
                .collect::<Vec<_>>(),
        );
        let pause = match lowest {
            Some(id) => {
                identity.publish(id);
                EVERY
            }
            None => FIRST,
        };
        if std::mem::take(&mut first) {
            identity.first_round_done();
        }
        tokio::time::sleep(pause).await;
    }
}

/// Each master's commands, by address, with the `run_id` they were read under.
#[derive(Default)]
struct Commands {
    nodes: HashMap<String, (String, cluster::command::learn::NodeCommands)>,
    /// The masters and run ids of the table installed last.
    installed: Vec<(String, String)>,
}

impl Commands {
    fn stale(&self, addr: &str, run_id: &str) -> bool {
        self.nodes.get(addr).is_none_or(|(id, _)| id != run_id)
    }

    /// `COMMAND INFO` from one master; a failure is retried next round.
    async fn fetch(&mut self, conn: &mut NodeConn, addr: &str, run_id: String) -> bool {
        match conn.call(&[b"COMMAND", b"INFO"]).await {
            Ok(reply) => {
                let table = cluster::command::learn::NodeCommands::parse(&reply);
                self.nodes.insert(addr.to_string(), (run_id, table));
                true
            }
            Err(error) => {
                tracing::debug!(%addr, %error, "COMMAND INFO failed");
                false
            }
        }
    }

    /// Once every master of the map has answered, install what they share (when that
    /// changed: a master added, gone or restarted).
    fn install_if_complete(&mut self, masters: &[&str]) {
        self.nodes
            .retain(|addr, _| masters.contains(&addr.as_str()));
        let mut now: Vec<(String, String)> = Vec::new();
        for addr in masters {
            let Some((run_id, _)) = self.nodes.get(*addr) else {
                return;
            };
            now.push((addr.to_string(), run_id.clone()));
        }
        now.sort();
        if now.is_empty() || now == self.installed {
            return;
        }
        let tables: Vec<_> = self.nodes.values().map(|(_, t)| t.clone()).collect();
        if tables.iter().all(|t| t.is_empty()) {
            // A backend user refused COMMAND (NOPERM), or an answer that did not parse.
            tracing::warn!("no master described its commands; routing by the built-in table");
            self.installed = now;
            return;
        }
        match cluster::command::learn::install(&tables) {
            Some(s) => tracing::info!(
                masters = s.nodes,
                added = s.added,
                changed = s.changed,
                partial = s.partial,
                "command table learned from the masters"
            ),
            None => tracing::warn!("too many distinct command tables; keeping the last one"),
        }
        self.installed = now;
    }
}

/// A Valkey 9 master's `cluster-databases`; 1 when the backend user may not read the
/// config (SELECT then only knows database 0), None when it did not answer in time.
async fn cluster_databases(conn: &mut NodeConn, addr: &str) -> Option<u32> {
    let call = conn.call(&[b"CONFIG", b"GET", b"cluster-databases"]);
    match tokio::time::timeout(TIMEOUT, call).await {
        Ok(Ok(resp::Value::Array(items))) => {
            let value = match items.get(1) {
                Some(resp::Value::BulkString(b)) => std::str::from_utf8(b).ok(),
                _ => None,
            };
            Some(value.and_then(|v| v.parse().ok()).unwrap_or(1))
        }
        Ok(Ok(resp::Value::Map(pairs))) => {
            let value = match pairs.first() {
                Some((_, resp::Value::BulkString(b))) => std::str::from_utf8(b).ok(),
                _ => None,
            };
            Some(value.and_then(|v| v.parse().ok()).unwrap_or(1))
        }
        Ok(Ok(other)) => {
            tracing::warn!(%addr, reply = ?other, "CONFIG GET cluster-databases refused; SELECT serves database 0 only");
            Some(1)
        }
        Ok(Err(error)) => {
            tracing::warn!(%addr, %error, "CONFIG GET cluster-databases failed; SELECT serves database 0 only");
            Some(1)
        }
        Err(_) => None,
    }
}

/// One master's identity and `run_id`; None when it did not answer in time.
async fn sample(
    conns: &mut HashMap<String, NodeConn>,
    addr: &str,
    auth: Option<&bytes::Bytes>,
    tls: Option<&crate::tls::Connector>,
) -> Option<(ServerIdentity, String)> {
    const ARGS: &[&[u8]] = &[b"INFO", b"server"];
    let reply = tokio::time::timeout(TIMEOUT, async {
        if !conns.contains_key(addr) {
            let conn = NodeConn::connect(addr, auth, tls).await.ok()?;
            conns.insert(addr.to_string(), conn);
        }
        conns.get_mut(addr)?.call(ARGS).await.ok()
    })
    .await;
    match reply {
        Ok(Some(resp::Value::BulkString(b))) => {
            let text = String::from_utf8_lossy(&b);
            let run_id = text
                .lines()
                .find_map(|l| l.trim_end().strip_prefix("run_id:"))
                .unwrap_or_default()
                .to_string();
            Some((ServerIdentity::parse(&text)?, run_id))
        }
        // A timeout leaves a reply on its way: the connection cannot be reused.
        _ => {
            conns.remove(addr);
            None
        }
    }
}
