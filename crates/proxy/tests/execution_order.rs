//! A client's requests to one slot execute in the order it sent them, through ASK, TRYAGAIN
//! and MOVED (review-proxy.md B1), on a real 3-master cluster with slots moved by hand.
//! Replies already came back in order; these tests look at what the nodes executed: the
//! value a later GET finds, and the values INCR returned.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::migrate::{admin, info, Move};
use common::{start_proxy, tempdir, text, Client, Harness};
use resp::Value;
use testkit::reply::slot_of;

/// Wait for `cond`, polling, for at most `secs` (a generous ceiling, not a timing claim).
fn wait_for(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// (a) `MSET {x}a 1 {x}b 1 ; SET {x}a 2 ; GET {x}a` while `{x}a` has moved and `{x}b` not:
/// the MSET gets TRYAGAIN, the SET gets ASK. The SET must not run before the MSET's retry
/// does, so once the migration ends `{x}a` is "2". Ten slots, one round each.
#[test]
fn a_retried_mset_runs_before_the_set_sent_after_it() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    let mut probe = h.client();
    for round in 0..10 {
        let tag = format!("{{x{round}}}");
        let (a, b) = (format!("{tag}a"), format!("{tag}b"));
        assert_eq!(text(&c.call(&["MSET", &a, "0", &b, "0"])), "OK");
        let m = Move::begin(&h.cluster, &tag);
        m.migrate(std::slice::from_ref(&a));
        let retries = info(&mut probe, "tryagain_retries");
        c.send(&[b"MSET", a.as_bytes(), b"1", b.as_bytes(), b"1"]);
        c.send(&[b"SET", a.as_bytes(), b"2"]);
        c.send(&[b"GET", a.as_bytes()]);
        wait_for(10, "the MSET's TRYAGAIN", || {
            info(&mut probe, "tryagain_retries") > retries
        });
        m.migrate(std::slice::from_ref(&b));
        m.finish();
        let replies: Vec<String> = (0..3).map(|_| text(&c.read().expect("reply"))).collect();
        assert_eq!(replies, ["OK", "OK", "2"], "round {round}");
        assert_eq!(
            text(&c.call(&["GET", &a])),
            "2",
            "round {round}: MSET ran last"
        );
    }
}

/// How many migrations (b) runs the slot through while the writer pipelines.
const MIGRATIONS: usize = 60;

/// (b) 200 pipelined `SET k i` interleaved with `INCR n` in one slot, round after round,
/// while that slot moves back and forth between two masters (ASK, then MOVED; the main
/// client's request after each move patches the map under the writer's feet, as any other
/// client's MOVED would). Each round's final GET must see its last SET, and INCR must count
/// up one by one across all rounds.
#[test]
fn pipelined_writes_keep_their_order_while_the_slot_moves() {
    let h = Harness::start(3, 0);
    let tag = "{b7}";
    let keys = [format!("{tag}k"), format!("{tag}n")];
    let mut c = h.client();
    assert_eq!(text(&c.call(&["SET", &keys[0], "0"])), "OK");
    assert_eq!(text(&c.call(&["SET", &keys[1], "0"])), "OK");
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (addr, keys, stop, rounds) = (h.addr(), keys.clone(), stop.clone(), rounds.clone());
        std::thread::spawn(move || write_rounds(addr, &keys, &stop, &rounds))
    };
    for _ in 0..MIGRATIONS {
        settle(&h.cluster, &keys[0]);
        assert!(matches!(c.call(&["EXISTS", &keys[0]]), Value::Integer(1)));
        let m = Move::begin(&h.cluster, tag);
        m.migrate(&keys);
        m.finish();
        // Every pipeline that overlapped this move ends before the next move starts. A slot
        // that left a node and came back while a pipeline was still on its way there lets
        // the node refuse early requests and run later ones: no proxy can undo that
        // (`order.rs`), and it is not what this test is about.
        let seen = rounds.load(Ordering::Relaxed);
        wait_for(30, "two rounds after the move", || {
            writer.is_finished() || rounds.load(Ordering::Relaxed) >= seen + 2
        });
        if writer.is_finished() {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let done = writer.join().expect("every round kept its order");
    eprintln!("{done} rounds of 400 pipelined writes over {MIGRATIONS} migrations");
}

/// Wait until the masters agree on `key`'s owner (asked directly: the owner answers, the
/// others redirect) and on every node's config epoch. Migrating again before the epochs
/// have spread can leave the slot owned by nobody (each side's stale gossip wins).
fn settle(cluster: &devcluster::Cluster, key: &str) {
    let view = |m: SocketAddr| {
        let owner = match cluster.command(m, &["EXISTS", key]).ok()? {
            r if r.is_error() => r.as_text()?.split(' ').nth(2)?.to_string(),
            _ => m.to_string(),
        };
        let nodes = cluster.command(m, &["CLUSTER", "NODES"]).ok()?.as_text()?;
        let mut epochs: Vec<(String, String)> = nodes
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                Some((f.first()?.to_string(), f.get(6)?.to_string()))
            })
            .collect();
        epochs.sort();
        Some((owner, epochs))
    };
    wait_for(30, "the masters to agree on owner and epochs", || {
        let views: Vec<_> = cluster.masters().into_iter().map(view).collect();
        views[0].is_some() && views.iter().all(|v| *v == views[0])
    });
}

/// Pipeline `SET k <round>:<i>` and `INCR n` 200 times, then `GET k`, until stopped.
fn write_rounds(
    addr: SocketAddr,
    keys: &[String],
    stop: &AtomicBool,
    rounds: &AtomicUsize,
) -> usize {
    let mut c = Client::connect(addr);
    let mut last = 0;
    let mut round = 0;
    while !stop.load(Ordering::Relaxed) {
        for i in 1..=200 {
            c.send(&[
                b"SET",
                keys[0].as_bytes(),
                format!("{round}:{i}").as_bytes(),
            ]);
            c.send(&[b"INCR", keys[1].as_bytes()]);
        }
        c.send(&[b"GET", keys[0].as_bytes()]);
        let replies: Vec<Value> = (0..400).map(|_| c.read().expect("reply")).collect();
        check_round(&replies, round, last);
        last += 200;
        let got = text(&c.read().expect("reply"));
        assert_eq!(
            got,
            format!("{round}:200"),
            "round {round}: GET after the last SET"
        );
        round += 1;
        rounds.store(round, Ordering::Relaxed);
    }
    round
}

/// Every SET said OK, and the INCRs counted on from `last` one by one: they ran in order.
fn check_round(replies: &[Value], round: usize, last: i64) {
    let incrs: Vec<i64> = replies
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            assert_eq!(text(&pair[0]), "OK", "round {round}: SET {}", i + 1);
            match pair[1] {
                Value::Integer(n) => n,
                ref other => panic!("round {round}: INCR {}: {}", i + 1, text(other)),
            }
        })
        .collect();
    let expected: Vec<i64> = (last + 1..=last + 200).collect();
    assert_eq!(incrs, expected, "round {round}: INCR ran out of order");
}

/// A tag whose slot `owner` serves, other than `not`'s.
fn tag_on(cluster: &devcluster::Cluster, owner: SocketAddr, not: &str) -> String {
    (0..1000)
        .map(|i| format!("{{o{i}}}"))
        .find(|t| {
            slot_of(t.as_bytes()) != slot_of(not.as_bytes())
                && cluster.owner_of(t.as_bytes()).ok() == Some(owner)
        })
        .expect("a tag on that master")
}

/// (c) MOVED: client A's `SET k 1` is in flight to k's old owner (held there behind a write
/// that `CLIENT PAUSE WRITE` postpones) when another client's MOVED patches the map. A's
/// `SET k 2`, sent next, must not reach the new owner before `SET k 1` does.
#[test]
fn a_request_behind_a_moved_waits_for_it() {
    let dir = tempdir("order-moved");
    let opts = devcluster::Options {
        masters: 3,
        dir,
        ..Default::default()
    };
    let cluster = devcluster::Cluster::start(&opts).expect("cluster starts");
    // Only MOVED may teach the proxy the new owner: no periodic refresh during the test.
    let proxy = start_proxy(&cluster, |c| c.cluster.periodic_refresh_ms = 600_000);
    let h = Harness {
        proxy: Some(proxy),
        cluster,
    };
    for round in 0..3 {
        moved_round(&h, round);
    }
}

fn moved_round(h: &Harness, round: usize) {
    let tag = format!("{{c{round}}}");
    let k = format!("{tag}k");
    let mut a = h.client();
    assert_eq!(text(&a.call(&["SET", &k, "0"])), "OK");
    let m = Move::begin(&h.cluster, &tag);
    m.migrate(std::slice::from_ref(&k));
    m.finish();
    let blocker = format!("{}x", tag_on(&h.cluster, m.src, &tag));
    admin(&h.cluster, m.src, &["CLIENT", "PAUSE", "20000", "WRITE"]);
    a.send(&[b"SET", blocker.as_bytes(), b"1"]);
    a.send(&[b"SET", k.as_bytes(), b"1"]);
    patch_map_from_another_worker(h, &k);
    a.send(&[b"SET", k.as_bytes(), b"2"]);
    a.send(&[b"GET", k.as_bytes()]);
    // Let the proxy route A's last two requests while the first two are held: done once its
    // CLIENT LIST shows the GET as A's last command (requests are counted as they are
    // routed, in order).
    let me = a.stream.local_addr().expect("local addr");
    let mut probe = h.client();
    wait_for(10, "the proxy to read A's GET", || {
        last_command(&mut probe, me).as_deref() == Some("get")
    });
    admin(&h.cluster, m.src, &["CLIENT", "UNPAUSE"]);
    let replies: Vec<String> = (0..4).map(|_| text(&a.read().expect("reply"))).collect();
    assert_eq!(
        replies[..3],
        ["OK", "OK", "OK"],
        "round {round}: {replies:?}"
    );
    assert_eq!(
        text(&a.call(&["GET", &k])),
        "2",
        "round {round}: SET k 1 ran last"
    );
}

/// `cmd=` of the proxy's CLIENT LIST line for the client connected from `addr`.
fn last_command(probe: &mut Client, addr: SocketAddr) -> Option<String> {
    let list = text(&probe.call(&["CLIENT", "LIST"]));
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" addr={addr} ")))?;
    let cmd = line.split(' ').find_map(|f| f.strip_prefix("cmd="))?;
    Some(cmd.to_string())
}

/// GET `k` from several connections until one answers: those on the other worker reach the
/// old owner on a connection that the pause does not hold, get MOVED and patch the map.
fn patch_map_from_another_worker(h: &Harness, k: &str) {
    let mut others: Vec<Client> = (0..16).map(|_| h.client()).collect();
    for o in &mut others {
        o.stream
            .set_read_timeout(Some(Duration::from_millis(20)))
            .expect("timeout");
        o.send(&[b"GET", k.as_bytes()]);
    }
    wait_for(10, "a MOVED followed on the other worker", || {
        others.iter_mut().any(|o| o.try_read().is_some())
    });
}

/// Two resends written together to an importing node: a script over a key that does not
/// exist yet and a key already migrated (the source answers ASK for both, all its keys
/// being missing there), then a SET of the migrated key (ASK too). At the target the
/// script gets TRYAGAIN (one key is not there) and the SET would run at once: the script's
/// retry would then read the SET's value. Released one at a time, the SET waits for the
/// script, which runs once the migration ends and reads the old value, as on one Redis.
#[test]
fn a_resend_refused_again_is_not_overtaken_by_the_next_one() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    let mut probe = h.client();
    for round in 0..5 {
        let tag = format!("{{rr{round}}}");
        let (absent, moved) = (format!("{tag}n"), format!("{tag}s"));
        assert_eq!(text(&c.call(&["SET", &moved, "old"])), "OK");
        let m = Move::begin(&h.cluster, &tag);
        m.migrate(std::slice::from_ref(&moved));
        let retries = info(&mut probe, "tryagain_retries");
        let script = "return {redis.call('INCR', KEYS[1]), redis.call('GET', KEYS[2])}";
        c.send(&[
            b"EVAL",
            script.as_bytes(),
            b"2",
            absent.as_bytes(),
            moved.as_bytes(),
        ]);
        c.send(&[b"SET", moved.as_bytes(), b"new"]);
        // Ends the migration once the target refused the script (TRYAGAIN, being retried),
        // well inside the retry budget (2-3 s): the script then runs.
        wait_for(10, "the script's TRYAGAIN", || {
            info(&mut probe, "tryagain_retries") > retries
        });
        m.finish();
        let eval = c.read().expect("EVAL reply");
        let got: Vec<String> = eval.as_array().expect("array").iter().map(text).collect();
        assert_eq!(got, [":1", "old"], "round {round}: the SET ran first");
        assert_eq!(text(&c.read().expect("SET reply")), "OK");
        assert_eq!(text(&c.call(&["GET", &moved])), "new");
    }
}
