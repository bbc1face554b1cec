//! Where each request goes: answered here, sent to a slot's master, sent to any master, or
//! refused with Redis's own error. Pure: no I/O, no state beyond the request.
//!
//! The order of checks is Redis's own (`processCommand`): unknown command, then arity, then
//! keys. Arity is checked before any key is extracted, so routing never reads past argv.

use bytes::Bytes;
use cluster::command::{flags, CommandSpec, KeyPositions, RequestPolicy};

use crate::fanout::{merge_for, Merge};
use crate::pubsub::PubSubTarget;
use crate::transaction::TxCommand;
use resp::Request;

/// The routing decision for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// Answered by the proxy itself.
    Local(Local),
    /// Sent to the master serving this slot.
    Slot(u16),
    /// Keyless: any master gives the same answer.
    AnyNode,
    /// Keys in several slots of a command that may be split: one part per slot, merged.
    Split { keys: KeyPositions, merge: Merge },
    /// Sent to every master, replies merged (DBSIZE, KEYS, FLUSHALL, SCRIPT LOAD…).
    Broadcast(Merge),
    /// Refused; the error reply is ready.
    Refuse(Bytes),
    /// A transaction command; `slot` is that of WATCH's keys (None if they span slots).
    Tx { cmd: TxCommand, slot: Option<u16> },
    /// A command that may block: run alone on the session's dedicated connection.
    Exclusive(Option<u16>),
    /// SCAN across masters, with a cursor that names the master.
    Scan,
    /// A subscribe/unsubscribe command, for the session's subscription connections.
    PubSub(PubSubTarget),
}

/// Commands the proxy answers without a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Local {
    Ping,
    Echo,
    Quit,
    Select,
    Hello,
    Client,
    Auth,
    Reset,
    Info,
    ClusterKeyslot,
    ClusterSlots,
    ClusterShards,
    ClusterNodes,
    ClusterInfo,
    ClusterMyid,
    /// SLOWLOG GET/LEN/RESET/HELP: the proxy's own log, whatever `allow_admin_commands` says.
    Slowlog,
}

/// Decide where `req` goes. Administrative commands are refused unless `allow_admin`.
#[cfg(test)]
pub(crate) fn route(req: &Request, allow_admin: bool) -> Route {
    route_looked_up(req, cluster::lookup(req.arg(0)), allow_admin)
}

/// `route`, plus the command's index in the table (for statistics), with one lookup.
pub(crate) fn route_counted(req: &Request, allow_admin: bool) -> (Route, Option<usize>) {
    let spec = cluster::lookup(req.arg(0));
    let index = spec.and_then(crate::cmdstats::command_index);
    (route_looked_up(req, spec, allow_admin), index)
}

fn route_looked_up(req: &Request, spec: Option<&'static CommandSpec>, allow_admin: bool) -> Route {
    let arg = |i: usize| req.arg(i);
    let Some(spec) = spec else {
        return Route::Refuse(unknown_command(req));
    };
    let spec = spec.resolve(req.argc(), arg);
    if spec.name == "client" && req.argc() >= 2 && req.arg(1).eq_ignore_ascii_case(b"setinfo") {
        // Redis 7.2's CLIENT SETINFO, newer than the table: sent by clients on connect.
        return Route::Local(Local::Client);
    }
    if !spec.subcommands.is_empty() && req.argc() >= 2 {
        // `resolve` found no such subcommand: Redis's own answer.
        let sub = truncated(req.arg(1), 128);
        let help = spec.name.to_uppercase();
        return Route::Refuse(error(&format!(
            "unknown subcommand '{sub}'. Try {help} HELP."
        )));
    }
    if !spec.arity_ok(req.argc()) || !key_step_fits(spec, req.argc()) {
        return Route::Refuse(error(&format!(
            "wrong number of arguments for '{}' command",
            spec.name
        )));
    }
    if let Some(cmd) = tx_command(spec.name) {
        return Route::Tx {
            cmd,
            slot: watch_slot(req),
        };
    }
    if let Some(target) = pubsub_target(spec.name, req) {
        return target;
    }
    if spec.name == "scan" {
        // The one command whose request policy is "special" that the proxy serves.
        return Route::Scan;
    }
    if let Some(local) = local_command(spec.name) {
        return Route::Local(local);
    }
    if let Some(merge) = pubsub_introspection(spec.name) {
        return Route::Broadcast(merge);
    }
    if let Some(why) = unsupported(spec, allow_admin) {
        return Route::Refuse(error(&format!("slotgate: '{}' {why}", spec.name)));
    }
    match spec.key_positions(req.argc(), arg) {
        // Bad numkeys and the like: a node gives Redis's exact answer, checks in Redis's order
        // (FCALL looks the function up before numkeys), and cannot run such a request.
        Err(_) => Route::AnyNode,
        Ok(keys) if keys.count() == 0 && is_broadcast(spec) => {
            match merge_for(spec.response_policy, false) {
                Some(merge) => Route::Broadcast(merge),
                None => Route::AnyNode,
            }
        }
        Ok(keys) => match route_keys(req, spec, keys) {
            Route::Slot(slot) if spec.has(flags::BLOCKING) && really_blocks(spec, req) => {
                Route::Exclusive(Some(slot))
            }
            other => other,
        },
    }
}

fn is_broadcast(spec: &CommandSpec) -> bool {
    matches!(
        spec.request_policy,
        RequestPolicy::AllShards | RequestPolicy::AllNodes
    )
}

/// Pub/sub subscriptions: the bus for channels and patterns, the slot's owner for shard
/// channels (which must all share one slot, as Redis requires).
fn pubsub_target(name: &str, req: &Request) -> Option<Route> {
    Some(match name {
        "subscribe" | "psubscribe" | "unsubscribe" | "punsubscribe" => {
            Route::PubSub(PubSubTarget::Bus)
        }
        "ssubscribe" | "sunsubscribe" if req.argc() == 1 => {
            Route::PubSub(PubSubTarget::Shard(None))
        }
        "ssubscribe" | "sunsubscribe" => match watch_slot(req) {
            Some(slot) => Route::PubSub(PubSubTarget::Shard(Some(slot))),
            None => Route::Refuse(Bytes::from_static(
                b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
            )),
        },
        _ => return None,
    })
}

fn tx_command(name: &str) -> Option<TxCommand> {
    Some(match name {
        "multi" => TxCommand::Multi,
        "exec" => TxCommand::Exec,
        "discard" => TxCommand::Discard,
        "watch" => TxCommand::Watch,
        "unwatch" => TxCommand::Unwatch,
        _ => return None,
    })
}

/// The one slot of WATCH's keys, or None when they span slots (or for the other commands).
fn watch_slot(req: &Request) -> Option<u16> {
    let mut slots = (1..req.argc()).map(|i| cluster::key_slot(req.arg(i)));
    let first = slots.next()?;
    slots.all(|s| s == first).then_some(first)
}

fn local_command(name: &str) -> Option<Local> {
    Some(match name {
        "ping" => Local::Ping,
        "echo" => Local::Echo,
        "quit" => Local::Quit,
        "select" => Local::Select,
        "hello" => Local::Hello,
        "auth" => Local::Auth,
        "reset" => Local::Reset,
        "info" => Local::Info,
        "cluster|keyslot" => Local::ClusterKeyslot,
        "cluster|slots" => Local::ClusterSlots,
        "cluster|shards" => Local::ClusterShards,
        "cluster|nodes" => Local::ClusterNodes,
        "cluster|info" => Local::ClusterInfo,
        "cluster|myid" => Local::ClusterMyid,
        n if n == "client" || n.starts_with("client|") => Local::Client,
        n if n.starts_with("slowlog|") => Local::Slowlog,
        _ => return None,
    })
}

/// Commands that would break the shared, multiplexed backend connections or would silently
/// give a one-node answer to a cluster-wide question. Each gets a clear refusal instead.
fn unsupported(spec: &CommandSpec, allow_admin: bool) -> Option<&'static str> {
    const STATEFUL: &[&str] = &["monitor", "wait", "sync", "psync"];
    if STATEFUL.contains(&spec.name) {
        return Some("needs a dedicated connection, which this proxy does not offer yet");
    }
    if (spec.has(flags::ADMIN) || spec.name == "migrate") && !allow_admin {
        return Some(
            "is an administrative command, refused unless proxy.allow_admin_commands is set",
        );
    }
    if is_broadcast(spec) && merge_for(spec.response_policy, false).is_none() {
        return Some("needs a cluster-wide reply merge this proxy does not do yet");
    }
    if spec.name.starts_with("cluster") {
        return Some("is not served through the proxy yet");
    }
    None
}

/// PUBSUB's introspection subcommands carry no response policy in the command table, yet
/// each node only knows its own subscribers: ask every master and merge by meaning.
fn pubsub_introspection(name: &str) -> Option<Merge> {
    Some(match name {
        "pubsub|channels" | "pubsub|shardchannels" => Merge::Union,
        "pubsub|numsub" | "pubsub|shardnumsub" => Merge::SumPairs,
        "pubsub|numpat" => Merge::Sum,
        _ => return None,
    })
}

/// Key/value commands (MSET, MSETNX: a key every `step` arguments up to the last) need the
/// arguments after the first key to come in whole steps, as Redis checks.
fn key_step_fits(spec: &CommandSpec, argc: usize) -> bool {
    if spec.step <= 1 || spec.last_key >= 0 || spec.first_key <= 0 {
        return true;
    }
    (argc as i64 - i64::from(spec.first_key)) % i64::from(spec.step) == 0
}

/// XREAD and XREADGROUP block only with a BLOCK option; the other blocking commands always may.
fn really_blocks(spec: &CommandSpec, req: &Request) -> bool {
    if spec.name != "xread" && spec.name != "xreadgroup" {
        return true;
    }
    (1..req.argc()).any(|i| req.arg(i).eq_ignore_ascii_case(b"block"))
}

/// One slot: route there. Several: split if the table says the command is a per-key
/// operation that may be split (MultiShard, and not MSETNX's all-or-nothing AggMin);
/// otherwise refuse as Redis Cluster does.
fn route_keys(req: &Request, spec: &CommandSpec, keys: KeyPositions) -> Route {
    let mut slots = keys.iter().map(|i| cluster::key_slot(req.arg(i)));
    let Some(first) = slots.next() else {
        return Route::AnyNode;
    };
    let single_slot = !slots.any(|s| s != first);
    drop(slots);
    if single_slot {
        return Route::Slot(first);
    }
    let splittable = spec.request_policy == RequestPolicy::MultiShard;
    match merge_for(spec.response_policy, true) {
        Some(merge) if splittable => Route::Split { keys, merge },
        _ => Route::Refuse(Bytes::from_static(
            b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
        )),
    }
}

/// `-ERR <msg>\r\n`, with CR and LF in `msg` turned into spaces as Redis does.
pub(crate) fn error(msg: &str) -> Bytes {
    let clean: String = msg
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect();
    Bytes::from(format!("-ERR {clean}\r\n"))
}

/// Redis's text: the name (128 bytes at most), then as many quoted args as fit in 128 bytes.
fn unknown_command(req: &Request) -> Bytes {
    let name = truncated(req.arg(0), 128);
    let mut args = String::new();
    for i in 1..req.argc() {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push_str(&format!("'{}' ", truncated(req.arg(i), room)));
    }
    error(&format!(
        "unknown command '{name}', with args beginning with: {args}"
    ))
}

fn truncated(bytes: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(max)]).into_owned()
}

#[cfg(test)]
mod tests {
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
            Route::Slot(cluster::key_slot(b"foo"))
        );
        assert_eq!(
            route_default(&req(&["get", "{a}x"])),
            Route::Slot(cluster::key_slot(b"a"))
        );
        assert_eq!(
            route_default(&req(&["MGET", "{a}1", "{a}2"])),
            Route::Slot(cluster::key_slot(b"a"))
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
            Route::Split {
                merge: Merge::KeyOrder,
                ..
            }
        ));
        assert!(matches!(
            route_default(&req(&["DEL", "a", "b"])),
            Route::Split {
                merge: Merge::Sum,
                ..
            }
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
        for args in [&["MONITOR"][..], &["CONFIG", "SET", "maxmemory", "1"]] {
            assert!(
                refusal(route_default(&req(args))).starts_with("-ERR slotgate: "),
                "{args:?}"
            );
        }
        assert_eq!(
            route_default(&req(&["XREAD", "STREAMS", "s", "0"])),
            Route::Slot(cluster::key_slot(b"s"))
        );
    }

    #[test]
    fn unknown_command_text_is_capped_at_128_bytes() {
        let long = "x".repeat(300);
        let text = refusal(route_default(&req(&["nope", &long, "more"])));
        assert!(text.len() < 128 + 128 + 80, "{}", text.len());
        assert!(!text.contains("more"));
    }
}
