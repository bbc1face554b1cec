//! SLOWLOG GET/LEN/RESET/HELP answered as Redis answers them, over the shared log.

use super::*;
use crate::config::SlowlogConfig;
use crate::context::slowlog::*;

fn req(args: &[&[u8]]) -> Request {
    Request::from_args(args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn argv_is_capped_as_redis_caps_it() {
    let long = vec![b'a'; 140];
    let argv = capped_argv(&req(&[b"SET", b"k", &long]));
    assert_eq!(
        text(&argv[2]),
        format!("{}... (12 more bytes)", "a".repeat(128))
    );
    let many: Vec<Vec<u8>> = (0..42).map(|i| i.to_string().into_bytes()).collect();
    let many: Vec<&[u8]> = many.iter().map(|a| a.as_slice()).collect();
    let argv = capped_argv(&req(&many));
    assert_eq!(argv.len(), 32);
    assert_eq!(text(&argv[30]), "30");
    assert_eq!(text(&argv[31]), "... (11 more arguments)");
    let exactly: Vec<&[u8]> = many[..32].to_vec();
    assert_eq!(text(&capped_argv(&req(&exactly))[31]), "31");
}

#[test]
fn credentials_are_redacted() {
    let shown = |args: &[&[u8]]| -> Vec<String> {
        capped_argv(&req(args)).iter().map(|a| text(a)).collect()
    };
    assert_eq!(
        shown(&[b"AUTH", b"user", b"pw"]),
        ["AUTH", "(redacted)", "(redacted)"]
    );
    assert_eq!(
        shown(&[b"HELLO", b"3", b"SETNAME", b"auth", b"AUTH", b"u", b"p"]),
        [
            "HELLO",
            "3",
            "SETNAME",
            "auth",
            "AUTH",
            "(redacted)",
            "(redacted)"
        ]
    );
    assert_eq!(shown(&[b"GET", b"auth"]), ["GET", "auth"]);
}

/// A transaction's commands come to `log` as their frames one after the other (EXEC's
/// mark), in either request form: each is its own entry, in order, with the same time.
#[test]
fn each_request_of_the_bytes_is_an_entry_in_either_form() {
    let log = Slowlog::new(&SlowlogConfig {
        log_slower_than_us: 0,
        max_len: 128,
    });
    let ring = Ring::default();
    let client = Client {
        peer: None,
        name: None,
    };
    let frames = Bytes::from_static(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n\r\nset k v\r\n*0\r\n");
    log.log_as(LogKind::Slow, &ring, &frames, 7, client);
    let entries = ring.0.lock().unwrap();
    let argv: Vec<Vec<String>> = entries
        .iter()
        .map(|e| e.argv.iter().map(|a| text(a)).collect())
        .collect();
    assert_eq!(argv, [vec!["GET", "k"], vec!["set", "k", "v"]]);
    assert!(entries.iter().all(|e| e.duration_us == 7));
    assert_eq!(entries.iter().map(|e| e.id).collect::<Vec<_>>(), [0, 1]);
    drop(entries);
    // A cut frame (never logged: marks hold whole requests) ends the walk, whole ones kept.
    let cut = Bytes::from_static(b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGE");
    log.log_as(LogKind::Slow, &ring, &cut, 1, client);
    assert_eq!(log.logged(), 3);
}

/// A transaction of many commands logs at most `max_len` of them (its first), and reads
/// its bytes only as far as it logs: a frame longer than the first window still parses.
#[test]
fn a_transaction_logs_at_most_max_len_commands() {
    let log = Slowlog::new(&SlowlogConfig {
        log_slower_than_us: 0,
        max_len: 3,
    });
    let ring = Ring::default();
    let client = Client {
        peer: None,
        name: None,
    };
    let big = "v".repeat(40_000);
    let mut frames = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n{big}\r\n", big.len());
    for i in 0..100_000 {
        frames.push_str(&format!(
            "*2\r\n$3\r\nGET\r\n${}\r\n{i}\r\n",
            i.to_string().len()
        ));
    }
    log.log_as(LogKind::Slow, &ring, &Bytes::from(frames), 9, client);
    assert_eq!(log.logged(), 3, "ids spent: the entries kept");
    let entries = ring.0.lock().unwrap();
    let first: Vec<String> = entries.iter().map(|e| text(&e.argv[0])).collect();
    assert_eq!(first, ["SET", "GET", "GET"]);
    assert_eq!(
        text(&entries[0].argv[2]),
        format!("{}... (39872 more bytes)", "v".repeat(128))
    );
}

#[test]
fn rings_keep_the_newest_and_reset_clears_them() {
    let log = Slowlog::new(&SlowlogConfig {
        log_slower_than_us: 0,
        max_len: 3,
    });
    let ring = Ring::default();
    let name = Bytes::from_static(b"app");
    for i in 0..5u64 {
        let client = Client {
            peer: "127.0.0.1:9".parse().ok(),
            name: Some(&name),
        };
        let request = Bytes::from(format!("*2\r\n$3\r\nGET\r\n$1\r\n{i}\r\n"));
        log.log_as(LogKind::Slow, &ring, &request, i * 10, client);
    }
    let entries = ring.0.lock().unwrap();
    let ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
    assert_eq!(ids, [2, 3, 4]);
    let mut out = BytesMut::new();
    write_entry(&mut out, &entries[2]);
    assert_eq!(
        text(&out),
        format!(
            "*6\r\n:4\r\n:{}\r\n:40\r\n*2\r\n$3\r\nGET\r\n$1\r\n4\r\n$11\r\n127.0.0.1:9\r\n$3\r\napp\r\n",
            entries[2].unix_time
        )
    );
    assert_eq!(log.logged(), 5);
}

#[test]
fn a_megabyte_client_name_is_cut_in_the_entry_like_an_argument() {
    let log = Slowlog::new(&SlowlogConfig {
        log_slower_than_us: 0,
        max_len: 128,
    });
    let ring = Ring::default();
    let name = Bytes::from(vec![b'n'; 1 << 20]);
    let client = Client {
        peer: None,
        name: Some(&name),
    };
    log.log_as(
        LogKind::Slow,
        &ring,
        &Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
        1,
        client,
    );
    let entries = ring.0.lock().unwrap();
    let kept = text(&entries[0].name);
    assert_eq!(kept.len(), 1024 + "... (1047552 more bytes)".len());
    assert!(kept.ends_with("n... (1047552 more bytes)"), "{kept:.40}");
}

#[test]
fn negative_threshold_turns_the_log_off() {
    let off = Slowlog::new(&SlowlogConfig {
        log_slower_than_us: -1,
        max_len: 128,
    });
    assert_eq!(off.threshold(), None);
    assert_eq!(Slowlog::default().threshold(), Some(10_000));
}

#[test]
fn help_has_redis_shape() {
    let reply = help(&req(&[b"slowlog", b"help"]));
    let reply = text(&reply);
    assert!(reply.starts_with(
        "*12\r\n+SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+GET [<count>]\r\n"
    ));
    assert!(
        reply.ends_with("+HELP\r\n+    Prints this help.\r\n"),
        "{reply}"
    );
}

#[test]
fn slowlog_is_the_proxys_own_even_when_admin_commands_are_forwarded() {
    use crate::route::{route, Local, Route};
    for allow_admin in [false, true] {
        for sub in [&b"GET"[..], b"len", b"RESET", b"help"] {
            assert_eq!(
                route(&req(&[b"SLOWLOG", sub]), allow_admin),
                Route::Local(Local::Slowlog)
            );
        }
    }
    let unknown = route(&req(&[b"SLOWLOG", b"nope"]), false);
    assert_eq!(
        unknown,
        Route::Refuse(Bytes::from_static(
            b"-ERR unknown subcommand 'nope'. Try SLOWLOG HELP.\r\n"
        ))
    );
}
