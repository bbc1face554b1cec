//! Routing: which `Route` each request gets, and Redis's own refusals for bad shapes.

use super::*;

fn req(args: &[&str]) -> Request {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    Request::from_args(&args)
}

fn route_default(r: &Request) -> Route {
    route(r, false)
}

fn refusal(r: Route) -> String {
    match r {
        Route::Refuse(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn routes_by_slot_and_refuses_like_redis() {
    assert_eq!(
        route_default(&req(&["GET", "foo"])),
        Route::Read(cluster::key_slot(b"foo"))
    );
    assert_eq!(
        route_default(&req(&["get", "{a}x"])),
        Route::Read(cluster::key_slot(b"a"))
    );
    assert_eq!(
        route_default(&req(&["MGET", "{a}1", "{a}2"])),
        Route::Read(cluster::key_slot(b"a"))
    );
    assert_eq!(route_default(&req(&["PING"])), Route::Local(Local::Ping));
    assert_eq!(route_default(&req(&["COMMAND", "COUNT"])), Route::AnyNode);
    let cases: &[(&[&str], &str)] = &[
        (
            &["MSETNX", "a", "1", "b", "2"],
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
        ),
        (
            &["RENAME", "a", "b"],
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
        ),
        (
            &["GET"],
            "-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            &["MSET", "a", "1", "b"],
            "-ERR wrong number of arguments for 'mset' command\r\n",
        ),
        (
            &["CLUSTER", "NOSUCHSUB"],
            "-ERR unknown subcommand 'NOSUCHSUB'. Try CLUSTER HELP.\r\n",
        ),
        (
            &["CLIENT", "nope"],
            "-ERR unknown subcommand 'nope'. Try CLIENT HELP.\r\n",
        ),
        (
            &["NOSUCHC"],
            "-ERR unknown command 'NOSUCHC', with args beginning with: \r\n",
        ),
        (
            &["foo", "a", "b"],
            "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n",
        ),
        (
            &[""],
            "-ERR unknown command '', with args beginning with: \r\n",
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(refusal(route_default(&req(args))), *expected, "{args:?}");
    }
}

#[test]
fn refuses_what_a_shared_connection_cannot_carry() {
    assert!(matches!(
        route_default(&req(&["MGET", "a", "b"])),
        Route::Split(split) if split.merge == Merge::KeyOrder
    ));
    assert!(matches!(
        route_default(&req(&["DEL", "a", "b"])),
        Route::Split(split) if split.merge == Merge::Sum
    ));
    assert_eq!(
        route_default(&req(&["DBSIZE"])),
        Route::Broadcast(Merge::Sum)
    );
    let blpop = route_default(&req(&["BLPOP", "l", "0"]));
    assert_eq!(blpop, Route::Exclusive(Some(cluster::key_slot(b"l"))));
    let multi = route_default(&req(&["MULTI"]));
    assert_eq!(
        multi,
        Route::Tx {
            cmd: TxCommand::Multi,
            slot: None
        }
    );
    assert_eq!(
        route_default(&req(&["KEYS", "*"])),
        Route::Broadcast(Merge::Concat)
    );
    // A subcommand's table name is not a command (Redis: unknown command).
    for args in [&["CONFIG|GET", "x"][..], &["GET|"], &["GET|SET", "k"]] {
        let refused = refusal(route_default(&req(args)));
        assert!(
            refused.starts_with("-ERR unknown command"),
            "{args:?}: {refused}"
        );
    }
    for args in [&["MONITOR"][..], &["CONFIG", "SET", "maxmemory", "1"]] {
        assert!(
            refusal(route_default(&req(args))).starts_with("-ERR slotgate: "),
            "{args:?}"
        );
    }
    assert_eq!(
        route_default(&req(&["XREAD", "STREAMS", "s", "0"])),
        Route::Read(cluster::key_slot(b"s"))
    );
    // Only the table's readonly flag makes a read: writes and scripts stay on the master.
    let slot = cluster::key_slot(b"k");
    assert_eq!(route_default(&req(&["SET", "k", "v"])), Route::Slot(slot));
    assert_eq!(
        route_default(&req(&["EVAL", "return 1", "1", "k"])),
        Route::Slot(slot)
    );
    assert_eq!(
        route_default(&req(&["EVAL_RO", "return 1", "1", "k"])),
        Route::Read(slot)
    );
    assert_eq!(
        route_default(&req(&["READONLY"])),
        Route::Local(Local::ReadOnly(true))
    );
}

#[test]
fn unknown_command_text_is_capped_at_128_bytes() {
    let long = "x".repeat(300);
    let text = refusal(route_default(&req(&["nope", &long, "more"])));
    assert!(text.len() < 128 + 128 + 80, "{}", text.len());
    assert!(!text.contains("more"));
}

#[test]
fn publish_goes_to_the_home_of_classic_pubsub() {
    assert_eq!(
        route_default(&req(&["PUBLISH", "news", "m"])),
        Route::Slot(PUBSUB_HOME_SLOT)
    );
    assert!(refusal(route_default(&req(&["PUBLISH", "news"]))).contains("wrong number"));
}

#[test]
fn msetex_is_split_unless_all_or_nothing() {
    // The row Redis 8.4 and Valkey 9 describe (learned, so built here by hand).
    let spec = CommandSpec {
        name: "msetex",
        arity: -4,
        flags: 0,
        first_key: 0,
        last_key: 0,
        step: 0,
        keys: KeySpec::NumKeys {
            numkeys_at: 1,
            first: 2,
            step: 2,
            errors: cluster::command::NumKeysErrors::Server,
        },
        key_access: &[],
        acl_categories: 0,
        request_policy: RequestPolicy::MultiShard,
        response_policy: cluster::command::ResponsePolicy::AllSucceeded,
        subcommands: &[],
    };
    let routed = |args: &[&str]| {
        let r = req(args);
        let keys = spec.key_positions(r.argc(), |i| r.arg(i)).unwrap();
        route_keys(&r, &spec, keys, &cluster::Placement::Slots)
    };
    assert_eq!(
        routed(&["MSETEX", "2", "a", "1", "b", "2", "EX", "9"]),
        Route::Split(Box::new(Split {
            keys: cluster::command::KeyPositions::Range {
                first: 2,
                last: 4,
                step: 2
            },
            merge: Merge::AllSucceeded,
            shape: PartShape::NumKeys {
                numkeys_at: 1,
                keys_at: 2,
                options_at: 6
            },
        }))
    );
    let crossslot = "-CROSSSLOT Keys in request don't hash to the same slot\r\n";
    // NX or XX: all keys or none, which parts on several nodes cannot promise.
    for condition in ["NX", "xx"] {
        let r = routed(&["MSETEX", "2", "a", "1", "b", "2", condition, "EX", "9"]);
        assert_eq!(refusal(r), crossslot);
    }
    // A key without its value: no server runs it, a node refuses it in its own words.
    assert_eq!(routed(&["MSETEX", "2", "a", "1", "b"]), Route::AnyNode);
    assert_eq!(
        routed(&["MSETEX", "2", "{a}1", "1", "{a}2", "2", "NX"]),
        Route::Slot(cluster::key_slot(b"a"))
    );
}

#[test]
fn config_resetstat_reaches_every_master_and_needs_admin() {
    let r = req(&["CONFIG", "RESETSTAT"]);
    assert_eq!(route(&r, true), Route::Broadcast(Merge::AllSucceeded));
    assert!(matches!(route(&r, false), Route::Refuse(_)));
}

/// The fast path of `route_by_name` skips the rules for a name `has_name_rule` does not
/// list: for every command and subcommand of the table, such a name must be one no rule
/// matches, whatever its arguments.
#[test]
fn every_name_a_rule_matches_is_listed() {
    let tails: &[&[&str]] = &[
        &[],
        &["a"],
        &["a", "b"],
        &["a", "slow"],
        &["a", "b", "c", "d"],
    ];
    let rows = cluster::command::every()
        .flat_map(|top| std::iter::once(top).chain(top.subcommands.iter()));
    for spec in rows {
        if has_name_rule(spec.name) {
            continue;
        }
        let head: Vec<&str> = spec.name.split('|').collect();
        for tail in tails {
            let args: Vec<&str> = head.iter().chain(tail.iter()).copied().collect();
            let r = req(&args);
            for admin in [false, true] {
                assert_eq!(
                    name_rules(&r, spec, admin, &Placement::Slots),
                    refusal_of_unsupported(spec, admin),
                    "{args:?}: a rule matches {}, which has_name_rule does not list",
                    spec.name
                );
            }
        }
    }
}
