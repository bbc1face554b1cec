//! Where each request goes: answered here, sent to a slot's master, sent to any master, or
//! refused with Redis's own error. Pure: no I/O, no state beyond the request.
//!
//! The order of checks is Redis's own (`processCommand`): unknown command, then arity, then
//! keys. Arity is checked before any key is extracted, so routing never reads past argv.

use bytes::Bytes;
use cluster::command::{flags, CommandSpec, KeyError, KeyPositions, KeySpec, RequestPolicy};
use cluster::Placement;

use resp::Request;

use crate::reply::error;

pub(crate) use merge::{merge_for, Merge};
use slot_stats::SlotOrder;

pub(crate) mod frames;
pub(crate) mod info;
pub(crate) mod keyspace;
pub(crate) mod latency;
pub(crate) mod merge;
pub(crate) mod scan;
pub(crate) mod slot_stats;

/// The routing decision for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// Answered by the proxy itself.
    Local(Local),
    /// Sent to the master serving this slot.
    Slot(u16),
    /// A command the table flags read-only, for this slot: its master, or one of its
    /// replicas when the client's read policy allows (`worker/reads.rs`).
    Read(u16),
    /// Keyless: any master gives the same answer.
    AnyNode,
    /// Keys in several slots of a command that may be split: one part per slot, merged.
    /// Boxed: every request's route is moved along the dispatch path, few are split.
    Split(Box<Split>),
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
    /// SCRIPT KILL, FUNCTION KILL, FUNCTION STATS: every master, each on a connection of
    /// its own, never behind a script running on a shared one (`session/side_call.rs`).
    OwnConnections,
}

impl Route {
    /// The one slot the request runs in, if it has one (a split or a broadcast has not).
    pub(crate) fn slot(&self) -> Option<u16> {
        match self {
            Route::Slot(slot) | Route::Read(slot) | Route::Exclusive(Some(slot)) => Some(*slot),
            Route::Tx { slot, .. } => *slot,
            _ => None,
        }
    }
}

/// How a request whose keys span slots is cut into parts and their replies merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    pub(crate) keys: KeyPositions,
    pub(crate) merge: Merge,
    pub(crate) shape: PartShape,
}

/// Commands the proxy answers without a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Local {
    /// ACL WHOAMI, CAT, DRYRUN and GENPASS, about the proxy's users (`session/acl.rs`).
    Acl,
    /// ACL SETUSER, DELUSER, GETUSER, USERS and LIST: the proxy's users, with
    /// `allow_admin_commands` only (`session/acl_users.rs`).
    AclUsers,
    /// MONITOR (`session/monitor.rs`), with `allow_admin_commands` only.
    Monitor,
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
    /// CLUSTER MYSHARDID (Redis 7.2, Valkey 8): the proxy's own shard in its cluster face.
    ClusterMyShardId,
    /// SLOWLOG GET/LEN/RESET/HELP: the proxy's own log, whatever `allow_admin_commands` says.
    Slowlog,
    /// ASKING: a node's one-shot per-connection flag. Answered `+OK` here: on a shared
    /// connection it would serve another client's next command.
    ClusterFlag,
    /// READONLY, READWRITE: `+OK`, and the session's reads may go to replicas, or not
    /// (`config/read_policy.rs`).
    ReadOnly(bool),
    /// WAIT: answered by the proxy from the masters' replication offsets (`session/wait.rs`).
    Wait,
    /// HOTKEYS (Redis 8.6): the proxy's own hot-key board (`admin/hotkeys.rs`), whatever
    /// the masters' version, so whether or not the table knows the command.
    Hotkeys,
}

/// Decide where `req` goes. Administrative commands are refused unless `allow_admin`.
#[cfg(test)]
pub(crate) fn route(req: &Request, allow_admin: bool) -> Route {
    route_looked_up(
        req,
        cluster::lookup(req.arg(0)),
        allow_admin,
        &Placement::Slots,
    )
}

/// What the statistics and the write bookkeeping need of a request's command, found by
/// the lookup that routed it (one table lookup per request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counted {
    /// The command's statistics slot (`context/cmdstats.rs`); None for an unknown command.
    pub(crate) index: Option<usize>,
    /// The command writes data (`CommandSpec::replicates`): a later WAIT counts it.
    pub(crate) replicates: bool,
    /// Redis never logs the command in SLOWLOG (`skip_slowlog`: EXEC, AUTH…).
    pub(crate) skip_slowlog: bool,
    /// For a command with subcommands, the one named (its position among them plus one;
    /// 0 for none): CLIENT LIST's `cmd=client|setname`. Statistics stay per command.
    pub(crate) sub: u16,
}

/// `route`, plus what [`Counted`] says of the command, with one lookup.
/// Keys map to slots by `placement` (a cluster's CRC16 slots, or a sharded pool's servers).
pub(crate) fn route_counted(
    req: &Request,
    allow_admin: bool,
    placement: &Placement,
) -> (Route, Counted) {
    let spec = cluster::lookup(req.arg(0));
    let counted = Counted {
        index: spec.and_then(crate::context::cmdstats::command_index),
        replicates: spec.is_some_and(CommandSpec::replicates),
        skip_slowlog: spec.is_some_and(|s| s.has(flags::SKIP_SLOWLOG)),
        // Containers only (CLIENT, CONFIG…): a GET pays one emptiness check.
        sub: spec
            .filter(|s| !s.subcommands.is_empty())
            .map_or(0, |s| subcommand_slot(s, req)),
    };
    (route_looked_up(req, spec, allow_admin, placement), counted)
}

/// The position plus one of the subcommand `req` names among `spec`'s; 0 for none.
fn subcommand_slot(spec: &'static CommandSpec, req: &Request) -> u16 {
    let named = spec.resolve(req.argc(), |i| req.arg(i));
    spec.subcommands
        .iter()
        .position(|sub| std::ptr::eq(sub, named))
        .map_or(0, |i| i as u16 + 1)
}

fn route_looked_up(
    req: &Request,
    spec: Option<&'static CommandSpec>,
    allow_admin: bool,
    placement: &Placement,
) -> Route {
    if req.arg(0).eq_ignore_ascii_case(b"hotkeys") {
        return Route::Local(Local::Hotkeys);
    }
    // `container|sub` names a subcommand to ACL rules and COMMAND INFO, never as a command
    // sent (Redis answers `CONFIG|GET x` as an unknown command).
    let Some(spec) = spec.filter(|_| !req.arg(0).contains(&b'|')) else {
        return Route::Refuse(unknown_command(req));
    };
    let spec = spec.resolve(req.argc(), |i: usize| req.arg(i));
    if let Some(route) = check_shape(req, spec) {
        return route;
    }
    if let Some(route) = route_by_name(req, spec, allow_admin, placement) {
        return route;
    }
    route_by_keys(req, spec, placement)
}

/// Redis refuses a bad subcommand or arity before looking at keys, so these come first.
fn check_shape(req: &Request, spec: &CommandSpec) -> Option<Route> {
    if spec.name == "client" && req.argc() >= 2 && req.arg(1).eq_ignore_ascii_case(b"setinfo") {
        // Redis 7.2's CLIENT SETINFO, newer than the table: sent by clients on connect.
        return Some(Route::Local(Local::Client));
    }
    if !spec.subcommands.is_empty() && req.argc() >= 2 {
        // `resolve` found no such subcommand: Redis's own answer.
        let sub = truncated(req.arg(1), 128);
        let help = spec.name.to_uppercase();
        return Some(Route::Refuse(error(&format!(
            "unknown subcommand '{sub}'. Try {help} HELP."
        ))));
    }
    if !spec.arity_ok(req.argc()) || !key_step_fits(spec, req.argc()) {
        return Some(Route::Refuse(error(&format!(
            "wrong number of arguments for '{}' command",
            spec.name
        ))));
    }
    None
}

/// Commands whose route follows from their name alone, before their keys are read.
fn route_by_name(
    req: &Request,
    spec: &'static CommandSpec,
    allow_admin: bool,
    placement: &Placement,
) -> Option<Route> {
    if !has_name_rule_memo(spec) {
        // GET, SET and most requests: no rule names them, only the flags may refuse them.
        return refusal_of_unsupported(spec, allow_admin);
    }
    name_rules(req, spec, allow_admin, placement)
}

/// Whether [`name_rules`] has a rule for this command or subcommand name beyond
/// [`unsupported`]. Every name a rule matches must be here; a test checks each name of
/// the table against the rules.
fn has_name_rule(name: &str) -> bool {
    tx_command(name).is_some()
        || local_command(name).is_some()
        || pubsub_introspection(name).is_some()
        || latency::Latency::of(name).is_some()
        || matches!(
            name,
            "subscribe"
                | "psubscribe"
                | "unsubscribe"
                | "punsubscribe"
                | "ssubscribe"
                | "sunsubscribe"
                | "publish"
                | "scan"
                | "client|help"
                | "commandlog|get"
                | "commandlog|len"
                | "commandlog|reset"
                | "config|resetstat"
                | "config|set"
                | "config|get"
                | "cluster|slot-stats"
                | "script|kill"
                | "function|kill"
                | "function|stats"
        )
}

/// [`has_name_rule`] of the row last asked about on this thread, remembered: requests in a
/// row mostly share their command, and the list is long.
fn has_name_rule_memo(spec: &'static CommandSpec) -> bool {
    std::thread_local! {
        static LAST: std::cell::Cell<Option<(usize, bool)>> = const { std::cell::Cell::new(None) };
    }
    let at = spec as *const CommandSpec as usize;
    match LAST.get() {
        Some((last, rule)) if last == at => rule,
        _ => {
            let rule = has_name_rule(spec.name);
            LAST.set(Some((at, rule)));
            rule
        }
    }
}

/// [`unsupported`]'s refusal, as a route.
fn refusal_of_unsupported(spec: &CommandSpec, allow_admin: bool) -> Option<Route> {
    let why = unsupported(spec, allow_admin)?;
    Some(Route::Refuse(error(&format!(
        "slotgate: '{}' {why}",
        spec.name
    ))))
}

/// The rules of [`route_by_name`], for a name [`has_name_rule`] lists.
fn name_rules(
    req: &Request,
    spec: &CommandSpec,
    allow_admin: bool,
    placement: &Placement,
) -> Option<Route> {
    if let Some(cmd) = tx_command(spec.name) {
        return Some(Route::Tx {
            cmd,
            slot: watch_slot(req, placement),
        });
    }
    if let Some(target) = pubsub_target(spec.name, req, placement) {
        return Some(target);
    }
    if spec.name == "scan" {
        // The one command whose request policy is "special" that the proxy serves.
        return Some(Route::Scan);
    }
    if spec.name == "client|help" {
        // The servers' own text: the CLIENT the proxy answers is theirs, subcommand by
        // subcommand (docs/commands.md).
        return Some(Route::AnyNode);
    }
    if is_own_commandlog(spec.name, req) {
        // Valkey's COMMANDLOG of type `slow` is SLOWLOG's log: the proxy's own, as SLOWLOG
        // is; so are `large-request` and `large-reply`, by the sizes its clients send and
        // get. A type the proxy does not know goes to a node, which answers its error.
        return Some(Route::Local(Local::Slowlog));
    }
    if let Some(local) = local_command(spec.name) {
        // Managing the proxy's users and MONITOR are admin commands, as in Redis: refused
        // below unless allowed.
        if !matches!(local, Local::AclUsers | Local::Monitor) || allow_admin {
            return Some(Route::Local(local));
        }
    }
    if let Some(merge) = pubsub_introspection(spec.name) {
        return Some(Route::Broadcast(merge));
    }
    if spec.name == "config|resetstat" && allow_admin {
        // Every master's statistics and the proxy's own, as one Redis resets all of its
        // own: Redis 7.2 tags it `all_nodes`, 7.0's table (ours) does not.
        return Some(Route::Broadcast(Merge::AllSucceeded));
    }
    if spec.name == "cluster|slot-stats" {
        // Each master reports its own slots: every master is asked, the entries merged.
        return Some(Route::Broadcast(Merge::SlotStats(SlotOrder::of(req))));
    }
    if let Some(kind) = latency::Latency::of(spec.name).filter(|_| allow_admin) {
        // Each master monitors its own latency: all are asked, the replies merged.
        return Some(Route::Broadcast(Merge::Latency(kind)));
    }
    if matches!(
        spec.name,
        "script|kill" | "function|kill" | "function|stats"
    ) {
        return Some(Route::OwnConnections);
    }
    if let Some(refusal) = refusal_of_unsupported(spec, allow_admin) {
        return Some(refusal);
    }
    if spec.name == "config|set" && crate::redact::sets_placeholder(req) {
        return Some(Route::Refuse(error(
            "slotgate: CONFIG GET through the proxy shows '(redacted)' for a secret; \
             CONFIG SET needs the real value",
        )));
    }
    if spec.name == "config|set" && req.argc() > 4 && sets_requirepass(req) {
        // Alone it is the proxy's (`session/acl_users.rs`); with others, part of it would be
        // the proxy's and part the nodes', which cannot be one all-or-nothing change.
        return Some(Route::Refuse(error(
            "slotgate: CONFIG SET requirepass sets the password of the proxy's clients, \
             not the nodes'; set it alone",
        )));
    }
    // The nodes' reply carries their passwords: it comes back through a merge that hides
    // them (one master is asked, as any would do).
    (spec.name == "config|get").then_some(Route::Broadcast(Merge::ConfigGet))
}

/// Whether a CONFIG SET names `requirepass` among its parameters.
pub(crate) fn sets_requirepass(req: &Request) -> bool {
    (2..req.argc().saturating_sub(1))
        .step_by(2)
        .any(|i| req.arg(i).eq_ignore_ascii_case(b"requirepass"))
}

/// The common case: route by the slots of the command's keys, or broadcast if keyless.
fn route_by_keys(req: &Request, spec: &CommandSpec, placement: &Placement) -> Route {
    match spec.key_positions(req.argc(), |i: usize| req.arg(i)) {
        // Bad numkeys and the like: a node gives Redis's exact answer, checks in Redis's order
        // (FCALL looks the function up before numkeys), and cannot run such a request.
        Err(KeyError::Unreadable) => Route::Refuse(error(&format!(
            "slotgate: '{}' has key specs this proxy cannot read; not served yet",
            spec.name
        ))),
        Err(_) => Route::AnyNode,
        Ok(keys) if keys.count() == 0 && is_broadcast(spec) => {
            match merge_for(spec.response_policy, false) {
                Some(merge) => Route::Broadcast(merge),
                None => Route::AnyNode,
            }
        }
        Ok(keys) => match route_keys(req, spec, keys, placement) {
            Route::Slot(slot) if spec.has(flags::BLOCKING) && really_blocks(spec, req) => {
                Route::Exclusive(Some(slot))
            }
            Route::Slot(slot) if spec.has(flags::READONLY) => Route::Read(slot),
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

/// The slot whose master is the home of classic pub/sub through the proxy (see `publish`).
pub(crate) const PUBSUB_HOME_SLOT: u16 = 0;

/// Pub/sub subscriptions: the bus for channels and patterns, the slot's owner for shard
/// channels (which must all share one slot, as Redis requires).
fn pubsub_target(name: &str, req: &Request, placement: &Placement) -> Option<Route> {
    Some(match name {
        "subscribe" | "psubscribe" | "unsubscribe" | "punsubscribe" => {
            Route::PubSub(PubSubTarget::Bus)
        }
        "ssubscribe" | "sunsubscribe" if req.argc() == 1 => {
            Route::PubSub(PubSubTarget::Shard(None))
        }
        "ssubscribe" | "sunsubscribe" => match watch_slot(req, placement) {
            Some(slot) => Route::PubSub(PubSubTarget::Shard(Some(slot))),
            None => Route::Refuse(Bytes::from_static(
                b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
            )),
        },
        // Classic pub/sub through the proxy has one home, the master of slot 0, where the
        // sessions' bus connections subscribe too: a message reaches the proxy's
        // subscribers while PUBLISH runs, in the order published, and PUBLISH counts them,
        // as one Redis does. Elsewhere it would arrive later over the cluster bus.
        "publish" if req.argc() == 3 => Route::Slot(PUBSUB_HOME_SLOT),
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
fn watch_slot(req: &Request, placement: &Placement) -> Option<u16> {
    let mut slots = (1..req.argc()).map(|i| placement.slot(req.arg(i)));
    let first = slots.next()?;
    slots.all(|s| s == first).then_some(first)
}

/// `COMMANDLOG GET count <type>`, `COMMANDLOG LEN <type>`, `COMMANDLOG RESET <type>`, of a
/// type the proxy keeps (all three of Valkey's).
fn is_own_commandlog(name: &str, req: &Request) -> bool {
    matches!(
        name,
        "commandlog|get" | "commandlog|len" | "commandlog|reset"
    ) && req.argc() >= 3
        && crate::context::slowlog::LogKind::named(req.arg(req.argc() - 1)).is_some()
}

/// Whether the proxy answers the command or subcommand `name` itself (its statistics are
/// then the proxy's own; the nodes never see a client's).
pub(crate) fn answered_by_proxy(name: &str) -> bool {
    name != "client|help" && local_command(name).is_some()
}

fn local_command(name: &str) -> Option<Local> {
    Some(match name {
        "ping" => Local::Ping,
        "echo" => Local::Echo,
        "quit" => Local::Quit,
        "select" => Local::Select,
        "hello" => Local::Hello,
        "auth" => Local::Auth,
        "acl|whoami" | "acl|cat" | "acl|dryrun" | "acl|genpass" => Local::Acl,
        "acl|setuser" | "acl|deluser" | "acl|getuser" | "acl|users" | "acl|list" => Local::AclUsers,
        "monitor" => Local::Monitor,
        "reset" => Local::Reset,
        "info" => Local::Info,
        "wait" => Local::Wait,
        "cluster|keyslot" => Local::ClusterKeyslot,
        "cluster|slots" => Local::ClusterSlots,
        "cluster|shards" => Local::ClusterShards,
        "cluster|nodes" => Local::ClusterNodes,
        "cluster|info" => Local::ClusterInfo,
        "cluster|myid" => Local::ClusterMyid,
        "cluster|myshardid" => Local::ClusterMyShardId,
        "asking" => Local::ClusterFlag,
        "readonly" => Local::ReadOnly(true),
        "readwrite" => Local::ReadOnly(false),
        n if n == "client" || n.starts_with("client|") => Local::Client,
        n if n.starts_with("slowlog|") => Local::Slowlog,
        _ => return None,
    })
}

/// Commands that would break the shared, multiplexed backend connections or would silently
/// give a one-node answer to a cluster-wide question. Each gets a clear refusal instead.
fn unsupported(spec: &CommandSpec, allow_admin: bool) -> Option<&'static str> {
    const STATEFUL: &[&str] = &["sync", "psync"];
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
    if is_broadcast(spec) && spec.has(flags::BLOCKING) {
        // WAITAOF: it would hold every master's shared connection for its timeout.
        return Some("would block the shared connections to every master; not served yet");
    }
    if spec.name.starts_with("cluster|") {
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

/// How the parts of a split request are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartShape {
    /// The name, then each of the part's keys with the arguments that follow it (`step`):
    /// MGET, MSET, DEL…
    Keys,
    /// The arguments before the first key, `keys_at` (argument `numkeys_at` set to the
    /// part's key count), the part's keys with theirs, then every argument from
    /// `options_at` on, the options (MSETEX `numkeys key value … [EX s]`).
    NumKeys {
        numkeys_at: usize,
        keys_at: usize,
        options_at: usize,
    },
}

/// Options that make a splittable command all-or-nothing across its keys: with one of
/// them, parts on several nodes could each decide alone (MSETEX NX sets none if any key
/// exists; its parts would set those of the nodes where none does), so it is refused.
const ALL_OR_NOTHING: &[(&str, &[&str])] = &[("msetex", &["nx", "xx"])];

/// The shape a multi-slot request of `spec` is split in, or None when it must not be:
/// a plain key range (the legacy spec), or `numkeys` keys with no legacy keys before them,
/// each with its whole step of arguments, and no all-or-nothing option after them.
fn part_shape(req: &Request, spec: &CommandSpec, keys: &KeyPositions) -> Option<PartShape> {
    match spec.keys {
        KeySpec::Legacy => Some(PartShape::Keys),
        KeySpec::NumKeys {
            numkeys_at, step, ..
        } if spec.first_key <= 0 => {
            let KeyPositions::Range { first, last, .. } = *keys else {
                return None;
            };
            let options_at = last + usize::from(step.max(1));
            let atomic = ALL_OR_NOTHING
                .iter()
                .find(|(name, _)| *name == spec.name)
                .is_some_and(|(_, tokens)| {
                    (options_at..req.argc()).any(|i| {
                        (tokens.iter()).any(|t| t.as_bytes().eq_ignore_ascii_case(req.arg(i)))
                    })
                });
            (options_at <= req.argc() && !atomic).then_some(PartShape::NumKeys {
                numkeys_at: usize::from(numkeys_at),
                keys_at: first,
                options_at,
            })
        }
        _ => None,
    }
}

/// A command whose keys a `numkeys` argument counts, each followed by its value (MSETEX),
/// with fewer arguments than its pairs need: the last key has no value.
fn pairs_cut_short(req: &Request, spec: &CommandSpec, keys: &KeyPositions) -> bool {
    let KeySpec::NumKeys { step, .. } = spec.keys else {
        return false;
    };
    let KeyPositions::Range { last, .. } = *keys else {
        return false;
    };
    step > 1 && last + usize::from(step) > req.argc()
}

/// One slot: route there. Several: split if the table says the command is a per-key
/// operation that may be split (MultiShard, and not MSETNX's all-or-nothing AggMin) and
/// its arguments can be cut into parts (`part_shape`); otherwise refuse as Redis Cluster
/// does.
fn route_keys(
    req: &Request,
    spec: &CommandSpec,
    keys: KeyPositions,
    placement: &Placement,
) -> Route {
    if keys.count() == 1 {
        // GET, SET and most requests: one key, one slot.
        return keys.first().map_or(Route::AnyNode, |at| {
            Route::Slot(placement.slot(req.arg(at)))
        });
    }
    let mut slots = keys.iter().map(|i| placement.slot(req.arg(i)));
    let Some(first) = slots.next() else {
        return Route::AnyNode;
    };
    let single_slot = !slots.any(|s| s != first);
    drop(slots);
    if single_slot {
        return Route::Slot(first);
    }
    if pairs_cut_short(req, spec, &keys) {
        // MSETEX 2 a v b: no server runs it, and each refuses it with its own text (Redis
        // 8 "wrong number of key-value pairs", Valkey "syntax error"; a node that checks
        // the keys' slots first says CROSSSLOT): a node answers.
        return Route::AnyNode;
    }
    let shape = match spec.request_policy {
        RequestPolicy::MultiShard => part_shape(req, spec, &keys),
        _ => None,
    };
    match (merge_for(spec.response_policy, true), shape) {
        (Some(merge), Some(shape)) => Route::Split(Box::new(Split { keys, merge, shape })),
        _ => Route::Refuse(Bytes::from_static(
            b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
        )),
    }
}

/// Redis's text: the name (128 bytes at most), then as many quoted args as fit in 128 bytes
/// (none and no tail behind Redis 8, for a command without arguments).
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
    if req.argc() < 2 && crate::identity::bare_unknown_command() {
        return error(&format!("unknown command '{name}'"));
    }
    error(&format!(
        "unknown command '{name}', with args beginning with: {args}"
    ))
}

fn truncated(bytes: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(max)]).into_owned()
}

/// Where a pub/sub command goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PubSubTarget {
    /// SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE, PUNSUBSCRIBE (and anything in RESP2 subscribed mode).
    Bus,
    /// SSUBSCRIBE/SUNSUBSCRIBE of channels in this slot; None: every shard connection.
    Shard(Option<u16>),
}

/// The transaction commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxCommand {
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
}

#[cfg(test)]
mod tests;
