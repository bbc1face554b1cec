//! Redis Sentinel set-ups on real servers: a redis-server or a sentinel process, killed
//! when dropped (`tests/sentinel.rs`, `tests/migration.rs`).

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::reference::free_port;
use super::{wait_until, Client};

/// A redis-server (or sentinel) process, killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Server {
    pub fn start(extra: &[&str]) -> Server {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs");
        Self::ready(child, port)
    }

    pub fn sentinel(dir: &std::path::Path, master: SocketAddr) -> Server {
        let port = free_port();
        let conf = dir.join(format!("sentinel-{port}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {} 1\n\
                 sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\n",
                dir.display(),
                master.port()
            ),
        )
        .unwrap();
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server --sentinel runs");
        Self::ready(child, port)
    }

    fn ready(child: Child, port: u16) -> Server {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_until(Duration::from_secs(20), || {
            std::net::TcpStream::connect(addr).is_ok()
        });
        Server { child, addr }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
