//! The learned rows: reading a node's COMMAND INFO, replacing generated rows, installing.

use super::*;
use bytes::Bytes;

fn s(text: &str) -> Value {
    Value::BulkString(Bytes::copy_from_slice(text.as_bytes()))
}

fn arr(items: Vec<Value>) -> Value {
    Value::Array(items)
}

fn strs(items: &[&str]) -> Value {
    arr(items.iter().map(|t| s(t)).collect())
}

/// A key spec as a RESP2 flat map, as the servers send it.
fn spec(flags: &[&str], begin: (&str, &str, i64), find: (&str, [(&str, i64); 3])) -> Value {
    let (btype, bkey, bval) = begin;
    let (ftype, fields) = find;
    let fspec = fields
        .iter()
        .flat_map(|(k, v)| [s(k), Value::Integer(*v)])
        .collect();
    arr(vec![
        s("flags"),
        strs(flags),
        s("begin_search"),
        arr(vec![
            s("type"),
            s(btype),
            s("spec"),
            arr(vec![s(bkey), Value::Integer(bval)]),
        ]),
        s("find_keys"),
        arr(vec![s("type"), s(ftype), s("spec"), arr(fspec)]),
    ])
}

#[allow(clippy::too_many_arguments)]
fn entry(
    name: &str,
    arity: i64,
    flags: &[&str],
    keys: (i64, i64, i64),
    cats: &[&str],
    tips: &[&str],
    specs: Vec<Value>,
    subs: Vec<Value>,
) -> Value {
    arr(vec![
        s(name),
        Value::Integer(arity),
        strs(flags),
        Value::Integer(keys.0),
        Value::Integer(keys.1),
        Value::Integer(keys.2),
        strs(cats),
        strs(tips),
        arr(specs),
        arr(subs),
    ])
}

/// A row with only a name, an arity and subcommands (flags, keys, categories, tips empty).
fn bare(name: &str, arity: i64, subs: Vec<Value>) -> Value {
    entry(name, arity, &[], (0, 0, 0), &[], &[], vec![], subs)
}

/// Valkey 9.1's MSETEX, as its COMMAND INFO describes it.
fn msetex(name: &str) -> Value {
    entry(
        name,
        -4,
        &["write", "denyoom", "movablekeys"],
        (0, 0, 0),
        &["@write", "@string", "@slow"],
        &[
            "request_policy:multi_shard",
            "response_policy:all_succeeded",
        ],
        vec![spec(
            &["OW", "update"],
            ("index", "index", 1),
            (
                "keynum",
                [("keynumidx", 0), ("firstkey", 1), ("keystep", 2)],
            ),
        )],
        vec![],
    )
}

#[test]
fn a_node_row_reads_into_a_routable_spec() {
    let node = NodeCommands::parse(&arr(vec![
        msetex("MSETEX"),
        entry(
            "vcard",
            2,
            &["readonly", "module"],
            (1, 1, 1),
            &[],
            &[],
            vec![spec(
                &["RO", "access"],
                ("index", "index", 1),
                ("range", [("lastkey", 0), ("keystep", 1), ("limit", 0)]),
            )],
            vec![],
        ),
        Value::Integer(7),
    ]));
    assert_eq!(node.len(), 2, "a malformed entry is left out");
    let row = &node.rows["msetex"];
    assert_eq!(
        row.keys,
        Keys::NumKeys {
            numkeys_at: 1,
            first: 2,
            step: 2
        }
    );
    assert_eq!(row.request_policy, RequestPolicy::MultiShard);
    assert_eq!(row.key_access[0].need, access::WRITE);
    let spec = row.leak(&[]);
    let args: Vec<&[u8]> = vec![b"msetex", b"2", b"a", b"1", b"b", b"2", b"EX", b"10"];
    let keys = spec.key_positions(args.len(), |i| args[i]).unwrap();
    assert_eq!(keys.iter().collect::<Vec<_>>(), vec![2, 4]);
    assert_eq!(node.rows["vcard"].keys, Keys::Legacy);
    assert!(node.rows["vcard"].flags & flags::READONLY != 0);
}

#[test]
fn unreadable_specs_are_marked_not_guessed() {
    let node = NodeCommands::parse(&arr(vec![entry(
        "odd",
        -2,
        &["write", "movablekeys"],
        (0, 0, 0),
        &[],
        &[],
        vec![arr(vec![
            s("flags"),
            strs(&["RW"]),
            s("begin_search"),
            arr(vec![s("type"), s("unknown"), s("spec"), arr(vec![])]),
            s("find_keys"),
            arr(vec![s("type"), s("unknown"), s("spec"), arr(vec![])]),
        ])],
        vec![],
    )]));
    let spec = node.rows["odd"].leak(&[]);
    assert_eq!(
        spec.key_positions(2, |_| b"k"),
        Err(crate::KeyError::Unreadable)
    );
}

#[test]
fn a_looser_arity_or_new_subcommands_replace_a_generated_row() {
    assert_eq!(looser(3, -3), -3, "ZRANK key member [WITHSCORE]");
    assert_eq!(looser(-3, 3), -3, "never stricter");
    assert_eq!(looser(-3, -2), -2);
    assert_eq!(
        looser(2, -3),
        2,
        "a node accepting fewer calls changes nothing"
    );
    let zrank = crate::lookup(b"zrank").unwrap();
    let node = NodeCommands::parse(&arr(vec![entry(
        "zrank",
        -3,
        &["readonly", "fast"],
        (1, 1, 1),
        &[],
        &[],
        vec![],
        vec![],
    )]));
    let changed_row = changed(zrank, &node.rows["zrank"], &[]).unwrap();
    assert_eq!((changed_row.arity, changed_row.keys), (-3, zrank.keys));
    let same = NodeCommands::parse(&arr(vec![entry(
        "zrank",
        3,
        &["readonly", "fast"],
        (1, 1, 1),
        &[],
        &[],
        vec![],
        vec![],
    )]));
    assert!(changed(zrank, &same.rows["zrank"], &[]).is_none());
    let client = crate::lookup(b"client").unwrap();
    let capa = NodeCommands::parse(&arr(vec![bare(
        "client",
        -2,
        vec![entry(
            "client|capa",
            -3,
            &["noscript"],
            (0, 0, 0),
            &[],
            &[],
            vec![],
            vec![],
        )],
    )]));
    let row = &capa.rows["client"];
    let subs: Vec<&Row> = row.subcommands.values().collect();
    let merged = changed(client, row, &subs).unwrap();
    assert_eq!(merged.subcommands.len(), client.subcommands.len() + 1);
    let names: Vec<&str> = merged.subcommands.iter().map(|r| r.name).collect();
    assert!(
        names.windows(2).all(|w| w[0] < w[1]),
        "sorted for lookup: {names:?}"
    );
}

#[test]
fn an_installed_command_is_found_only_where_every_node_knows_it() {
    // A name no generated row has, so tests running beside this one see no change.
    let both = NodeCommands::parse(&arr(vec![
        msetex("slotgate-test-both"),
        msetex("slotgate-test-one"),
    ]));
    let one = NodeCommands::parse(&arr(vec![msetex("slotgate-test-both")]));
    let summary = install(&[both, one]).unwrap();
    assert_eq!((summary.nodes, summary.added, summary.partial), (2, 1, 1));
    let found = crate::lookup(b"SLOTGATE-TEST-BOTH").unwrap();
    assert_eq!(found.name, "slotgate-test-both");
    assert!(crate::lookup(b"slotgate-test-one").is_none());
    let index = super::super::stats_index(found).unwrap();
    assert!(index >= table::COMMANDS.len() && index < stats_len());
    assert_eq!(
        super::super::at_stats_index(index).map(|r| r.name),
        Some(found.name)
    );
}

#[test]
fn every_subcommand_has_a_statistics_slot_of_its_own() {
    use super::super::sub_stats::stats_slot;
    let mut seen = std::collections::HashSet::new();
    for (i, row) in table::COMMANDS.iter().enumerate() {
        assert_eq!(stats_slot(i, 0), i, "no subcommand: the row's own slot");
        for (p, sub) in row.subcommands.iter().enumerate() {
            let slot = stats_slot(i, p as u16 + 1);
            assert!(slot >= table::COMMANDS.len() + MAX_LEARNED && slot < stats_len());
            assert!(seen.insert(slot), "{} shares slot {slot}", sub.name);
            assert_eq!(
                super::super::at_stats_index(slot).map(|r| r.name),
                Some(sub.name)
            );
        }
    }
    assert!(seen.len() > 100, "{}", seen.len());
}

#[test]
fn a_learned_subcommand_keeps_its_slot_across_tables() {
    use super::super::sub_stats::stats_slot;
    // A container no generated row has, so tests running beside this one see no change.
    let container = |subs: &[&str]| {
        let subs = subs.iter().map(|n| bare(n, -2, vec![])).collect();
        bare("slotgate-test-box", -2, subs)
    };
    let slot_of = |name: &str| {
        let spec = crate::lookup(b"slotgate-test-box").unwrap();
        let index = super::super::stats_index(spec).unwrap();
        let p = spec
            .subcommands
            .iter()
            .position(|s| s.name == name)
            .unwrap();
        let slot = stats_slot(index, p as u16 + 1);
        assert_ne!(slot, index, "{name} counted apart from its container");
        assert_eq!(
            super::super::at_stats_index(slot).map(|r| r.name),
            Some(name)
        );
        slot
    };
    install(&[NodeCommands::parse(&arr(vec![container(&[
        "slotgate-test-box|b",
    ])]))])
    .unwrap();
    let b = slot_of("slotgate-test-box|b");
    install(&[NodeCommands::parse(&arr(vec![container(&[
        "slotgate-test-box|a",
        "slotgate-test-box|b",
    ])]))])
    .unwrap();
    assert_eq!(slot_of("slotgate-test-box|b"), b, "same name, same slot");
    assert_ne!(slot_of("slotgate-test-box|a"), b);
}
