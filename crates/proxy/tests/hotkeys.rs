//! The hot-key board (issue 27's detection, `[hotkeys]`): a skewed workload through the
//! proxy, and INFO `hotkeys` names its hottest keys, reads and writes apart.

mod common;

use std::io::Write;

use common::{text, Client};

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
        c.admin.listen = "127.0.0.1:0".into();
    });
    let admin = proxy.admin_addr().expect("admin endpoint");
    let mut c = Client::connect(proxy.local_addr());
    let off = text(&c.call(&["INFO", "hotkeys"]));
    assert!(off.contains("hotkeys_enabled:1"), "{off}");
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
    assert_eq!(writes.len(), 5, "{info}");
    // The same board in /metrics, one series per key and rank, bounded by `top`.
    let series: Vec<String> = common::scrape(admin)
        .lines()
        .filter(|l| l.starts_with("slotgate_hotkey_requests{"))
        .map(str::to_string)
        .collect();
    assert_eq!(series.len(), 15, "{series:?}");
    assert!(series
        .iter()
        .any(|l| l.contains("kind=\"write\",rank=\"0\",key=\"w:0\"")));
    // Not in plain INFO, as commandstats is not.
    assert!(!text(&c.call(&["INFO"])).contains("# Hotkeys"));
    proxy.shutdown();
}
