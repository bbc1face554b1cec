//! The binary's signals against a real cluster: SIGHUP re-reads `--config` (a new password
//! works, the old one no longer does, connected clients stay), SIGTERM drains and exits 0,
//! and the log written to a pipe carries no colour codes.

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{call, connect, signal, wait_until};

/// A one-master cluster in a fresh directory named after `tag` and this process.
fn one_node_cluster(tag: &str) -> (std::path::PathBuf, devcluster::Cluster) {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    let opts = devcluster::Options {
        masters: 1,
        replicas: 0,
        dir: dir.join("cluster"),
        ..Default::default()
    };
    let cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
    (dir, cluster)
}

#[test]
fn sighup_reloads_and_sigterm_drains() {
    let (dir, cluster) = one_node_cluster("slotgate-signals");
    let port = devcluster::free_port_pair().unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let file = dir.join("proxy.toml");
    let config = |password: &str| {
        format!(
            "[proxy]\nlisten = \"{addr}\"\nthreads = 1\ndrain_timeout_ms = 5000\n[cluster]\nseeds = [\"{}\"]\n[auth]\nrequirepass = \"{password}\"\n",
            cluster.seed()
        )
    };
    std::fs::write(&file, config("first")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_slotgate"))
        .args(["proxy", "--config"])
        .arg(&file)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("slotgate starts");
    wait_until("the proxy listens", || connect(addr).is_some());
    let mut kept = connect(addr).unwrap();
    assert_eq!(call(&mut kept, &["AUTH", "first"]), "+OK");

    std::fs::write(&file, config("second")).unwrap();
    signal(child.id(), "HUP");
    wait_until("the new password works", || {
        let mut c = connect(addr).unwrap();
        call(&mut c, &["AUTH", "second"]) == "+OK"
    });
    let mut c = connect(addr).unwrap();
    assert!(call(&mut c, &["AUTH", "first"]).starts_with("-WRONGPASS"));
    assert_eq!(
        call(&mut kept, &["SET", "k", "v"]),
        "+OK",
        "connected clients stay"
    );

    signal(child.id(), "TERM");
    // An idle client is closed at once by the drain: it reads end of file.
    let mut rest = Vec::new();
    let _ = kept.read_to_end(&mut rest);
    assert!(
        rest.is_empty(),
        "closed between requests, nothing half-written"
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "slotgate did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("configuration reloaded"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "no colour codes in a piped log: {log:?}"
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

/// S17: a SIGHUP during start-up neither kills the process nor is lost: it is applied once
/// the proxy is ready. The only seed is a relay that holds the bootstrap's connection until
/// the signal was sent, so the signal surely lands while `Proxy::start` runs.
#[test]
fn a_sighup_during_start_up_is_applied_once_ready() {
    use std::net::TcpListener;
    use std::sync::mpsc;
    let (dir, cluster) = one_node_cluster("slotgate-early-hup");
    let node = cluster.seed().to_string();
    let relay_port = devcluster::free_port_pair().unwrap();
    let relay = TcpListener::bind(("127.0.0.1", relay_port)).unwrap();
    let (accepted, first) = mpsc::channel::<()>();
    let (go, go_rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut go_rx = Some(go_rx);
        for client in relay.incoming().flatten() {
            if let Some(go_rx) = go_rx.take() {
                let _ = accepted.send(());
                let _ = go_rx.recv_timeout(Duration::from_secs(20));
            }
            let Ok(upstream) = TcpStream::connect(&node) else {
                continue;
            };
            let (mut a, mut b) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut a, &mut b));
            let (mut c, mut d) = (upstream, client);
            std::thread::spawn(move || std::io::copy(&mut c, &mut d));
        }
    });
    let port = devcluster::free_port_pair().unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let file = dir.join("proxy.toml");
    let config = |password: &str| {
        format!(
            "[proxy]\nlisten = \"{addr}\"\nthreads = 1\n[cluster]\nseeds = [\"127.0.0.1:{relay_port}\"]\n[auth]\nrequirepass = \"{password}\"\n"
        )
    };
    std::fs::write(&file, config("first")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_slotgate"))
        .args(["proxy", "--config"])
        .arg(&file)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("slotgate starts");
    first
        .recv_timeout(Duration::from_secs(20))
        .expect("the bootstrap dialled its seed");
    std::fs::write(&file, config("second")).unwrap();
    signal(child.id(), "HUP");
    go.send(()).unwrap();
    wait_until("the proxy listens, or died", || {
        connect(addr).is_some() || child.try_wait().unwrap().is_some()
    });
    assert!(
        child.try_wait().unwrap().is_none(),
        "a SIGHUP during start-up killed the process"
    );
    wait_until("the reload queued during start-up applied", || {
        let mut c = connect(addr).unwrap();
        call(&mut c, &["AUTH", "second"]) == "+OK"
    });
    signal(child.id(), "TERM");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(20), "did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
