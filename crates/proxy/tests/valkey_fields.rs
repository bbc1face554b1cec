//! What the proxy answers itself behind Valkey, in Valkey's words (issue 25, Valkey's
//! unit/commandlog, unit/pause, unit/slowlog): COMMANDLOG's slow log is the proxy's own
//! SLOWLOG, INFO clients shows the proxy's CLIENT PAUSE as Valkey shows its own, and a
//! CONFIG SET of Valkey's `primaryuser` is redacted in the log.

mod common;

use common::{text, Client, Harness};

fn field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or("<missing>")
        .trim()
        .to_string()
}

#[test]
fn commandlog_pause_info_and_redaction_answer_as_valkey() {
    let Some(cluster) = common::valkey_cluster(2, "valkey-fields") else {
        return;
    };
    let h = Harness {
        proxy: Some(common::start_proxy(&cluster, |cfg| {
            cfg.proxy.allow_admin_commands = true
        })),
        cluster,
    };
    let mut c: Client = h.client();
    // COMMANDLOG of type slow: the proxy's log, with the client's name, limited by Valkey's
    // setting names.
    assert_eq!(text(&c.call(&["CLIENT", "SETNAME", "foobar"])), "OK");
    let set = ["CONFIG", "SET", "commandlog-execution-slower-than", "0"];
    assert_eq!(text(&c.call(&set)), "OK");
    let max = ["CONFIG", "SET", "commandlog-slow-execution-max-len", "3"];
    assert_eq!(text(&c.call(&max)), "OK");
    assert_eq!(text(&c.call(&["COMMANDLOG", "RESET", "slow"])), "OK");
    for i in 0..5 {
        c.call(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(text(&c.call(&["COMMANDLOG", "LEN", "slow"])), ":3");
    let got = format!("{:?}", c.call(&["COMMANDLOG", "GET", "2", "slow"]));
    assert!(got.contains("foobar") && got.contains("k4"), "{got}");
    // CONFIG SET of Valkey's primaryuser: redacted in the log.
    c.call(&["CONFIG", "SET", "primaryuser", ""]);
    let got = format!("{:?}", c.call(&["SLOWLOG", "GET", "2"]));
    assert!(
        got.contains("(redacted)") && got.contains("primaryuser"),
        "{got}"
    );
    // The large-request log stays the nodes': answered by them.
    let large = c.call(&["COMMANDLOG", "LEN", "large-request"]);
    assert!(text(&large).starts_with(':'), "{large:?}");
    c.call(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    // INFO clients: the proxy's CLIENT PAUSE, as Valkey reports its own.
    let info = text(&c.call(&["INFO", "clients"]));
    assert_eq!(field(&info, "paused_reason"), "none", "{info}");
    assert_eq!(field(&info, "paused_actions"), "none", "{info}");
    assert_eq!(text(&c.call(&["CLIENT", "PAUSE", "10000", "WRITE"])), "OK");
    let info = text(&c.call(&["INFO", "clients"]));
    assert_eq!(field(&info, "paused_reason"), "client_pause", "{info}");
    assert_eq!(field(&info, "paused_actions"), "write", "{info}");
    let left: u64 = field(&info, "paused_timeout_milliseconds")
        .parse()
        .unwrap_or(0);
    assert!(left > 0 && left <= 10_000, "{info}");
    assert_eq!(text(&c.call(&["CLIENT", "UNPAUSE"])), "OK");
    // INFO tls without TLS: Valkey's fields, empty.
    let info = text(&c.call(&["INFO", "tls"]));
    for name in ["server", "client", "ca"] {
        assert_eq!(
            field(&info, &format!("tls_{name}_cert_serial")),
            "none",
            "{info}"
        );
        let left = field(&info, &format!("tls_{name}_cert_expires_in_seconds"));
        assert_eq!(left, "0", "{info}");
    }
}
