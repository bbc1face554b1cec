//! TCP keepalive is on for every connection the proxy opens to a node (topology, shared,
//! dedicated), checked from the kernel's side: in `/proc/net/tcp`, an established socket
//! with SO_KEEPALIVE has its keepalive timer armed (`tr` = 2); without it, no timer (0).

mod common;

use std::time::Duration;

use common::{text, Client};
use proxy::{Config, Proxy};
use testkit::{FakeNode, Range};

/// The timer kind (`tr`) of every established socket (`st` 01) whose remote port is `port`
/// (the bootstrap's closed connection lingers in TIME_WAIT, with that state's own timer).
fn timers_towards(port: u16) -> Vec<u8> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp readable");
    let remote = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (rem, state, timer) = (cols.get(2)?, cols.get(3)?, cols.get(5)?);
            let ours = rem.ends_with(&remote) && *state == "01";
            ours.then(|| timer.split(':').next()?.parse().ok())?
        })
        .collect()
}

#[test]
fn every_backend_connection_has_keepalive() {
    let node = FakeNode::plain();
    node.set_slots(vec![Range::new(0, 16383, node.addr(), &node.id)]);
    let mut config = Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 1;
    config.cluster.seeds = vec![node.addr().to_string()];
    // Frequent refreshes, so the topology thread holds a kept connection when we look.
    config.cluster.min_refresh_interval_ms = 50;
    config.cluster.periodic_refresh_ms = 50;
    let proxy = Proxy::start(config).expect("proxy starts");
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["SET", "k", "v"])), "OK");
    // The fake node does not know BLPOP: it answers at once, on the dedicated connection.
    let _ = c.call(&["BLPOP", "k", "0"]);
    // The topology thread's kept connection, the shared one and the dedicated one.
    let port = node.addr().port();
    testkit::wait_until(Duration::from_secs(20), || timers_towards(port).len() >= 3);
    let timers = timers_towards(port);
    // The topology thread's kept connection, the shared one and the dedicated one.
    assert!(timers.len() >= 3, "connections to the node: {timers:?}");
    assert!(
        timers.iter().all(|&t| t == 2),
        "keepalive timers: {timers:?}"
    );
    proxy.shutdown();
}
