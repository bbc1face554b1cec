//! Values above 4 MiB on a real cluster. Requests carrying them are streamed to the node as
//! they arrive (`upload.rs`) and replies reuse the buffers of earlier big frames
//! (`bigbuf.rs`): values must come back intact and in order, a broken or abandoned upload
//! must store nothing, and a redirect must resend the whole request.

mod common;

use std::time::Duration;

use common::Harness;
use resp::Value;
use testkit::reply::slot_of;

const SIZE: usize = 5 << 20;

fn value(i: usize) -> Vec<u8> {
    (0..SIZE)
        .map(|j| b'a' + ((i * 7 + j / 4096) % 26) as u8)
        .collect()
}

/// The next reply must be the bulk string `want`.
fn expect_bulk(c: &mut common::Client, want: &[u8], what: &str) {
    match c.read().expect("a reply") {
        Value::BulkString(got) => assert!(got[..] == want[..], "{what}"),
        other => panic!("{what}: {other:?}"),
    }
}

#[test]
fn pipelined_big_values_come_back_intact() {
    let h = Harness::start(1, 0);
    let mut c = h.client();
    let values: Vec<Vec<u8>> = (0..8).map(value).collect();
    let keys: Vec<String> = (0..8).map(|i| format!("big:{{b}}{i}")).collect();
    for round in 0..2 {
        for (k, v) in keys.iter().zip(&values) {
            c.send(&[b"SET", k.as_bytes(), v]);
        }
        for _ in &keys {
            assert_eq!(
                common::text(&c.read().expect("reply")),
                "OK",
                "round {round}"
            );
        }
        for k in &keys {
            c.send(&[b"GET", k.as_bytes()]);
        }
        for (i, v) in values.iter().enumerate() {
            expect_bulk(&mut c, v, &format!("value {i} of round {round}"));
        }
    }
}

/// Requests before and after a streamed value or reply are answered in order; a big value
/// inside an array reply is framed whole, and still intact.
#[test]
fn a_streamed_value_keeps_its_place_in_a_pipeline() {
    let h = Harness::start(1, 0);
    let mut c = h.client();
    let big = value(3);
    let mut wire = Vec::new();
    for args in [
        &[&b"SET"[..], b"before", b"1"][..],
        &[b"SET", b"big:{o}", &big],
        &[b"GET", b"before"],
        &[b"STRLEN", b"big:{o}"],
        &[b"GET", b"big:{o}"],
        &[b"MGET", b"big:{o}", b"before"],
        &[b"GET", b"before"],
    ] {
        let mut b = bytes::BytesMut::new();
        resp::encode_command(&mut b, args);
        wire.extend_from_slice(&b);
    }
    c.send_raw(&wire);
    let replies: Vec<String> = (0..4).map(|_| common::text(&c.read().unwrap())).collect();
    assert_eq!(replies, ["OK", "OK", "1", &format!(":{SIZE}")]);
    expect_bulk(&mut c, &big, "streamed reply intact");
    match c.read().unwrap() {
        Value::Array(items) => {
            assert!(matches!(&items[0], Value::BulkString(b) if b[..] == big[..]));
            assert_eq!(common::text(&items[1]), "1");
        }
        other => panic!("MGET: {other:?}"),
    }
    assert_eq!(common::text(&c.read().unwrap()), "1", "in order after them");
}

/// A value whose CRLF is wrong gets Redis's protocol error; the node never executes it.
#[test]
fn a_streamed_value_without_its_crlf_is_refused_and_not_stored() {
    let h = Harness::start(1, 0);
    let mut c = h.client();
    c.send_raw(format!("*3\r\n$3\r\nSET\r\n$7\r\nbad:{{x}}\r\n${SIZE}\r\n").as_bytes());
    c.send_raw(&value(1));
    c.send_raw(b"XX");
    let (got, closed) = c.read_raw(Duration::from_secs(5));
    assert!(String::from_utf8_lossy(&got).starts_with("-ERR Protocol error"));
    assert!(closed);
    let mut other = h.client();
    assert!(matches!(
        other.call(&["EXISTS", "bad:{x}"]),
        Value::Integer(0)
    ));
}

/// A client that leaves mid-value leaves nothing behind: no key, no stuck session.
#[test]
fn a_client_leaving_mid_value_stores_nothing() {
    let h = Harness::start(1, 0);
    let mut c = h.client();
    c.send_raw(format!("*3\r\n$3\r\nSET\r\n$8\r\ngone:{{x}}\r\n${SIZE}\r\n").as_bytes());
    c.send_raw(&value(2)[..SIZE / 2]);
    let mut other = h.client();
    // The proxy holds half a value for it (CLIENT LIST's `qbuf`, or an upload under way).
    let partial = |list: &str| {
        list.lines()
            .any(|l| !l.contains("cmd=client") && (l.contains("cmd=set") || !l.contains("qbuf=0 ")))
    };
    let list = |other: &mut common::Client| common::text(&other.call(&["CLIENT", "LIST"]));
    common::wait_until(Duration::from_secs(20), || partial(&list(&mut other)));
    drop(c);
    common::wait_until(Duration::from_secs(20), || {
        list(&mut other).lines().count() == 1
    });
    assert!(matches!(
        other.call(&["EXISTS", "gone:{x}"]),
        Value::Integer(0)
    ));
    let list = common::text(&other.call(&["CLIENT", "LIST"]));
    assert_eq!(list.lines().count(), 1, "only the caller is left: {list}");
}

/// A streamed SET of a new key in a slot being migrated meets ASK: the proxy resends the
/// whole request, joined from its pieces, to the importing node.
#[test]
fn a_streamed_value_follows_ask_to_the_importing_node() {
    let h = Harness::start(2, 0);
    let cluster = &h.cluster;
    let tag = b"{ask}";
    let src = cluster.owner_of(tag).expect("owner");
    let dst = *cluster.masters().iter().find(|a| **a != src).expect("dst");
    let slot = slot_of(tag).to_string();
    let id = |a| {
        cluster
            .command(a, &["CLUSTER", "MYID"])
            .unwrap()
            .as_text()
            .unwrap()
    };
    let (src_id, dst_id) = (id(src), id(dst));
    cluster
        .command(dst, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src_id])
        .unwrap();
    cluster
        .command(src, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst_id])
        .unwrap();
    let mut c = h.client();
    let v = value(4);
    c.send(&[b"SET", b"new{ask}", &v]);
    assert_eq!(common::text(&c.read().unwrap()), "OK");
    c.send(&[b"GET", b"new{ask}"]);
    expect_bulk(&mut c, &v, "the value reached the importer whole");
}

/// Two big GETs and a STRLEN of one key, pipelined, all redirected (ASK while the slot
/// migrates, then MOVED once it moved): the resends go one at a time in the client's order
/// (`order.rs`), each released by the end of the streamed reply before it. Before the fix
/// the end of a streamed reply did not release its slot's next request: the second GET
/// waited forever (seen in the server matrix's chaos run on Valkey 8.1).
#[test]
fn streamed_replies_resent_after_a_redirect_release_the_next() {
    let h = Harness::start(2, 0);
    let mut c = h.client();
    let v = value(5);
    c.send(&[b"SET", b"big{rd}", &v]);
    assert_eq!(common::text(&c.read().unwrap()), "OK");
    let m = common::migrate::Move::begin(&h.cluster, "{rd}");
    m.migrate(&["big{rd}".to_string()]);
    for phase in ["ask", "moved"] {
        c.send(&[b"GET", b"big{rd}"]);
        c.send(&[b"GET", b"big{rd}"]);
        c.send(&[b"STRLEN", b"big{rd}"]);
        expect_bulk(&mut c, &v, &format!("{phase}: first GET"));
        expect_bulk(&mut c, &v, &format!("{phase}: second GET"));
        assert_eq!(
            common::text(&c.read().expect("STRLEN's reply")),
            format!(":{SIZE}"),
            "{phase}"
        );
        if phase == "ask" {
            m.finish();
        }
    }
}

/// A big last argument that is a key, not a value, is framed whole: the part not yet
/// arrived decides the slot. Here MGET's keys are in different slots, though the first
/// alone shares the slot of an empty key.
#[test]
fn a_big_key_is_not_streamed() {
    let h = Harness::start(2, 0);
    let small = (0..100_000)
        .map(|i| format!("k{i}"))
        .find(|k| slot_of(k.as_bytes()) == slot_of(b""))
        .expect("a key in slot 0");
    let big_key = vec![b'a'; SIZE];
    assert_ne!(slot_of(&big_key), slot_of(b""));
    let mut c = h.client();
    c.send(&[b"SET", small.as_bytes(), b"1"]);
    c.send(&[b"SET", &big_key, b"2"]);
    c.send(&[b"MGET", small.as_bytes(), &big_key]);
    assert_eq!(common::text(&c.read().unwrap()), "OK");
    assert_eq!(common::text(&c.read().unwrap()), "OK");
    match c.read().unwrap() {
        Value::Array(items) => {
            let got: Vec<String> = items.iter().map(common::text).collect();
            assert_eq!(got, ["1", "2"]);
        }
        other => panic!("MGET: {other:?}"),
    }
}
