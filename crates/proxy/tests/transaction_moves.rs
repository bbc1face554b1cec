//! A transaction whose slot is migrating or has moved runs as on one Redis: the node refuses
//! the queued commands (ASK, MOVED) before anything runs, and the proxy sends the whole
//! `MULTI…EXEC` again where the keys are, instead of passing on an EXECABORT that one Redis
//! never gives. After WATCH it cannot (the WATCH stayed behind): EXEC answers nil.

mod common;

use common::migrate::Move;
use common::{text, Harness};
use resp::Value;

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("array expected, got {v:?}"))
        .iter()
        .map(text)
        .collect()
}

#[test]
fn a_transaction_follows_its_slot_through_a_migration() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    assert_eq!(text(&c.call(&["SET", "{tx}a", "1"])), "OK");
    let moving = Move::begin(&h.cluster, "{tx}");
    moving.migrate(&["{tx}a".to_string()]);
    // The key is on the target: the owner answers ASK for each queued command.
    for cmd in [&["MULTI"][..], &["INCR", "{tx}a"], &["GET", "{tx}a"]] {
        let reply = text(&c.call(cmd));
        assert!(reply == "OK" || reply == "QUEUED", "{cmd:?}: {reply}");
    }
    assert_eq!(
        strings(&c.call(&["EXEC"])),
        [":2", "2"],
        "run at the target"
    );
    moving.finish();
    // The proxy's map still names the old owner, which now answers MOVED.
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["INCR", "{tx}a"])), "QUEUED");
    assert_eq!(strings(&c.call(&["EXEC"])), [":3"], "run at the new owner");
    assert_eq!(text(&c.call(&["GET", "{tx}a"])), "3", "applied once");
}

#[test]
fn a_watched_transaction_whose_keys_moved_answers_nil() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    assert_eq!(text(&c.call(&["SET", "{tw}a", "1"])), "OK");
    assert_eq!(text(&c.call(&["WATCH", "{tw}a"])), "OK");
    let moving = Move::begin(&h.cluster, "{tw}");
    moving.migrate(&["{tw}a".to_string()]);
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["INCR", "{tw}a"])), "QUEUED");
    assert_eq!(
        c.call(&["EXEC"]),
        Value::NullArray,
        "not an ASK, not EXECABORT"
    );
    moving.finish();
    assert_eq!(
        text(&c.call(&["GET", "{tw}a"])),
        "1",
        "nothing ran unwatched"
    );
}
