//! The topology thread facing a node that accepts connections and never answers (a wedged
//! process, a half-open firewall), with backend AUTH configured so the first thing the
//! proxy waits for is AUTH's reply: bootstrap must give up on that seed, refreshes must
//! not wedge, and shutdown must not hang. Bounds are generous ceilings (tens of seconds),
//! far above the 2 s query timeout: they catch a hang, not a slow machine.

use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use proxy::{Config, Proxy};
use testkit::{FakeNode, Range, Reply};

/// Far above any timeout the proxy applies; only a hang goes past it.
const CEILING: Duration = Duration::from_secs(30);

/// A listener whose connections complete (the kernel's backlog) but are never read.
fn silent_listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port")
}

fn config(seeds: Vec<String>) -> Config {
    let mut config = Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 1;
    config.cluster.seeds = seeds;
    config.cluster.backend_password = "secret".into();
    config.cluster.min_refresh_interval_ms = 50;
    config.cluster.periodic_refresh_ms = 50;
    config
}

/// Run `f` on its own thread; None when it has not finished within `CEILING`.
fn within_ceiling<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(CEILING).ok()
}

/// The only seed accepts and never answers AUTH: bootstrap fails instead of waiting forever.
#[test]
fn bootstrap_gives_up_on_a_seed_that_never_answers_auth() {
    let silent = silent_listener();
    let seed = silent.local_addr().unwrap().to_string();
    let started = within_ceiling(move || Proxy::start(config(vec![seed])).map(Proxy::shutdown));
    let result = started.expect("bootstrap returned instead of hanging");
    let err = result.expect_err("no seed answered, so the proxy cannot start");
    assert!(err.to_string().contains("timed out"), "{err}");
    drop(silent);
}

/// A master that never answers is among the refresher's targets: refreshes keep going past
/// it, and shutdown completes.
#[test]
fn refreshes_and_shutdown_survive_a_node_that_never_answers() {
    let silent = silent_listener();
    let silent_addr = silent.local_addr().unwrap();
    let good = FakeNode::start(|args, _| match args[0].to_ascii_uppercase().as_slice() {
        b"AUTH" => Reply::Bytes(testkit::reply::ok()),
        _ => Reply::Default,
    });
    good.set_slots(vec![
        Range::new(0, 8191, good.addr(), &good.id),
        Range::new(8192, 16383, silent_addr, &"s".repeat(40)),
    ]);
    let proxy = Proxy::start(config(vec![good.addr().to_string()])).expect("proxy starts");
    // Refreshes every 50 ms pick one of the two masters first at random: the silent one
    // is dialled (its connection waits in the listener's backlog, where `accept` finds
    // it), and refreshes must go on past it, answered by the good one.
    silent.set_nonblocking(true).expect("nonblocking");
    let mut held = Vec::new();
    testkit::wait_until(CEILING, || match silent.accept() {
        Ok((conn, _)) => {
            held.push(conn); // kept open and never read: the node stays silent
            true
        }
        Err(_) => false,
    });
    let before = good.count("CLUSTER SLOTS");
    testkit::wait_until(CEILING, || good.count("CLUSTER SLOTS") > before + 1);
    assert!(
        within_ceiling(move || proxy.shutdown()).is_some(),
        "shutdown completed"
    );
    drop(silent);
}
