//! `slotgate proxy --nutcracker FILE` as an operator runs it in nutcracker's place: every
//! pool of the file served on its own address, SIGHUP re-reads the file, SIGTERM ends it
//! with 0, and a file nutcracker would refuse is refused with the reason. Placement itself
//! is checked against the real nutcracker in `crates/proxy/tests/sharded.rs`.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use common::{call, connect, signal, wait_until};

/// A standalone redis-server on a free port; killed when dropped.
struct Server(Child, u16);

impl Server {
    fn start() -> Server {
        let port = devcluster::free_port_pair().expect("a free port");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs");
        let server = Server(child, port);
        wait_until("redis-server listens", || connect(server.addr()).is_some());
        server
    }

    fn addr(&self) -> SocketAddr {
        format!("127.0.0.1:{}", self.1).parse().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_file(tag: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("nutcracker.yml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_pool_of_the_file_is_served_on_its_own_address() {
    let servers = [Server::start(), Server::start()];
    let ports = [
        devcluster::free_port_pair().unwrap(),
        devcluster::free_port_pair().unwrap(),
    ];
    let text = format!(
        "one:\n  listen: 127.0.0.1:{}\n  redis: true\n  auto_eject_hosts: true\n  servers:\n   - {}:1\n\
         two:\n  listen: 127.0.0.1:{}\n  redis: true\n  hash: murmur\n  servers:\n   - {}:1\n",
        ports[0],
        servers[0].addr(),
        ports[1],
        servers[1].addr()
    );
    let conf = write_file("slotgate-nc-pools", &text);
    let mut child = Command::new(env!("CARGO_BIN_EXE_slotgate"))
        .args(["proxy", "--threads", "1", "--nutcracker"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("slotgate runs");
    for (i, (port, server)) in ports.iter().zip(&servers).enumerate() {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_until("the pool listens", || connect(addr).is_some());
        let mut c = connect(addr).unwrap();
        let (mine, other) = (format!("x{i}"), format!("x{}", 1 - i));
        assert_eq!(call(&mut c, &["SET", &mine, "v"]), "+OK");
        let mut direct = connect(server.addr()).unwrap();
        assert_eq!(call(&mut direct, &["EXISTS", &mine]), ":1");
        assert_eq!(call(&mut direct, &["EXISTS", &other]), ":0");
    }
    // SIGHUP re-reads the file: pool one now wants a password (from its clients; the
    // servers' password is read at start only, so they are still reached without one).
    let with_auth = text.replacen(
        "  redis: true\n",
        "  redis: true\n  redis_auth: s3cret\n",
        1,
    );
    std::fs::write(&conf, with_auth).unwrap();
    signal(child.id(), "HUP");
    let one: SocketAddr = format!("127.0.0.1:{}", ports[0]).parse().unwrap();
    wait_until("the reloaded pool asks for its password", || {
        let mut c = connect(one).unwrap();
        call(&mut c, &["GET", "x0"]).starts_with("-NOAUTH")
    });
    let mut c = connect(one).unwrap();
    assert_eq!(call(&mut c, &["AUTH", "s3cret"]), "+OK");
    assert_eq!(call(&mut c, &["EXISTS", "x0"]), ":1");
    signal(child.id(), "TERM");
    let mut exited = None;
    wait_until("slotgate exits on SIGTERM", || {
        exited = child.try_wait().unwrap();
        exited.is_some()
    });
    let status = exited.unwrap();
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(conf.parent().unwrap());
}

#[test]
fn a_file_nutcracker_would_refuse_is_refused_with_the_reason() {
    let cases = [
        ("hash: sha1\n", "unknown hash 'sha1'"),
        ("distribution: vnode\n", "unknown distribution 'vnode'"),
        ("timeoutt: 400\n", "unknown directive 'timeoutt'"),
    ];
    for (line, want) in cases {
        let text = format!(
            "a:\n  listen: 127.0.0.1:1\n  redis: true\n  {line}  servers:\n   - 127.0.0.1:2:1\n"
        );
        let conf = write_file("slotgate-nc-bad", &text);
        let out = Command::new(env!("CARGO_BIN_EXE_slotgate"))
            .args(["proxy", "--check-config", "--nutcracker"])
            .arg(&conf)
            .output()
            .expect("slotgate runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{line}: {err}");
        let _ = std::fs::remove_dir_all(conf.parent().unwrap());
    }
}
