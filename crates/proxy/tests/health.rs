//! `/healthz` and `/readyz` on the admin port, as load balancers and Kubernetes probe them:
//! live while the process answers, ready while every slot has a reachable master. A master
//! with no replica that dies leaves its slots without one, so the proxy turns not-ready.

mod common;

use std::time::Duration;

use common::{scrape_path, start_proxy, wait_until};

#[test]
fn readyz_turns_not_ready_when_a_master_without_replica_dies() {
    let dir = common::tempdir("health");
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        dir,
        ..Default::default()
    };
    let mut cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
    let proxy = start_proxy(&cluster, |c| c.admin.listen = "127.0.0.1:0".into());
    let admin = proxy.admin_addr().expect("admin endpoint");
    let live = scrape_path(admin, "/healthz");
    assert!(live.starts_with("HTTP/1.0 200"), "{live}");
    let ready = scrape_path(admin, "/readyz");
    assert!(ready.starts_with("HTTP/1.0 200"), "{ready}");
    assert!(ready.contains("ready: topology version"), "{ready}");

    // Connections to every master, so its loss is seen at once.
    let mut c = common::Client::connect(proxy.local_addr());
    assert!(matches!(c.call(&["DBSIZE"]), resp::Value::Integer(0)));
    drop(c);
    let victim = cluster.masters()[1];
    cluster.kill(victim).expect("kill a master");
    // Its connections break at once; no request is needed (one for its slots would be held,
    // waiting for a replacement master, up to cluster.failover_hold_ms).
    wait_until(Duration::from_secs(20), || {
        scrape_path(admin, "/readyz").starts_with("HTTP/1.0 503")
    });
    let not_ready = scrape_path(admin, "/readyz");
    assert!(
        not_ready.contains(&format!("master {victim} (5461 slots) is unreachable")),
        "{not_ready}"
    );
    let live = scrape_path(admin, "/healthz");
    assert!(
        live.starts_with("HTTP/1.0 200"),
        "alive though not ready: {live}"
    );
    let other = scrape_path(admin, "/nope");
    assert!(other.starts_with("HTTP/1.0 404"), "{other}");
    proxy.shutdown();
}

/// Review S5: one client sending its request a byte every 1.9 s, and others that ask for
/// `/metrics` and never read, must not hold `/healthz`: connections are served at once,
/// each under its own deadlines, and the slow one is cut by the head deadline.
#[test]
fn a_slow_client_does_not_hold_the_probes() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    let opts = devcluster::Options {
        masters: 1,
        replicas: 0,
        dir: common::tempdir("health-slow"),
        ..Default::default()
    };
    let cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
    let proxy = start_proxy(&cluster, |c| c.admin.listen = "127.0.0.1:0".into());
    let admin = proxy.admin_addr().expect("admin endpoint");

    // The slow loris: one byte, then a read that waits 1.9 s (and sees the close), again.
    let cut = Arc::new(AtomicBool::new(false));
    let mut loris = TcpStream::connect(admin).unwrap();
    loris
        .set_read_timeout(Some(Duration::from_millis(1900)))
        .unwrap();
    let loris_cut = cut.clone();
    let loris_thread = std::thread::spawn(move || {
        let started = Instant::now();
        for byte in b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: yes\r\n".iter() {
            if loris.write_all(&[*byte]).is_err() {
                break;
            }
            match loris.read(&mut [0u8; 256]) {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(_) => {}
            }
        }
        loris_cut.store(true, Ordering::Relaxed);
        started.elapsed()
    });
    // Readers that never read a large answer.
    let stalled: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(admin).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .unwrap();
            s
        })
        .collect();

    for _ in 0..3 {
        let started = Instant::now();
        let mut probe = TcpStream::connect(admin).unwrap();
        probe
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        probe.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").unwrap();
        let mut answer = String::new();
        let _ = probe.read_to_string(&mut answer);
        assert!(
            answer.starts_with("HTTP/1.0 200"),
            "/healthz not answered beside a slow client: {answer:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    // The slow one is cut by the head deadline (5 s), not served for ever.
    wait_until(Duration::from_secs(20), || cut.load(Ordering::Relaxed));
    let held = loris_thread.join().unwrap();
    assert!(
        held < Duration::from_secs(12),
        "the slow client held on {held:?}"
    );
    drop(stalled);
    proxy.shutdown();
}
