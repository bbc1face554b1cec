//! The identity sampler: every master's `INFO server`, the lowest published
//! (`crate::identity`), on the topology thread beside the refresher.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::{Tls, Topology};
use crate::identity::{Identity, ServerIdentity};
use crate::node_query::NodeConn;

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
    tls: Tls,
) {
    let mut conns: HashMap<String, NodeConn> = HashMap::new();
    loop {
        let map = topology.current();
        let mut lowest: Option<ServerIdentity> = None;
        for master in map.nodes() {
            let Some(id) = sample(&mut conns, &master.addr, auth.as_ref(), tls.as_deref()).await
            else {
                continue;
            };
            lowest = Some(match lowest {
                None => id,
                Some(l) => l.lowest(id),
            });
        }
        conns.retain(|addr, _| map.nodes().iter().any(|n| n.addr == *addr));
        let pause = match lowest {
            Some(id) => {
                identity.publish(id);
                EVERY
            }
            None => FIRST,
        };
        tokio::time::sleep(pause).await;
    }
}

/// One master's identity; None when it did not answer in time.
async fn sample(
    conns: &mut HashMap<String, NodeConn>,
    addr: &str,
    auth: Option<&bytes::Bytes>,
    tls: Option<&crate::tls::Connector>,
) -> Option<ServerIdentity> {
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
        Ok(Some(resp::Value::BulkString(b))) => ServerIdentity::parse(&String::from_utf8_lossy(&b)),
        // A timeout leaves a reply on its way: the connection cannot be reused.
        _ => {
            conns.remove(addr);
            None
        }
    }
}
