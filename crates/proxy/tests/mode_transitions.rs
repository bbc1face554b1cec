//! Mode transitions answered exactly as one Redis answers them: every case is sent, byte for
//! byte, to a standalone redis-server and through the proxy to a 3-master cluster, and the
//! raw replies must be equal. The cases are the reproductions of the review's findings
//! (B4, B5, RESET/QUIT overtaking replies, WATCH lost, RESP3 confirmation order).

mod common;

use common::reference::{exchange, read_frames, Reference};
use common::{Client, Harness};

/// One write on connection `conn`, and how many frames it is answered with.
struct Step<'a> {
    conn: usize,
    cmds: &'a [&'a str],
    frames: usize,
    /// False for replies that differ by nature (HELLO's id and mode).
    compare: bool,
}

const fn step<'a>(conn: usize, cmds: &'a [&'a str], frames: usize) -> Step<'a> {
    Step {
        conn,
        cmds,
        frames,
        compare: true,
    }
}

const fn unchecked<'a>(conn: usize, cmds: &'a [&'a str], frames: usize) -> Step<'a> {
    Step {
        conn,
        cmds,
        frames,
        compare: false,
    }
}

/// Run `steps` on fresh connections to `addr`, after a FLUSHALL; the frames of each step.
fn run(addr: std::net::SocketAddr, steps: &[Step<'_>]) -> Vec<Vec<String>> {
    let mut admin = Client::connect(addr);
    assert_eq!(read_after(&mut admin, &["FLUSHALL"]), vec!["+OK\r\n"]);
    let conns = steps.iter().map(|s| s.conn).max().unwrap_or(0) + 1;
    let mut clients: Vec<Client> = (0..conns).map(|_| Client::connect(addr)).collect();
    steps
        .iter()
        .map(|s| exchange(&mut clients[s.conn], s.cmds, s.frames))
        .collect()
}

fn read_after(c: &mut Client, cmds: &[&str]) -> Vec<String> {
    exchange(c, cmds, cmds.len())
}

/// The case must give the same frames through the proxy as from one Redis.
fn same(h: &Harness, reference: &Reference, name: &str, steps: &[Step<'_>]) {
    eprintln!("case: {name}");
    let want = run(reference.addr, steps);
    let got = run(h.addr(), steps);
    for (i, s) in steps.iter().enumerate() {
        if s.compare {
            assert_eq!(
                got[i], want[i],
                "{name}: step {i} {:?}: proxy (left) vs redis (right)",
                s.cmds
            );
        }
    }
}

#[test]
fn pubsub_transitions_match_one_redis() {
    let h = Harness::start(3, 0);
    let r = Reference::start();
    let cases: &[(&str, &[Step])] = &[
        (
            "RESP2 command pipelined after the last UNSUBSCRIBE (B4)",
            &[
                step(0, &["SET k v"], 1),
                step(0, &["SUBSCRIBE ch"], 1),
                step(0, &["UNSUBSCRIBE ch", "GET k"], 2),
            ],
        ),
        (
            "UNSUBSCRIBE on a fresh connection, then a command",
            &[step(0, &["UNSUBSCRIBE ch", "CLIENT GETNAME"], 2)],
        ),
        (
            "SSUBSCRIBE, SUNSUBSCRIBE, a command",
            &[step(0, &["SSUBSCRIBE {t}ch", "SUNSUBSCRIBE", "DECR s3"], 3)],
        ),
        (
            "RESET in RESP3 subscribed mode (B5)",
            &[
                unchecked(0, &["HELLO 3"], 1),
                step(0, &["SUBSCRIBE ch"], 1),
                step(0, &["RESET", "INCR c2", "GET c2"], 3),
            ],
        ),
        (
            "RESET does not overtake confirmations (RESP2)",
            &[step(0, &["SUBSCRIBE a b", "RESET", "ECHO x"], 4)],
        ),
        (
            "RESP3 confirmations before later replies",
            &[
                unchecked(0, &["HELLO 3"], 1),
                step(
                    0,
                    &[
                        "SUBSCRIBE a b",
                        "MSETNX {t}s2 x",
                        "UNSUBSCRIBE a",
                        "GET {t}s2",
                    ],
                    5,
                ),
            ],
        ),
        (
            "PUBLISH counts the proxy's subscribers; one publisher's order across channels",
            &[
                step(0, &["SUBSCRIBE a b"], 2),
                step(1, &["PSUBSCRIBE *"], 1),
                step(
                    2,
                    &["PUBLISH b 1", "PUBLISH a 2", "PUBLISH b 3", "PUBLISH c 4"],
                    4,
                ),
                step(0, &[], 3),
                step(1, &[], 4),
                step(0, &["UNSUBSCRIBE b", "EXEC"], 2),
            ],
        ),
        (
            "RESP2 subscribed refusal names the subcommand",
            &[step(
                0,
                &["SUBSCRIBE a", "CLIENT GETNAME", "PING", "RESET"],
                4,
            )],
        ),
        (
            "SSUBSCRIBE then SPUBLISH: the subscription is live first",
            &[
                unchecked(0, &["HELLO 3"], 1),
                step(0, &["SSUBSCRIBE ch", "SPUBLISH ch self", "PING"], 3),
            ],
        ),
    ];
    for (name, steps) in cases {
        same(&h, &r, name, steps);
    }
}

#[test]
fn reset_quit_and_hello_do_not_overtake_replies() {
    let h = Harness::start(3, 0);
    let r = Reference::start();
    let cases: &[(&str, &[Step])] = &[
        (
            "HELLO's error before RESET",
            &[step(0, &["HELLO 4", "RESET", "PING"], 3)],
        ),
        (
            "QUIT mid-pipeline: earlier replies, +OK, then close",
            &[step(0, &["SET a 1", "PING", "GET a", "QUIT", "GET a"], 5)],
        ),
        (
            "QUIT in RESP2 subscribed mode",
            &[step(0, &["SUBSCRIBE a", "PING", "QUIT"], 4)],
        ),
        (
            "RESET inside MULTI",
            &[step(0, &["MULTI", "SET m 1", "RESET", "EXEC", "GET m"], 5)],
        ),
        (
            "HELLO switching protocol mid-pipeline",
            &[
                step(0, &["SET hk v1", "GET hk"], 2),
                unchecked(0, &["HELLO 3"], 1),
                step(0, &["STRLEN hk", "CLIENT GETNAME", "HGETALL nohash"], 3),
                unchecked(0, &["HELLO 2"], 1),
                step(0, &["SET hk v2", "GET hk", "CLIENT GETNAME"], 3),
            ],
        ),
    ];
    for (name, steps) in cases {
        same(&h, &r, name, steps);
    }
}

#[test]
fn watch_is_never_lost_silently() {
    let h = Harness::start(3, 0);
    let r = Reference::start();
    // A list on another master than the watched key: the BLPOP must not drop the WATCH.
    let watched = "s2";
    let other = (0..200)
        .map(|i| format!("{{l{i}}}list"))
        .find(|k| {
            h.cluster.owner_of(k.as_bytes()).ok() != h.cluster.owner_of(watched.as_bytes()).ok()
        })
        .expect("a key on another master");
    let blpop = format!("BLPOP {other} 0.01");
    let blpop: &[&str] = &[blpop.as_str()];
    let cases: &[(&str, &[Step])] = &[
        (
            "WATCH, BLPOP on another node, key touched: EXEC nil",
            &[
                step(0, &["WATCH s2"], 1),
                step(0, blpop, 1),
                step(1, &["SET s2 x"], 1),
                step(0, &["MULTI", "GET s2", "EXEC"], 3),
            ],
        ),
        (
            "WATCH, BLPOP on another node, key untouched: EXEC runs",
            &[
                step(0, &["WATCH s2"], 1),
                step(0, blpop, 1),
                step(0, &["MULTI", "SET s2 mine", "EXEC", "GET s2"], 4),
            ],
        ),
        (
            "WATCH then RESET: the WATCH is gone",
            &[
                step(0, &["WATCH wr", "RESET"], 2),
                step(1, &["SET wr 2"], 1),
                step(0, &["MULTI", "SET wr 3", "EXEC", "GET wr"], 4),
            ],
        ),
        (
            "WATCH, HELLO 3, key touched: EXEC nil",
            &[
                step(0, &["WATCH c2"], 1),
                unchecked(0, &["HELLO 3"], 1),
                step(1, &["INCR c2"], 1),
                step(0, &["MULTI", "EXEC"], 2),
            ],
        ),
        (
            "WATCH, HELLO 3, key untouched: EXEC runs in RESP3",
            &[
                step(0, &["WATCH {c3}k"], 1),
                unchecked(0, &["HELLO 3"], 1),
                step(
                    0,
                    &["MULTI", "SET {c3}k x", "HGETALL {c3}h", "EXEC", "GET {c3}k"],
                    5,
                ),
            ],
        ),
        (
            "WATCH, UNWATCH, key touched: EXEC runs",
            &[
                step(0, &["WATCH u1", "UNWATCH"], 2),
                step(1, &["SET u1 theirs"], 1),
                step(0, &["MULTI", "SET u1 mine", "EXEC", "GET u1"], 4),
            ],
        ),
    ];
    for (name, steps) in cases {
        same(&h, &r, name, steps);
    }
}

#[test]
fn a_resp3_subscriber_gets_big_replies_whole_between_pushes() {
    let h = Harness::start(3, 0);
    let big = "x".repeat(8 << 20);
    let mut sub = h.client();
    let mut publisher = h.client();
    let mut writer = h.client();
    writer.send(&[b"SET", b"big", big.as_bytes()]);
    assert_eq!(read_frames(&mut writer, 1), vec!["+OK\r\n"]);
    exchange(&mut sub, &["HELLO 3"], 1);
    assert_eq!(exchange(&mut sub, &["SUBSCRIBE ch"], 1).len(), 1);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let pubs = std::thread::spawn(move || {
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            exchange(&mut publisher, &["PUBLISH ch m"], 1);
        }
    });
    for _ in 0..3 {
        sub.send_raw(&common::reference::pipeline(&[
            "GET big", "GET big", "GET big", "PING",
        ]));
        let mut replies = 0;
        while replies < 4 {
            let frame = sub.read_frame().expect("a frame");
            if frame.starts_with(b">") {
                assert!(frame.ends_with(b"$1\r\nm\r\n"), "a message push");
                continue;
            }
            let want = if replies < 3 { 8 << 20 } else { 0 };
            if want > 0 {
                assert!(frame.starts_with(b"$8388608\r\n"), "the value, whole");
                assert_eq!(frame.len(), want + 12);
            }
            replies += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    pubs.join().expect("publisher");
}

#[test]
fn one_publishers_messages_arrive_in_order() {
    let h = Harness::start(3, 0);
    let mut sub = h.client();
    let mut publisher = h.client();
    assert_eq!(exchange(&mut sub, &["SUBSCRIBE ch"], 1).len(), 1);
    let cmds: Vec<String> = (0..300).map(|i| format!("PUBLISH ch {i}")).collect();
    let cmds: Vec<&str> = cmds.iter().map(String::as_str).collect();
    let counts = exchange(&mut publisher, &cmds, cmds.len());
    assert!(counts.iter().all(|c| c == ":1\r\n" || c == ":0\r\n"));
    let got: Vec<String> = read_frames(&mut sub, 300);
    let want: Vec<String> = (0..300)
        .map(|i| {
            let n = i.to_string();
            format!("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n${}\r\n{n}\r\n", n.len())
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn shard_subscriptions_read_as_one_redis() {
    let h = Harness::start(3, 0);
    let r = Reference::start();
    // Two shard channels on different masters: each node counts only its own.
    let first = "{sa}x";
    let other = (0..200)
        .map(|i| format!("{{s{i}}}y"))
        .find(|c| h.cluster.owner_of(c.as_bytes()).ok() != h.cluster.owner_of(b"{sa}x").ok())
        .expect("a channel on another master");
    let sub_first = format!("SSUBSCRIBE {first}");
    let sub_other = format!("SSUBSCRIBE {other}");
    let unsub_other = format!("SUNSUBSCRIBE {other}");
    let (sub_first, sub_other, unsub_other) = (
        [sub_first.as_str()],
        [sub_other.as_str()],
        [unsub_other.as_str()],
    );
    let cases: &[(&str, &[Step])] = &[
        (
            "shard confirmations count every shard channel of the client",
            &[
                step(0, &sub_first, 1),
                step(0, &sub_other, 1),
                step(0, &unsub_other, 1),
            ],
        ),
        (
            "PING with two arguments in shard-subscribed mode: Redis's arity error",
            &[step(0, &sub_first, 1), step(0, &["PING a b", "PING"], 2)],
        ),
        (
            "SUNSUBSCRIBE with only patterns subscribed stays in subscribed mode",
            &[
                step(0, &["PSUBSCRIBE ch*"], 1),
                step(0, &["SUNSUBSCRIBE", "PING hi", "GET k"], 3),
            ],
        ),
        (
            "PING in RESP2 shard-subscribed mode",
            &[step(0, &sub_first, 1), step(0, &["PING", "PING x"], 2)],
        ),
        (
            "HELLO 2 while subscribed in RESP3: RESP2 frames from then on",
            &[
                unchecked(0, &["HELLO 3"], 1),
                step(0, &sub_first, 1),
                unchecked(0, &["HELLO 2"], 1),
                step(0, &sub_other, 1),
                step(0, &["PING"], 1),
            ],
        ),
    ];
    for (name, steps) in cases {
        same(&h, &r, name, steps);
    }
}
