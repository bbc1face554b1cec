//! The hot-key board (issue 27's detection, `[hotkeys]`): a skewed workload through the
//! proxy, and INFO `hotkeys` names its hottest keys, reads and writes apart, and its
//! largest replies; so do `/metrics`, `/status.json` and HOTKEYS GET (Redis 8.6's shape).

mod common;

use std::io::Write;
use std::time::Duration;

use common::{text, Client};
use resp::Value;

/// `INFO hotkeys` lines `kindN:key=…` as (kind, key) in order.
fn board(info: &str) -> Vec<(String, String)> {
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let kind = name.trim_end_matches(|c: char| c.is_ascii_digit());
            let key = rest.strip_prefix("key=")?.split(',').next()?;
            Some((kind.to_string(), key.to_string()))
        })
        .collect()
}

#[test]
fn the_hottest_keys_are_named_reads_and_writes_apart() {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        dir: common::tempdir("hotkeys"),
        ..Default::default()
    };
    let cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
    let proxy = common::start_proxy(&cluster, |c| {
        c.hotkeys.enabled = true;
        // Long windows: the checks below (and a loaded CI machine) may outlast two 10 s
        // windows, after which an idle board is aged out.
        c.hotkeys.window_seconds = 300;
        c.admin.listen = "127.0.0.1:0".into();
    });
    let admin = proxy.admin_addr().expect("admin endpoint");
    let mut c = Client::connect(proxy.local_addr());
    let off = text(&c.call(&["INFO", "hotkeys"]));
    assert!(off.contains("hotkeys_enabled:1"), "{off}");
    let ok = text(&c.call(&[
        "HOTKEYS", "START", "METRICS", "2", "CPU", "NET", "COUNT", "5",
    ]));
    assert_eq!(ok, "OK");
    // hot:i read (20 - i) × 160 times, 2,000 cold keys 16 times each, interleaved by a
    // fixed shuffle; w:j written (5 - j) × 200 times.
    let mut requests: Vec<String> = Vec::new();
    for i in 0..10 {
        requests.extend(std::iter::repeat_n(format!("GET hot:{i}"), (20 - i) * 160));
    }
    for k in 0..2000 {
        requests.extend(std::iter::repeat_n(format!("GET cold:{k}"), 16));
    }
    for j in 0..5 {
        requests.extend(std::iter::repeat_n(format!("SET w:{j} v"), (5 - j) * 200));
    }
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in (1..requests.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        requests.swap(i, (x % (i as u64 + 1)) as usize);
    }
    pipelined(&mut c, &requests);
    big_values(&mut c);
    let info = text(&c.call(&["INFO", "hotkeys"]));
    let entries = board(&info);
    let reads: Vec<&str> = entries
        .iter()
        .filter(|(k, _)| k == "read")
        .map(|(_, key)| key.as_str())
        .collect();
    let mut expected: Vec<String> = (0..10).map(|i| format!("hot:{i}")).collect();
    let mut got: Vec<String> = reads.iter().map(|s| s.to_string()).collect();
    expected.sort();
    got.sort();
    assert_eq!(got, expected, "{info}");
    let writes: Vec<&str> = entries
        .iter()
        .filter(|(k, _)| k == "write")
        .map(|(_, key)| key.as_str())
        .collect();
    assert_eq!(writes.first(), Some(&"w:0"), "{info}");
    // The big values' three SETs may be sampled too, once each: below the five written
    // hundreds of times.
    let mut top_writes = writes[..5].to_vec();
    top_writes.sort();
    assert_eq!(top_writes, ["w:0", "w:1", "w:2", "w:3", "w:4"], "{info}");
    // The same board in /metrics, one series per key and rank, bounded by `top`.
    let series: Vec<String> = common::scrape(admin)
        .lines()
        .filter(|l| l.starts_with("slotgate_hotkey_requests{"))
        .map(str::to_string)
        .collect();
    let reads = series
        .iter()
        .filter(|l| l.contains("kind=\"read\""))
        .count();
    assert_eq!(reads, 10, "{series:?}");
    assert!((15..=18).contains(&series.len()), "{series:?}");
    assert!(series
        .iter()
        .any(|l| l.contains("kind=\"write\",rank=\"0\",key=\"w:0\"")));
    // Not in plain INFO, as commandstats is not.
    assert!(!text(&c.call(&["INFO"])).contains("# Hotkeys"));
    big_keys_are_named(&info, admin);
    status_json_has_the_board(admin);
    hotkeys_get_answers_as_redis(&mut c);
    proxy.shutdown();
}

/// `requests` ("CMD arg…") sent in pipelines of 500, every reply read.
fn pipelined(c: &mut Client, requests: &[String]) {
    for batch in requests.chunks(500) {
        let mut out = Vec::new();
        for r in batch {
            let args: Vec<&[u8]> = r.split(' ').map(str::as_bytes).collect();
            let mut frame = bytes::BytesMut::new();
            resp::encode_command(&mut frame, &args);
            out.extend_from_slice(&frame);
        }
        c.stream.write_all(&out).unwrap();
        for _ in batch {
            c.read().expect("a reply");
        }
    }
}

/// big:0..3 hold 40, 30 and 20 KB values, each read 64 times in a row: at least 4 of
/// each key's reads are sampled (one in 16).
fn big_values(c: &mut Client) {
    for (i, kb) in [40, 30, 20].into_iter().enumerate() {
        let value = "x".repeat(kb * 1000);
        assert_eq!(text(&c.call(&["SET", &format!("big:{i}"), &value])), "OK");
    }
    let mut reads = Vec::new();
    for i in 0..3 {
        reads.extend(std::iter::repeat_n(format!("GET big:{i}"), 64));
    }
    pipelined(c, &reads);
}

/// INFO `bigkeyN` and `slotgate_bigkey_reply_bytes`: the three big values first, each
/// with its reply's bytes (`$40000\r\n…\r\n`) and the command that got it.
fn big_keys_are_named(info: &str, admin: std::net::SocketAddr) {
    for (i, kb) in [40, 30, 20].into_iter().enumerate() {
        let line = format!(
            "bigkey{i}:key=big:{i},reply_bytes={},command=get",
            kb * 1000 + 10
        );
        assert!(info.contains(&line), "{line} in {info}");
    }
    let metrics = common::scrape(admin);
    let series: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("slotgate_bigkey_reply_bytes{"))
        .collect();
    assert!(series.len() <= 10, "bounded by top: {series:?}");
    assert!(
        series.contains(&"slotgate_bigkey_reply_bytes{rank=\"0\",key=\"big:0\"} 40010"),
        "{series:?}"
    );
}

/// `/status.json`'s board and, within a few of its 2 s steps, its history.
fn status_json_has_the_board(admin: std::net::SocketAddr) {
    let doc = || {
        let answer = common::scrape_path(admin, "/status.json");
        let body = answer.split("\r\n\r\n").nth(1).expect("a body").to_string();
        serde_json::from_str::<serde_json::Value>(&body).expect("JSON")
    };
    let d = doc();
    let hk = &d["hotkeys"];
    assert_eq!(hk["enabled"], true, "{hk}");
    let mut reads: Vec<&str> = hk["reads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    reads.sort();
    let expected: Vec<String> = (0..10).map(|i| format!("hot:{i}")).collect();
    assert_eq!(reads, expected, "{hk}");
    assert_eq!(hk["writes"][0]["key"], "w:0", "{hk}");
    assert_eq!(hk["big"][0]["key"], "big:0", "{hk}");
    assert_eq!(hk["big"][0]["reply_bytes"], 40010, "{hk}");
    common::wait_until(Duration::from_secs(20), || {
        doc()["history"]["t"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    });
    let h = &doc()["history"];
    assert_eq!(h["masters"].as_array().unwrap().len(), 3, "{h}");
}

/// HOTKEYS GET after START: Redis 8.6's one map in an array (a flat array in RESP2), the
/// keys by bytes (big:0's reads moved the most) and by time; STOP, RESET and the errors.
fn hotkeys_get_answers_as_redis(c: &mut Client) {
    let Value::Array(outer) = c.call(&["HOTKEYS", "GET"]) else {
        panic!("an array");
    };
    let Some(Value::Array(flat)) = outer.first() else {
        panic!("a flat map: {outer:?}");
    };
    let field = |name: &str| {
        let i = flat.iter().position(|v| text(v) == name);
        flat[i.unwrap_or_else(|| panic!("{name} in {flat:?}")) + 1].clone()
    };
    assert_eq!(field("tracking-active"), Value::Integer(1));
    assert_eq!(field("sample-ratio"), Value::Integer(16));
    let Value::Array(net) = field("by-net-bytes") else {
        panic!("by-net-bytes");
    };
    assert_eq!(text(&net[0]), "big:0", "{net:?}");
    assert!(net.len() <= 10, "COUNT 5: {net:?}");
    let Value::Array(cpu) = field("by-cpu-time-us") else {
        panic!("by-cpu-time-us");
    };
    assert!(!cpu.is_empty());
    let busy = text(&c.call(&["HOTKEYS", "RESET"]));
    assert!(busy.contains("stop tracking first"), "{busy}");
    assert_eq!(text(&c.call(&["HOTKEYS", "STOP"])), "OK");
    assert_eq!(c.call(&["HOTKEYS", "STOP"]), Value::Null);
    assert_eq!(text(&c.call(&["HOTKEYS", "RESET"])), "OK");
    assert_eq!(c.call(&["HOTKEYS", "GET"]), Value::Null);
    let refused = text(&c.call(&["HOTKEYS", "START", "COUNT", "3"]));
    assert_eq!(refused, "-ERR METRICS parameter is required");
    let unknown = text(&c.call(&["HOTKEYS", "NOPE"]));
    assert_eq!(unknown, "-ERR unknown subcommand 'NOPE'. Try HOTKEYS HELP.");
}
