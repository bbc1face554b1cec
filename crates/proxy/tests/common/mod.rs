//! Shared set-up for the proxy's integration tests: a real local Redis Cluster (devcluster,
//! free ports), a proxy in front of it, and a small blocking RESP client.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use proxy::{Config, Proxy};
use resp::Value;

pub mod faults;
pub mod migrate;
pub mod paused;
pub mod reference;
pub mod sentinel;
pub mod slots;
pub mod tls;

/// A cluster and a proxy; both stop when dropped.
pub struct Harness {
    pub proxy: Option<Proxy>,
    pub cluster: devcluster::Cluster,
}

impl Harness {
    /// The replica of the master serving `key` (the cluster has one per master).
    pub fn replica_of(&self, key: &str) -> &devcluster::Node {
        let master = self.cluster.owner_of(key.as_bytes()).unwrap();
        let nodes = self.cluster.nodes();
        let id = &nodes.iter().find(|n| n.addr == master).unwrap().id;
        nodes
            .iter()
            .find(|n| n.master_of.as_deref() == Some(id.as_str()))
            .unwrap()
    }

    pub fn start(masters: usize, replicas: usize) -> Harness {
        let dir = tempdir(&format!("proxy-test-{masters}x{replicas}"));
        let opts = devcluster::Options {
            masters,
            replicas,
            dir,
            ..Default::default()
        };
        let cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
        let proxy = start_proxy(&cluster, |_| {});
        Harness {
            proxy: Some(proxy),
            cluster,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.proxy.as_ref().expect("proxy running").local_addr()
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr())
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(p) = self.proxy.take() {
            p.shutdown();
        }
    }
}

/// A Valkey 9.1 cluster of `masters` masters, from the server `scripts/install-servers`
/// caches (`make matrix`, `make suite`), or None (said on stderr) where it was never
/// installed.
pub fn valkey_cluster(masters: usize, tag: &str) -> Option<devcluster::Cluster> {
    cached_server_cluster("valkey-9.1", masters, tag)
}

/// The same with Redis 8.6.
pub fn redis86_cluster(masters: usize, tag: &str) -> Option<devcluster::Cluster> {
    cached_server_cluster("redis-8.6", masters, tag)
}

fn cached_server_cluster(name: &str, masters: usize, tag: &str) -> Option<devcluster::Cluster> {
    let home = std::env::var_os("HOME")?;
    let server = std::path::Path::new(&home)
        .join(".cache/slotgate/servers")
        .join(name)
        .join("server");
    if !server.exists() {
        eprintln!("skipped: no {name} in ~/.cache/slotgate/servers (scripts/install-servers)");
        return None;
    }
    let opts = devcluster::Options {
        masters,
        replicas: 0,
        dir: tempdir(tag),
        redis_server: server,
        ..Default::default()
    };
    Some(devcluster::Cluster::start(&opts).expect("cluster starts"))
}

pub fn start_proxy(cluster: &devcluster::Cluster, tweak: impl FnOnce(&mut Config)) -> Proxy {
    let mut config = Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 2;
    config.cluster.seeds = cluster.masters().iter().map(|a| a.to_string()).collect();
    tweak(&mut config);
    Proxy::start(config).expect("proxy starts")
}

pub fn tempdir(tag: &str) -> std::path::PathBuf {
    let n: u64 = rand_u64();
    std::env::temp_dir().join(format!("slotgate-{tag}-{}-{n:x}", std::process::id()))
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish()
}

/// A blocking RESP client over one TCP connection; supports pipelining.
pub struct Client {
    pub stream: TcpStream,
    buf: BytesMut,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client {
            stream,
            buf: BytesMut::new(),
        }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = BytesMut::new();
        resp::encode_command(&mut out, args);
        self.stream.write_all(&out).expect("write");
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Read one reply (None when the server closed the connection cleanly).
    pub fn read(&mut self) -> Option<Value> {
        let frame = self.read_frame()?;
        let (value, _) = resp::decode(&frame)
            .expect("valid reply")
            .expect("complete");
        Some(value)
    }

    /// One reply's raw bytes (None when the server closed the connection).
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut framer = resp::ReplyFramer::new();
        loop {
            if let Some(len) = framer.next_frame(&self.buf).expect("valid reply") {
                return Some(self.buf.split_to(len).freeze());
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                // A paused or resumed redis-server child sends SIGCHLD, which can cut a read short.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// Like `read`, but None when the read timeout passes first (the partial frame is kept).
    pub fn try_read(&mut self) -> Option<Value> {
        let mut framer = resp::ReplyFramer::new();
        loop {
            if let Some(len) = framer.next_frame(&self.buf).expect("valid reply") {
                let frame: Bytes = self.buf.split_to(len).freeze();
                return resp::decode(&frame).expect("valid reply").map(|(v, _)| v);
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            }
        }
    }

    pub fn call(&mut self, args: &[&str]) -> Value {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&args);
        self.read().expect("a reply")
    }

    /// Raw bytes until the server closes or `wait` passes without data.
    pub fn read_raw(&mut self, wait: Duration) -> (Vec<u8>, bool) {
        self.stream.set_read_timeout(Some(wait)).expect("timeout");
        let mut all = self.buf.split().to_vec();
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return (all, true),
                Ok(n) => all.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (all, true),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return (all, false),
            }
        }
    }
}

/// Text of a simple/bulk/error reply, for assertions.
pub fn text(v: &Value) -> String {
    match v {
        Value::SimpleString(b) | Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Error(b) => format!("-{}", String::from_utf8_lossy(b)),
        Value::Integer(n) => format!(":{n}"),
        Value::Null | Value::NullArray => "(nil)".into(),
        other => format!("{other:?}"),
    }
}

/// `GET path` on the admin endpoint: the whole HTTP answer, headers included.
pub fn scrape_path(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// `GET /metrics` on the admin endpoint.
pub fn scrape(addr: SocketAddr) -> String {
    scrape_path(addr, "/metrics")
}

/// Wait for a state, never for a time (`testkit::wait_until`).
#[allow(unused_imports)] // not every test binary waits
pub use testkit::wait_until;

/// Calls of `cmdstat_<name>` summed over the masters (what reached the nodes).
pub fn calls_on_masters(h: &Harness, name: &str) -> u64 {
    let prefix = format!("cmdstat_{name}:calls=");
    h.cluster
        .masters()
        .into_iter()
        .map(|node| text(&Client::connect(node).call(&["INFO", "commandstats"])))
        .filter_map(|stats| {
            let rest = stats
                .lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))?;
            rest.split(',').next()?.parse::<u64>().ok()
        })
        .sum()
}
