//! Valkey's CLIENT IMPORT-SOURCE through the proxy (issue 25, Valkey's unit/expire), in a
//! test binary of its own: written while the command table learned from the nodes was one
//! per process (a Redis 7.0 proxy of another test replaced the Valkey rows it needs); each
//! proxy now has its own (`learned_tables.rs`).

mod common;

use std::time::Duration;

use common::reference::exchange;
use common::{text, Client, Harness};
use resp::Value;

/// The flags of `c`'s own line in CLIENT LIST.
fn own_flags(c: &mut Client) -> String {
    let id = text(&c.call(&["CLIENT", "ID"]));
    let line = text(&c.call(&["CLIENT", "LIST", "ID", id.trim_start_matches(':')]));
    let flags = line.split(' ').find(|f| f.starts_with("flags="));
    flags.unwrap_or("no flags").to_string()
}

/// Valkey's unit/expire import-source tests through the proxy: the masters decide ON
/// (their `import-mode`), their refusal is the answer verbatim, and once on the client's
/// requests (the very next one, pipelined) see expired keys as Valkey's import source does.
#[test]
fn client_import_source_is_the_masters_to_allow_and_then_sees_expired_keys() {
    let Some(cluster) = common::valkey_cluster(2, "import-source") else {
        return;
    };
    let h = Harness {
        proxy: Some(common::start_proxy(&cluster, |_| {})),
        cluster,
    };
    let mut masters: Vec<Client> = h
        .cluster
        .masters()
        .into_iter()
        .map(Client::connect)
        .collect();
    let import_mode = |masters: &mut [Client], on: &str| {
        for m in masters.iter_mut() {
            assert_eq!(text(&m.call(&["CONFIG", "SET", "import-mode", on])), "OK");
        }
    };
    let mut c = h.client();
    // The subcommand is known once the proxy learned the masters' COMMAND INFO.
    testkit::wait_until(Duration::from_secs(20), || {
        text(&c.call(&["CLIENT", "IMPORT-SOURCE", "OFF"])) == "OK"
    });
    let owner = h.cluster.owner_of(b"foo1").unwrap();
    let mut direct = Client::connect(owner);

    // Refused by the servers, in their words; the mode stays off.
    import_mode(&mut masters, "no");
    for arg in ["ON", "maybe"] {
        let want = text(&direct.call(&["CLIENT", "IMPORT-SOURCE", arg]));
        assert_eq!(want, "-ERR Server is not in import mode");
        assert_eq!(text(&c.call(&["CLIENT", "IMPORT-SOURCE", arg])), want);
    }
    assert_eq!(own_flags(&mut c), "flags=N");
    // One master in import mode is not enough: the client's keys live on all of them.
    masters[0].call(&["CONFIG", "SET", "import-mode", "yes"]);
    let refused = text(&c.call(&["CLIENT", "IMPORT-SOURCE", "ON"]));
    assert_eq!(refused, "-ERR Server is not in import mode");
    import_mode(&mut masters, "yes");
    assert_eq!(
        text(&c.call(&["CLIENT", "IMPORT-SOURCE", "maybe"])),
        text(&direct.call(&["CLIENT", "IMPORT-SOURCE", "maybe"])),
    );

    // "Client can visit expired key in import-source state".
    assert_eq!(text(&c.call(&["SET", "foo1", "1", "PX", "1"])), "OK");
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(text(&c.call(&["GET", "foo1"])), "(nil)");
    assert_eq!(text(&c.call(&["TTL", "foo1"])), ":-2");
    assert_eq!(text(&c.call(&["DBSIZE"])), ":1");
    // The request pipelined right behind ON already runs in the mode.
    let mut fresh = h.client();
    let got = exchange(&mut fresh, &["CLIENT IMPORT-SOURCE ON", "GET foo1"], 2);
    assert_eq!(got, ["+OK\r\n", "$1\r\n1\r\n"]);
    assert_eq!(text(&c.call(&["CLIENT", "IMPORT-SOURCE", "ON"])), "OK");
    assert_eq!(own_flags(&mut c), "flags=I");
    assert_eq!(text(&c.call(&["TTL", "foo1"])), ":0");
    assert_eq!(text(&c.call(&["GET", "foo1"])), "1");
    assert_eq!(text(&c.call(&["INCR", "foo1"])), ":2");
    assert_eq!(text(&c.call(&["RANDOMKEY"])), "foo1");
    let keys = c.call(&["KEYS", "*"]);
    assert_eq!(keys, Value::Array(vec![Value::BulkString("foo1".into())]));
    // Other clients still see it expired.
    assert_eq!(text(&h.client().call(&["GET", "foo1"])), "(nil)");

    // "import-source can be closed when import-mode is off": the flag stays until OFF, as
    // on the node, and means nothing meanwhile.
    direct.call(&["CLIENT", "IMPORT-SOURCE", "ON"]);
    import_mode(&mut masters, "no");
    assert_eq!(own_flags(&mut c), own_flags(&mut direct));
    assert_eq!(own_flags(&mut c), "flags=I");
    assert_eq!(text(&c.call(&["GET", "foo1"])), "(nil)");
    assert_eq!(text(&c.call(&["CLIENT", "IMPORT-SOURCE", "OFF"])), "OK");
    assert_eq!(own_flags(&mut c), "flags=N");

    // RESET drops it (`RESET clears the import-source flag`).
    import_mode(&mut masters, "yes");
    assert_eq!(text(&c.call(&["SET", "foo1", "1", "PX", "1"])), "OK");
    std::thread::sleep(Duration::from_millis(10));
    // Inside MULTI too: replayed at EXEC before the GET, which then sees the expired key.
    let tx = [
        "MULTI",
        "CLIENT IMPORT-SOURCE ON",
        "GET foo1",
        "EXEC",
        "CLIENT IMPORT-SOURCE OFF",
    ];
    let got = exchange(&mut c, &tx, 5);
    let want = exchange(&mut direct, &tx, 5);
    assert_eq!(got, want);
    assert_eq!(text(&fresh.call(&["CLIENT", "IMPORT-SOURCE", "ON"])), "OK");
    assert_eq!(text(&fresh.call(&["RESET"])), "RESET");
    assert_eq!(own_flags(&mut fresh), "flags=N");
    import_mode(&mut masters, "no");
}
