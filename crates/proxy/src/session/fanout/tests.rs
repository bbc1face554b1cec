//! Requests split by slot and broadcast, and their parts' replies merged in key order.

use super::*;
use crate::route::PartShape;

fn req(args: &[&str]) -> Request {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    Request::from_args(&args)
}

fn keys_of(r: &Request) -> KeyPositions {
    let spec = cluster::lookup(r.arg(0)).unwrap();
    spec.key_positions(r.argc(), |i| r.arg(i)).unwrap()
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[test]
fn mget_is_split_by_slot_and_merged_in_key_order() {
    let r = req(&["MGET", "a", "b", "{a}x", "c"]);
    let mut f = Fanout::split(
        &r,
        &keys_of(&r),
        Merge::KeyOrder,
        PartShape::Keys,
        &cluster::Placement::Slots,
    );
    assert_eq!(f.parts.len(), 3, "a and {{a}}x share a slot");
    let frames: Vec<String> = f
        .parts
        .iter()
        .map(|p| String::from_utf8_lossy(&p.frame).into_owned())
        .collect();
    assert_eq!(frames[0], "*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$4\r\n{a}x\r\n");
    assert!(f.complete(2, b("*1\r\n$2\r\nvc\r\n")).is_none());
    assert!(f.complete(1, b("*1\r\n$-1\r\n")).is_none());
    let merged = f.complete(0, b("*2\r\n$2\r\nva\r\n$3\r\nvax\r\n")).unwrap();
    assert_eq!(
        merged,
        b("*4\r\n$2\r\nva\r\n$-1\r\n$3\r\nvax\r\n$2\r\nvc\r\n")
    );
}

#[test]
fn msetex_parts_keep_their_count_and_the_options() {
    // Redis 8.4's and Valkey 9's `MSETEX numkeys key value … [EX s]`: keys at 2, 4, 6.
    let r = req(&["MSETEX", "3", "a", "1", "b", "2", "{a}x", "3", "EX", "100"]);
    let keys = KeyPositions::Range {
        first: 2,
        last: 6,
        step: 2,
    };
    let shape = PartShape::NumKeys {
        numkeys_at: 1,
        keys_at: 2,
        options_at: 8,
    };
    let f = Fanout::split(
        &r,
        &keys,
        Merge::AllSucceeded,
        shape,
        &cluster::Placement::Slots,
    );
    let frames: Vec<String> = (f.parts.iter())
        .map(|p| String::from_utf8_lossy(&p.frame).replace("\r\n", " "))
        .collect();
    assert_eq!(
        frames,
        [
            "*8 $6 MSETEX $1 2 $1 a $1 1 $4 {a}x $1 3 $2 EX $3 100 ",
            "*6 $6 MSETEX $1 1 $1 b $1 2 $2 EX $3 100 ",
        ]
    );
}

#[test]
fn mset_keeps_values_with_their_keys() {
    let r = req(&["MSET", "a", "1", "b", "2"]);
    let mut f = Fanout::split(
        &r,
        &keys_of(&r),
        Merge::AllSucceeded,
        PartShape::Keys,
        &cluster::Placement::Slots,
    );
    assert_eq!(
        f.parts[1].frame,
        b("*3\r\n$4\r\nMSET\r\n$1\r\nb\r\n$1\r\n2\r\n")
    );
    f.complete(0, b("+OK\r\n"));
    assert_eq!(f.complete(1, b("+OK\r\n")).unwrap(), b("+OK\r\n"));
}

#[test]
fn merges_follow_the_response_policy() {
    let r = req(&["DBSIZE"]);
    let mut sum = Fanout::broadcast(&r, 3, Merge::Sum, false);
    sum.complete(0, b(":2\r\n"));
    sum.complete(1, b(":0\r\n"));
    assert_eq!(sum.complete(2, b(":5\r\n")).unwrap(), b(":7\r\n"));

    let mut keys = Fanout::broadcast(&req(&["KEYS", "*"]), 2, Merge::Concat, false);
    keys.complete(0, b("*1\r\n$1\r\na\r\n"));
    assert_eq!(
        keys.complete(1, b("*1\r\n$1\r\nb\r\n")).unwrap(),
        b("*2\r\n$1\r\na\r\n$1\r\nb\r\n")
    );

    let mut and = Fanout::broadcast(
        &req(&["SCRIPT", "EXISTS", "x", "y"]),
        2,
        Merge::LogicalAnd,
        false,
    );
    and.complete(0, b("*2\r\n:1\r\n:1\r\n"));
    assert_eq!(
        and.complete(1, b("*2\r\n:1\r\n:0\r\n")).unwrap(),
        b("*2\r\n:1\r\n:0\r\n")
    );

    let mut failed = Fanout::broadcast(&req(&["FLUSHALL"]), 2, Merge::AllSucceeded, false);
    failed.complete(0, b("+OK\r\n"));
    assert_eq!(
        failed.complete(1, b("-ERR boom\r\n")).unwrap(),
        b("-ERR boom\r\n")
    );
}

/// Every command of the table, with awkward argument lists (odd counts, keys in several
/// slots, numbers where keys go), through the router and, for split commands, the split
/// and the merge: nothing may panic on client input.
#[test]
fn no_command_shape_panics_the_router_or_the_split() {
    let pool: [&str; 8] = ["a", "b", "{x}c", "1", "-1", "0", "2", "STREAMS"];
    let mut names: Vec<String> = Vec::new();
    for spec in cluster::command::all() {
        names.push(spec.name.to_string());
        names.extend(spec.subcommands.iter().map(|s| s.name.replace('|', " ")));
    }
    for name in &names {
        for argc in 0..7 {
            for rotate in 0..pool.len() {
                let mut args: Vec<&str> = name.split(' ').collect();
                args.extend((0..argc).map(|i| pool[(i + rotate) % pool.len()]));
                let r = req(&args);
                if let crate::route::Route::Split(split) = crate::route::route(&r, false) {
                    let crate::route::Split { keys, merge, shape } = *split;
                    let mut f = Fanout::split(&r, &keys, merge, shape, &cluster::Placement::Slots);
                    for i in 0..f.parts.len() {
                        f.complete(i, b("*1\r\n$1\r\nv\r\n"));
                    }
                }
            }
        }
    }
}

#[test]
fn keys_reads_every_master_twice_the_second_round_after_the_first() {
    let r = req(&["KEYS", "*"]);
    let mut f = Fanout::twice(&r, 2);
    assert_eq!(f.parts.len(), 4);
    assert_eq!(f.release_second_round(), None, "the first round is not in");
    assert!(f.complete(1, b("*1\r\n$1\r\nb\r\n")).is_none());
    assert_eq!(f.release_second_round(), None);
    // A key moving from master 0 to master 1: master 0's first read already missed it.
    assert!(f.complete(0, b("*0\r\n")).is_none());
    assert_eq!(f.release_second_round(), Some(2..4));
    assert_eq!(f.release_second_round(), None, "released once");
    assert!(f.complete(2, b("*0\r\n")).is_none());
    let merged = f.complete(3, b("*2\r\n$1\r\nb\r\n$1\r\nm\r\n")).unwrap();
    assert_eq!(
        &merged[..],
        b"*2\r\n$1\r\nb\r\n$1\r\nm\r\n",
        "each name once"
    );
}

#[test]
fn keys_with_a_failed_first_round_answers_the_error_without_a_second() {
    let r = req(&["KEYS", "*"]);
    let mut f = Fanout::twice(&r, 2);
    assert!(f.complete(0, b("-ERR boom\r\n")).is_none());
    let merged = f.complete(1, b("*0\r\n")).unwrap();
    assert_eq!(&merged[..], b"-ERR boom\r\n");
    assert_eq!(f.release_second_round(), None);
}
