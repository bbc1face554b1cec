//! The CLUSTER replies for one proxy and for a group: shapes, ranges, ids.

use super::*;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn ranges(view: &ClusterView) -> Vec<(i64, i64, i64, String)> {
    let slots = view.slots();
    let (value, _) = resp::decode(&slots).unwrap().unwrap();
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let p = r.as_array().unwrap();
            let node = p[2].as_array().unwrap();
            let id = String::from_utf8(node[2].as_bytes().unwrap().to_vec()).unwrap();
            (
                p[0].as_int().unwrap(),
                p[1].as_int().unwrap(),
                node[1].as_int().unwrap(),
                id,
            )
        })
        .collect()
}

#[test]
fn replies_describe_one_node_owning_every_slot() {
    let me = addr("127.0.0.1:7777");
    let view = ClusterView::new(&[], me);
    let r = ranges(&view);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].0, r[0].1, r[0].2), (0, 16383, 7777));
    assert_eq!(r[0].3.len(), 40);
    let nodes = String::from_utf8(view.nodes().to_vec()).unwrap();
    assert!(nodes.contains("127.0.0.1:7777@17777 myself,master - 0 0 1 connected 0-16383"));
    assert!(view.shards(false).starts_with(b"*1\r\n*4\r\n"));
    assert!(view.shards(true).starts_with(b"*1\r\n%2\r\n"));
}

#[test]
fn a_group_splits_the_slots_the_same_way_from_every_member() {
    let a = addr("127.0.0.1:7003");
    let b = addr("127.0.0.1:7001");
    let c = addr("127.0.0.1:7002");
    let from_a = ClusterView::new(&[a, b, c], a);
    let from_c = ClusterView::new(&[c, a, b], c);
    assert_eq!(from_a.slots(), from_c.slots(), "same set, same answer");
    let r = ranges(&from_a);
    let spans: Vec<_> = r.iter().map(|x| (x.0, x.1, x.2)).collect();
    assert_eq!(
        spans,
        vec![(0, 5460, 7001), (5461, 10921, 7002), (10922, 16383, 7003)]
    );
    assert_eq!(r[0].3, node_id(b));
    assert_ne!(from_a.myid(), from_c.myid());
    let encoded = from_a.nodes();
    let (value, _) = resp::decode(&encoded).unwrap().unwrap();
    let nodes = String::from_utf8(value.as_bytes().unwrap().to_vec()).unwrap();
    assert_eq!(nodes.lines().count(), 3);
    assert!(nodes.contains("127.0.0.1:7003@17003 myself,master - 0 0 3 connected 10922-16383"));
    assert!(from_a.shards(false).starts_with(b"*3\r\n"));
    let master = cluster::slot_map::NodeEntry {
        addr: "127.0.0.1:1".into(),
        id: None,
        replicas: vec![],
    };
    let range = cluster::slot_map::SlotRange {
        start: 0,
        end: 16383,
        master,
    };
    let map = SlotMap::from_ranges(1, &[range]).unwrap();
    let info = String::from_utf8(from_a.info(&map, &cluster::Placement::Slots).to_vec()).unwrap();
    assert!(
        info.contains("cluster_known_nodes:3\r\ncluster_size:3\r\n"),
        "{info}"
    );
}

#[test]
fn node_ids_are_the_sha1_of_the_address() {
    // printf '127.0.0.1:7001' | sha1sum
    assert_eq!(
        node_id(addr("127.0.0.1:7001")),
        "73e424d53fc3edc27f2c55eb2808f7bdd833f129"
    );
}
