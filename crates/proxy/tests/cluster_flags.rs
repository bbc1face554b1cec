//! A client's own ASKING, READONLY and READWRITE are answered by the proxy (`+OK`, as a
//! cluster node answers them) and never reach a node: sent down a shared connection,
//! ASKING's one-shot flag would apply to whichever client's command came next there.

mod common;

use common::{calls_on_masters, text, Harness};

#[test]
fn asking_readonly_readwrite_are_answered_by_the_proxy() {
    let h = Harness::start(3, 0);
    let mut a = h.client();
    let mut b = h.client();
    for _ in 0..3 {
        for cmd in ["ASKING", "READONLY", "READWRITE", "asking"] {
            assert_eq!(text(&a.call(&[cmd])), "OK", "{cmd}");
        }
        // Another client's commands, possibly on the same shared connections.
        assert_eq!(text(&b.call(&["SET", "flags:k", "v"])), "OK");
        assert_eq!(text(&b.call(&["GET", "flags:k"])), "v");
    }
    for name in ["asking", "readonly", "readwrite"] {
        assert_eq!(calls_on_masters(&h, name), 0, "{name} reached a node");
    }
    // Inside MULTI they queue like any command, as Redis does.
    assert_eq!(text(&a.call(&["MULTI"])), "OK");
    assert_eq!(text(&a.call(&["READONLY"])), "QUEUED");
    assert_eq!(text(&a.call(&["GET", "flags:k"])), "QUEUED");
    let exec = a.call(&["EXEC"]);
    assert!(format!("{exec:?}").contains("OK"), "{exec:?}");
    assert!(
        format!("{exec:?}").contains("BulkString(b\"v\")"),
        "{exec:?}"
    );
}
