//! The slot map built from CLUSTER SLOTS and SHARDS replies, patched and redirected.

use bytes::Bytes;
use resp::Value;

use super::*;

fn node(host: &str, port: i64, id: &str) -> Value {
    Value::Array(vec![
        Value::BulkString(Bytes::copy_from_slice(host.as_bytes())),
        Value::Integer(port),
        Value::BulkString(Bytes::copy_from_slice(id.as_bytes())),
    ])
}

fn range(start: i64, end: i64, nodes: Vec<Value>) -> Value {
    let mut v = vec![Value::Integer(start), Value::Integer(end)];
    v.extend(nodes);
    Value::Array(v)
}

fn three_masters() -> Value {
    Value::Array(vec![
        range(
            0,
            5460,
            vec![node("127.0.0.1", 7000, "a"), node("127.0.0.1", 7003, "d")],
        ),
        range(5461, 10922, vec![node("127.0.0.1", 7001, "b")]),
        range(10923, 16383, vec![node("127.0.0.1", 7002, "c")]),
    ])
}

#[test]
fn parses_cluster_slots() {
    let map = SlotMap::from_cluster_slots(1, &three_masters(), "127.0.0.1").unwrap();
    assert_eq!(map.nodes().len(), 3);
    assert_eq!(map.assigned(), SLOT_COUNT);
    assert_eq!(map.node_of(0).unwrap().addr, "127.0.0.1:7000");
    assert_eq!(
        map.node_of(0).unwrap().replicas,
        vec!["127.0.0.1:7003".to_string()]
    );
    assert_eq!(map.node_of(5461).unwrap().addr, "127.0.0.1:7001");
    assert_eq!(map.node_of(16383).unwrap().addr, "127.0.0.1:7002");
}

#[test]
fn empty_host_means_responder_and_question_mark_is_a_hole() {
    let reply = Value::Array(vec![
        range(0, 99, vec![node("", 7000, "a")]),
        range(100, 199, vec![node("?", 7001, "b")]),
    ]);
    let map = SlotMap::from_cluster_slots(1, &reply, "10.0.0.9").unwrap();
    assert_eq!(map.node_of(5).unwrap().addr, "10.0.0.9:7000");
    assert!(map.node_of(150).is_none());
    assert!(map.node_of(5000).is_none());
    assert_eq!(map.assigned(), 100);
}

#[test]
fn question_mark_takes_the_ip_of_the_metadata() {
    // As Redis 7 answers with `cluster-preferred-endpoint-type hostname` and no hostname
    // set: `?`, and the IP in the metadata (a flat array in RESP2, a map in RESP3).
    let with_meta = |meta: Value| {
        Value::Array(vec![
            Value::BulkString(Bytes::from_static(b"?")),
            Value::Integer(7001),
            Value::BulkString(Bytes::from_static(b"b")),
            meta,
        ])
    };
    let ip = |b: &'static [u8]| Value::BulkString(Bytes::from_static(b));
    let reply = Value::Array(vec![
        range(
            0,
            99,
            vec![with_meta(Value::Array(vec![ip(b"ip"), ip(b"10.0.0.7")]))],
        ),
        range(
            100,
            199,
            vec![with_meta(Value::Map(vec![(ip(b"ip"), ip(b"10.0.0.8"))]))],
        ),
        range(200, 299, vec![with_meta(Value::Array(vec![]))]),
    ]);
    let map = SlotMap::from_cluster_slots(1, &reply, "10.0.0.9").unwrap();
    assert_eq!(map.node_of(5).unwrap().addr, "10.0.0.7:7001");
    assert_eq!(map.node_of(150).unwrap().addr, "10.0.0.8:7001");
    assert!(map.node_of(250).is_none());
}

#[test]
fn redirects_resolve_empty_hosts_and_question_marks() {
    use crate::redirect::{Endpoint, Host};
    let map = SlotMap::from_cluster_slots(1, &three_masters(), "127.0.0.1").unwrap();
    let to = |host, port| Endpoint { host, port };
    let from = "10.0.0.1:7000";
    assert_eq!(
        map.redirect_addr(to(Host::Name("h.example"), 7001), from),
        Some("h.example:7001".into())
    );
    // `-MOVED 3999 :7002`: the host of the node that answered.
    assert_eq!(
        map.redirect_addr(to(Host::Same, 7002), from),
        Some("10.0.0.1:7002".into())
    );
    // `-MOVED 3999 ?:7003`: the one node of the map on that port (here a replica).
    assert_eq!(
        map.redirect_addr(to(Host::Unknown, 7003), from),
        Some("127.0.0.1:7003".into())
    );
    assert_eq!(map.redirect_addr(to(Host::Unknown, 7999), from), None);
}

#[test]
fn ipv6_hosts_are_bracketed() {
    let reply = Value::Array(vec![range(0, 16383, vec![node("::1", 7000, "a")])]);
    let map = SlotMap::from_cluster_slots(1, &reply, "::1").unwrap();
    assert_eq!(map.node_of(1).unwrap().addr, "[::1]:7000");
}

#[test]
fn refuses_empty_and_malformed_replies() {
    assert_eq!(
        SlotMap::from_cluster_slots(1, &Value::Array(vec![]), "h").unwrap_err(),
        TopologyError::Empty
    );
    assert_eq!(
        SlotMap::from_cluster_slots(1, &Value::Integer(3), "h").unwrap_err(),
        TopologyError::NotAnArray
    );
    let bad = Value::Array(vec![range(0, 16384, vec![node("h", 1, "a")])]);
    assert!(matches!(
        SlotMap::from_cluster_slots(1, &bad, "h"),
        Err(TopologyError::BadRange(..))
    ));
    let bad_port = Value::Array(vec![range(0, 10, vec![node("h", 0, "a")])]);
    assert!(SlotMap::from_cluster_slots(1, &bad_port, "h").is_err());
}

#[test]
fn patch_repoints_only_to_known_masters() {
    let map = SlotMap::from_cluster_slots(1, &three_masters(), "127.0.0.1").unwrap();
    assert!(map.patch(42, "127.0.0.1:7002"));
    assert_eq!(map.node_of(42).unwrap().addr, "127.0.0.1:7002");
    assert!(!map.patch(43, "127.0.0.1:9999"));
    assert_eq!(map.node_of(43).unwrap().addr, "127.0.0.1:7000");
}

#[test]
fn stamps_tell_routings_apart_across_patches_and_copies() {
    let map = SlotMap::from_cluster_slots(1, &three_masters(), "127.0.0.1").unwrap();
    let before = map.stamp();
    assert_eq!(map.stamp_after(), before, "no patch: a stable routing");
    assert!(map.patch(42, "127.0.0.1:7002"));
    let after = map.stamp();
    assert_ne!(after, before, "a patch changes the stamp");
    assert!(after.seq.is_multiple_of(2), "no patch is half done");
    assert!(!map.patch(43, "127.0.0.1:9999"));
    assert_eq!(map.stamp(), after, "a refused patch changes nothing");
    let copy = map.with_master("127.0.0.1:7009");
    assert_ne!(copy.stamp().map, map.stamp().map, "a copy is another map");
    let twin = SlotMap::from_cluster_slots(1, &three_masters(), "127.0.0.1").unwrap();
    assert_ne!(twin.stamp(), before, "same version, another instance");
}

#[test]
fn patches_from_several_threads_all_count() {
    let map = SlotMap::from_cluster_slots(1, &three_masters(), "127.0.0.1").unwrap();
    std::thread::scope(|s| {
        for t in 0..4u16 {
            let map = &map;
            s.spawn(move || {
                for i in 0..500 {
                    map.patch(t * 1000 + i, "127.0.0.1:7001");
                }
            });
        }
    });
    assert_eq!(map.stamp().seq, 2 * 4 * 500);
}

#[test]
fn compares_routes_and_cluster_identity() {
    let a = SlotMap::from_cluster_slots(1, &three_masters(), "127.0.0.1").unwrap();
    let b = SlotMap::from_cluster_slots(2, &three_masters(), "127.0.0.1").unwrap();
    assert!(a.same_routes(&b));
    b.patch(7, "127.0.0.1:7001");
    assert!(!a.same_routes(&b));
    let other = Value::Array(vec![range(0, 16383, vec![node("127.0.0.1", 7000, "zzz")])]);
    let c = SlotMap::from_cluster_slots(3, &other, "127.0.0.1").unwrap();
    assert!(!a.same_cluster(&c));
    assert!(a.same_cluster(&b));
}

#[test]
fn fragmented_map_builds_linearly() {
    // Even slots on one master, odd on another: 16384 ranges.
    let entries: Vec<Value> = (0..16384)
        .map(|s| {
            range(
                s,
                s,
                vec![node(
                    "127.0.0.1",
                    7000 + (s % 2),
                    if s % 2 == 0 { "a" } else { "b" },
                )],
            )
        })
        .collect();
    let map = SlotMap::from_cluster_slots(1, &Value::Array(entries), "h").unwrap();
    assert_eq!(map.nodes().len(), 2);
    assert_eq!(map.node_of(3).unwrap().addr, "127.0.0.1:7001");
}

#[test]
fn a_copy_can_learn_a_new_master() {
    let map = SlotMap::from_cluster_slots(1, &three_masters(), "127.0.0.1").unwrap();
    assert!(!map.patch(9, "127.0.0.1:7009"));
    let bigger = map.with_master("127.0.0.1:7009");
    assert!(bigger.patch(9, "127.0.0.1:7009"));
    assert_eq!(bigger.node_of(9).unwrap().addr, "127.0.0.1:7009");
    assert_eq!(bigger.node_of(10).unwrap().addr, "127.0.0.1:7000");
    assert_eq!(bigger.version(), map.version());
    assert_eq!(bigger.nodes().len(), 4);
}

#[test]
fn host_of_strips_the_port_and_ipv6_brackets() {
    for (addr, host) in [
        ("127.0.0.1:7000", "127.0.0.1"),
        ("[::1]:7000", "::1"),
        ("redis-0.svc:6379", "redis-0.svc"),
        ("nohost", "nohost"),
    ] {
        assert_eq!(super::host_of(addr), host, "{addr}");
    }
}
