//! Mode transitions meeting faults: a WATCH whose slot moves away, and a subscription whose
//! connection cannot be made. A client must never be left waiting, and never run a
//! transaction unwatched.

mod common;

use std::io::Read;
use std::time::Duration;

use common::reference::{exchange, pipeline, read_frames};
use common::slots::move_slot_of;
use common::{Client, Harness};

#[test]
fn exec_answers_nil_when_the_watched_slot_moved() {
    let h = Harness::start(3, 0);
    let mut c0 = h.client();
    let mut c1 = h.client();
    assert_eq!(
        exchange(&mut c0, &["SET w orig", "WATCH w"], 2),
        ["+OK\r\n"; 2]
    );
    move_slot_of(&h.cluster, "w");
    // Another client writes the key on its new owner (the proxy learns the move here).
    assert_eq!(exchange(&mut c1, &["SET w theirs"], 1), ["+OK\r\n"]);
    let got = exchange(&mut c0, &["MULTI", "SET w mine", "EXEC", "GET w"], 4);
    assert_eq!(
        got,
        ["+OK\r\n", "+QUEUED\r\n", "*-1\r\n", "$6\r\ntheirs\r\n"]
    );
}

#[test]
fn a_subscriber_whose_connection_fails_is_closed_not_left_waiting() {
    let mut h = Harness::start(3, 0);
    let dead = h.cluster.masters()[1];
    h.cluster.kill(dead).expect("kill a master");
    // Each client's subscription connection goes to a master chosen by its id: some of them
    // pick the dead one. Each must get its confirmation or see its connection closed.
    for i in 0..6 {
        let mut c = h.client();
        c.stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        c.send_raw(&pipeline(&[&format!("SUBSCRIBE ch{i}")]));
        let mut buf = [0u8; 256];
        let read = loop {
            match c.stream.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match read {
            Ok(0) => {}
            Ok(n) => assert!(buf[..n].starts_with(b"*3\r\n$9\r\nsubscribe"), "client {i}"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("client {i} was left waiting: {e}"),
        }
    }
    let mut probe: Client = h.client();
    assert_eq!(exchange(&mut probe, &["PING"], 1), ["+PONG\r\n"]);
}

#[test]
fn a_transaction_queue_is_bounded_like_the_query_buffer() {
    let cluster = devcluster::Cluster::start(&devcluster::Options {
        masters: 3,
        replicas: 0,
        dir: common::tempdir("tx-bound"),
        ..Default::default()
    })
    .expect("cluster");
    let proxy = common::start_proxy(&cluster, |c| c.limits.max_query_buffer_bytes = 256 * 1024);
    let mut c = Client::connect(proxy.local_addr());
    let value = "v".repeat(1024);
    let set = format!("SET {{t}}k {value}");
    let mut cmds = vec!["MULTI"];
    cmds.extend(std::iter::repeat_n(set.as_str(), 400));
    cmds.push("EXEC");
    cmds.push("EXISTS {t}k");
    let got = exchange(&mut c, &cmds, cmds.len());
    assert_eq!(got[0], "+OK\r\n");
    assert!(got[1..]
        .iter()
        .any(|r| r.contains("max_query_buffer_bytes")));
    assert!(got[401].starts_with("-EXECABORT"), "{}", got[401]);
    assert_eq!(got[402], ":0\r\n", "nothing applied");
    proxy.shutdown();
}

#[test]
fn ssubscribe_on_a_stale_map_subscribes_at_the_new_owner() {
    let h = Harness::start(3, 0);
    let mut warm = h.client();
    assert_eq!(exchange(&mut warm, &["SET {sc}k v"], 1), ["+OK\r\n"]);
    // The slot moves behind the proxy's back: its map still names the old owner.
    move_slot_of(&h.cluster, "{sc}k");
    let mut sub = h.client();
    let confirmation = exchange(&mut sub, &["SSUBSCRIBE {sc}ch"], 1);
    assert_eq!(
        confirmation,
        ["*3\r\n$10\r\nssubscribe\r\n$6\r\n{sc}ch\r\n:1\r\n"]
    );
    let mut publisher = h.client();
    assert_eq!(
        exchange(&mut publisher, &["SPUBLISH {sc}ch hi"], 1),
        [":1\r\n"]
    );
    assert_eq!(
        read_frames(&mut sub, 1),
        ["*3\r\n$8\r\nsmessage\r\n$6\r\n{sc}ch\r\n$2\r\nhi\r\n"]
    );
}

#[test]
fn exec_answers_nil_when_the_watch_connection_was_lost() {
    let h = Harness::start(3, 0);
    let mut c0 = h.client();
    assert_eq!(
        exchange(&mut c0, &["SET wk 1", "WATCH wk"], 2),
        ["+OK\r\n"; 2]
    );
    // The node drops the connection that holds the WATCH (a restart, a network blip).
    let owner = h.cluster.owner_of(b"wk").expect("owner");
    let clients = h.cluster.command(owner, &["CLIENT", "LIST"]).expect("list");
    let line = clients
        .lines()
        .into_iter()
        .find(|l| l.contains("cmd=watch"))
        .expect("the watch connection");
    let id = line
        .split(' ')
        .next()
        .and_then(|f| f.strip_prefix("id="))
        .expect("id");
    let killed = h
        .cluster
        .command(owner, &["CLIENT", "KILL", "ID", id])
        .expect("kill");
    assert!(!killed.is_error(), "{killed:?}");
    // Once the proxy has seen the loss (before that, EXEC would fail with "connection
    // lost", also never unwatched), EXEC must answer nil.
    let mut admin = h.client();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !exchange(&mut admin, &["INFO backends"], 1)[0].contains("conn_lost=1") {
        assert!(
            std::time::Instant::now() < deadline,
            "the proxy never saw the loss"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let got = exchange(&mut c0, &["MULTI", "SET wk mine", "EXEC", "GET wk"], 4);
    assert_eq!(got, ["+OK\r\n", "+QUEUED\r\n", "*-1\r\n", "$1\r\n1\r\n"]);
}
