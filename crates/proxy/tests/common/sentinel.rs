//! Redis Sentinel set-ups on real servers: a redis-server or a sentinel process, killed
//! when dropped (`tests/sentinel.rs`, `tests/migration.rs`).

use std::net::SocketAddr;
use std::process::{Child, Command};

use super::reference::spawn_serving;
use super::Client;

/// A redis-server (or sentinel) process, killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Server {
    pub fn start(extra: &[&str]) -> Server {
        let (child, addr) = spawn_serving(|port| {
            let mut cmd = Command::new("redis-server");
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(extra);
            cmd
        });
        Server { child, addr }
    }

    pub fn sentinel(dir: &std::path::Path, master: SocketAddr) -> Server {
        let (child, addr) = spawn_serving(|port| {
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
            let mut cmd = Command::new("redis-server");
            cmd.arg(&conf).arg("--sentinel");
            cmd
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
