//! Commands learned from the servers: one node's `COMMAND INFO` read into rows, and the
//! rows every master shares turned into the table the proxy routes by.
//!
//! The generated table (`table.rs`) is Redis 7.0's. A node of a newer Redis or Valkey knows
//! more: new commands (HEXPIRE, MSETEX, VADD, WAITAOF...), new subcommands of old containers
//! (CLIENT CAPA, CLUSTER SLOT-STATS), and looser arities of old ones (ZRANK's WITHSCORE).
//! Reading them from the nodes means no list of ours ages: a command every master knows is
//! routed by its key specs and tips. What the proxy decides itself (its local commands,
//! fan-out and merge rules, refusals) still goes by name in `route`, so a learned row of a
//! name the proxy handles changes nothing there.
//!
//! This file is pure: the caller fetches the replies and calls [`NodeCommands::parse`] and
//! [`install`]. Rows are leaked into `'static` memory so lookups stay allocation-free and
//! borrow-free like the generated ones; each distinct table is built once and remembered
//! (at most [`MAX_TABLES`]), so a flapping cluster cannot grow the process.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use resp::Value;

use super::{access, acl, flags, table, CommandSpec, KeyAccess, KeySpec, KeywordTake};
use super::{NumKeysErrors, RequestPolicy, ResponsePolicy};

/// At most this many commands are learned beyond the generated table (their statistics
/// need a fixed slot each, see [`stats_len`]); Redis 8.6 adds 35.
pub const MAX_LEARNED: usize = 512;
/// At most this many distinct learned tables are ever built in one process.
pub const MAX_TABLES: usize = 32;
/// A node naming more commands than this is not believed.
const MAX_ROWS: usize = 4096;
/// Longest command name accepted from a node.
const MAX_NAME: usize = 64;

/// One node's commands, as its `COMMAND INFO` (no arguments) described them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeCommands {
    rows: BTreeMap<String, Row>,
}

/// One command or subcommand as a node describes it, owned until it is installed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    name: String,
    arity: i16,
    flags: u32,
    first_key: i16,
    last_key: i16,
    step: i16,
    keys: Keys,
    key_access: Vec<KeyAccess>,
    acl_categories: u64,
    request_policy: RequestPolicy,
    response_policy: ResponsePolicy,
    subcommands: BTreeMap<String, Row>,
}

/// [`KeySpec`] with owned keywords.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // named as the `KeySpec` variants they stand for
enum Keys {
    Legacy,
    None,
    NumKeys {
        numkeys_at: u8,
        first: u8,
        step: u8,
    },
    Keyword {
        keywords: Vec<String>,
        from: u8,
        take: KeywordTake,
    },
    /// Key specs the proxy cannot turn into positions (`unknown`, `incomplete`, or a shape
    /// it has no reader for): such a command is refused, never guessed at.
    Unreadable,
}

impl NodeCommands {
    /// Reads a `COMMAND INFO` reply (RESP2 or RESP3). Entries that do not parse are left
    /// out (the proxy then answers for them as for a command it does not know).
    pub fn parse(reply: &Value) -> NodeCommands {
        let mut rows = BTreeMap::new();
        for entry in list(reply).iter().take(MAX_ROWS) {
            if let Some(row) = Row::parse(entry, 0) {
                rows.insert(row.name.clone(), row);
            }
        }
        NodeCommands { rows }
    }

    /// How many top-level commands the node named.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the node named none.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl Row {
    fn parse(entry: &Value, depth: u8) -> Option<Row> {
        let f = list(entry);
        let name = text(f.first()?)?.to_ascii_lowercase();
        if name.is_empty() || name.len() > MAX_NAME {
            return None;
        }
        let arity = i16::try_from(int(f.get(1)?)?).ok()?;
        let mut bits = 0;
        for flag in list(f.get(2)?) {
            bits |= flags::named(text(flag).unwrap_or("")).unwrap_or(0);
        }
        let first_key = i16::try_from(int(f.get(3)?)?).ok()?;
        let last_key = i16::try_from(int(f.get(4)?)?).ok()?;
        let step = i16::try_from(int(f.get(5)?)?).ok()?;
        let acl_categories = f.get(6).map_or(0, |cats| {
            list(cats)
                .iter()
                .map(|c| acl_bit(text(c).unwrap_or("")))
                .fold(0, |a, b| a | b)
        });
        let (mut request_policy, mut response_policy) =
            (RequestPolicy::Default, ResponsePolicy::Default);
        for tip in f.get(7).map(list).unwrap_or(&[]) {
            let (key, value) = text(tip).unwrap_or("").split_once(':').unwrap_or(("", ""));
            match key {
                "request_policy" => request_policy = request(value),
                "response_policy" => response_policy = response(value),
                _ => {}
            }
        }
        let specs: Vec<Spec> = f
            .get(8)
            .map(list)
            .unwrap_or(&[])
            .iter()
            .map(Spec::parse)
            .collect();
        if specs.iter().any(|s| s.not_key) {
            bits |= flags::SHARD_CHANNEL;
        }
        let keys = keys_of(bits, first_key, &specs);
        let key_access = specs.iter().filter_map(Spec::access).collect();
        let mut subcommands = BTreeMap::new();
        if depth == 0 {
            for sub in f.get(9).map(list).unwrap_or(&[]).iter().take(MAX_ROWS) {
                if let Some(row) = Row::parse(sub, 1) {
                    if row.name.starts_with(&format!("{name}|")) {
                        subcommands.insert(row.name.clone(), row);
                    }
                }
            }
        }
        Some(Row {
            name,
            arity,
            flags: bits,
            first_key,
            last_key,
            step,
            keys,
            key_access,
            acl_categories,
            request_policy,
            response_policy,
            subcommands,
        })
    }

    /// The row in `'static` memory, with these subcommand rows (sorted by name).
    fn leak(&self, subcommands: &'static [CommandSpec]) -> CommandSpec {
        CommandSpec {
            name: leak_str(&self.name),
            arity: self.arity,
            flags: self.flags,
            first_key: self.first_key,
            last_key: self.last_key,
            step: self.step,
            keys: match &self.keys {
                Keys::Legacy => KeySpec::Legacy,
                Keys::None => KeySpec::None,
                Keys::NumKeys {
                    numkeys_at,
                    first,
                    step,
                } => KeySpec::NumKeys {
                    numkeys_at: *numkeys_at,
                    first: *first,
                    step: *step,
                    errors: NumKeysErrors::Server,
                },
                Keys::Keyword {
                    keywords,
                    from,
                    take,
                } => KeySpec::Keyword {
                    keywords: Box::leak(keywords.iter().map(|k| leak_str(k)).collect()),
                    from: *from,
                    skip: &[],
                    take: *take,
                },
                Keys::Unreadable => KeySpec::Unreadable,
            },
            key_access: Box::leak(self.key_access.clone().into_boxed_slice()),
            acl_categories: self.acl_categories,
            request_policy: self.request_policy,
            response_policy: self.response_policy,
            subcommands,
        }
    }
}

/// One key spec, as far as routing and ACL need it.
struct Spec {
    not_key: bool,
    need: u8,
    /// `("index", index)` or `("keyword", startfrom)` with the keyword.
    begin: Option<(bool, i64, String)>,
    /// `range (lastkey, keystep, limit)` or `keynum (keynumidx, firstkey, keystep)`.
    find: Option<(bool, i64, i64, i64)>,
}

impl Spec {
    fn parse(v: &Value) -> Spec {
        let m = map(v);
        let flags: Vec<&str> = m
            .get("flags")
            .map_or(Vec::new(), |f| list(f).iter().filter_map(text).collect());
        let mut need = 0;
        if flags.contains(&"access") {
            need |= access::READ;
        }
        if flags
            .iter()
            .any(|f| matches!(*f, "insert" | "delete" | "update"))
        {
            need |= access::WRITE;
        }
        let begin = m.get("begin_search").and_then(|b| {
            let b = map(b);
            let spec = map(b.get("spec")?);
            match text(b.get("type")?)? {
                "index" => Some((true, int(spec.get("index")?)?, String::new())),
                "keyword" => Some((
                    false,
                    int(spec.get("startfrom")?)?,
                    text(spec.get("keyword")?)?.to_ascii_uppercase(),
                )),
                _ => None,
            }
        });
        let find = m.get("find_keys").and_then(|f| {
            let f = map(f);
            let spec = map(f.get("spec")?);
            let get = |k: &str| spec.get(k).and_then(|v| int(v));
            match text(f.get("type")?)? {
                "range" => Some((true, get("lastkey")?, get("keystep")?, get("limit")?)),
                "keynum" => Some((false, get("keynumidx")?, get("firstkey")?, get("keystep")?)),
                _ => None,
            }
        });
        Spec {
            not_key: flags.contains(&"not_key"),
            need,
            begin,
            find,
        }
    }

    /// The spec's ACL need, with the positions an index-and-range spec covers.
    fn access(&self) -> Option<KeyAccess> {
        let (begin, last, step) = match (&self.begin, self.find) {
            (Some((true, index, _)), Some((true, last, step, _))) => (*index, last, step),
            _ => (0, 0, 1),
        };
        Some(KeyAccess {
            begin: u8::try_from(begin).ok()?,
            last: i8::try_from(last).ok()?,
            step: u8::try_from(step).ok()?.max(1),
            need: self.need,
        })
    }
}

/// How to find a command's keys from its flags, legacy first key and key specs, the way
/// `scripts/gen_command_table.py` derives the generated rows (without its overrides).
fn keys_of(flag_bits: u32, first_key: i16, specs: &[Spec]) -> Keys {
    if flag_bits & flags::MOVABLE_KEYS == 0 {
        let plain = specs
            .iter()
            .all(|s| matches!((&s.begin, s.find), (Some((true, ..)), Some((true, ..)))));
        return match (plain, first_key) {
            (false, _) => Keys::Unreadable,
            (true, 0) => Keys::None,
            (true, _) => Keys::Legacy,
        };
    }
    let mut numkeys = Vec::new();
    let mut keywords = Vec::new();
    for s in specs {
        match (&s.begin, s.find) {
            (Some((true, index, _)), Some((true, 0, _, _))) if *index == i64::from(first_key) => {}
            (Some((true, index, _)), Some((false, at, first, step))) => {
                numkeys.push((index + at, index + first, step));
            }
            (Some((false, from, word)), Some((true, last, step, limit))) if *from > 0 => {
                keywords.push((word.clone(), *from, (last, step, limit)));
            }
            _ => return Keys::Unreadable,
        }
    }
    let small = |v: i64| u8::try_from(v).ok();
    match (numkeys.as_slice(), keywords.is_empty()) {
        ([(at, first, step)], true) => match (small(*at), small(*first), small(*step)) {
            (Some(numkeys_at), Some(first), Some(step)) if step > 0 => Keys::NumKeys {
                numkeys_at,
                first,
                step,
            },
            _ => Keys::Unreadable,
        },
        ([], false) => {
            let from: BTreeSet<i64> = keywords.iter().map(|k| k.1).collect();
            let shape: BTreeSet<(i64, i64, i64)> = keywords.iter().map(|k| k.2).collect();
            let take = match shape.iter().next() {
                Some((0, 1, 0)) => KeywordTake::EachNext,
                Some((-1, 1, 2)) => KeywordTake::HalfOfRest,
                _ => return Keys::Unreadable,
            };
            match (
                from.len(),
                shape.len(),
                from.iter().next().and_then(|f| small(*f)),
            ) {
                (1, 1, Some(from)) => Keys::Keyword {
                    keywords: keywords.into_iter().map(|k| k.0).collect(),
                    from,
                    take,
                },
                _ => Keys::Unreadable,
            }
        }
        _ => Keys::Unreadable,
    }
}

// ---------------------------------------------------------------- the installed table

/// What the proxy routes by beyond the generated rows.
#[derive(Debug)]
pub(super) struct Learned {
    /// Per generated row (by index): a replacement when the nodes know it differently (a
    /// looser arity, more subcommands).
    pub(super) overrides: Vec<Option<&'static CommandSpec>>,
    /// Commands the generated table lacks, sorted by name, with their statistics index.
    pub(super) extra: Vec<(&'static CommandSpec, usize)>,
    /// The same commands by statistics index, less the generated rows' count.
    pub(super) by_index: Vec<Option<&'static CommandSpec>>,
    /// Subcommands the generated table lacks, sorted by name, with their statistics slot
    /// (`sub_stats.rs`).
    subs: Vec<(&'static str, usize)>,
    /// The same subcommands by slot, less the first learned subcommand slot.
    sub_by_slot: Vec<Option<&'static CommandSpec>>,
    pub(super) summary: Summary,
}

impl Learned {
    /// The statistics slot of a subcommand only this table knows.
    pub(super) fn sub_slot(&self, name: &str) -> Option<usize> {
        let i = self.subs.binary_search_by(|(n, _)| (*n).cmp(name)).ok()?;
        Some(self.subs[i].1)
    }

    /// The subcommand at learned subcommand slot `k` (counted from the first).
    pub(super) fn sub_at(&self, k: usize) -> Option<&'static CommandSpec> {
        self.sub_by_slot.get(k).copied().flatten()
    }
}

/// What the last install found, for INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Masters the table was learned from.
    pub nodes: usize,
    /// Commands the generated table lacks that every node knows (routed by their specs).
    pub added: usize,
    /// Generated rows replaced because every node knows them differently.
    pub changed: usize,
    /// Commands (and subcommands) only some nodes know: not routed, as during a rolling
    /// upgrade the others would refuse them.
    pub partial: usize,
}

/// Which learned table a proxy routes by. One process may run several proxies (one per
/// nutcracker pool, or the tests' many), each behind servers of their own versions: each
/// has its choice, and the threads that serve it read that one (`route_this_thread_by`).
#[derive(Debug, Default)]
pub struct TableChoice {
    /// Which of [`BUILT`] is installed: 0 for none, else its place plus one.
    current: AtomicUsize,
    /// How many masters it was learned from.
    from: AtomicUsize,
}

impl TableChoice {
    /// A choice of its own for one proxy, for the life of the process (a few words).
    pub fn leaked() -> &'static TableChoice {
        Box::leak(Box::default())
    }
}

/// The last table installed by any proxy: what a thread that serves none reads.
static LAST: TableChoice = TableChoice {
    current: AtomicUsize::new(0),
    from: AtomicUsize::new(0),
};

std::thread_local! {
    /// The choice of the proxy this thread serves, once it said so.
    static CHOICE: Cell<Option<&'static TableChoice>> = const { Cell::new(None) };
}

/// This thread routes by `choice` from now on (a proxy's worker, topology and admin
/// threads each say so when they start).
pub fn route_this_thread_by(choice: &'static TableChoice) {
    CHOICE.with(|c| c.set(Some(choice)));
}

fn choice() -> &'static TableChoice {
    CHOICE.with(|c| c.get()).unwrap_or(&LAST)
}
/// Every table built, in order; each set once and kept for the life of the process.
static BUILT: [OnceLock<&'static Learned>; MAX_TABLES] = [const { OnceLock::new() }; MAX_TABLES];

/// Tables built so far (by content) and the statistics index of each learned name and
/// learned subcommand name.
struct Memory {
    tables: Vec<(Vec<NodeCommands>, &'static Learned)>,
    names: Vec<String>,
    sub_names: Vec<String>,
}

static MEMORY: Mutex<Memory> = Mutex::new(Memory {
    tables: Vec::new(),
    names: Vec::new(),
    sub_names: Vec::new(),
});

/// The installed table, if any.
/// Which table this thread routes by now: changes whenever [`current`] would.
pub(super) fn generation() -> usize {
    choice().current.load(Ordering::Acquire)
}

pub(super) fn current() -> Option<&'static Learned> {
    let i = choice().current.load(Ordering::Acquire).checked_sub(1)?;
    BUILT.get(i)?.get().copied()
}

/// The summary of the installed table (all zero before any).
pub fn summary() -> Summary {
    current().map_or(Summary::default(), |l| Summary {
        nodes: choice().from.load(Ordering::Relaxed),
        ..l.summary
    })
}

/// Statistics slots needed: the generated rows, one per name ever learned, then the
/// subcommands' (`sub_stats.rs`).
pub fn stats_len() -> usize {
    super::sub_stats::stats_len()
}

/// Routes by what every one of `nodes` knows from now on (each node's commands from
/// [`NodeCommands::parse`]): the choice of this thread's proxy, and the last table any
/// proxy installed. Returns the summary, or `None` when this would be a table beyond the
/// first [`MAX_TABLES`] (the installed one stays).
pub fn install(nodes: &[NodeCommands]) -> Option<Summary> {
    let nodes: Vec<&NodeCommands> = nodes.iter().filter(|n| !n.is_empty()).collect();
    if nodes.is_empty() {
        return None;
    }
    let from = nodes.len();
    let mut key: Vec<NodeCommands> = nodes.iter().map(|n| (*n).clone()).collect();
    key.sort_by(|a, b| {
        a.rows
            .keys()
            .cmp(b.rows.keys())
            .then(a.rows.len().cmp(&b.rows.len()))
    });
    key.dedup();
    let mut memory = MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    let place = match memory.tables.iter().position(|(k, _)| *k == key) {
        Some(place) => place,
        None if memory.tables.len() >= MAX_TABLES => return None,
        None => {
            let Memory {
                names, sub_names, ..
            } = &mut *memory;
            let built: &'static Learned = Box::leak(Box::new(build(&key, names, sub_names)));
            let place = memory.tables.len();
            BUILT[place].set(built).ok()?;
            memory.tables.push((key, built));
            place
        }
    };
    for choice in [choice(), &LAST] {
        choice.from.store(from, Ordering::Relaxed);
        choice.current.store(place + 1, Ordering::Release);
    }
    Some(Summary {
        nodes: from,
        ..memory.tables[place].1.summary
    })
}

/// The shared table of distinct node tables `nodes` (at least one).
fn build(nodes: &[NodeCommands], names: &mut Vec<String>, sub_names: &mut Vec<String>) -> Learned {
    // The fewest commands first: the oldest node, whose row wins where they differ.
    let mut nodes: Vec<&NodeCommands> = nodes.iter().collect();
    nodes.sort_by_key(|n| n.rows.len());
    let (base, others) = nodes.split_first().expect("at least one node");
    let mut summary = Summary::default();
    let everywhere = |name: &str, sub: Option<&str>| {
        others.iter().all(|n| match (n.rows.get(name), sub) {
            (Some(_), None) => true,
            (Some(row), Some(sub)) => row.subcommands.contains_key(sub),
            (None, _) => false,
        })
    };
    let mut all_names: BTreeSet<&String> = BTreeSet::new();
    for n in &nodes {
        all_names.extend(n.rows.keys());
    }
    let mut overrides = vec![None; table::COMMANDS.len()];
    let mut extra = Vec::new();
    for name in all_names {
        let Some(row) = base.rows.get(name).filter(|_| everywhere(name, None)) else {
            summary.partial += 1;
            continue;
        };
        let shared_subs: Vec<&Row> = row
            .subcommands
            .values()
            .filter(|s| everywhere(name, Some(&s.name)))
            .collect();
        summary.partial += row.subcommands.len() - shared_subs.len();
        let known = table::COMMANDS
            .binary_search_by(|r| r.name.cmp(name.as_str()))
            .ok();
        match known {
            Some(i) => {
                if let Some(spec) = changed(&table::COMMANDS[i], row, &shared_subs) {
                    overrides[i] = Some(&*Box::leak(Box::new(spec)));
                    summary.changed += 1;
                }
            }
            None => {
                let index = match names.iter().position(|n| n == name) {
                    Some(i) => i,
                    None if names.len() < MAX_LEARNED => {
                        names.push(name.clone());
                        names.len() - 1
                    }
                    None => continue,
                };
                let subs = leak_rows(shared_subs.iter().map(|s| s.leak(&[])).collect());
                let spec: &'static CommandSpec = Box::leak(Box::new(row.leak(subs)));
                extra.push((spec, table::COMMANDS.len() + index));
                summary.added += 1;
            }
        }
    }
    extra.sort_by(|a, b| a.0.name.cmp(b.0.name));
    let mut by_index = vec![None; MAX_LEARNED];
    for (spec, index) in &extra {
        by_index[index - table::COMMANDS.len()] = Some(*spec);
    }
    let (subs, sub_by_slot) = learned_subs(&overrides, &extra, sub_names);
    Learned {
        overrides,
        extra,
        subs,
        sub_by_slot,
        by_index,
        summary,
    }
}

/// The statistics slots of the subcommands the generated table lacks (of changed rows and
/// of learned commands): a name keeps the slot it got first, for the life of the process.
#[allow(clippy::type_complexity)]
fn learned_subs(
    overrides: &[Option<&'static CommandSpec>],
    extra: &[(&'static CommandSpec, usize)],
    sub_names: &mut Vec<String>,
) -> (
    Vec<(&'static str, usize)>,
    Vec<Option<&'static CommandSpec>>,
) {
    let rows = overrides
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.map(|spec| (Some(i), spec)))
        .chain(extra.iter().map(|(spec, _)| (None, *spec)));
    let first = super::sub_stats::learned_base();
    let mut subs = Vec::new();
    let mut by_slot = vec![None; super::sub_stats::MAX_LEARNED_SUBS];
    for (row, spec) in rows {
        for sub in spec.subcommands {
            if row
                .and_then(|r| super::sub_stats::generated_slot(r, sub.name))
                .is_some()
            {
                continue;
            }
            let k = match sub_names.iter().position(|n| n == sub.name) {
                Some(k) => k,
                None if sub_names.len() < super::sub_stats::MAX_LEARNED_SUBS => {
                    sub_names.push(sub.name.to_owned());
                    sub_names.len() - 1
                }
                None => continue,
            };
            subs.push((sub.name, first + k));
            by_slot[k] = Some(sub);
        }
    }
    subs.sort_unstable();
    (subs, by_slot)
}

/// Flags a node may add to a generated row: those the proxy answers by as the server does
/// (Valkey flags CLIENT REPLY `no-multi`, Redis does not).
const LEARNED_FLAGS: u32 = flags::NO_MULTI;

/// A generated row as the nodes know it, when that differs in what routing checks: an
/// arity the nodes accept more calls with (ZRANK's WITHSCORE), `LEARNED_FLAGS` the nodes
/// set, or subcommands the row lacks. Everything else stays the generated row's (it may
/// carry hand-made key rules).
fn changed(known: &'static CommandSpec, row: &Row, subs: &[&Row]) -> Option<CommandSpec> {
    let arity = looser(known.arity, row.arity);
    let flags = known.flags | (row.flags & LEARNED_FLAGS);
    let new_subs: Vec<&&Row> = subs
        .iter()
        .filter(|s| !known.subcommands.iter().any(|k| k.name == s.name))
        .collect();
    let mut sub_changes = false;
    let mut merged: Vec<CommandSpec> = Vec::new();
    for k in known.subcommands {
        let learned = subs.iter().find(|s| s.name == k.name);
        let sub_arity = learned.map_or(k.arity, |s| looser(k.arity, s.arity));
        let sub_flags = k.flags | learned.map_or(0, |s| s.flags & LEARNED_FLAGS);
        sub_changes |= sub_arity != k.arity || sub_flags != k.flags;
        merged.push(CommandSpec {
            arity: sub_arity,
            flags: sub_flags,
            ..k.clone()
        });
    }
    if arity == known.arity && flags == known.flags && new_subs.is_empty() && !sub_changes {
        return None;
    }
    merged.extend(new_subs.iter().map(|s| s.leak(&[])));
    merged.sort_by(|a, b| a.name.cmp(b.name));
    Some(CommandSpec {
        arity,
        flags,
        subcommands: match merged.is_empty() {
            true => known.subcommands,
            false => leak_rows(merged),
        },
        ..known.clone()
    })
}

/// The node's arity when it accepts every call the generated one does and more.
fn looser(known: i16, node: i16) -> i16 {
    let accepts_more = match (known >= 0, node >= 0) {
        (true, false) => node.unsigned_abs() <= known.unsigned_abs(),
        (false, false) => node > known,
        _ => false,
    };
    if accepts_more {
        node
    } else {
        known
    }
}

fn leak_rows(rows: Vec<CommandSpec>) -> &'static [CommandSpec] {
    Box::leak(rows.into_boxed_slice())
}

fn leak_str(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

// ---------------------------------------------------------------- reading values

fn list(v: &Value) -> &[Value] {
    match v {
        Value::Array(items) | Value::Set(items) => items,
        _ => &[],
    }
}

fn text(v: &Value) -> Option<&str> {
    match v {
        Value::SimpleString(b) | Value::BulkString(b) => std::str::from_utf8(b).ok(),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(n) => Some(*n),
        _ => None,
    }
}

/// A RESP3 map or a RESP2 flat `[k, v, k, v]` array, by text key.
fn map(v: &Value) -> BTreeMap<&str, &Value> {
    match v {
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, v)))
            .collect(),
        _ => list(v)
            .chunks_exact(2)
            .filter_map(|kv| Some((text(&kv[0])?, &kv[1])))
            .collect(),
    }
}

fn acl_bit(name: &str) -> u64 {
    match name.trim_start_matches('@') {
        "keyspace" => acl::KEYSPACE,
        "read" => acl::READ,
        "write" => acl::WRITE,
        "set" => acl::SET,
        "sortedset" => acl::SORTEDSET,
        "list" => acl::LIST,
        "hash" => acl::HASH,
        "string" => acl::STRING,
        "bitmap" => acl::BITMAP,
        "hyperloglog" => acl::HYPERLOGLOG,
        "geo" => acl::GEO,
        "stream" => acl::STREAM,
        "pubsub" => acl::PUBSUB,
        "admin" => acl::ADMIN,
        "fast" => acl::FAST,
        "slow" => acl::SLOW,
        "blocking" => acl::BLOCKING,
        "dangerous" => acl::DANGEROUS,
        "connection" => acl::CONNECTION,
        "transaction" => acl::TRANSACTION,
        "scripting" => acl::SCRIPTING,
        _ => 0,
    }
}

fn request(value: &str) -> RequestPolicy {
    match value {
        "all_nodes" => RequestPolicy::AllNodes,
        "all_shards" => RequestPolicy::AllShards,
        "multi_shard" => RequestPolicy::MultiShard,
        "special" => RequestPolicy::Special,
        _ => RequestPolicy::Default,
    }
}

fn response(value: &str) -> ResponsePolicy {
    match value {
        "one_succeeded" => ResponsePolicy::OneSucceeded,
        "all_succeeded" => ResponsePolicy::AllSucceeded,
        "agg_logical_and" => ResponsePolicy::AggLogicalAnd,
        "agg_logical_or" => ResponsePolicy::AggLogicalOr,
        "agg_min" => ResponsePolicy::AggMin,
        "agg_max" => ResponsePolicy::AggMax,
        "agg_sum" => ResponsePolicy::AggSum,
        "special" => ResponsePolicy::Special,
        _ => ResponsePolicy::Default,
    }
}

#[cfg(test)]
mod tests;
