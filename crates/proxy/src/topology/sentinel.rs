//! A Sentinel-managed master as the proxy's topology: the map has one slot (0, which
//! `Placement::One` routes every key to), owned by the master the sentinels name, with the
//! replicas they list as healthy.
//!
//! ```text
//!   refresher (throttled, periodic) ──▶ SENTINEL GET-MASTER-ADDR-BY-NAME + REPLICAS ──▶ map
//!   follower: SUBSCRIBE +switch-master on a sentinel ──▶ slot 0 patched at once
//!                                                        (learn_moved), then a refresh
//! ```
//!
//! The follower makes the switch as soon as a sentinel announces it, without waiting for
//! the refresher's interval; requests that never reached the dead master wait for it in
//! the failover hold (`session/redirect/hold.rs`), and those written to it before it died
//! fail as "may or may not have run", as in front of a cluster.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use cluster::slot_map::{join_host_port, NodeEntry, SlotMap, SlotRange};
use resp::Value;

use ::topology::Topology;

use crate::config::SentinelConfig;
use crate::node_query::NodeConn;

/// TLS towards the sentinels: the nodes' (`backend_tls`), when enabled.
type Tls = Option<Arc<crate::tls::Connector>>;

/// `AUTH password` for the sentinels, encoded once.
fn sentinel_auth(cfg: &SentinelConfig) -> Option<Bytes> {
    if cfg.password.is_empty() {
        return None;
    }
    let mut frame = BytesMut::new();
    resp::encode_command(&mut frame, &[b"AUTH", cfg.password.expose().as_bytes()]);
    Some(frame.freeze())
}

/// Maps read from the sentinels, over one kept connection per sentinel.
pub(crate) struct SentinelSource {
    sentinels: Vec<String>,
    name: String,
    auth: Option<Bytes>,
    tls: Tls,
    conns: HashMap<String, NodeConn>,
}

impl SentinelSource {
    pub(crate) fn new(cfg: &SentinelConfig, tls: Tls) -> SentinelSource {
        SentinelSource {
            sentinels: cfg.sentinels.clone(),
            name: cfg.master_name.clone(),
            auth: sentinel_auth(cfg),
            tls,
            conns: HashMap::new(),
        }
    }

    async fn call(&mut self, sentinel: &str, args: &[&[u8]]) -> Result<Value, String> {
        let conn = match self.conns.remove(sentinel) {
            Some(conn) => conn,
            None => NodeConn::connect(sentinel, self.auth.as_ref(), self.tls.as_deref()).await?,
        };
        let mut conn = conn;
        let reply = conn.call(args).await?;
        self.conns.insert(sentinel.to_string(), conn);
        match reply {
            Value::Error(e) => Err(String::from_utf8_lossy(&e).into_owned()),
            v => Ok(v),
        }
    }

    /// One sentinel's view: its master for the name and the replicas it considers healthy.
    async fn ask(&mut self, sentinel: &str, version: u64) -> Result<SlotMap, String> {
        let name = self.name.clone();
        let reply = self
            .call(
                sentinel,
                &[b"SENTINEL", b"GET-MASTER-ADDR-BY-NAME", name.as_bytes()],
            )
            .await?;
        let master = match &reply {
            Value::Array(parts) if parts.len() == 2 => {
                address(&parts[0], &parts[1]).ok_or("malformed master address")?
            }
            _ => return Err(format!("no master named {name:?}")),
        };
        let replicas = match self
            .call(sentinel, &[b"SENTINEL", b"REPLICAS", name.as_bytes()])
            .await
        {
            Ok(Value::Array(list)) => list.iter().filter_map(healthy_replica).collect(),
            _ => Vec::new(),
        };
        let range = SlotRange {
            start: 0,
            end: 0,
            master: NodeEntry {
                addr: master,
                id: None,
                replicas,
            },
        };
        SlotMap::from_ranges(version, &[range]).map_err(|e| e.to_string())
    }
}

impl SentinelSource {
    /// The master the first sentinel that answers names (a migration's source,
    /// `migration/copier.rs`).
    pub(crate) async fn master(&mut self) -> Result<String, String> {
        let map = ::topology::Source::fetch(self, "", 0).await?;
        map.node_of(0)
            .map(|n| n.addr.to_string())
            .ok_or_else(|| "no master".to_string())
    }
}

impl ::topology::Source for SentinelSource {
    type Error = String;

    /// `addr` is a node of the current map; the answer comes from the sentinels, the first
    /// that answers, in configuration order.
    async fn fetch(&mut self, _addr: &str, version: u64) -> Result<SlotMap, String> {
        let mut last = String::from("no sentinel configured");
        for sentinel in self.sentinels.clone() {
            match self.ask(&sentinel, version).await {
                Ok(map) => return Ok(map),
                Err(e) => {
                    self.conns.remove(&sentinel);
                    last = format!("sentinel {sentinel}: {e}");
                }
            }
        }
        Err(last)
    }
}

/// `host:port` from two bulk strings.
fn address(host: &Value, port: &Value) -> Option<String> {
    let text = |v: &Value| match v {
        Value::BulkString(b) | Value::SimpleString(b) => {
            std::str::from_utf8(b).ok().map(str::to_string)
        }
        _ => None,
    };
    let port: u16 = text(port)?.parse().ok()?;
    Some(join_host_port(&text(host)?, port))
}

/// A replica of SENTINEL REPLICAS (a flat field/value array) that no sentinel marks down.
fn healthy_replica(entry: &Value) -> Option<String> {
    let Value::Array(fields) = entry else {
        return None;
    };
    let field = |name: &[u8]| {
        fields
            .chunks_exact(2)
            .find(|kv| matches!(&kv[0], Value::BulkString(k) if k.as_ref() == name))
            .map(|kv| &kv[1])
    };
    let flags = match field(b"flags") {
        Some(Value::BulkString(f)) => String::from_utf8_lossy(f).into_owned(),
        _ => String::new(),
    };
    let down = ["s_down", "o_down", "disconnected"];
    if down.iter().any(|d| flags.split(',').any(|f| f == *d)) {
        return None;
    }
    address(field(b"ip")?, field(b"port")?)
}

/// Pause between two attempts to subscribe when no sentinel could be reached.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_secs(1);

/// Follow `+switch-master` for the configured name on the first sentinel that accepts the
/// subscription, and on the next one when it goes away: the new master takes slot 0 at
/// once, then a refresh brings its replicas. Never returns.
pub(crate) async fn follow(topo: Arc<Topology>, cfg: SentinelConfig, tls: Tls) {
    let auth = sentinel_auth(&cfg);
    let mut next = 0usize;
    loop {
        let sentinel = &cfg.sentinels[next % cfg.sentinels.len()];
        next += 1;
        match subscribe(sentinel, auth.as_ref(), tls.as_deref()).await {
            Ok(mut conn) => {
                tracing::debug!(%sentinel, "following +switch-master");
                // A failover that happened while no subscription was held.
                topo.request_refresh_now();
                while let Ok(message) = conn.next_reply().await {
                    if let Some(addr) = switched_to(&message, &cfg.master_name) {
                        tracing::info!(%sentinel, master = %addr, "sentinel switched the master");
                        let version = topo.current().version();
                        topo.learn_moved(0, &addr, version);
                        topo.request_refresh_now();
                    }
                }
            }
            Err(e) => {
                tracing::debug!(%sentinel, error = %e, "cannot subscribe to the sentinel");
                tokio::time::sleep(RESUBSCRIBE_PAUSE).await;
            }
        }
    }
}

async fn subscribe(
    sentinel: &str,
    auth: Option<&Bytes>,
    tls: Option<&crate::tls::Connector>,
) -> Result<NodeConn, String> {
    let mut conn = NodeConn::connect(sentinel, auth, tls).await?;
    match conn.call(&[b"SUBSCRIBE", b"+switch-master"]).await? {
        Value::Error(e) => Err(String::from_utf8_lossy(&e).into_owned()),
        _ => Ok(conn),
    }
}

/// The new master's address in a `+switch-master` message about `name`
/// (`<name> <old-ip> <old-port> <new-ip> <new-port>`).
fn switched_to(message: &Value, name: &str) -> Option<String> {
    let Value::Array(parts) = message else {
        return None;
    };
    let Some(Value::BulkString(payload)) = parts.get(2) else {
        return None;
    };
    let text = std::str::from_utf8(payload).ok()?;
    let fields: Vec<&str> = text.split(' ').collect();
    match fields.as_slice() {
        [n, _, _, ip, port] if *n == name => Some(join_host_port(ip, port.parse().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn switch_messages_for_our_master_only() {
        let msg = |payload: &str| {
            Value::Array(vec![bulk("message"), bulk("+switch-master"), bulk(payload)])
        };
        let ours = msg("mymaster 127.0.0.1 6379 127.0.0.1 6380");
        assert_eq!(
            switched_to(&ours, "mymaster").as_deref(),
            Some("127.0.0.1:6380")
        );
        assert_eq!(switched_to(&ours, "other"), None);
        let v6 = msg("mymaster ::1 6379 ::1 6380");
        assert_eq!(switched_to(&v6, "mymaster").as_deref(), Some("[::1]:6380"));
        assert_eq!(switched_to(&msg("garbage"), "mymaster"), None);
    }

    #[test]
    fn replicas_marked_down_are_left_out() {
        let replica = |flags: &str| {
            Value::Array(
                [
                    "name", "x", "ip", "10.0.0.2", "port", "6380", "flags", flags,
                ]
                .iter()
                .map(|s| bulk(s))
                .collect(),
            )
        };
        assert_eq!(
            healthy_replica(&replica("slave")).as_deref(),
            Some("10.0.0.2:6380")
        );
        assert_eq!(healthy_replica(&replica("s_down,slave")), None);
        assert_eq!(healthy_replica(&replica("slave,disconnected")), None);
    }
}
