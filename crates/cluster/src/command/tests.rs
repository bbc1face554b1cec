//! Unit tests for the command table: lookup, subcommand resolution and key
//! extraction on representative commands of every key-spec shape. The
//! expectations were checked against COMMAND GETKEYS and the error replies
//! of a redis-server 7.0.15; tests/live_server.rs rechecks them live.

use super::*;

/// Key positions for a command line given as space-separated words
/// (`''` stands for an empty argument).
fn keys(line: &str) -> Result<Vec<usize>, KeyError> {
    let args: Vec<&[u8]> = line
        .split(' ')
        .map(|w| if w == "''" { &b""[..] } else { w.as_bytes() })
        .collect();
    let spec = lookup(args[0]).expect("known command");
    let spec = spec.resolve(args.len(), |i| args[i]);
    spec.key_positions(args.len(), |i| args[i])
        .map(|k| k.iter().collect())
}

fn ok(line: &str) -> Vec<usize> {
    keys(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn err(line: &str) -> String {
    match keys(line) {
        Ok(k) => panic!("{line}: expected error, got {k:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn table_is_sorted_unique_and_lowercase() {
    assert_eq!(all().len(), 240);
    let subs: usize = all().iter().map(|c| c.subcommands.len()).sum();
    assert_eq!(subs, 126);
    let sorted = |rows: &[CommandSpec]| rows.windows(2).all(|w| w[0].name < w[1].name);
    assert!(sorted(all()));
    for c in all() {
        assert_eq!(c.name, c.name.to_ascii_lowercase());
        assert!(sorted(c.subcommands), "{}", c.name);
        for s in c.subcommands {
            assert!(s.name.starts_with(&format!("{}|", c.name)), "{}", s.name);
            assert!(s.subcommands.is_empty());
        }
    }
}

#[test]
fn lookup_is_case_insensitive() {
    for name in [&b"get"[..], b"GET", b"gEt"] {
        assert_eq!(lookup(name).map(|c| c.name), Some("get"));
    }
    assert_eq!(
        lookup(b"GEORADIUSBYMEMBER_RO").map(|c| c.name),
        Some("georadiusbymember_ro")
    );
    assert_eq!(
        lookup(b"restore-ASKING").map(|c| c.name),
        Some("restore-asking")
    );
    assert_eq!(
        lookup(b"Object|Encoding").map(|c| c.name),
        Some("object|encoding")
    );
}

#[test]
fn unknown_commands_are_none() {
    for name in [
        &b"nosuchcommand"[..],
        b"",
        b"ge",
        b"gett",
        b"get\0",
        b"|",
        b"object|",
        b"object|nope",
    ] {
        assert!(lookup(name).is_none(), "{}", String::from_utf8_lossy(name));
    }
    let long = [b'a'; 4096];
    assert!(lookup(&long).is_none());
}

#[test]
fn resolve_picks_subcommands() {
    let object = lookup(b"object").expect("object");
    let args: [&[u8]; 3] = [b"object", b"ENCODING", b"k"];
    assert_eq!(object.resolve(3, |i| args[i]).name, "object|encoding");
    assert_eq!(object.resolve(1, |i| args[i]).name, "object");
    let unknown: [&[u8]; 2] = [b"object", b"nope"];
    assert_eq!(object.resolve(2, |i| unknown[i]).name, "object");
    let get = lookup(b"get").expect("get");
    assert_eq!(get.resolve(2, |_| &b"encoding"[..]).name, "get");
}

#[test]
fn arity_and_flags() {
    let get = lookup(b"get").expect("get");
    assert!(get.arity_ok(2) && !get.arity_ok(1) && !get.arity_ok(3));
    let mset = lookup(b"mset").expect("mset");
    assert!(mset.arity_ok(3) && mset.arity_ok(99) && !mset.arity_ok(2));
    assert!(get.has(flags::READONLY | flags::FAST) && !get.has(flags::WRITE));
    assert!(get.acl_categories & acl::STRING != 0);
    let eval = lookup(b"eval").expect("eval");
    assert!(eval.has(flags::MOVABLE_KEYS) && eval.has(flags::NO_MANDATORY_KEYS));
    assert!(lookup(b"spublish")
        .expect("spublish")
        .has(flags::SHARD_CHANNEL));
    assert_eq!(err("get"), "wrong number of arguments for 'get' command");
    assert_eq!(
        err("object encoding"),
        "wrong number of arguments for 'object|encoding' command"
    );
}

#[test]
fn policies_come_from_tips() {
    let dbsize = lookup(b"dbsize").expect("dbsize");
    assert_eq!(dbsize.request_policy, RequestPolicy::AllShards);
    assert_eq!(dbsize.response_policy, ResponsePolicy::AggSum);
    let mset = lookup(b"mset").expect("mset");
    assert_eq!(mset.request_policy, RequestPolicy::MultiShard);
    assert_eq!(
        lookup(b"get").expect("get").request_policy,
        RequestPolicy::Default
    );
}

#[test]
fn legacy_ranges() {
    assert_eq!(ok("get k"), [1]);
    assert_eq!(ok("set k v ex 10"), [1]);
    assert_eq!(ok("mget a b c"), [1, 2, 3]);
    assert_eq!(ok("mset a 1 b 2"), [1, 3]);
    assert_eq!(ok("del a b"), [1, 2]);
    assert_eq!(ok("blpop a b 0"), [1, 2]);
    assert_eq!(ok("bitop and d a b"), [2, 3, 4]);
    assert_eq!(ok("ping"), [] as [usize; 0]);
    assert_eq!(ok("object encoding k"), [2]);
    assert_eq!(ok("xinfo stream k full"), [2]);
    assert_eq!(ok("memory usage k samples 5"), [2]);
    assert_eq!(ok("spublish ch msg"), [1]);
    assert_eq!(ok("sunsubscribe"), [] as [usize; 0]);
    let mset: [&[u8]; 5] = [b"mset", b"a", b"1", b"b", b"2"];
    let pos = lookup(b"mset").expect("mset").key_positions(5, |i| mset[i]);
    assert_eq!(
        pos,
        Ok(KeyPositions::Range {
            first: 1,
            last: 3,
            step: 2
        })
    );
    let pos = pos.expect("positions");
    assert_eq!((pos.first(), pos.count()), (Some(1), 2));
}

#[test]
fn eval_family() {
    assert_eq!(ok("eval s 0"), [] as [usize; 0]);
    assert_eq!(ok("eval s 0 arg"), [] as [usize; 0]);
    assert_eq!(ok("eval s 2 a b arg"), [3, 4]);
    assert_eq!(ok("EVALSHA_RO sha 1 a"), [3]);
    assert_eq!(
        err("eval s 3 a b"),
        "Number of keys can't be greater than number of args"
    );
    assert_eq!(
        err("eval s 9223372036854775807 a"),
        "Number of keys can't be greater than number of args"
    );
    assert_eq!(err("eval s -1 a"), "Number of keys can't be negative");
    for bad in ["x", "1.5", "+1", "01", "-0", "''", "99999999999999999999"] {
        assert_eq!(
            err(&format!("eval s {bad} a")),
            "value is not an integer or out of range"
        );
    }
}

#[test]
fn fcall_family() {
    assert_eq!(ok("fcall f 2 a b x"), [3, 4]);
    assert_eq!(ok("fcall_ro f 0"), [] as [usize; 0]);
    assert_eq!(err("fcall f x a"), "Bad number of keys provided");
    assert_eq!(err("fcall f -2 a"), "Number of keys can't be negative");
    assert_eq!(
        err("fcall_ro f 5 a"),
        "Number of keys can't be greater than number of args"
    );
}

#[test]
fn sorted_set_ops() {
    assert_eq!(ok("zunionstore d 2 a b weights 1 2"), [1, 3, 4]);
    assert_eq!(ok("zinter 2 a b"), [2, 3]);
    assert_eq!(ok("zintercard 1 a limit 3"), [2]);
    assert_eq!(
        err("zunionstore d 0 a"),
        "at least 1 input key is needed for 'zunionstore' command"
    );
    assert_eq!(
        err("zdiff -1 a"),
        "at least 1 input key is needed for 'zdiff' command"
    );
    assert_eq!(err("zunion 3 a b"), "syntax error");
    assert_eq!(
        err("zunionstore d x a"),
        "value is not an integer or out of range"
    );
}

#[test]
fn set_card_and_multi_pop() {
    assert_eq!(ok("sintercard 2 a b limit 1"), [2, 3]);
    assert_eq!(err("sintercard 0 a"), "numkeys should be greater than 0");
    assert_eq!(err("sintercard x a"), "numkeys should be greater than 0");
    assert_eq!(
        err("sintercard 3 a"),
        "Number of keys can't be greater than number of args"
    );
    assert_eq!(ok("lmpop 2 a b left count 2"), [2, 3]);
    assert_eq!(ok("blmpop 0 2 a b left"), [3, 4]);
    assert_eq!(ok("bzmpop 1.5 1 a min"), [3]);
    assert_eq!(err("blmpop 0 0 a left"), "numkeys should be greater than 0");
    assert_eq!(err("zmpop x a min"), "numkeys should be greater than 0");
    assert_eq!(err("lmpop 9 a left"), "syntax error");
}

#[test]
fn streams_keyword() {
    assert_eq!(ok("xread count 5 streams a b 0 0"), [4, 5]);
    assert_eq!(ok("XREAD BLOCK 0 STREAMS a $"), [4]);
    // Odd tails round down, as the server's key spec does.
    assert_eq!(ok("xread streams a b 0"), [2]);
    assert_eq!(
        ok("xreadgroup group g c count 1 noack streams a b > >"),
        [8, 9]
    );
    // XREADGROUP's scan starts after GROUP g c, so a group named "streams"
    // is not mistaken for the keyword.
    assert_eq!(ok("xreadgroup group streams streams streams a >"), [5]);
}

#[test]
fn migrate_keys() {
    assert_eq!(ok("migrate h 1 k 0 10"), [3]);
    assert_eq!(ok("migrate h 1 '' 0 10 copy replace keys a b"), [9, 10]);
    assert_eq!(ok("migrate h 1 '' 0 10 auth keys keys a"), [9]);
    assert_eq!(
        ok("migrate h 1 '' 0 10 auth2 u keys keys a keys b"),
        [10, 11, 12]
    );
    assert_eq!(ok("migrate h 1 '' 0 10 keys"), [] as [usize; 0]);
    assert_eq!(
        err("migrate h 1 k 0 10 keys a"),
        "When using MIGRATE KEYS option, the key argument must be set to the empty string"
    );
}

#[test]
fn store_keywords() {
    assert_eq!(ok("sort k"), [1]);
    assert_eq!(ok("sort k limit 0 10 store d"), [1, 6]);
    assert_eq!(ok("sort k get store"), [1]);
    assert_eq!(ok("sort k by store store d"), [1, 5]);
    assert_eq!(ok("SORT k asc STORE d"), [1, 4]);
    assert_eq!(ok("sort k store"), [1]);
    assert_eq!(ok("sort_ro k by w_* get o_*"), [1]);
    assert_eq!(ok("georadius k 1 2 3 m store d"), [1, 7]);
    assert_eq!(ok("georadius k 1 2 3 m storedist d"), [1, 7]);
    assert_eq!(ok("georadiusbymember k m 3 km withdist store d"), [1, 7]);
    assert_eq!(ok("georadius_ro k 1 2 3 m"), [1]);
}

#[test]
fn positions_helpers() {
    let none = KeyPositions::None;
    assert_eq!(
        (none.first(), none.count(), none.iter().count()),
        (None, 0, 0)
    );
    let range = KeyPositions::Range {
        first: 3,
        last: 9,
        step: 3,
    };
    assert_eq!(range.iter().collect::<Vec<_>>(), [3, 6, 9]);
    assert_eq!(range.count(), 3);
    let list = KeyPositions::List(smallvec::smallvec![1, 5]);
    assert_eq!((list.first(), list.count()), (Some(1), 2));
}

proptest::proptest! {
    /// Arbitrary argument lists never panic and never yield out-of-range
    /// positions, for every row of the table.
    #[test]
    fn key_positions_stay_in_bounds(
        args in proptest::collection::vec(
            proptest::sample::select(vec!["0", "1", "2", "-1", "x", "", "streams", "keys",
                                          "store", "storedist", "get", "by", "limit", "auth2"]),
            0..9),
        idx in 0usize..366,
    ) {
        let rows: Vec<&CommandSpec> = all().iter()
            .flat_map(|c| std::iter::once(c).chain(c.subcommands)).collect();
        let spec = rows[idx % rows.len()];
        let argv: Vec<&[u8]> = std::iter::once(spec.name.as_bytes())
            .chain(args.iter().map(|a| a.as_bytes())).collect();
        if let Ok(pos) = spec.key_positions(argv.len(), |i| argv[i]) {
            proptest::prop_assert!(pos.iter().all(|p| p > 0 && p < argv.len()));
            proptest::prop_assert_eq!(pos.count(), pos.iter().count());
        }
    }
}
