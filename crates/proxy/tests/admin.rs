//! The admin endpoint as an operator expects it (review S5): a bearer token guards
//! everything but the probes, a web page cannot post to `/reload` nor read through a
//! rebound DNS name, and an admin port off loopback without a token is refused at start
//! and at reload.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use common::{start_proxy, tempdir};
use proxy::{Config, ConfigSource, Proxy};

/// One raw HTTP exchange: the whole answer, headers included.
fn http(addr: SocketAddr, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// `METHOD path` over HTTP/1.1 with `Host: <addr>` and these extra header lines.
fn call(addr: SocketAddr, method: &str, path: &str, headers: &[&str]) -> String {
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    let length = match method {
        "POST" => "Content-Length: 0\r\n",
        _ => "",
    };
    http(
        addr,
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{length}{extra}Connection: close\r\n\r\n"
        ),
    )
}

fn status(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn cluster(tag: &str) -> devcluster::Cluster {
    let opts = devcluster::Options {
        masters: 1,
        replicas: 0,
        dir: tempdir(tag),
        ..Default::default()
    };
    devcluster::Cluster::start(&opts).expect("cluster starts")
}

/// `[admin]` from TOML, so the test reads as the operator's file would.
fn admin(c: &mut Config, listen: &str, token: &str) {
    let text = format!("[admin]\nlisten = \"{listen}\"\ntoken = \"{token}\"\n");
    c.admin = Config::from_toml(&text).expect("admin section").admin;
}

const TOKEN: &str = "adm1n-T0ken-5e1f";

#[test]
fn the_token_guards_everything_but_the_probes() {
    let cluster = cluster("admin-token");
    let proxy = start_proxy(&cluster, |c| admin(c, "127.0.0.1:0", TOKEN));
    let addr = proxy.admin_addr().unwrap();
    let bearer = format!("Authorization: Bearer {TOKEN}");
    for path in ["/", "/status.json", "/metrics"] {
        let refused = call(addr, "GET", path, &[]);
        assert_eq!(status(&refused), 401, "{path}: {refused}");
        assert!(!refused.contains(TOKEN));
        let wrong = call(addr, "GET", path, &["Authorization: Bearer nope"]);
        assert_eq!(status(&wrong), 401, "{path}: {wrong}");
        let ok = call(addr, "GET", path, &[&bearer]);
        assert_eq!(status(&ok), 200, "{path}: {ok}");
    }
    assert_eq!(status(&call(addr, "POST", "/reload", &[])), 401);
    // No configuration file: refused by the reload, past the token.
    let reload = call(addr, "POST", "/reload", &[&bearer]);
    assert_eq!(status(&reload), 500, "{reload}");
    assert!(reload.contains("no configuration file"), "{reload}");
    for probe in ["/healthz", "/livez", "/readyz"] {
        let open = call(addr, "GET", probe, &[]);
        assert_eq!(status(&open), 200, "{probe}: {open}");
        // A probe may name the host however it likes.
        let named = http(
            addr,
            &format!("GET {probe} HTTP/1.1\r\nHost: pod.svc:9121\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(status(&named), 200, "{probe}: {named}");
    }
    let mut c = common::Client::connect(proxy.local_addr());
    let info = common::text(&c.call(&["INFO", "everything"]));
    assert!(!info.contains(TOKEN), "INFO shows the admin token");
    proxy.shutdown();
}

#[test]
fn a_cross_site_post_to_reload_is_refused() {
    let cluster = cluster("admin-csrf");
    let dir = tempdir("admin-csrf-file");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("proxy.toml");
    let seed = cluster.seed().to_string();
    let file = |password: &str| {
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\nthreads = 1\n[cluster]\nseeds = [\"{seed}\"]\n[auth]\nrequirepass = \"{password}\"\n"
        )
    };
    std::fs::write(&path, file("before")).unwrap();
    let proxy = start_proxy(&cluster, |c| {
        *c = Config::from_toml(&file("before")).unwrap();
        c.admin.listen = "127.0.0.1:0".into();
    });
    proxy.set_config_source(ConfigSource {
        path: path.clone(),
        overrides: Box::new(|_| {}),
        on_applied: Box::new(|_| {}),
    });
    let addr = proxy.admin_addr().unwrap();
    std::fs::write(&path, file("after")).unwrap();
    let own = format!("Origin: http://{addr}");
    let refused: &[(&[&str], u16)] = &[
        // What a <form method=post> on any web page sends.
        (
            &[
                "Origin: http://evil.example",
                "Content-Type: application/x-www-form-urlencoded",
            ],
            403,
        ),
        (&["Content-Type: application/x-www-form-urlencoded"], 415),
        (&["Content-Type: multipart/form-data; boundary=x"], 415),
        (&["Content-Type: text/plain"], 415),
        (&[own.as_str(), "Content-Type: text/plain"], 415),
        (&["Origin: null"], 403),
        (&["Sec-Fetch-Site: cross-site"], 403),
    ];
    for (headers, want) in refused {
        let answer = call(addr, "POST", "/reload", headers);
        assert_eq!(status(&answer), *want, "{headers:?}: {answer}");
    }
    // DNS rebinding: the page's own name in Host, on every endpoint but the probes.
    for (method, path) in [
        ("POST", "/reload"),
        ("GET", "/status.json"),
        ("GET", "/metrics"),
    ] {
        let rebound = http(
            addr,
            &format!("{method} {path} HTTP/1.1\r\nHost: evil.example:9121\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(status(&rebound), 403, "{path}: {rebound}");
    }
    let mut c = common::Client::connect(proxy.local_addr());
    assert_eq!(common::text(&c.call(&["AUTH", "before"])), "OK");
    let stats = common::text(&c.call(&["INFO", "stats"]));
    assert!(
        stats.contains("config_reloads:0"),
        "no refused request reloaded: {stats}"
    );
    // The operator's own call still works: curl sends no Origin and no form type.
    let ok = call(addr, "POST", "/reload", &[]);
    assert_eq!(status(&ok), 200, "{ok}");
    let mut c = common::Client::connect(proxy.local_addr());
    assert_eq!(common::text(&c.call(&["AUTH", "after"])), "OK");
    // As does a request from the status page itself (same origin, JSON or no body).
    let same = call(
        addr,
        "POST",
        "/reload",
        &[&own, "Content-Type: application/json"],
    );
    assert_eq!(status(&same), 200, "{same}");
    proxy.shutdown();
}

#[test]
fn an_admin_port_off_loopback_needs_a_token_at_start_and_at_reload() {
    let cluster = cluster("admin-public");
    let port = devcluster::free_port_pair().unwrap();
    let public = format!("0.0.0.0:{port}");
    let config = |token: &str| {
        let mut c = Config::default();
        c.proxy.listen = "127.0.0.1:0".into();
        c.proxy.threads = 1;
        c.cluster.seeds = vec![cluster.seed().to_string()];
        admin(&mut c, &public, token);
        c
    };
    let err = Proxy::start(config(""))
        .err()
        .expect("refused without a token");
    assert!(err.to_string().contains(&public), "{err}");
    assert!(err.to_string().contains("admin.token"), "{err}");

    let proxy = Proxy::start(config(TOKEN)).expect("starts with a token");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let bearer = format!("Authorization: Bearer {TOKEN}");
    assert_eq!(status(&call(addr, "GET", "/metrics", &[&bearer])), 200);
    let err = proxy
        .reload_with(config(""))
        .expect_err("a reload cannot drop the token");
    assert!(err.to_string().contains(&public), "{err}");
    assert!(!err.to_string().contains(TOKEN));
    assert_eq!(
        status(&call(addr, "GET", "/metrics", &[])),
        401,
        "still guarded"
    );
    assert_eq!(status(&call(addr, "GET", "/metrics", &[&bearer])), 200);
    // The token itself may change live.
    proxy.reload_with(config("n3w-t0ken")).expect("a new token");
    assert_eq!(status(&call(addr, "GET", "/metrics", &[&bearer])), 401);
    let new = "Authorization: Bearer n3w-t0ken";
    assert_eq!(status(&call(addr, "GET", "/metrics", &[new])), 200);
    proxy.shutdown();
}
