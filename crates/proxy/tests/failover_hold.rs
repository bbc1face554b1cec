//! F1 of the fault catalogue (reliability.md §C): `kill -9` of a master with a replica while
//! a client INCRs a counter in a loop through the proxy. Requests that never reached the dead
//! master are held for its replica's promotion instead of failing (`session/redirect/hold.rs`):
//! the client sees a pause, at most one error (the INCR in flight at the kill, whose outcome
//! is unknown), and the final counter equals the acknowledged count (that one INCR aside).

mod common;

use common::{text, Client, Harness};
use resp::Value;

#[test]
fn a_killed_master_costs_a_pause_not_errors() {
    let mut h = Harness::start(3, 1);
    let victim = h.cluster.owner_of(b"{f1}").unwrap();
    let mut c = h.client();
    let mut acked = 0i64;
    let mut errors = Vec::new();
    let mut killed = false;
    let mut after_kill = 0;
    // Until 200 INCRs were answered after the kill (whatever the failover takes).
    while after_kill < 200 {
        match c.call(&["INCR", "{f1}counter"]) {
            Value::Integer(n) => {
                acked += 1;
                assert!(n >= acked, "counter {n} behind {acked} acknowledged INCRs");
            }
            other => errors.push(text(&other)),
        }
        if killed {
            after_kill += 1;
        } else if acked == 500 {
            h.cluster.kill(victim).unwrap();
            killed = true;
        }
    }
    assert!(errors.len() <= 1, "errors: {errors:?}");
    for e in &errors {
        assert!(
            e.contains("may or may not have run"),
            "only an unknown outcome: {e}"
        );
    }
    let mut probe = Client::connect(h.addr());
    let counter = match probe.call(&["GET", "{f1}counter"]) {
        Value::BulkString(b) => String::from_utf8_lossy(&b).parse::<i64>().unwrap(),
        other => panic!("GET: {other:?}"),
    };
    let unknown = errors.len() as i64;
    assert!(
        (acked..=acked + unknown).contains(&counter),
        "counter {counter}, acknowledged {acked}, unknown {unknown}"
    );
    // The proxy counted what it held and released.
    let info = text(&probe.call(&["INFO", "stats"]));
    let stat = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} in INFO stats"))
    };
    assert!(stat("failover_held_requests") >= 1);
    assert_eq!(stat("failover_expired_requests"), 0);
    eprintln!(
        "acked {acked}, errors {errors:?}, held {}, released {}",
        stat("failover_held_requests"),
        stat("failover_released_requests")
    );
}
