//! SLOWLOG on a real cluster: what is logged, Redis's reply shapes and errors, argument
//! capping, and a slow (blocking) command's duration.

mod common;

use common::{start_proxy, text, Client, Harness};
use resp::Value;

fn entries(v: &Value) -> &[Value] {
    match v {
        Value::Array(items) => items,
        other => panic!("not an array: {other:?}"),
    }
}

/// (id, duration µs, argv, peer, name) of one entry.
fn entry(v: &Value) -> (i64, i64, Vec<String>, String, String) {
    let f = entries(v);
    assert_eq!(f.len(), 6, "{v:?}");
    let int = |v: &Value| match v {
        Value::Integer(n) => *n,
        other => panic!("not an integer: {other:?}"),
    };
    let argv = entries(&f[3]).iter().map(text).collect();
    (int(&f[0]), int(&f[2]), argv, text(&f[4]), text(&f[5]))
}

fn log(c: &mut Client, count: &str) -> Vec<(i64, i64, Vec<String>, String, String)> {
    entries(&c.call(&["SLOWLOG", "GET", count]))
        .iter()
        .map(entry)
        .collect()
}

#[test]
fn threshold_zero_logs_every_command_with_capped_arguments() {
    let h = Harness::start(3, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.slowlog.log_slower_than_us = 0);
    let mut c = Client::connect(proxy.local_addr());
    let me = c.stream.local_addr().unwrap().to_string();
    assert_eq!(text(&c.call(&["SLOWLOG", "RESET"])), "OK");
    assert_eq!(
        text(&c.call(&["SLOWLOG", "LEN"])),
        ":1",
        "RESET logs itself, as in Redis"
    );
    assert_eq!(text(&c.call(&["CLIENT", "SETNAME", "app"])), "OK");
    c.call(&["SET", "k", &"a".repeat(140)]);
    let many: Vec<String> = (0..41).map(|i| i.to_string()).collect();
    let mut rpush = vec!["RPUSH", "list"];
    rpush.extend(many.iter().map(String::as_str));
    c.call(&rpush);
    c.call(&["MGET", "a", "b", "c"]);
    c.call(&["NOSUCHCMD"]);
    c.call(&["GET"]);

    let all = log(&mut c, "-1");
    let names: Vec<&str> = all.iter().map(|e| e.2[0].as_str()).collect();
    assert_eq!(
        names,
        ["MGET", "RPUSH", "SET", "CLIENT", "SLOWLOG", "SLOWLOG"],
        "newest first; unknown and refused commands are not logged"
    );
    assert!(all.windows(2).all(|w| w[0].0 > w[1].0), "ids decrease");
    let (_, _, mget, peer, name) = &all[0];
    assert_eq!(mget, &["MGET", "a", "b", "c"], "a fan-out is one entry");
    assert_eq!((peer.as_str(), name.as_str()), (me.as_str(), "app"));
    let rpush_argv = &all[1].2;
    assert_eq!(rpush_argv.len(), 32);
    assert_eq!(rpush_argv[30], "28");
    assert_eq!(rpush_argv[31], "... (12 more arguments)");
    assert_eq!(
        all[2].2[2],
        format!("{}... (12 more bytes)", "a".repeat(128))
    );

    let newest = log(&mut c, "1");
    assert_eq!(newest.len(), 1);
    assert_eq!(
        newest[0].2[..2],
        ["SLOWLOG", "GET"],
        "the previous GET, logged"
    );
    assert_eq!(log(&mut c, "0").len(), 0);
    assert_eq!(log(&mut c, "3").len(), 3);
    assert_eq!(
        entries(&c.call(&["SLOWLOG", "GET"])).len(),
        10,
        "10 by default (10 entries are logged by now)"
    );
    for bad in ["-2", "x"] {
        assert_eq!(
            text(&c.call(&["SLOWLOG", "GET", bad])),
            "-ERR count should be greater than or equal to -1"
        );
    }
    assert_eq!(
        text(&c.call(&["SLOWLOG", "get", "1", "2"])),
        "-ERR unknown subcommand or wrong number of arguments for 'get'. Try SLOWLOG HELP."
    );
    assert_eq!(
        text(&c.call(&["SLOWLOG", "LEN", "x"])),
        "-ERR wrong number of arguments for 'slowlog|len' command"
    );
    let help = c.call(&["SLOWLOG", "HELP"]);
    assert_eq!(entries(&help).len(), 12);
    assert_eq!(text(&c.call(&["SLOWLOG", "RESET"])), "OK");
    assert_eq!(text(&c.call(&["SLOWLOG", "LEN"])), ":1");
    proxy.shutdown();
}

#[test]
fn a_blocking_command_is_logged_with_its_duration_and_fast_ones_are_not() {
    let h = Harness::start(3, 0);
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.slowlog.log_slower_than_us = 150_000;
        cfg.slowlog.max_len = 2;
    });
    let mut c = Client::connect(proxy.local_addr());
    for i in 0..20 {
        c.call(&["SET", &format!("fast:{i}"), "v"]);
    }
    assert_eq!(text(&c.call(&["SLOWLOG", "LEN"])), ":0");
    assert_eq!(text(&c.call(&["BLPOP", "nothing-here", "0.2"])), "(nil)");
    let logged = log(&mut c, "-1");
    assert_eq!(logged.len(), 1, "{logged:?}");
    let (_, duration_us, argv, _, name) = &logged[0];
    assert_eq!(argv, &["BLPOP", "nothing-here", "0.2"]);
    assert!(
        (190_000..2_000_000).contains(duration_us),
        "BLPOP 0.2 took {duration_us} µs"
    );
    assert_eq!(name, "");
    for _ in 0..3 {
        c.call(&["BLPOP", "nothing-here", "0.16"]);
    }
    assert_eq!(
        text(&c.call(&["SLOWLOG", "LEN"])),
        ":2",
        "max_len caps the log"
    );
    proxy.shutdown();
}

#[test]
fn a_negative_threshold_turns_the_log_off() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.slowlog.log_slower_than_us = -1);
    let mut c = Client::connect(proxy.local_addr());
    c.call(&["BLPOP", "nothing-here", "0.05"]);
    assert_eq!(text(&c.call(&["SLOWLOG", "LEN"])), ":0");
    assert_eq!(entries(&c.call(&["SLOWLOG", "GET"])).len(), 0);
    proxy.shutdown();
}

/// Review S15: with admin commands forwarded, SLOWLOG hides what Redis 7.0 hides (CONFIG
/// SET of a password, ACL SETUSER's name and rules, MIGRATE's AUTH/AUTH2), and CONFIG GET
/// through the proxy hands out no node password.
#[test]
fn secrets_are_redacted_with_admin_commands_allowed() {
    const SECRET: &str = "n0de-Secret-31";
    let h = Harness::start(3, 0);
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.slowlog.log_slower_than_us = 0;
        cfg.proxy.allow_admin_commands = true;
    });
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["SLOWLOG", "RESET"])), "OK");
    let set = c.call(&[
        "CONFIG",
        "SET",
        "masterauth",
        SECRET,
        "maxmemory-samples",
        "6",
    ]);
    assert_eq!(text(&set), "OK");
    let acl = c.call(&[
        "ACL",
        "SETUSER",
        "slowlog-user",
        "on",
        &format!(">{SECRET}"),
    ]);
    assert_eq!(text(&acl), "OK");
    for auth in [&["AUTH", SECRET][..], &["AUTH2", "someone", SECRET]] {
        let mut migrate = vec!["MIGRATE", "127.0.0.1", "1", "", "0", "10"];
        migrate.extend_from_slice(auth);
        migrate.extend_from_slice(&["KEYS", "nokey"]);
        assert_eq!(text(&c.call(&migrate)), "NOKEY");
    }
    let shown = format!("{:?}", log(&mut c, "-1"));
    assert!(!shown.contains(SECRET), "SLOWLOG shows a password: {shown}");
    assert!(
        !shown.contains("slowlog-user"),
        "ACL SETUSER's user name: {shown}"
    );
    let mut argv = |name: &str| -> Vec<Vec<String>> {
        log(&mut c, "-1")
            .into_iter()
            .map(|e| e.2)
            .filter(|a| a[0] == name)
            .collect()
    };
    assert_eq!(
        argv("CONFIG")[0],
        [
            "CONFIG",
            "SET",
            "masterauth",
            "(redacted)",
            "maxmemory-samples",
            "6"
        ]
    );
    assert_eq!(
        argv("ACL")[0],
        ["ACL", "SETUSER", "(redacted)", "(redacted)", "(redacted)"]
    );
    let migrates = argv("MIGRATE");
    assert_eq!(
        migrates[0][6..],
        ["AUTH2", "(redacted)", "(redacted)", "KEYS", "nokey"]
    );
    assert_eq!(migrates[1][6..], ["AUTH", "(redacted)", "KEYS", "nokey"]);

    for pattern in [
        &["masterauth"][..],
        &["*"],
        &["*auth*", "maxmemory-samples"],
    ] {
        let mut get = vec!["CONFIG", "GET"];
        get.extend_from_slice(pattern);
        let reply = format!("{:?}", c.call(&get));
        assert!(!reply.contains(SECRET), "CONFIG GET {pattern:?}: {reply}");
        assert!(
            reply.contains("(redacted)"),
            "CONFIG GET {pattern:?}: {reply}"
        );
    }
    let samples = format!("{:?}", c.call(&["CONFIG", "GET", "maxmemory-samples"]));
    assert!(samples.contains('6'), "other values pass: {samples}");
    c.call(&["HELLO", "3"]);
    let resp3 = format!("{:?}", c.call(&["CONFIG", "GET", "masterauth"]));
    assert!(
        !resp3.contains(SECRET) && resp3.contains("(redacted)"),
        "{resp3}"
    );
    proxy.shutdown();
}

/// Redis never logs EXEC but each command the transaction ran; the proxy, which sees only
/// the transaction's time, logs each of them at EXEC with it (not when queued, when they
/// have not run), and nothing for a discarded or aborted transaction.
#[test]
fn a_transaction_logs_its_commands_at_exec_not_exec_itself() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.slowlog.log_slower_than_us = 100_000;
        cfg.proxy.allow_admin_commands = true;
    });
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["MULTI"])), "OK");
    assert_eq!(text(&c.call(&["SET", "tx", "1"])), "QUEUED");
    assert_eq!(text(&c.call(&["DEBUG", "SLEEP", "0.2"])), "QUEUED");
    c.call(&["EXEC"]);
    let logged = log(&mut c, "-1");
    let argv: Vec<&Vec<String>> = logged.iter().map(|e| &e.2).collect();
    assert_eq!(
        argv,
        [&vec!["DEBUG", "SLEEP", "0.2"], &vec!["SET", "tx", "1"]],
        "newest first, EXEC not among them"
    );
    assert!(logged.iter().all(|e| e.1 >= 190_000), "{logged:?}");
    // Nothing ran: nothing logged.
    assert_eq!(text(&c.call(&["SLOWLOG", "RESET"])), "OK");
    for end in ["DISCARD", "EXEC"] {
        c.call(&["MULTI"]);
        c.call(&["DEBUG", "SLEEP", "0.15"]);
        if end == "EXEC" {
            c.call(&["GET"]);
        }
        c.call(&[end]);
    }
    assert_eq!(text(&c.call(&["SLOWLOG", "LEN"])), ":0");
    proxy.shutdown();
}
