//! The backend password never leaves the proxy: not in INFO, CLIENT LIST/INFO, CLUSTER
//! replies, error replies, `/metrics`, a failed start's error, nor any log line (captured at
//! TRACE level from the whole process, so every worker thread's output is seen).
//!
//! Its own test binary: it installs the process-wide tracing subscriber.
//!
//! Also (review S14): a password on a line the TOML parser refuses is not quoted by the
//! error, the reload's log line or `POST /reload`'s answer.

mod common;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use common::{start_proxy, text, Client, Harness};

const SECRET: &str = "Backend-S3cret-9f2c";
const NODE_DEFAULT_PASS: &str = "node-default-7a1";

/// Every byte any thread logs.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        log.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The process-wide capture, installed by whichever test asks first.
fn capture_logs() -> Capture {
    static CAPTURE: std::sync::OnceLock<Capture> = std::sync::OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let capture = Capture::default();
            let writer = capture.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("first subscriber");
            capture
        })
        .clone()
}

/// `GET /metrics`, retried: one run of the whole workspace saw a scrape reset (not seen
/// again in isolation), and this test is about what a scrape shows.
fn scrape(addr: std::net::SocketAddr) -> String {
    let once = || -> std::io::Result<String> {
        let mut s = std::net::TcpStream::connect(addr)?;
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
        let mut body = String::new();
        s.read_to_string(&mut body)?;
        Ok(body)
    };
    let mut last = None;
    for _ in 0..3 {
        match once() {
            Ok(body) => return body,
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    panic!("scrape failed: {last:?}")
}

/// Nodes accept only an ACL user with the secret; their default user has another password.
fn protect_nodes(h: &Harness) {
    for node in h.cluster.masters() {
        let acl = ["ACL", "SETUSER", "slotgate", "on", &format!(">{SECRET}")];
        let acl = [&acl[..], &["~*", "&*", "+@all"]].concat();
        h.cluster.command(node, &acl).unwrap().ok().unwrap();
        let pass = ["CONFIG", "SET", "requirepass", NODE_DEFAULT_PASS];
        h.cluster.command(node, &pass).unwrap().ok().unwrap();
    }
}

fn probes(c: &mut Client) -> Vec<(String, String)> {
    let probes: &[&[&str]] = &[
        &["INFO"],
        &["INFO", "all"],
        &["INFO", "everything"],
        &["INFO", "server", "clients", "stats", "keyspace"],
        &["CLIENT", "LIST"],
        &["CLIENT", "INFO"],
        &["CONFIG", "GET", "*"],
        &["CONFIG", "GET", "*pass*"],
        &["CLUSTER", "NODES"],
        &["CLUSTER", "SHARDS"],
        &["CLUSTER", "SLOTS"],
        &["HELLO", "3"],
        &["HELLO", "2"],
        // Error replies: refused, unknown, wrong type from a node, cross-slot, bad auth.
        &["ACL", "LIST"],
        &["NOSUCHCOMMAND", "x"],
        &["LPUSH", "secret:k", "v"],
        &["MSET", "a", "1", "b", "2"],
        &["AUTH", "slotgate", "guess"],
        &["CLIENT", "KILL", "USER", "slotgate"],
    ];
    probes
        .iter()
        .map(|args| (args.join(" "), format!("{:?}", c.call(args))))
        .collect()
}

#[test]
fn backend_password_is_never_shown_or_logged() {
    let logs = capture_logs();
    let mut h = Harness::start(3, 0);
    if let Some(p) = h.proxy.take() {
        p.shutdown();
    }
    protect_nodes(&h);
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.cluster.backend_user = "slotgate".into();
        cfg.cluster.backend_password = SECRET.into();
        cfg.admin.listen = "127.0.0.1:0".into();
    });
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["SET", "secret:k", "v"])), "OK");
    assert_eq!(text(&c.call(&["GET", "secret:k"])), "v");
    let mut shown = probes(&mut c);
    assert!(
        shown.iter().any(|(_, r)| r.contains("WRONGTYPE")),
        "{shown:?}"
    );
    let metrics = scrape(proxy.admin_addr().unwrap());
    assert!(metrics.contains("slotgate_connected_clients"), "{metrics}");
    shown.push(("/metrics".into(), metrics));

    // A start with the wrong password fails, and its error does not echo what was tried.
    let wrong = format!("{SECRET}-wrong");
    let mut config = proxy::Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.cluster.seeds = h.cluster.masters().iter().map(|a| a.to_string()).collect();
    config.cluster.backend_user = "slotgate".into();
    config.cluster.backend_password = wrong.clone();
    let err = proxy::Proxy::start(config)
        .err()
        .expect("wrong password refused");
    shown.push(("failed start".into(), err.to_string()));
    proxy.shutdown();

    for (what, reply) in &shown {
        assert!(
            !reply.contains(SECRET),
            "{what} shows the backend password: {reply}"
        );
    }
    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(logged.contains("client connected"), "debug logs captured");
    assert!(
        !logged.contains(SECRET),
        "the log shows the backend password"
    );
    assert!(!logged.contains(&wrong));
    assert!(!logged.contains(NODE_DEFAULT_PASS));
}

#[test]
fn a_config_parse_error_does_not_quote_the_password() {
    const PASSWORD: &str = "hunter2-Unquoted-77";
    let logs = capture_logs();
    let h = Harness::start(1, 0);
    let dir = common::tempdir("secrets-parse");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("proxy.toml");
    let proxy = start_proxy(&h.cluster, |cfg| cfg.admin.listen = "127.0.0.1:0".into());
    proxy.set_config_source(proxy::ConfigSource {
        path: path.clone(),
        overrides: Box::new(|_| {}),
        on_applied: Box::new(|_| {}),
    });
    let seed = h.cluster.seed().to_string();
    std::fs::write(
        &path,
        format!("[cluster]\nseeds = [\"{seed}\"]\n[auth]\nrequirepass = {PASSWORD}\n"),
    )
    .unwrap();
    let err = proxy.reload().expect_err("refused").to_string();
    assert!(err.contains("line 4"), "the place is given: {err}");
    let mut s = std::net::TcpStream::connect(proxy.admin_addr().unwrap()).unwrap();
    s.write_all(b"POST /reload HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.contains("line 4"), "{answer}");
    proxy.shutdown();
    for (what, text) in [("the error", &err), ("POST /reload", &answer)] {
        assert!(
            !text.contains(PASSWORD),
            "{what} quotes the password: {text}"
        );
    }
    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        logged.contains("configuration reload refused"),
        "logs captured"
    );
    assert!(!logged.contains(PASSWORD), "the log quotes the password");
}
