//! The status page on the admin port, loaded by headless Chromium (Debian's `chromium`,
//! installed by scripts/install-deps) against a live 3x1 cluster: it shows the 3 masters,
//! all 16384 slots covered, the charts of the last minutes and the hot-key board. The screenshot goes to a temporary file, or to
//! docs/status.png with `UPDATE_SCREENSHOT=1` (the one the README shows).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{scrape_path, start_proxy, text};

/// Headless Chromium with a few seconds of virtual time, so the page's fetches and its
/// 2 s refresh timer run before the DOM is dumped or the screenshot taken.
fn chromium(args: &[&str], url: &str) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--virtual-time-budget=7000",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs (scripts/install-deps installs it)");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_status_page_shows_every_master_and_every_slot() {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 1,
        dir: common::tempdir("status"),
        ..Default::default()
    };
    let cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
    let proxy = start_proxy(&cluster, |c| {
        c.admin.listen = "127.0.0.1:0".into();
        c.hotkeys.enabled = true;
        // Long windows: on a loaded machine the wait and Chromium's start can outlast two
        // 10 s windows, and an idle board is aged out by then.
        c.hotkeys.window_seconds = 300;
    });
    let admin = proxy.admin_addr().unwrap();
    let mut c = common::Client::connect(proxy.local_addr());
    for i in 0..300 {
        assert_eq!(text(&c.call(&["SET", &format!("k{i}"), "v"])), "OK");
        assert_eq!(text(&c.call(&["GET", &format!("k{}", i % 5)])), "v");
    }
    // The admin thread's ring has a rate (two points, 2 s apart) before the page loads.
    common::wait_until(std::time::Duration::from_secs(20), || {
        let answer = scrape_path(admin, "/status.json");
        answer.contains("\"t\":[") && !answer.contains("\"t\":[]")
    });

    let answer = scrape_path(admin, "/status.json");
    let body = answer.split("\r\n\r\n").nth(1).expect("a body");
    let doc: serde_json::Value = serde_json::from_str(body).expect("JSON");
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 3, "{doc}");
    let covered: u64 = doc["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["master"].is_null())
        .map(|r| r["end"].as_u64().unwrap() - r["start"].as_u64().unwrap() + 1)
        .sum();
    assert_eq!(covered, 16384, "{doc}");
    assert_eq!(doc["proxy"]["ready"], true, "{doc}");

    let url = format!("http://{admin}/");
    let dom = chromium(&["--dump-dom"], &url);
    assert!(
        dom.contains("data-loaded=\"yes\""),
        "the page read /status.json: {dom}"
    );
    assert!(dom.contains("data-nodes=\"3\""), "3 masters listed: {dom}");
    assert!(
        dom.contains("data-slots=\"16384\""),
        "every slot covered: {dom}"
    );
    assert!(dom.contains("16384 of 16384 slots covered"), "{dom}");
    assert!(dom.contains("id=\"rpsChart\""), "{dom}");
    assert!(
        !dom.contains("data-points=\"0\""),
        "the charts have points: {dom}"
    );
    assert!(
        dom.contains("<code title=\"k0\">k0</code>"),
        "k0 among the hot reads: {dom}"
    );

    let shot = match std::env::var_os("UPDATE_SCREENSHOT") {
        Some(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/status.png"),
        None => common::tempdir("status-shot").with_extension("png"),
    };
    let arg = format!("--screenshot={}", shot.display());
    chromium(&[&arg, "--window-size=1100,700"], &url);
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    proxy.shutdown();
}
