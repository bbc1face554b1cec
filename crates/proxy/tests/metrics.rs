//! Statistics on a real cluster: INFO commandstats/latencystats and Prometheus `/metrics`.

mod common;

use common::{start_proxy, text, Client, Harness};

#[test]
fn commands_are_counted_in_info_and_metrics() {
    let h = Harness::start(3, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.admin.listen = "127.0.0.1:0".into());
    let mut c = Client::connect(proxy.local_addr());
    for i in 0..200 {
        assert_eq!(text(&c.call(&["SET", &format!("m:{i}"), "v"])), "OK");
    }
    for i in 0..100 {
        assert_eq!(text(&c.call(&["GET", &format!("m:{i}")])), "v");
    }
    let info = text(&c.call(&["INFO", "commandstats"]));
    assert!(info.contains("cmdstat_set:calls=200,"), "{info}");
    assert!(info.contains("cmdstat_get:calls=100,"), "{info}");
    let plain = text(&c.call(&["INFO"]));
    assert!(
        !plain.contains("cmdstat_"),
        "commandstats only on request, as in Redis"
    );
    let latency = text(&c.call(&["INFO", "latencystats"]));
    assert!(
        latency.contains("latency_percentiles_usec_set:p50="),
        "{latency}"
    );

    let admin = proxy.admin_addr().expect("admin endpoint");
    let body = common::scrape_path(admin, "/metrics");
    assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
    assert!(
        body.contains("slotgate_commands_total{command=\"set\"} 200"),
        "{body}"
    );
    assert!(body.contains("# TYPE slotgate_command_duration_seconds histogram"));
    assert!(body.contains("slotgate_command_duration_seconds_bucket{command=\"set\",le=\"+Inf\"}"));
    assert!(body.contains("slotgate_topology_slots_assigned 16384"));
    assert!(common::scrape_path(admin, "/nope").starts_with("HTTP/1.0 404"));
    proxy.shutdown();
}
