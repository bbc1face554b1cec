//! `/healthz` and `/readyz` on the admin port, as load balancers and Kubernetes probe them:
//! live while the process answers, ready while every slot has a reachable master. A master
//! with no replica that dies leaves its slots without one, so the proxy turns not-ready.

mod common;

use std::time::Duration;

use common::{scrape_path, start_proxy, wait_until};

#[test]
fn readyz_turns_not_ready_when_a_master_without_replica_dies() {
    let dir = common::tempdir("health");
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        dir,
        ..Default::default()
    };
    let mut cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
    let proxy = start_proxy(&cluster, |c| c.admin.listen = "127.0.0.1:0".into());
    let admin = proxy.admin_addr().expect("admin endpoint");
    let live = scrape_path(admin, "/healthz");
    assert!(live.starts_with("HTTP/1.0 200"), "{live}");
    let ready = scrape_path(admin, "/readyz");
    assert!(ready.starts_with("HTTP/1.0 200"), "{ready}");
    assert!(ready.contains("ready: topology version"), "{ready}");

    // Connections to every master, so its loss is seen at once.
    let mut c = common::Client::connect(proxy.local_addr());
    assert!(matches!(c.call(&["DBSIZE"]), resp::Value::Integer(0)));
    drop(c);
    let victim = cluster.masters()[1];
    cluster.kill(victim).expect("kill a master");
    // Its connections break at once; no request is needed (one for its slots would be held,
    // waiting for a replacement master, up to cluster.failover_hold_ms).
    wait_until(Duration::from_secs(20), || {
        scrape_path(admin, "/readyz").starts_with("HTTP/1.0 503")
    });
    let not_ready = scrape_path(admin, "/readyz");
    assert!(
        not_ready.contains(&format!("master {victim} (5461 slots) is unreachable")),
        "{not_ready}"
    );
    let live = scrape_path(admin, "/healthz");
    assert!(
        live.starts_with("HTTP/1.0 200"),
        "alive though not ready: {live}"
    );
    let other = scrape_path(admin, "/nope");
    assert!(other.starts_with("HTTP/1.0 404"), "{other}");
    proxy.shutdown();
}
