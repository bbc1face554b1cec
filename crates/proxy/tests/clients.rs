//! CLIENT LIST / INFO / KILL / SETINFO / NO-EVICT on a real cluster, with two workers so the
//! registry is read and killed across threads, and connection churn leaving it empty.

mod common;

use std::time::{Duration, Instant};

use common::{start_proxy, text, Client, Harness};
use proxy::config::AuthConfig;
use resp::Value;

/// The CLIENT LIST lines, split into `field=value` maps' raw text.
fn lines(c: &mut Client, args: &[&str]) -> Vec<String> {
    let reply = text(&c.call(args));
    reply.lines().map(str::to_string).collect()
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.trim_end()
        .split(' ')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

fn id_of(c: &mut Client) -> String {
    text(&c.call(&["CLIENT", "ID"]))
        .trim_start_matches(':')
        .into()
}

/// The connection was closed by the proxy (within the read timeout).
fn closed(c: &mut Client) -> bool {
    c.stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    c.try_read().is_none() && c.read_raw(Duration::from_millis(100)).1
}

/// `n` named clients; with two workers, SO_REUSEPORT spreads them over both.
fn named(h: &Harness, n: usize) -> Vec<Client> {
    (0..n)
        .map(|i| {
            let mut c = h.client();
            assert_eq!(
                text(&c.call(&["CLIENT", "SETNAME", &format!("c{i}")])),
                "OK"
            );
            c
        })
        .collect()
}

#[test]
fn list_and_info_show_every_client_of_every_worker() {
    let h = Harness::start(3, 0);
    let mut others = named(&h, 12);
    let mut me = h.client();
    assert_eq!(text(&me.call(&["CLIENT", "SETNAME", "admin"])), "OK");
    assert_eq!(
        text(&me.call(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"])),
        "OK"
    );
    assert_eq!(
        text(&me.call(&["CLIENT", "SETINFO", "lib-ver", "5.0.1"])),
        "OK"
    );
    assert_eq!(
        text(&me.call(&["CLIENT", "SETINFO", "lib-color", "x"])),
        "-ERR Unrecognized option 'lib-color'"
    );
    let all = lines(&mut me, &["CLIENT", "LIST"]);
    assert_eq!(all.len(), 13, "{all:?}");
    for i in 0..12 {
        assert!(
            all.iter().any(|l| field(l, "name") == format!("c{i}")),
            "c{i}"
        );
    }
    // An idle client's last command by its subcommand, as Redis shows it, and no query
    // buffer of its own (the worker's spare, as Redis 7.4's reusable query buffer).
    let c0 = all.iter().find(|l| field(l, "name") == "c0").expect("c0");
    assert_eq!(field(c0, "cmd"), "client|setname", "{c0}");
    assert_eq!(
        (field(c0, "qbuf"), field(c0, "qbuf-free")),
        ("0", "0"),
        "{c0}"
    );
    assert_eq!(field(c0, "rbs"), "0", "{c0}");
    let info = text(&me.call(&["CLIENT", "INFO"]));
    assert_eq!(field(&info, "id"), id_of(&mut me));
    assert_eq!(field(&info, "name"), "admin");
    assert_eq!(field(&info, "laddr"), h.addr().to_string());
    assert_eq!(field(&info, "lib-name"), "redis-py");
    assert_eq!(field(&info, "lib-ver"), "5.0.1");
    assert_eq!(field(&info, "flags"), "N");
    assert_eq!(
        field(&info, "cmd"),
        "client|info",
        "the command it runs, as Redis shows it"
    );
    assert_eq!(field(&info, "user"), "default");
    assert_eq!(
        field(&info, "addr"),
        me.stream.local_addr().unwrap().to_string()
    );
    assert!(info.starts_with("id=") && info.ends_with('\n'), "{info:?}");

    let (a, b) = (id_of(&mut others[3]), id_of(&mut others[7]));
    let picked = lines(&mut me, &["CLIENT", "LIST", "ID", &b, &a, "999999"]);
    let names: Vec<&str> = picked.iter().map(|l| field(l, "name")).collect();
    assert_eq!(names, ["c7", "c3"]);

    assert!(matches!(
        others[0].call(&["SUBSCRIBE", "news"]),
        Value::Array(_)
    ));
    assert_eq!(text(&me.call(&["CLIENT", "NO-EVICT", "on"])), "OK");
    let pubsub = lines(&mut me, &["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert_eq!(pubsub.len(), 1, "{pubsub:?}");
    assert_eq!(
        (field(&pubsub[0], "name"), field(&pubsub[0], "flags")),
        ("c0", "P")
    );
    assert_eq!(field(&pubsub[0], "sub"), "1");
    assert_eq!(
        lines(&mut me, &["CLIENT", "LIST", "TYPE", "normal"]).len(),
        12
    );
    assert!(lines(&mut me, &["CLIENT", "LIST", "TYPE", "replica"]).is_empty());
    assert_eq!(field(&text(&me.call(&["CLIENT", "INFO"])), "flags"), "e");
    assert_eq!(text(&me.call(&["RESET"])), "RESET");
    let info = text(&me.call(&["CLIENT", "INFO"]));
    assert_eq!((field(&info, "flags"), field(&info, "name")), ("N", ""));
    assert_eq!(
        text(&me.call(&["CLIENT", "NO-EVICT", "maybe"])),
        "-ERR syntax error"
    );
    let mut resp3 = h.client();
    assert!(matches!(resp3.call(&["HELLO", "3"]), Value::Map(_)));
    match resp3.call(&["CLIENT", "INFO"]) {
        Value::Verbatim { text, .. } => {
            assert_eq!(field(&String::from_utf8_lossy(&text), "resp"), "3")
        }
        other => panic!("RESP3 CLIENT INFO is a verbatim string, not {other:?}"),
    }
}

#[test]
fn kill_filters_close_the_right_connections_on_any_worker() {
    let h = Harness::start(3, 0);
    let mut victims = named(&h, 16);
    let mut me = h.client();
    let ids: Vec<String> = victims.iter_mut().take(8).map(id_of).collect();
    // One victim is blocked on its dedicated connection: the kill ends that too.
    victims[0].send(&[b"BLPOP", b"nothing:here", b"0"]);
    // By ID, each on whichever worker it landed: all must close promptly.
    for (v, id) in victims.iter_mut().zip(&ids) {
        assert_eq!(text(&me.call(&["CLIENT", "KILL", "ID", id])), ":1");
        assert!(closed(v), "client {id} still open");
    }
    let gone = id_of(&mut me);
    assert_eq!(text(&me.call(&["CLIENT", "KILL", "ID", "999999"])), ":0");
    // By ADDR, new form, then the old form; then the old form's error.
    let addr = victims[8].stream.local_addr().unwrap().to_string();
    assert_eq!(text(&me.call(&["CLIENT", "KILL", "ADDR", &addr])), ":1");
    assert!(closed(&mut victims[8]));
    let addr = victims[9].stream.local_addr().unwrap().to_string();
    assert_eq!(text(&me.call(&["CLIENT", "KILL", &addr])), "OK");
    assert!(closed(&mut victims[9]));
    assert_eq!(
        text(&me.call(&["CLIENT", "KILL", &addr])),
        "-ERR No such client"
    );
    // SKIPME: the caller survives its own LADDR kill unless it says `SKIPME no`.
    let laddr = h.addr().to_string();
    assert_eq!(text(&me.call(&["CLIENT", "KILL", "LADDR", &laddr])), ":6");
    for v in victims.iter_mut().skip(10) {
        assert!(closed(v));
    }
    assert_eq!(text(&me.call(&["CLIENT", "KILL", "ID", &gone])), ":0");
    assert_eq!(lines(&mut me, &["CLIENT", "LIST"]).len(), 1);
    let killed = me.call(&["CLIENT", "KILL", "ID", &gone, "SKIPME", "no"]);
    assert_eq!(text(&killed), ":1", "the reply comes before the close");
    assert!(closed(&mut me));
}

#[test]
fn kill_by_user_and_admin_commands_need_admin_rights() {
    let h = Harness::start(1, 0);
    let app = "name = 'app'\npassword = 'a'\ncommands = ['+@all']";
    let limited = "name = 'ro'\npassword = 'r'\ncommands = ['+@all', '-@dangerous']";
    let auth = AuthConfig {
        requirepass: "root".into(),
        users: vec![
            toml::from_str(app).unwrap(),
            toml::from_str(limited).unwrap(),
        ],
    };
    let proxy = start_proxy(&h.cluster, |cfg| cfg.auth = auth);
    let login = |user: &str, pass: &str| {
        let mut c = Client::connect(proxy.local_addr());
        assert_eq!(text(&c.call(&["AUTH", user, pass])), "OK");
        c
    };
    let mut apps = [login("app", "a"), login("app", "a")];
    let mut ro = login("ro", "r");
    let mut root = login("default", "root");
    assert_eq!(
        text(&ro.call(&["CLIENT", "LIST"])),
        "-NOPERM this user has no permissions to run the 'client|list' command"
    );
    assert!(text(&ro.call(&["CLIENT", "KILL", "USER", "app"])).starts_with("-NOPERM"));
    assert_eq!(field(&text(&ro.call(&["CLIENT", "INFO"])), "user"), "ro");
    assert_eq!(
        text(&root.call(&["CLIENT", "KILL", "USER", "nobody"])),
        "-ERR No such user 'nobody'"
    );
    assert_eq!(text(&root.call(&["CLIENT", "KILL", "USER", "app"])), ":2");
    for c in &mut apps {
        assert!(closed(c));
    }
    let left = lines(&mut root, &["CLIENT", "LIST"]);
    let users: Vec<&str> = left.iter().map(|l| field(l, "user")).collect();
    assert_eq!(users.len(), 2, "{left:?}");
    assert!(users.contains(&"ro") && users.contains(&"default"));
    proxy.shutdown();
}

#[test]
fn churn_leaves_only_the_caller_registered() {
    let h = Harness::start(1, 0);
    let addr = h.addr();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..500 {
                    let mut c = Client::connect(addr);
                    assert_eq!(text(&c.call(&["PING"])), "PONG");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut me = h.client();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = lines(&mut me, &["CLIENT", "LIST"]);
        if all.len() == 1 {
            assert_eq!(field(&all[0], "id"), id_of(&mut me));
            break;
        }
        assert!(Instant::now() < deadline, "{} clients left", all.len());
        std::thread::sleep(Duration::from_millis(50));
    }
    let info = text(&me.call(&["INFO", "clients"]));
    assert!(info.contains("connected_clients:1\r\n"), "{info}");
}
