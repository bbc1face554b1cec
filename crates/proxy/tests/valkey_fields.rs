//! What the proxy answers itself behind Valkey, in Valkey's words (issue 25, Valkey's
//! unit/commandlog, unit/pause, unit/slowlog): COMMANDLOG's slow log is the proxy's own
//! SLOWLOG, its large-request and large-reply logs the proxy's own by its clients' sizes, INFO clients shows the proxy's CLIENT PAUSE as Valkey shows its own, and a
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
    // The large-request and large-reply logs are the proxy's too: the client's sizes,
    // name and address, Valkey's settings and defaults (1 MiB: nothing here is logged).
    for kind in ["large-request", "large-reply"] {
        assert_eq!(text(&c.call(&["COMMANDLOG", "RESET", kind])), "OK");
    }
    let value = "A".repeat(1024);
    c.call(&["SET", "big", &value]);
    c.call(&["GET", "big"]);
    assert_eq!(text(&c.call(&["COMMANDLOG", "LEN", "large-request"])), ":0");
    for setting in [
        "commandlog-request-larger-than",
        "commandlog-reply-larger-than",
    ] {
        assert_eq!(text(&c.call(&["CONFIG", "SET", setting, "1024"])), "OK");
    }
    c.call(&["SET", "big", &value]);
    c.call(&["GET", "big"]);
    c.call(&["GET", "small"]);
    let entries = |c: &mut Client, kind: &str| match c.call(&["COMMANDLOG", "GET", "-1", kind]) {
        resp::Value::Array(entries) => entries,
        other => panic!("{other:?}"),
    };
    let requests = entries(&mut c, "large-request");
    assert_eq!(requests.len(), 1, "{requests:?}");
    let got = format!("{:?}", requests[0]);
    // SET big <1024 bytes>: 1055 bytes as sent; the value cut at 128 bytes, as Valkey does.
    assert!(
        got.contains("Integer(1055)") && got.contains("foobar"),
        "{got}"
    );
    assert!(got.contains("896 more bytes"), "{got}");
    let replies = entries(&mut c, "large-reply");
    assert_eq!(replies.len(), 1, "{replies:?}");
    // GET big's reply: `$1024\r\n` + 1024 bytes + CRLF.
    let got = format!("{:?}", replies[0]);
    assert!(
        got.contains("Integer(1033)") && got.contains("\"GET\""),
        "{got}"
    );
    // A type the proxy does not keep: the node's error.
    let bad = text(&c.call(&["COMMANDLOG", "LEN", "no-such-type"]));
    assert!(bad.starts_with("-ERR"), "{bad}");
    for setting in [
        "commandlog-request-larger-than",
        "commandlog-reply-larger-than",
    ] {
        c.call(&["CONFIG", "SET", setting, "1048576"]);
    }
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
