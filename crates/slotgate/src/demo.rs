//! `slotgate demo`: a local 3-master cluster (real redis-server processes) with the proxy in
//! front, a few commands run through it to show routing, then wait for Ctrl-C (or `--for`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::{Bytes, BytesMut};
use clap::Args;
use proxy::{Config, Proxy};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Stop by itself after this many seconds (for scripts); default: run until Ctrl-C.
    #[arg(long = "for")]
    for_seconds: Option<u64>,
    /// Masters in the local cluster.
    #[arg(long, default_value_t = 3)]
    masters: usize,
    /// Replicas per master.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// Where the proxy listens; a free port is chosen if this one is taken.
    #[arg(long, default_value = "127.0.0.1:7777")]
    listen: SocketAddr,
}

pub fn run(args: DemoArgs) -> Result<()> {
    let _ = crate::init_logging("warn");
    let dir = std::env::temp_dir().join(format!("slotgate-demo-{}", std::process::id()));
    let options = devcluster::Options {
        masters: args.masters,
        replicas: args.replicas,
        dir,
        ..Default::default()
    };
    eprintln!(
        "starting a local Redis Cluster: {} masters, {} replica(s) each ...",
        args.masters, args.replicas
    );
    let cluster = devcluster::Cluster::start(&options).context("cannot start the local cluster")?;
    let listen = if TcpListener::bind(args.listen).is_ok() {
        args.listen
    } else {
        SocketAddr::from(([127, 0, 0, 1], 0))
    };
    let mut config = Config::default();
    config.proxy.listen = listen.to_string();
    config.cluster.seeds = cluster.masters().iter().map(|a| a.to_string()).collect();
    let proxy = Proxy::start(config).context("cannot start the proxy")?;
    let addr = proxy.local_addr();
    println!("cluster masters: {}", config_list(&cluster.masters()));
    println!("slotgate proxy:  {addr}\n");
    show_routing(addr, &proxy)?;
    println!("\nConnect with any Redis client, e.g.:\n  redis-cli -p {}\n  redis-cli -p {} set hello world\n", addr.port(), addr.port());
    println!("Press Ctrl-C to stop the proxy and the cluster.");
    crate::wait_for_signal(args.for_seconds.map(Duration::from_secs))?;
    proxy.shutdown();
    drop(cluster);
    println!("stopped.");
    Ok(())
}

fn config_list(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// SET and GET a few keys through the proxy and say which master owns each.
fn show_routing(addr: SocketAddr, proxy: &Proxy) -> Result<()> {
    let mut conn = TcpStream::connect(addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let map = proxy.topology().current();
    for key in ["user:1", "user:2", "cart:{42}", "session:abc"] {
        let value = format!("value-of-{key}");
        let set = call(&mut conn, &[b"SET", key.as_bytes(), value.as_bytes()])?;
        let get = call(&mut conn, &[b"GET", key.as_bytes()])?;
        let slot = cluster::key_slot(key.as_bytes());
        let owner = map.node_of(slot).map_or("?", |n| n.addr.as_str());
        println!("SET {key:<12} -> {set:<4} GET -> {get:<22} (slot {slot:>5} on {owner})");
    }
    Ok(())
}

/// One request, one reply, as text.
fn call(conn: &mut TcpStream, args: &[&[u8]]) -> Result<String> {
    let mut out = BytesMut::new();
    resp::encode_command(&mut out, args);
    conn.write_all(&out)?;
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        let frozen = Bytes::copy_from_slice(&buf);
        if let Some((value, _)) = resp::decode(&frozen)? {
            return Ok(match value {
                resp::Value::SimpleString(s) | resp::Value::BulkString(s) => {
                    String::from_utf8_lossy(&s).into_owned()
                }
                other => format!("{other:?}"),
            });
        }
        let n = conn.read(&mut chunk)?;
        anyhow::ensure!(n > 0, "proxy closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}
