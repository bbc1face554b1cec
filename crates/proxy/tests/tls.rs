//! TLS on both sides against real TLS redis-servers (`tls-port`, `tls-cluster yes`,
//! client certificates required by the nodes), with `redis-cli --tls` as the reference
//! client: the same replies as the plain listener, mutual TLS towards clients, nodes
//! checked by their IP subjectAltName or a configured name, and the certificates' days
//! left in INFO and `/metrics`. Certificates are made by the test (common/tls.rs).

mod common;

use common::tls::{s, Leaf, Pki, TlsClient};
use common::{scrape, text};
use proxy::{Config, Proxy};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

/// A 3-master TLS cluster whose nodes require client certificates, and its PKI.
struct TlsCluster {
    cluster: devcluster::Cluster,
    pki: Pki,
}

impl TlsCluster {
    fn start(masters: usize, replicas: usize) -> TlsCluster {
        let dir = common::tempdir("tls");
        let pki = Pki::new(&dir.join("pki"), "cluster");
        let node = pki.leaf("node", &["redis.test"], 365);
        let opts = devcluster::Options {
            masters,
            replicas,
            dir: dir.join("cluster"),
            tls: Some(pki.node_files(&node, true)),
            ..Default::default()
        };
        let cluster = devcluster::Cluster::start(&opts).expect("TLS cluster starts");
        TlsCluster { cluster, pki }
    }

    /// The masters' TLS addresses, as the proxy's seeds.
    fn tls_seeds(&self) -> Vec<String> {
        let masters = self.cluster.masters();
        let tls = masters
            .iter()
            .map(|a| self.cluster.tls_addr(*a).expect("TLS port"));
        tls.map(|a| a.to_string()).collect()
    }

    /// A proxy config with TLS towards the nodes (client cert `proxy-backend`).
    fn config(&self) -> Config {
        let leaf = self.pki.leaf("proxy-backend", &[], 30);
        let mut config = Config::default();
        config.proxy.listen = "127.0.0.1:0".into();
        config.proxy.threads = 2;
        config.admin.listen = "127.0.0.1:0".into();
        config.cluster.seeds = self.tls_seeds();
        config.backend_tls.enabled = true;
        config.backend_tls.ca_file = s(&self.pki.ca);
        config.backend_tls.cert_file = s(&leaf.cert);
        config.backend_tls.key_file = s(&leaf.key);
        config
    }
}

/// Client-side TLS: the proxy's certificate (10 days left) from its own CA, and mutual
/// TLS against that CA when `mtls`.
fn listen_tls(config: &mut Config, pki: &Pki, mtls: bool) -> Leaf {
    let leaf = pki.leaf("proxy-listener", &["proxy.test"], 10);
    config.tls.listen = "127.0.0.1:0".into();
    config.tls.cert_file = s(&leaf.cert);
    config.tls.key_file = s(&leaf.key);
    if mtls {
        config.tls.client_ca_file = s(&pki.ca);
    }
    leaf
}

/// `redis-cli --tls` against `addr`, with a client certificate when given.
fn redis_cli(addr: SocketAddr, ca: &Path, client: Option<&Leaf>, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["--tls", "--cacert"]).arg(ca);
    if let Some(leaf) = client {
        cmd.arg("--cert")
            .arg(&leaf.cert)
            .arg("--key")
            .arg(&leaf.key);
    }
    cmd.args(["-h", "127.0.0.1", "-p", &addr.port().to_string()]);
    let out = cmd.args(args).output().expect("redis-cli runs");
    let all =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), all.trim().to_string())
}

#[test]
fn tls_on_both_sides_serves_what_plain_serves() {
    let tc = TlsCluster::start(3, 0);
    let client_pki = Pki::new(&tc.pki.dir.join("clients"), "clients");
    let mut config = tc.config();
    let listener = listen_tls(&mut config, &client_pki, true);
    let proxy = Proxy::start(config).expect("proxy starts over TLS nodes");
    let tls = proxy.tls_addr().expect("TLS listener");
    let alice = client_pki.leaf("alice", &[], 30);
    let cli = |args: &[&str]| redis_cli(tls, &client_pki.ca, Some(&alice), args);

    let mut plain = common::Client::connect(proxy.local_addr());
    for i in 0..50 {
        let (k, v) = (format!("k{i}"), format!("v{i}"));
        assert_eq!(cli(&["SET", &k, &v]), (true, "OK".into()));
        assert_eq!(text(&plain.call(&["GET", &k])), v);
    }
    // Multi-slot, fan-out and local commands: the same answer on either listener.
    for args in [
        &["MGET", "k1", "k2", "k3", "nokey"][..],
        &["DBSIZE"],
        &["EXISTS", "k1", "k7", "k9"],
        &["GET", "nokey"],
        &["PING"],
        &["INCR", "k1"],
    ] {
        let (ok, tls_reply) = cli(args);
        assert!(ok, "{args:?}: {tls_reply}");
        let plain_reply = redis_cli_plain(proxy.local_addr(), args);
        assert_eq!(tls_reply, plain_reply, "{args:?}");
    }
    assert_eq!(cli(&["DBSIZE"]).1, "50");

    // No client certificate, or one from another CA: refused at the handshake.
    assert!(!cli_ok(redis_cli(tls, &client_pki.ca, None, &["PING"])));
    let stranger = tc.pki.leaf("stranger", &[], 30);
    assert!(!cli_ok(redis_cli(
        tls,
        &client_pki.ca,
        Some(&stranger),
        &["PING"]
    )));

    let (_, info) = cli(&["INFO", "tls"]);
    assert!(info.contains("tls_backend:yes"), "{info}");
    assert!(
        info.contains(&format!("tls_listener_cert_file:{}", s(&listener.cert))),
        "{info}"
    );
    assert!(info.contains("tls_listener_cert_days_left:9"), "{info}");
    assert!(
        info.contains("tls_backend_client_cert_days_left:29"),
        "{info}"
    );
    // Valkey 9's names too: serials in hex, seconds left (whole days as above).
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    for (name, days) in [("server", 9), ("client", 29)] {
        let serial = field(&format!("tls_{name}_cert_serial"));
        assert!(
            !serial.is_empty() && serial != "none" && serial.chars().all(|c| c.is_ascii_hexdigit()),
            "{info}"
        );
        let left: i64 = field(&format!("tls_{name}_cert_expires_in_seconds"))
            .parse()
            .unwrap_or(0);
        assert!(
            (days * 86_400..(days + 1) * 86_400).contains(&left),
            "{info}"
        );
    }
    assert_ne!(field("tls_ca_cert_serial"), "none", "{info}");
    let handshakes_failed = info
        .lines()
        .find_map(|l| l.strip_prefix("tls_handshake_failures:"))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(handshakes_failed >= Some(2), "{info}");
    let metrics = scrape(proxy.admin_addr().unwrap());
    let days = format!(
        "slotgate_tls_certificate_days_left{{role=\"listener\",file=\"{}\"}} ",
        s(&listener.cert)
    );
    let value = metrics.lines().find_map(|l| l.strip_prefix(days.as_str()));
    assert!(matches!(value, Some("9" | "10")), "{metrics}");
    proxy.shutdown();
}

fn cli_ok((ok, out): (bool, String)) -> bool {
    ok && out == "PONG"
}

/// The same command through the plain listener, as redis-cli prints it.
fn redis_cli_plain(addr: SocketAddr, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &addr.port().to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Big values and deep pipelines through TLS on both sides: both sockets fill up, so
/// every record TLS holds back must still be flushed (a missing flush hangs here).
#[test]
fn big_values_and_pipelines_cross_tls_intact() {
    let tc = TlsCluster::start(3, 0);
    let mut config = tc.config();
    listen_tls(&mut config, &tc.pki, false);
    let proxy = Proxy::start(config).expect("proxy starts");
    let mut c = TlsClient::connect(proxy.tls_addr().unwrap(), &tc.pki.ca);
    let big: Vec<u8> = (0..3 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    for i in 0..4 {
        c.send(&[b"SET", format!("big{i}").as_bytes(), &big]);
    }
    for _ in 0..4 {
        assert_eq!(c.read(), b"+OK\r\n");
    }
    for i in 0..4 {
        c.send(&[b"GET", format!("big{i}").as_bytes()]);
    }
    for _ in 0..4 {
        let reply = c.read();
        assert_eq!(
            &reply[reply.len() - big.len() - 2..reply.len() - 2],
            &big[..]
        );
    }
    for round in 0..5 {
        for i in 0..2000 {
            c.send(&[
                b"SET",
                format!("p{i}").as_bytes(),
                format!("{round}-{i}").as_bytes(),
            ]);
        }
        for _ in 0..2000 {
            assert_eq!(c.read(), b"+OK\r\n");
        }
    }
    for i in 0..2000 {
        c.send(&[b"GET", format!("p{i}").as_bytes()]);
    }
    for i in 0..2000 {
        let want = format!("4-{i}");
        assert_eq!(
            c.read(),
            format!("${}\r\n{want}\r\n", want.len()).as_bytes()
        );
    }
    proxy.shutdown();
}

/// Nodes are checked: a proxy without the client certificate the nodes require, or one
/// that expects another name than the nodes' certificates carry, never gets a topology.
#[test]
fn nodes_are_verified_and_named() {
    let tc = TlsCluster::start(1, 0);
    let mut no_cert = tc.config();
    no_cert.backend_tls.cert_file.clear();
    no_cert.backend_tls.key_file.clear();
    let err = Proxy::start(no_cert)
        .err()
        .expect("nodes require a client certificate");
    assert!(err.to_string().contains("CertificateRequired"), "{err}");

    let mut wrong_name = tc.config();
    wrong_name.backend_tls.server_name = "other.test".into();
    let err = Proxy::start(wrong_name)
        .err()
        .expect("the node's certificate is not other.test's");
    assert!(err.to_string().contains("not valid for name"), "{err}");

    let other_ca = Pki::new(&tc.pki.dir.join("other"), "other");
    let mut wrong_ca = tc.config();
    wrong_ca.backend_tls.ca_file = s(&other_ca.ca);
    let err = Proxy::start(wrong_ca)
        .err()
        .expect("the nodes' CA is not trusted");
    assert!(
        err.to_string().contains("invalid peer certificate"),
        "{err}"
    );

    // The name the node certificates do carry, sent as SNI and checked instead of the IP.
    let mut named = tc.config();
    named.backend_tls.server_name = "redis.test".into();
    let proxy = Proxy::start(named).expect("proxy starts with the right name");
    let mut c = common::Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["SET", "a", "1"])), "OK");
    assert_eq!(text(&c.call(&["GET", "a"])), "1");
    proxy.shutdown();

    // TLS only: no plain listener at all.
    let mut only = tc.config();
    only.proxy.listen.clear();
    listen_tls(&mut only, &tc.pki, false);
    let proxy = Proxy::start(only).expect("a TLS-only proxy starts");
    assert_eq!(Some(proxy.local_addr()), proxy.tls_addr());
    let mut c = TlsClient::connect(proxy.local_addr(), &tc.pki.ca);
    c.send(&[b"GET", b"a"]);
    assert_eq!(c.read(), b"$1\r\n1\r\n");
    proxy.shutdown();
}

/// Review S12: a TLS client counts against `limits.maxclients` from its accept, not from
/// the end of its handshake, so silent TLS connections cannot hold every file descriptor
/// for the handshake's 10 s while plain clients are still let in.
#[test]
fn silent_tls_handshakes_count_against_maxclients() {
    let h = common::Harness::start(1, 0);
    let pki = Pki::new(&common::tempdir("tls-maxclients"), "clients");
    let proxy = common::start_proxy(&h.cluster, |cfg| {
        listen_tls(cfg, &pki, false);
        cfg.limits.maxclients = 4;
    });
    let tls = proxy.tls_addr().expect("TLS listener");
    // Two more silent TLS connections than there are slots: every slot is then held by a
    // handshake, and the ones over the limit are closed at once rather than held for the
    // handshake's 10 s.
    let mut silent: Vec<std::net::TcpStream> = (0..6)
        .map(|_| std::net::TcpStream::connect(tls).unwrap())
        .collect();
    let mut closed = 0;
    for s in silent.iter_mut() {
        s.set_read_timeout(Some(std::time::Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 16];
        let read = std::io::Read::read(s, &mut buf);
        let reset = read
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset);
        closed += usize::from(matches!(read, Ok(0)) || reset);
    }
    assert!(
        closed >= 2,
        "{closed} of the connections over maxclients were closed"
    );
    // A plain client is refused with Redis's text while the handshakes hold the slots.
    let mut c = common::Client::connect(proxy.local_addr());
    c.send(&[b"PING"]);
    let reply = c.read().map(|v| text(&v));
    assert_eq!(reply.as_deref(), Some("-ERR max number of clients reached"));
    drop(silent);
    common::wait_until(std::time::Duration::from_secs(10), || {
        let mut c = common::Client::connect(proxy.local_addr());
        c.send(&[b"PING"]);
        c.read().is_some_and(|v| text(&v) == "PONG")
    });
    proxy.shutdown();
}
