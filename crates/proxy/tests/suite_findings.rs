//! What Redis's own test suite found through the proxy (issue 25, `docs/suite.md`), each
//! class checked here against a standalone redis-server as the oracle, so that it stays
//! fixed without running the Tcl suite: deep replies, CLIENT REPLY, blocking commands
//! inside MULTI, INFO's client counts.

mod common;

use std::time::{Duration, Instant};

use common::reference::{exchange, read_frames, Reference};
use common::{text, Client, Harness};
use resp::Value;

/// The same commands (whole arguments, spaces allowed) sent to both, `frames` replies each.
fn both(h: &Harness, reference: &Reference, cmds: &[&[&str]], frames: usize) -> [Vec<String>; 2] {
    [h.client(), reference.client()].map(|mut c| {
        for cmd in cmds {
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            c.send(&args);
        }
        read_frames(&mut c, frames)
    })
}

/// The same pipeline (each string split on spaces) written to both in one write, `frames`
/// raw replies read from each; they must be equal. The proxy's replies are returned.
fn pipelined(h: &Harness, reference: &Reference, cmds: &[&str], frames: usize) -> Vec<String> {
    let [proxied, direct] = [h.addr(), reference.addr].map(|addr| {
        let mut c = Client::connect(addr);
        exchange(&mut c, cmds, frames)
    });
    assert_eq!(proxied, direct);
    proxied
}

#[test]
fn a_script_reply_of_any_depth_passes_and_the_shared_connection_survives() {
    let h = Harness::start(1, 0);
    let reference = Reference::start();
    // Thousands of levels, as a script returning a self-referencing table gets from Redis:
    // the framer used to refuse past 1024 and drop the node connection others share.
    let script = "local t = {} local c = t for i = 1, 3000 do local n = {} c[1] = n c = n end \
                  c[1] = 'leaf' return t";
    let cmds: &[&[&str]] = &[&["SET", "k", "v"], &["EVAL", script, "0"], &["GET", "k"]];
    let [proxied, direct] = both(&h, &reference, cmds, 3);
    assert!(direct[1].len() > 3000 * 4, "the oracle nests deeply");
    assert_eq!(proxied, direct);
    // Another client, on the same shared connection, still served.
    let mut other = h.client();
    assert_eq!(text(&other.call(&["GET", "k"])), "v");
}

#[test]
fn client_reply_off_skip_and_on_answer_as_redis() {
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    let cmds = [
        "CLIENT REPLY OFF",
        "SET a 1",
        "GET a",
        "CLIENT REPLY SKIP",
        "CLIENT REPLY ON",
        "GET a",
        "CLIENT REPLY SKIP",
        "INCR a",
        "GET a",
        "CLIENT REPLY SKIP",
        "CLIENT REPLY SKIP",
        "INCR a",
        "GET a",
        "CLIENT REPLY MAYBE",
        "CLIENT REPLY",
    ];
    let got = pipelined(&h, &reference, &cmds, 6);
    assert_eq!(got[0], "+OK\r\n", "ON answers");
    assert_eq!(got[2], "$1\r\n2\r\n", "the skipped INCR ran");
}

#[test]
fn blocking_commands_inside_multi_run_without_blocking() {
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    let cmds = [
        "DEL {l}1",
        "MULTI",
        "BLPOP {l}1 0",
        "LPUSH {l}1 x y",
        "BRPOP {l}1 0",
        "BLMOVE {l}1 {l}2 LEFT RIGHT 0",
        "EXEC",
    ];
    let got = pipelined(&h, &reference, &cmds, 7);
    assert!(got[6].starts_with("*4\r\n*-1\r\n:2\r\n"), "{:?}", got[6]);
}

#[test]
fn info_counts_blocked_pubsub_and_watching_clients() {
    let h = Harness::start(3, 0);
    let mut admin = h.client();
    let field = |c: &mut Client, name: &str| -> String {
        let info = text(&c.call(&["INFO", "clients"]));
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {info}"))
            .trim()
            .to_string()
    };
    let wait_for = |c: &mut Client, name: &str, want: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while field(c, name) != want {
            assert!(Instant::now() < deadline, "{name} never became {want}");
            std::thread::sleep(Duration::from_millis(10)); // poll step
        }
    };
    assert_eq!(field(&mut admin, "blocked_clients"), "0");
    let mut blocked = h.client();
    blocked.send(&[b"BLPOP", b"nothing-yet", b"0"]);
    wait_for(&mut admin, "blocked_clients", "1");
    let mut subscriber = h.client();
    subscriber.call(&["SUBSCRIBE", "ch"]);
    wait_for(&mut admin, "pubsub_clients", "1");
    let mut watcher = h.client();
    assert_eq!(text(&watcher.call(&["WATCH", "w"])), "OK");
    wait_for(&mut admin, "watching_clients", "1");
    assert_eq!(text(&admin.call(&["LPUSH", "nothing-yet", "v"])), ":1");
    assert!(blocked.read().is_some());
    wait_for(&mut admin, "blocked_clients", "0");
    assert!(field(&mut admin, "maxclients").parse::<u64>().unwrap() > 0);
}

#[test]
fn client_pause_errors_answer_as_redis() {
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    let cmds = [
        "CLIENT PAUSE abc",
        "CLIENT PAUSE -1",
        "CLIENT PAUSE 10 MAYBE",
        "CLIENT PAUSE x MAYBE",
        "CLIENT PAUSE 10 ALL extra",
        "CLIENT PAUSE",
        "CLIENT PAUSE 0 WRITE",
        "SET p 1",
        "CLIENT UNPAUSE",
        "CLIENT UNPAUSE now",
    ];
    pipelined(&h, &reference, &cmds, cmds.len());
}

#[test]
fn client_pause_write_holds_writes_until_unpaused_and_lets_reads_pass() {
    let h = Harness::start(3, 0);
    let mut admin = h.client();
    let blocked = |c: &mut Client| -> String {
        let info = text(&c.call(&["INFO", "clients"]));
        info.lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    assert_eq!(text(&admin.call(&["SET", "k", "before"])), "OK");
    let library = "#!lua name=ro\nredis.register_function{function_name='ro', \
                   callback=function(keys) return redis.call('get', keys[1]) end, \
                   flags={'no-writes'}}";
    assert_eq!(text(&admin.call(&["FUNCTION", "LOAD", library])), "ro");
    assert_eq!(
        text(&admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"])),
        "OK"
    );
    let mut writer = h.client();
    writer.send(&[b"SET", b"k", b"during"]);
    let mut tx = h.client();
    for cmd in [&["MULTI"][..], &["INCR", "n"]] {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        tx.send(&args);
    }
    tx.send(&[b"EXEC"]);
    // PUBLISH and PFCOUNT may replicate (Redis's `may_replicate`): held too.
    let mut publisher = h.client();
    publisher.send(&[b"PUBLISH", b"ch", b"m"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocked(&mut admin) != "3" {
        assert!(
            Instant::now() < deadline,
            "the write, the EXEC and the PUBLISH were never held"
        );
        std::thread::sleep(Duration::from_millis(10)); // poll step
    }
    // Reads, read-only transactions and the pausing client's own reads pass.
    let mut reader = h.client();
    assert_eq!(text(&reader.call(&["GET", "k"])), "before");
    assert_eq!(text(&reader.call(&["MULTI"])), "OK");
    assert_eq!(text(&reader.call(&["GET", "k"])), "QUEUED");
    assert_eq!(
        text(&reader.call(&["EXEC"])),
        "Array([BulkString(b\"before\")])"
    );
    let read_only = "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])";
    assert_eq!(text(&reader.call(&["EVAL", read_only, "1", "k"])), "before");
    // SCRIPT LOAD does not replicate; EVALSHA of a script it loaded with `no-writes`, and
    // FCALL of a function loaded through the proxy with that flag, pass as in Redis.
    let sha = text(&reader.call(&["SCRIPT", "LOAD", read_only]));
    assert_eq!(text(&reader.call(&["EVALSHA", &sha, "1", "k"])), "before");
    assert_eq!(text(&reader.call(&["FCALL", "ro", "1", "k"])), "before");
    let list = text(&admin.call(&["CLIENT", "LIST"]));
    let held = list
        .lines()
        .filter(|l| {
            l.split(' ')
                .any(|f| f.starts_with("flags=") && f.contains('b'))
        })
        .count();
    assert_eq!(held, 3, "{list}");
    assert_eq!(text(&admin.call(&["CLIENT", "UNPAUSE"])), "OK");
    assert_eq!(text(&writer.read().unwrap()), "OK");
    assert_eq!(text(&tx.read().unwrap()), "OK");
    assert_eq!(text(&tx.read().unwrap()), "QUEUED");
    assert_eq!(text(&tx.read().unwrap()), "Array([Integer(1)])");
    assert_eq!(text(&publisher.read().unwrap()), ":0");
    assert_eq!(text(&reader.call(&["GET", "k"])), "during");
}

#[test]
fn a_pause_queued_in_a_transaction_starts_when_it_ran() {
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    // unit/pause's "client pause starts at the end of a transaction": two writes and a
    // pause run as one unit (the proxy used to refuse it), then the pause holds writes.
    let cmds = [
        "MULTI",
        "SET {p}1 BAR",
        "CLIENT PAUSE 60000 WRITE",
        "SET {p}2 BAR",
        "EXEC",
        "GET {p}1",
        "GET {p}2",
    ];
    let got = pipelined(&h, &reference, &cmds, 7);
    assert_eq!(got[4], "*3\r\n+OK\r\n+OK\r\n+OK\r\n");
    for addr in [h.addr(), reference.addr] {
        let mut writer = Client::connect(addr);
        writer.send(&[b"SET", b"{p}3", b"BAR"]);
        let mut admin = Client::connect(addr);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info = text(&admin.call(&["INFO", "clients"]));
            if info.contains("blocked_clients:1") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the write was never held: {info}"
            );
            std::thread::sleep(Duration::from_millis(10)); // poll step
        }
        // Read-only scripts queued in a transaction pass a WRITE pause, as in Redis.
        let read_only = "#!lua flags=no-writes\nreturn 12";
        let mut reader = Client::connect(addr);
        assert_eq!(text(&reader.call(&["MULTI"])), "OK");
        assert_eq!(text(&reader.call(&["EVAL", read_only, "0"])), "QUEUED");
        assert_eq!(text(&reader.call(&["EXEC"])), "Array([Integer(12)])");
        assert_eq!(text(&admin.call(&["GET", "{p}3"])), "(nil)");
        assert_eq!(text(&admin.call(&["CLIENT", "UNPAUSE"])), "OK");
        assert_eq!(text(&writer.read().unwrap()), "OK");
    }
}

#[test]
fn client_pause_all_holds_everyone_until_it_ends() {
    let h = Harness::start(3, 0);
    let mut admin = h.client();
    let started = Instant::now();
    assert_eq!(text(&admin.call(&["CLIENT", "PAUSE", "500", "ALL"])), "OK");
    let mut other = h.client();
    // Held, not refused: answered once the pause ends on its own (no UNPAUSE).
    assert_eq!(text(&other.call(&["GET", "k"])), "(nil)");
    assert_eq!(text(&admin.call(&["PING"])), "PONG");
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "the pause cannot end early"
    );
}

#[test]
fn latency_histogram_counts_every_masters_calls() {
    let h = Harness::start(3, 0);
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["CONFIG", "RESETSTAT"])), "OK");
    // Keys on every master: each keeps its own histogram.
    for i in 0..30 {
        assert_eq!(text(&c.call(&["SET", &format!("k{i}"), "v"])), "OK");
    }
    let Value::Array(histo) = c.call(&["LATENCY", "HISTOGRAM", "set"]) else {
        panic!("an array");
    };
    assert_eq!(text(&histo[0]), "set");
    let Value::Array(stats) = &histo[1] else {
        panic!("set's stats: {:?}", histo[1]);
    };
    assert_eq!(text(&stats[0]), "calls");
    assert_eq!(stats[1], Value::Integer(30));
    // The cumulative buckets end at every call.
    let Value::Array(buckets) = &stats[3] else {
        panic!("buckets: {:?}", stats[3]);
    };
    assert_eq!(buckets.last(), Some(&Value::Integer(30)));
    // PING is the proxy's: its entry is the proxy's own (the masters' counts the proxy's
    // own health checks, if any), calls exact.
    for _ in 0..3 {
        assert_eq!(text(&c.call(&["PING"])), "PONG");
    }
    let Value::Array(ping) = c.call(&["LATENCY", "HISTOGRAM", "ping"]) else {
        panic!("an array");
    };
    assert_eq!(text(&ping[0]), "ping");
    let Value::Array(stats) = &ping[1] else {
        panic!("ping's stats: {:?}", ping[1]);
    };
    assert_eq!(stats[1], Value::Integer(3), "{stats:?}");
    assert!(matches!(c.call(&["LATENCY", "LATEST"]), Value::Array(_)));
    assert!(matches!(
        c.call(&["LATENCY", "HISTORY", "command"]),
        Value::Array(_)
    ));
    assert!(matches!(
        c.call(&["LATENCY", "DOCTOR"]),
        Value::BulkString(_)
    ));
    proxy.shutdown();
}

/// Redis counts a subcommand on its own (`client|id`), never its container: INFO
/// commandstats and LATENCY HISTOGRAM through the proxy do the same for the subcommands it
/// answers ("LATENCY HISTOGRAM sub commands" of unit/latency-monitor).
#[test]
fn subcommands_are_counted_apart() {
    let h = Harness::start(1, 0);
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["CONFIG", "RESETSTAT"])), "OK");
    assert!(matches!(c.call(&["CLIENT", "ID"]), Value::Integer(_)));
    assert!(matches!(c.call(&["CLIENT", "LIST"]), Value::BulkString(_)));
    assert!(matches!(c.call(&["client", "id"]), Value::Integer(_)));
    let Value::Array(histo) = c.call(&["LATENCY", "HISTOGRAM", "client"]) else {
        panic!("an array");
    };
    let calls = |name: &str| {
        let at = histo.iter().position(|v| text(v) == name)?;
        let Value::Array(stats) = &histo[at + 1] else {
            return None;
        };
        Some(stats[1].clone())
    };
    assert_eq!(calls("client|id"), Some(Value::Integer(2)), "{histo:?}");
    assert_eq!(calls("client|list"), Some(Value::Integer(1)), "{histo:?}");
    assert_eq!(calls("client"), None, "{histo:?}");
    let info = text(&c.call(&["INFO", "commandstats"]));
    assert!(info.contains("cmdstat_client|id:calls=2,"), "{info}");
    assert!(info.contains("cmdstat_client|list:calls=1,"), "{info}");
    assert!(!info.contains("cmdstat_client:"), "{info}");
    proxy.shutdown();
}

#[test]
fn config_set_slowlog_settings_reach_the_proxys_own_log() {
    let h = Harness::start(3, 0);
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut c = Client::connect(proxy.local_addr());
    let set = [
        "CONFIG",
        "SET",
        "slowlog-log-slower-than",
        "0",
        "slowlog-max-len",
        "5",
    ];
    assert_eq!(text(&c.call(&set)), "OK");
    assert_eq!(text(&c.call(&["SLOWLOG", "RESET"])), "OK");
    for i in 0..12 {
        c.call(&["SET", &format!("s{i}"), "v"]);
    }
    assert_eq!(text(&c.call(&["SLOWLOG", "LEN"])), ":5");
    let off = ["CONFIG", "SET", "slowlog-log-slower-than", "-1"];
    assert_eq!(text(&c.call(&off)), "OK");
    assert_eq!(text(&c.call(&["SLOWLOG", "RESET"])), "OK");
    c.call(&["SET", "after", "v"]);
    assert_eq!(text(&c.call(&["SLOWLOG", "LEN"])), ":0");
    // The nodes took it too: CONFIG GET answers what was set.
    let got = c.call(&["CONFIG", "GET", "slowlog-max-len"]);
    assert_eq!(
        format!("{got:?}"),
        format!(
            "{:?}",
            Value::Array(vec![
                Value::BulkString("slowlog-max-len".into()),
                Value::BulkString("5".into()),
            ])
        )
    );
    proxy.shutdown();
}

#[test]
fn bcast_invalidations_come_one_message_per_prefix() {
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    let mut got = Vec::new();
    for addr in [h.addr(), reference.addr] {
        let mut tracked = Client::connect(addr);
        tracked.call(&["HELLO", "3"]);
        let on = [
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:",
        ];
        assert_eq!(text(&tracked.call(&on)), "OK");
        let mut writer = Client::connect(addr);
        let cmds = [
            "MULTI",
            "INCR a:1{t}",
            "INCR b:1{t}",
            "INCR a:2{t}",
            "INCR b:2{t}",
            "INCR c:1{t}",
            "EXEC",
        ];
        exchange(&mut writer, &cmds, cmds.len());
        // Two messages, one per prefix, each with its keys (in any order).
        let messages: Vec<Vec<String>> = (0..2)
            .map(|_| match tracked.read() {
                Some(Value::Push(items)) => {
                    let Some(Value::Array(keys)) = items.get(1) else {
                        panic!("an invalidation: {items:?}")
                    };
                    let mut keys: Vec<String> = keys.iter().map(text).collect();
                    keys.sort();
                    keys
                }
                other => panic!("a push: {other:?}"),
            })
            .collect();
        got.push(messages);
    }
    assert_eq!(got[0], got[1]);
    assert_eq!(got[0][0], ["a:1{t}", "a:2{t}"]);
}

#[test]
fn a_command_the_node_refuses_at_queue_time_aborts_exec_as_redis_does() {
    // Redis's "EXEC fails if there are errors while queueing commands #2": the node runs
    // out of memory between two queued commands and has room again before EXEC. Each
    // queued command is shown to its node (MULTI, cmd, DISCARD), so the second gets the
    // node's OOM at once and EXEC aborts, as on one Redis; the check itself runs nothing.
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let replies = [proxy.local_addr(), reference.addr].map(|addr| {
        let mut c = Client::connect(addr);
        let mut admin = Client::connect(addr);
        c.call(&["DEL", "{q}1", "{q}2", "{q}n"]);
        let mut seen = vec![text(&c.call(&["MULTI"]))];
        seen.push(text(&c.call(&["SET", "{q}1", "v"])));
        seen.push(text(&c.call(&["INCR", "{q}n"])));
        seen.push(text(&admin.call(&["CONFIG", "SET", "maxmemory", "1"])));
        seen.push(text(&c.call(&["LPUSH", "{q}2", "v"])));
        seen.push(text(&admin.call(&["CONFIG", "SET", "maxmemory", "0"])));
        seen.push(text(&c.call(&["EXEC"])));
        seen.push(text(&c.call(&["EXISTS", "{q}1", "{q}2", "{q}n"])));
        // A transaction after the aborted one runs.
        seen.push(text(&c.call(&["MULTI"])));
        seen.push(text(&c.call(&["INCR", "{q}n"])));
        seen.push(text(&c.call(&["EXEC"])));
        seen
    });
    assert_eq!(replies[0], replies[1]);
    assert!(replies[0][4].starts_with("-OOM"), "{:?}", replies[0]);
    assert!(replies[0][6].starts_with("-EXECABORT"), "{:?}", replies[0]);
    assert_eq!(replies[0][7], ":0");
    proxy.shutdown();

    // With the checks off, the node's refusal comes at EXEC: still nothing runs.
    let proxy = common::start_proxy(&h.cluster, |cfg| {
        cfg.proxy.allow_admin_commands = true;
        cfg.cluster.live_multi = false;
    });
    let mut c = Client::connect(proxy.local_addr());
    let mut admin = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["SET", "{q}1", "v"])), "QUEUED");
    admin.call(&["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(text(&c.call(&["LPUSH", "{q}2", "v"])), "QUEUED");
    let exec = text(&c.call(&["EXEC"]));
    admin.call(&["CONFIG", "SET", "maxmemory", "0"]);
    assert!(exec.starts_with("-EXECABORT"), "{exec}");
    assert_eq!(text(&c.call(&["EXISTS", "{q}1", "{q}2"])), ":0");
    proxy.shutdown();
}

#[test]
fn a_transaction_lives_on_its_node_and_exec_is_checked_when_it_runs() {
    // unit/multi's state-change tests: what the node checks at EXEC (too few replicas for
    // a write, reads under OOM) is decided by the node when EXEC runs, because the
    // commands were queued there as they came; DISCARD, AUTH inside MULTI and a WATCH of
    // thousands of keys answer as one Redis too.
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let keys: Vec<String> = (0..5000).map(|i| format!("w{{t}}{i}")).collect();
    let replies = [proxy.local_addr(), reference.addr].map(|addr| {
        let mut c = Client::connect(addr);
        let mut admin = Client::connect(addr);
        let mut seen = Vec::new();
        c.call(&["SET", "x{t}", "value"]);
        seen.push(text(&c.call(&["MULTI"])));
        seen.push(text(&c.call(&["INCR", "n{t}"])));
        admin.call(&["CONFIG", "SET", "min-replicas-to-write", "2"]);
        seen.push(text(&c.call(&["EXEC"])));
        admin.call(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
        seen.push(text(&c.call(&["MULTI"])));
        seen.push(text(&c.call(&["GET", "x{t}"])));
        seen.push(text(&c.call(&["PING"])));
        admin.call(&["CONFIG", "SET", "maxmemory", "1"]);
        seen.push(text(&c.call(&["EXEC"])));
        admin.call(&["CONFIG", "SET", "maxmemory", "0"]);
        // Pipelined: the DISCARD waits for nothing, the next command sees no transaction.
        seen.extend(exchange(
            &mut c,
            &["MULTI", "SET a{t} 1", "DISCARD", "GET a{t}"],
            4,
        ));
        // Pipelined behind a write on the shared connection: EXEC runs after it.
        c.call(&["DEL", "o{t}"]);
        seen.extend(exchange(
            &mut c,
            &["SET o{t} 1", "MULTI", "INCR o{t}", "EXEC", "GET o{t}"],
            5,
        ));
        seen.push(text(&c.call(&["MULTI"])));
        seen.push(text(&c.call(&["AUTH", "no-user", "foobar"])));
        seen.push(text(&c.call(&["EXEC"])));
        let mut watch: Vec<&str> = vec!["WATCH"];
        watch.extend(keys.iter().map(String::as_str));
        seen.push(text(&c.call(&watch)));
        seen.push(text(&c.call(&watch)));
        let info = text(&c.call(&["CLIENT", "INFO"]));
        seen.push(
            info.split(' ')
                .find(|f| f.starts_with("watch="))
                .unwrap_or("")
                .into(),
        );
        seen.push(text(&c.call(&["UNWATCH"])));
        seen
    });
    assert_eq!(replies[0], replies[1]);
    assert!(replies[0][2].starts_with("-EXECABORT Transaction discarded because of: NOREPLICAS"));
    // (Redis 7.0 has no `watch=` field; Valkey's unit/multi checks the count of 50,000.)
    proxy.shutdown();
}

#[test]
fn config_saved_through_the_proxy_can_be_set_back_without_locking_the_nodes() {
    // Redis's test framework saves CONFIG GET * and sets every value back: an empty
    // password must come back empty, and the placeholder of a real one is never set.
    let h = Harness::start(1, 0);
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut c = Client::connect(proxy.local_addr());
    let got = c.call(&["CONFIG", "GET", "requirepass"]);
    assert_eq!(
        format!("{got:?}"),
        format!(
            "{:?}",
            Value::Array(vec![
                Value::BulkString("requirepass".into()),
                Value::BulkString("".into()),
            ])
        )
    );
    assert_eq!(text(&c.call(&["CONFIG", "SET", "requirepass", ""])), "OK");
    let placeholder = c.call(&["CONFIG", "SET", "requirepass", "(redacted)"]);
    assert!(
        text(&placeholder).starts_with("-ERR slotgate: CONFIG GET"),
        "{placeholder:?}"
    );
    // The nodes still take a connection without a password.
    let mut fresh = Client::connect(proxy.local_addr());
    fresh.call(&["HELLO", "3"]);
    assert_eq!(text(&fresh.call(&["SET", "k", "v"])), "OK");
    proxy.shutdown();
}

#[test]
fn acl_users_set_through_the_proxy_log_in_and_are_checked_as_redis_checks_them() {
    let h = Harness::start(3, 0);
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let reference = Reference::start();
    let check = "return redis.acl_check_cmd('set','xx',1)";
    let denied = "return redis.acl_check_cmd('hset','xx','f',1)";
    let cmds: &[&[&str]] = &[
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">123",
            "+@scripting",
            "+set",
            "~x*",
        ],
        &["ACL", "GETUSER", "bob"],
        &["ACL", "LIST"],
        &["ACL", "USERS"],
        &["ACL", "GETUSER", "nobody"],
        &["ACL", "SETUSER", "bob", "bogus"],
        &["ACL", "SETUSER", "bob", "allkeys", "~y"],
        &["ACL", "SETUSER", "carol", ">pw"],
        &["AUTH", "carol", "pw"],
        &["AUTH", "bob", "nope"],
        &["AUTH", "bob", "123"],
        &["ACL", "WHOAMI"],
        &["EVAL", check, "1", "xx"],
        &["EVAL", denied, "1", "xx"],
        &["SET", "xa", "1"],
        &["SET", "yy", "1"],
        &["GET", "xa"],
        &["AUTH", "default", "anything"],
        &["ACL", "WHOAMI"],
        &["ACL", "DELUSER", "default"],
        &["ACL", "DELUSER", "bob", "nobody"],
        &["AUTH", "bob", "123"],
        &["ACL", "USERS"],
    ];
    let [proxied, direct] = [proxy.local_addr(), reference.addr].map(|addr| {
        let mut c = Client::connect(addr);
        for cmd in cmds {
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            c.send(&args);
        }
        read_frames(&mut c, cmds.len())
    });
    for (i, cmd) in cmds.iter().enumerate() {
        assert_eq!(proxied[i], direct[i], "{cmd:?}");
    }
    assert_eq!(proxied[10], "+OK\r\n", "bob logs in");
    assert_eq!(proxied[12], ":1\r\n", "the script's ACL check is bob's");
}

#[test]
fn a_deleted_users_clients_are_disconnected_and_admin_is_needed() {
    let h = Harness::start(1, 0);
    let mut plain = h.client();
    let refused = text(&plain.call(&["ACL", "SETUSER", "bob"]));
    assert!(refused.contains("allow_admin_commands"), "{refused}");
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut admin = Client::connect(proxy.local_addr());
    let set = ["ACL", "SETUSER", "bob", "on", ">pw", "+@all", "~*"];
    assert_eq!(text(&admin.call(&set)), "OK");
    let mut bob = Client::connect(proxy.local_addr());
    assert_eq!(text(&bob.call(&["AUTH", "bob", "pw"])), "OK");
    assert_eq!(text(&bob.call(&["SET", "k", "v"])), "OK");
    assert_eq!(admin.call(&["ACL", "DELUSER", "bob"]), Value::Integer(1));
    // Closed by the proxy, as Redis's ACL DELUSER closes the user's clients.
    let (_, closed) = bob.read_raw(Duration::from_secs(10));
    assert!(closed, "bob's connection is closed");
}

#[test]
fn a_running_script_shows_busy_to_ping_and_script_kill_reaches_it() {
    let h = Harness::start(1, 0);
    // One worker: the script runs on the one shared connection to the node, where SCRIPT
    // KILL used to wait behind the script it was meant to stop.
    let proxy = common::start_proxy(&h.cluster, |cfg| {
        cfg.proxy.allow_admin_commands = true;
        cfg.proxy.threads = 1;
    });
    let mut runner = Client::connect(proxy.local_addr());
    let mut other = Client::connect(proxy.local_addr());
    assert_eq!(
        text(&other.call(&["CONFIG", "SET", "lua-time-limit", "10"])),
        "OK"
    );
    runner.send(&[b"EVAL", b"while true do end", b"0"]);
    let until = |c: &mut Client, want: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = text(&c.call(&["PING"]));
            if got.contains(want) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "PING never answered {want}: {got}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    until(&mut other, "BUSY");
    // Answered by the node while the script runs (BUSY for an EVAL, the running function's
    // name for an FCALL), not held behind it.
    let stats = format!("{:?}", other.call(&["FUNCTION", "STATS"]));
    assert!(stats.contains("BUSY"), "{stats}");
    assert_eq!(text(&other.call(&["SCRIPT", "KILL"])), "OK");
    let killed = text(&runner.read().expect("the script's reply"));
    assert!(killed.contains("Script killed by user"), "{killed}");
    until(&mut other, "PONG");
    let not_busy = text(&other.call(&["SCRIPT", "KILL"]));
    assert!(not_busy.contains("NOTBUSY"), "{not_busy}");
}

#[test]
fn any_big_number_a_script_returns_passes_and_function_stats_answers_as_redis() {
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    // The script's text is sent as Redis sends it; the framer used to refuse it and drop
    // the node connection other clients share.
    let cmds: &[&[&str]] = &[
        &["HELLO", "3"],
        &["EVAL", "return {big_number='123  123'}", "0"],
        &["SET", "k", "v"],
        &["GET", "k"],
        &["FUNCTION", "STATS"],
        &["SCRIPT", "KILL"],
        &["FUNCTION", "KILL"],
    ];
    let [proxied, direct] = [h.client(), reference.client()].map(|mut c| {
        for cmd in cmds {
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            c.send(&args);
        }
        // HELLO's reply names the server: not compared.
        read_frames(&mut c, cmds.len()).split_off(1)
    });
    assert_eq!(proxied, direct);
    assert_eq!(proxied[0], "(123  123\r\n");
}

#[test]
fn monitor_shows_every_clients_commands_in_redis_format() {
    let h = Harness::start(3, 0);
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut monitor = Client::connect(proxy.local_addr());
    assert_eq!(text(&monitor.call(&["MONITOR"])), "OK");
    let mut c = Client::connect(proxy.local_addr());
    let local = c.stream.local_addr().unwrap();
    assert_eq!(text(&c.call(&["SET", "k", "a\"b\n"])), "OK");
    let _ = c.call(&["CONFIG", "GET", "maxmemory"]); // admin: not shown
    let _ = c.call(&["NOSUCH"]); // refused: not shown
    let _ = c.call(&["AUTH", "user", "secret"]);
    assert_eq!(text(&c.call(&["get", "k"])), "a\"b\n");
    let lines: Vec<String> = (0..3).map(|_| text(&monitor.read().unwrap())).collect();
    let tail = |l: &String| l.split_once(' ').map(|(_, t)| t.to_string()).unwrap();
    assert_eq!(
        lines.iter().map(tail).collect::<Vec<_>>(),
        [
            format!(r#"[0 {local}] "SET" "k" "a\"b\n""#),
            format!(r#"[0 {local}] "AUTH" "(redacted)" "(redacted)""#),
            format!(r#"[0 {local}] "get" "k""#),
        ]
    );
    assert!(
        lines[0].split(' ').next().unwrap().contains('.'),
        "{}",
        lines[0]
    );
    // What a script runs comes from the node's own MONITOR, after the EVAL's line.
    let script = "redis.call('set',KEYS[1],ARGV[1])";
    let _ = c.call(&["EVAL", script, "1", "foo", "bar"]);
    let eval = text(&monitor.read().unwrap());
    assert!(
        eval.ends_with(&format!(r#"[0 {local}] "EVAL" "{script}" "1" "foo" "bar""#)),
        "{eval}"
    );
    let inside = text(&monitor.read().unwrap());
    assert!(inside.ends_with(r#"[0 lua] "set" "foo" "bar""#), "{inside}");
    // While monitoring: the keyspace is refused as Redis refuses it; RESET ends it.
    let refused = text(&monitor.call(&["GET", "k"]));
    assert_eq!(refused, "-ERR Replica can't interact with the keyspace");
    assert_eq!(text(&monitor.call(&["RESET"])), "RESET");
    assert_eq!(text(&monitor.call(&["GET", "k"])), "a\"b\n");
}

#[test]
fn error_replies_are_counted_by_code_as_redis_counts_them() {
    let h = Harness::start(3, 0);
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let reference = Reference::start();
    let [proxied, direct] = [proxy.local_addr(), reference.addr].map(|addr| {
        let mut c = Client::connect(addr);
        let _ = c.call(&["CONFIG", "RESETSTAT"]);
        let _ = c.call(&[
            "EVAL",
            "return redis.error_reply('MY_ERR_CODE custom msg')",
            "0",
        ]);
        let _ = c.call(&["NOSUCH"]);
        let _ = c.call(&["SET", "k", "v"]);
        let _ = c.call(&["LPUSH", "k", "x"]);
        let _ = c.call(&["GET", "k", "extra"]);
        let info = text(&c.call(&["INFO", "errorstats"]));
        let stats = text(&c.call(&["INFO", "stats"]));
        let total = stats
            .lines()
            .find(|l| l.starts_with("total_error_replies:"));
        (info, total.map(String::from))
    });
    assert_eq!(proxied, direct);
    assert!(
        proxied.0.contains("errorstat_MY_ERR_CODE:count=1"),
        "{}",
        proxied.0
    );
}

#[test]
fn client_kill_maxage_checks_its_argument_and_spares_young_clients() {
    let h = Harness::start(1, 0);
    let mut c = h.client();
    let err = |c: &mut Client, age: &str| text(&c.call(&["CLIENT", "KILL", "MAXAGE", age]));
    assert!(err(&mut c, "str").contains("not an integer or out of range"));
    assert!(err(&mut c, "9999999999999999999").contains("not an integer or out of range"));
    assert!(err(&mut c, "-1").contains("greater than 0"));
    let _young = h.client();
    // Everyone here is younger than an hour: nobody is killed.
    assert_eq!(
        c.call(&["CLIENT", "KILL", "MAXAGE", "3600"]),
        Value::Integer(0)
    );
}

#[test]
fn commands_for_every_master_or_the_proxy_run_inside_multi_as_redis_runs_them() {
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    let proxy = common::start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut cmds: Vec<Vec<&str>> = vec![
        vec!["DEL", "k"],
        vec!["MULTI"],
        vec!["INCR", "k"],
        vec!["SCRIPT", "FLUSH"],
        vec!["CLIENT", "SETNAME", "replayed"],
        vec!["EXEC"],
        vec!["GET", "k"],
        vec!["CLIENT", "GETNAME"],
        vec!["MULTI"],
    ];
    // The suite's own: hundreds of SCRIPT FLUSH in one transaction.
    cmds.extend(std::iter::repeat_n(vec!["SCRIPT", "FLUSH"], 300));
    cmds.extend([vec!["EXEC"], vec!["PING"]]);
    let frames = cmds.len();
    let [proxied, direct] = [proxy.local_addr(), reference.addr].map(|addr| {
        let mut c = Client::connect(addr);
        for cmd in &cmds {
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            c.send(&args);
        }
        read_frames(&mut c, frames)
    });
    assert_eq!(proxied, direct);
    assert_eq!(proxied[5], "*3\r\n:1\r\n+OK\r\n+OK\r\n");
    // More than one command for a node beside them would not run as one unit: refused at
    // queue time, and EXEC runs nothing.
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["INCR", "k"])), "QUEUED");
    assert_eq!(text(&c.call(&["SCRIPT", "FLUSH"])), "QUEUED");
    assert!(text(&c.call(&["INCR", "k"])).contains("only share its transaction"));
    assert!(text(&c.call(&["EXEC"])).starts_with("-EXECABORT"));
    assert_eq!(text(&c.call(&["GET", "k"])), "1");
    proxy.shutdown();
}

/// unit/lazyfree's "FLUSHALL SYNC in MULTI not optimized to run as blocking FLUSHALL
/// ASYNC": since Redis 7.2 a FLUSHALL outside a transaction frees in the background while
/// its client waits; inside one it frees at once. A transaction holding a command for every
/// master is replayed at EXEC, and each master now runs its part inside a transaction of
/// its own (`Part::in_multi`), so nothing is lazily freed, as on one Redis.
#[test]
fn a_flushall_replayed_at_exec_runs_inside_a_transaction_on_each_master() {
    let Some(cluster) = common::redis86_cluster(3, "flushall-multi") else {
        return;
    };
    let proxy = common::start_proxy(&cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["CONFIG", "RESETSTAT"])), "OK");
    for key in ["x", "y", "z", "w"] {
        assert_eq!(text(&c.call(&["SET", key, "v"])), "OK");
    }
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["FLUSHALL"])), "QUEUED");
    assert_eq!(text(&c.call(&["DBSIZE"])), "QUEUED");
    c.send(&[b"EXEC"]);
    assert_eq!(
        read_frames(&mut c, 1),
        vec!["*2\r\n+OK\r\n:0\r\n".to_string()]
    );
    let info = text(&c.call(&["INFO", "memory"]));
    let stat = |name: &str| {
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")));
        line.unwrap_or_else(|| panic!("INFO memory has {name}"))
            .trim()
            .to_string()
    };
    assert_eq!(stat("lazyfreed_objects"), "0");
    // Outside a transaction, the same FLUSHALL frees in the background (Redis 8.6).
    for key in ["x", "y"] {
        assert_eq!(text(&c.call(&["SET", key, "v"])), "OK");
    }
    assert_eq!(text(&c.call(&["FLUSHALL"])), "OK");
    let info = text(&c.call(&["INFO", "memory"]));
    assert!(
        !info.contains("lazyfreed_objects:0\r\n"),
        "a FLUSHALL outside MULTI is lazily freed on Redis 8.6: {info}"
    );
    proxy.shutdown();
}

#[test]
fn client_unblock_ends_a_blocking_command_as_redis_does() {
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    for addr in [h.addr(), reference.addr] {
        let mut blocked = Client::connect(addr);
        let mut other = Client::connect(addr);
        let id = match blocked.call(&["CLIENT", "ID"]) {
            Value::Integer(id) => id.to_string(),
            other => panic!("CLIENT ID: {other:?}"),
        };
        let wait_blocked = |other: &mut Client| {
            testkit::wait_until(Duration::from_secs(10), || {
                text(&other.call(&["CLIENT", "LIST", "ID", &id])).contains("flags=b")
            });
        };
        // The default and TIMEOUT end it as its timeout would; ERROR with Redis's error.
        for (reason, want) in [
            (None, "*-1\r\n"),
            (Some("TIMEOUT"), "*-1\r\n"),
            (
                Some("ERROR"),
                "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
            ),
        ] {
            blocked.send(&[b"BLPOP", b"unblock-list", b"0"]);
            wait_blocked(&mut other);
            let mut cmd = vec!["CLIENT", "UNBLOCK", id.as_str()];
            cmd.extend(reason);
            assert_eq!(text(&other.call(&cmd)), ":1", "{addr} {reason:?}");
            assert_eq!(read_frames(&mut blocked, 1), [want], "{addr} {reason:?}");
        }
        let checks: [(&[&str], &str); 3] = [
            (&["CLIENT", "UNBLOCK", &id], ":0"),
            (
                &["CLIENT", "UNBLOCK", "x"],
                "-ERR value is not an integer or out of range",
            ),
            (
                &["CLIENT", "UNBLOCK", &id, "LATER"],
                "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ),
        ];
        for (cmd, want) in checks {
            assert_eq!(text(&other.call(cmd)), want, "{addr} {cmd:?}");
        }
        // Still served afterwards.
        blocked.send(&[b"BLPOP", b"unblock-list", b"0"]);
        wait_blocked(&mut other);
        other.call(&["RPUSH", "unblock-list", "v"]);
        let got = read_frames(&mut blocked, 1);
        assert!(got[0].ends_with("$1\r\nv\r\n"), "{addr} {got:?}");
    }
}

#[test]
fn extra_listeners_serve_the_same_proxy_with_their_own_laddr() {
    let h = Harness::start(1, 0);
    // Another loopback address (all of 127/8 is on `lo`), port 0: the main listener's.
    let proxy = common::start_proxy(&h.cluster, |cfg| {
        cfg.proxy.extra_listen = vec!["127.0.0.2:0".into()];
    });
    let port = proxy.local_addr().port();
    let mut main = Client::connect(proxy.local_addr());
    let mut extra = Client::connect(std::net::SocketAddr::from(([127, 0, 0, 2], port)));
    assert_eq!(text(&main.call(&["SET", "via", "main"])), "OK");
    assert_eq!(text(&extra.call(&["GET", "via"])), "main");
    let info = text(&extra.call(&["CLIENT", "INFO"]));
    assert!(info.contains(&format!("laddr=127.0.0.2:{port} ")), "{info}");
    proxy.shutdown();
}

/// Behind servers without CLIENT IMPORT-SOURCE (Redis) the proxy answers as they do.
#[test]
fn client_import_source_behind_redis_is_their_unknown_subcommand() {
    let h = Harness::start(1, 0);
    let reference = Reference::start();
    let cmds = [
        "CLIENT IMPORT-SOURCE ON",
        "CLIENT IMPORT-SOURCE OFF",
        "GET k",
    ];
    let got = pipelined(&h, &reference, &cmds, 3);
    assert!(got[0].starts_with("-ERR unknown subcommand"), "{got:?}");
}

#[test]
fn subscribe_and_unsubscribe_inside_multi_answer_in_execs_array() {
    let h = Harness::start(3, 0);
    let reference = Reference::start();
    // unit/pubsub's "unsubscribe inside multi, and publish to self" (RESP3): the
    // confirmations are EXEC's elements, and the client stays subscribed to what is left.
    let resp3 = [
        "HELLO 3",
        "SUBSCRIBE foo bar baz",
        "MULTI",
        "PING abc",
        "UNSUBSCRIBE bar",
        "UNSUBSCRIBE baz",
        "PING def",
        "EXEC",
        "PUBLISH foo vaz",
        "PING",
    ];
    let [proxied, direct] = [h.addr(), reference.addr].map(|addr| {
        let mut c = Client::connect(addr);
        exchange(&mut c, &resp3, 13)
    });
    assert_eq!(proxied[1..], direct[1..]);
    assert!(proxied[9].contains("unsubscribe") && proxied[9].starts_with("*4"));
    // RESP2: SUBSCRIBE queued, then subscribed mode from EXEC on; messages reach it.
    let resp2 = ["MULTI", "PING x", "SUBSCRIBE ch1", "EXEC"];
    let mut subscribers = [h.addr(), reference.addr].map(Client::connect);
    let [proxied, direct] = [0, 1].map(|i| exchange(&mut subscribers[i], &resp2, 4));
    assert_eq!(proxied, direct);
    for (i, addr) in [h.addr(), reference.addr].into_iter().enumerate() {
        let mut publisher = Client::connect(addr);
        assert_eq!(text(&publisher.call(&["PUBLISH", "ch1", "hi"])), ":1");
        let got = read_frames(&mut subscribers[i], 1);
        assert_eq!(got[0], "*3\r\n$7\r\nmessage\r\n$3\r\nch1\r\n$2\r\nhi\r\n");
        let pong = exchange(&mut subscribers[i], &["PING"], 1);
        assert_eq!(pong[0], "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    }
    // Anything else in the transaction runs on a node: refused at queue time.
    let mut c = h.client();
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["SET", "k", "v"])), "QUEUED");
    assert!(text(&c.call(&["SUBSCRIBE", "x"])).contains("may only share their transaction"));
    assert!(text(&c.call(&["EXEC"])).starts_with("-EXECABORT"));
    assert_eq!(text(&c.call(&["GET", "k"])), "(nil)");
}
