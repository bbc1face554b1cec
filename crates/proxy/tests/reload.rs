//! Reloading the configuration without a restart: users, passwords and limits change under
//! load with no client error; an invalid file changes nothing and the proxy keeps serving;
//! a rotated certificate serves new TLS clients while connected ones stay.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::tls::{s, Pki, TlsClient};
use common::{scrape, scrape_path, start_proxy, text, wait_until, Client};
use proxy::{Config, ConfigSource, Proxy};
use resp::Value;

/// A config holding just these users: `(name, password, command rules)`.
fn users(list: &[(&str, &str, &str)]) -> Config {
    let toml: String = list
        .iter()
        .map(|(name, password, rules)| {
            format!("[[auth.users]]\nname = \"{name}\"\npassword = \"{password}\"\ncommands = [{rules}]\n")
        })
        .collect();
    Config::from_toml(&toml).expect("users parse")
}

fn cluster() -> devcluster::Cluster {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        dir: common::tempdir("reload"),
        ..Default::default()
    };
    devcluster::Cluster::start(&opts).expect("cluster starts")
}

/// A client authenticated as `name`.
fn login(addr: std::net::SocketAddr, name: &str, password: &str) -> Client {
    let mut c = Client::connect(addr);
    assert_eq!(text(&c.call(&["AUTH", name, password])), "OK");
    c
}

/// Pipelined SET/GET rounds until `stop`; every reply checked, errors counted.
fn load(
    addr: std::net::SocketAddr,
    id: usize,
    stop: Arc<AtomicBool>,
    errors: Arc<AtomicU64>,
    done: Arc<AtomicU64>,
) {
    let mut c = login(addr, "app", "app-pass");
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for i in 0..20 {
            let (k, v) = (format!("c{id}:{i}"), format!("{round}"));
            c.send(&[b"SET", k.as_bytes(), v.as_bytes()]);
            c.send(&[b"GET", k.as_bytes()]);
        }
        for _ in 0..20 {
            let set = c.read().expect("a reply");
            let get = c.read().expect("a reply");
            let ok = matches!(&set, Value::SimpleString(s) if s == "OK")
                && text(&get) == round.to_string();
            if !ok {
                eprintln!("client {id}: {set:?} {get:?}");
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        done.fetch_add(20, Ordering::Relaxed);
        round += 1;
    }
}

#[test]
fn users_and_limits_reload_under_load_with_zero_errors() {
    let cluster = cluster();
    let base = |c: &mut Config| {
        c.admin.listen = "127.0.0.1:0".into();
        c.auth.users = users(&[
            ("app", "app-pass", "\"+@all\""),
            ("ops", "ops-1", "\"+@all\""),
            ("gone", "gone-pass", "\"+@all\""),
        ])
        .auth
        .users;
    };
    let proxy = start_proxy(&cluster, base);
    let addr = proxy.local_addr();
    let mut gone = login(addr, "gone", "gone-pass");
    let (stop, errors, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::default(),
        Arc::default(),
    );
    let workers: Vec<_> = (0..4)
        .map(|id| {
            let (stop, errors, done) = (stop.clone(), Arc::clone(&errors), Arc::clone(&done));
            std::thread::spawn(move || load(addr, id, stop, errors, done))
        })
        .collect();
    for step in 0..10u64 {
        let before = done.load(Ordering::Relaxed);
        let mut next = Config::default();
        next.proxy.listen = "127.0.0.1:0".into();
        next.proxy.threads = 2;
        next.cluster.seeds = cluster.masters().iter().map(|a| a.to_string()).collect();
        base(&mut next);
        let ops = format!("ops-{}", step + 2);
        next.auth.users = users(&[
            ("app", "app-pass", "\"+@all\""),
            ("ops", &ops, "\"+@all\""),
            ("new", "new-pass", "\"+@read\", \"+ping\""),
        ])
        .auth
        .users;
        next.limits.max_pending_per_client = 1000 + step as usize;
        next.slowlog.log_slower_than_us = 1000 * step as i64;
        let report = proxy.reload_with(next).expect("reload applies");
        assert!(report.needs_restart.is_empty(), "{report:?}");
        assert!(report.applied.contains(&"limits"), "{report:?}");
        wait_until(Duration::from_secs(20), || {
            done.load(Ordering::Relaxed) > before + 40
        });
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "no request failed across reloads"
    );
    assert!(done.load(Ordering::Relaxed) > 0);

    let mut ops = Client::connect(addr);
    assert!(text(&ops.call(&["AUTH", "ops", "ops-1"])).starts_with("-WRONGPASS"));
    assert_eq!(text(&ops.call(&["AUTH", "ops", "ops-11"])), "OK");
    let mut new = login(addr, "new", "new-pass");
    assert!(!text(&new.call(&["GET", "c0:0"])).is_empty());
    assert!(text(&new.call(&["SET", "x", "1"])).starts_with("-NOPERM"));
    // The removed user's session was closed, and its password no longer works.
    gone.stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    assert!(gone.read().is_none(), "a removed user's client is closed");
    let mut again = Client::connect(addr);
    assert!(text(&again.call(&["AUTH", "gone", "gone-pass"])).starts_with("-WRONGPASS"));
    let info = text(&ops.call(&["INFO", "stats"]));
    assert!(info.contains("config_reloads:10"), "{info}");
    proxy.shutdown();
}

#[test]
fn an_invalid_file_changes_nothing_and_the_proxy_keeps_serving() {
    let cluster = cluster();
    let dir = common::tempdir("reload-file");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("proxy.toml");
    let seeds: Vec<String> = cluster
        .masters()
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect();
    let good = |extra: &str| {
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\nthreads = 2\n[cluster]\nseeds = [{}]\n[auth]\nrequirepass = \"pw\"\n{extra}",
            seeds.join(",")
        )
    };
    std::fs::write(&path, good("")).unwrap();
    let proxy = start_proxy(&cluster, |c| {
        *c = Config::from_toml(&good("")).unwrap();
        c.admin.listen = "127.0.0.1:0".into();
    });
    proxy.set_config_source(ConfigSource {
        path: path.clone(),
        overrides: Box::new(|c| c.admin.listen = "127.0.0.1:0".into()),
        on_applied: Box::new(|_| {}),
    });
    let admin = proxy.admin_addr().unwrap();
    let mut c = login(proxy.local_addr(), "default", "pw");
    assert_eq!(text(&c.call(&["SET", "k", "1"])), "OK");

    for bad in [
        "[proxy\nlisten = ".to_string(),
        good("[limits]\nmax_bulk_bytes = 0\n"),
        good("[limits]\nno_such_key = 1\n")
            .replace("requirepass = \"pw\"", "requirepass = \"other\""),
        good("[[auth.users]]\nname = \"x\"\npassword = \"y\"\ncommands = [\"+@nonsense\"]\n"),
    ] {
        std::fs::write(&path, bad).unwrap();
        assert!(proxy.reload().is_err());
        assert!(
            text(&c.call(&["INCR", "k"])).starts_with(':'),
            "still serving"
        );
        let mut fresh = Client::connect(proxy.local_addr());
        assert_eq!(
            text(&fresh.call(&["AUTH", "pw"])),
            "OK",
            "the old password still works"
        );
    }
    let metrics = scrape(admin);
    assert!(
        metrics.contains("slotgate_config_reloads_total{result=\"failed\"} 4"),
        "{metrics}"
    );

    // A valid file: what can change does; the listener is reported, not moved.
    std::fs::write(
        &path,
        good("")
            .replace("127.0.0.1:0", "127.0.0.1:1")
            .replace("\"pw\"", "\"pw2\""),
    )
    .unwrap();
    let answer = post(admin, "/reload");
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    assert!(answer.contains("proxy.listen"), "{answer}");
    let mut fresh = Client::connect(proxy.local_addr());
    assert_eq!(text(&fresh.call(&["AUTH", "pw2"])), "OK");
    assert_eq!(text(&c.call(&["GET", "k"])), "5", "connected clients stay");
    assert!(scrape_path(admin, "/reload").starts_with("HTTP/1.0 405"));
    proxy.shutdown();
}

fn post(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "POST {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

#[test]
fn a_rotated_certificate_serves_new_clients_while_connected_ones_stay() {
    let cluster = cluster();
    let dir = common::tempdir("reload-tls");
    let pki = Pki::new(&dir, "rotation");
    let first = pki.leaf("proxy-a", &["proxy.test"], 10);
    let (cert, key) = (dir.join("live.crt"), dir.join("live.key"));
    std::fs::copy(&first.cert, &cert).unwrap();
    std::fs::copy(&first.key, &key).unwrap();
    let tls_cfg = |c: &mut Config| {
        c.tls.listen = "127.0.0.1:0".into();
        c.tls.cert_file = s(&cert);
        c.tls.key_file = s(&key);
    };
    let proxy = start_proxy(&cluster, tls_cfg);
    let tls = proxy.tls_addr().unwrap();
    let mut old = TlsClient::connect(tls, &pki.ca);
    old.send(&[b"SET", b"t", b"1"]);
    assert_eq!(old.read(), b"+OK\r\n");
    let before = old.peer_certificate();

    let second = pki.leaf("proxy-b", &["proxy.test"], 60);
    std::fs::copy(&second.cert, &cert).unwrap();
    std::fs::copy(&second.key, &key).unwrap();
    let mut next = Config::default();
    next.proxy.listen = "127.0.0.1:0".into();
    next.proxy.threads = 2;
    next.cluster.seeds = cluster.masters().iter().map(|a| a.to_string()).collect();
    tls_cfg(&mut next);
    let report = proxy.reload_with(next).expect("reload applies");
    assert!(report.applied.contains(&"tls certificates"), "{report:?}");

    old.send(&[b"INCR", b"t"]);
    assert_eq!(
        old.read(),
        b":2\r\n",
        "the connected client stays, on its session"
    );
    let mut new = TlsClient::connect(tls, &pki.ca);
    new.send(&[b"PING"]);
    assert_eq!(new.read(), b"+PONG\r\n");
    assert_ne!(
        new.peer_certificate(),
        before,
        "a new client gets the new certificate"
    );
    new.send(&[b"INFO", b"tls"]);
    let info = String::from_utf8(new.read()).unwrap();
    // Made to expire in 59.5 days (`Pki::leaf`).
    assert!(info.contains("tls_listener_cert_days_left:59"), "{info}");
    proxy.shutdown();
}

/// S4: the restart-only `listen` goes back before validation, so a reload that moves
/// `listen` to loopback while dropping `requirepass` is judged with the public listener it
/// would really leave running, and refused: nothing changes, AUTH is still required.
#[test]
fn a_reload_cannot_leave_a_public_listener_without_a_password() {
    let cluster = cluster();
    let dir = common::tempdir("reload-public");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("proxy.toml");
    let port = devcluster::free_port_pair().expect("a free port");
    let seeds: Vec<String> = cluster
        .masters()
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect();
    let file = |listen: &str, auth: &str| {
        format!(
            "[proxy]\nlisten = \"{listen}\"\nthreads = 1\n[cluster]\nseeds = [{}]\n{auth}",
            seeds.join(",")
        )
    };
    // 0.0.0.0 is not loopback by the config's rule, whatever this machine's interfaces.
    let public = format!("0.0.0.0:{port}");
    std::fs::write(&path, file(&public, "[auth]\nrequirepass = \"pw\"\n")).unwrap();
    let proxy = start_proxy(&cluster, |c| {
        *c = Config::from_toml(&std::fs::read_to_string(&path).unwrap()).unwrap();
    });
    proxy.set_config_source(ConfigSource {
        path: path.clone(),
        overrides: Box::new(|_| {}),
        on_applied: Box::new(|_| {}),
    });
    let local: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();

    std::fs::write(&path, file(&format!("127.0.0.1:{port}"), "")).unwrap();
    let err = proxy.reload().expect_err("refused").to_string();
    assert!(
        err.contains(&public),
        "the reason names the listener: {err}"
    );
    assert!(err.contains("authentication"), "{err}");

    let mut c = Client::connect(local);
    assert!(
        text(&c.call(&["GET", "k"])).starts_with("-NOAUTH"),
        "auth still enforced"
    );
    assert_eq!(text(&c.call(&["AUTH", "pw"])), "OK", "the password stays");
    proxy.shutdown();
}

/// S16: `reload_with` takes the lock a reload from the file holds, so the two never
/// interleave. The file's reload is held inside its command-line overrides (under the
/// lock); `reload_with` must wait for it, and so lands last: its password wins.
#[test]
fn reload_with_waits_for_a_reload_of_the_file() {
    use std::sync::mpsc;
    use std::sync::Mutex;
    let cluster = cluster();
    let dir = common::tempdir("reload-lock");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("proxy.toml");
    let seeds: Vec<String> = cluster.masters().iter().map(|a| a.to_string()).collect();
    let config = |password: &str| {
        let mut c = Config::default();
        c.proxy.listen = "127.0.0.1:0".into();
        c.proxy.threads = 1;
        c.cluster.seeds = seeds.clone();
        c.auth.requirepass = password.into();
        c
    };
    let quoted: Vec<String> = seeds.iter().map(|s| format!("\"{s}\"")).collect();
    std::fs::write(
        &path,
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\nthreads = 1\n[cluster]\nseeds = [{}]\n[auth]\nrequirepass = \"from-file\"\n",
            quoted.join(",")
        ),
    )
    .unwrap();
    let proxy = Proxy::start(config("first")).expect("proxy starts");
    let (entered_tx, entered) = mpsc::channel::<()>();
    let (release, release_rx) = mpsc::channel::<()>();
    let (entered_tx, release_rx) = (Mutex::new(entered_tx), Mutex::new(release_rx));
    proxy.set_config_source(ConfigSource {
        path,
        overrides: Box::new(move |_| {
            let _ = entered_tx.lock().unwrap().send(());
            let _ = release_rx
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(30));
        }),
        on_applied: Box::new(|_| {}),
    });
    let reloader = proxy.reloader();
    std::thread::scope(|s| {
        let from_file = s.spawn(move || reloader.reload());
        entered
            .recv_timeout(Duration::from_secs(20))
            .expect("the file's reload started");
        let (done_tx, done) = mpsc::channel();
        let proxy = &proxy;
        let direct = config("direct");
        s.spawn(move || {
            let r = proxy.reload_with(direct);
            let _ = done_tx.send(r.is_ok());
        });
        // A ceiling on something that must not happen: the direct reload stays blocked.
        assert!(
            done.recv_timeout(Duration::from_millis(500)).is_err(),
            "reload_with ran while a reload of the file was half-way"
        );
        release.send(()).unwrap();
        assert!(from_file.join().unwrap().is_ok());
        assert_eq!(done.recv_timeout(Duration::from_secs(20)), Ok(true));
    });
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(
        text(&c.call(&["AUTH", "direct"])),
        "OK",
        "the reload that waited is the one in force"
    );
    proxy.shutdown();
}
