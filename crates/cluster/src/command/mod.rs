//! The command table: everything the proxy needs to know about a Redis
//! command (arity, flags, where its keys are, how a cluster fans it out) as
//! data, one row per command, so routing code never special-cases names.
//!
//! The rows live in `table.rs`, generated from a live redis-server 7.0 by
//! `scripts/gen_command_table.py`, and in `learn.rs`, read from the nodes at run time (what
//! newer servers know); this file holds the row types and lookup.

mod keys;
pub mod learn;
pub mod sub_stats;
mod table;

#[cfg(test)]
mod tests;

use std::cmp::Ordering;

pub use keys::{KeyError, KeyPositions};

/// Command flag bits, as reported by `COMMAND INFO` (plus one synthetic bit).
pub mod flags {
    /// May modify the keyspace.
    pub const WRITE: u32 = 1 << 0;
    /// Only reads the keyspace.
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory; refused when the server is out of memory.
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative command.
    pub const ADMIN: u32 = 1 << 3;
    /// Pub/Sub related.
    pub const PUBSUB: u32 = 1 << 4;
    /// Not allowed from scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    /// May block the client.
    pub const BLOCKING: u32 = 1 << 6;
    /// Allowed while the dataset is loading.
    pub const LOADING: u32 = 1 << 7;
    /// Allowed on a replica with stale data.
    pub const STALE: u32 = 1 << 8;
    /// Not propagated to MONITOR.
    pub const SKIP_MONITOR: u32 = 1 << 9;
    /// Not logged in SLOWLOG.
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    /// Accepted for importing slots after ASKING.
    pub const ASKING: u32 = 1 << 11;
    /// O(1) or O(log N) command.
    pub const FAST: u32 = 1 << 12;
    /// Allowed before authentication.
    pub const NO_AUTH: u32 = 1 << 13;
    /// May replicate even when read-only. Redis 7.0's `COMMAND INFO` does not
    /// report this flag, so no generated row carries it; it is reserved.
    pub const MAY_REPLICATE: u32 = 1 << 14;
    /// The command may legitimately have zero keys (EVAL with numkeys 0).
    pub const NO_MANDATORY_KEYS: u32 = 1 << 15;
    /// Refused during asynchronous replica loading.
    pub const NO_ASYNC_LOADING: u32 = 1 << 16;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 17;
    /// Key positions depend on the arguments; see [`super::KeySpec`].
    pub const MOVABLE_KEYS: u32 = 1 << 18;
    /// Allowed while a script or function is busy.
    pub const ALLOW_BUSY: u32 = 1 << 19;
    /// Synthetic, not a Redis flag: the "key" positions name shard channels
    /// (SPUBLISH, SSUBSCRIBE, SUNSUBSCRIBE). They must be hashed for routing,
    /// but they are not keys (`COMMAND GETKEYS` reports none).
    pub const SHARD_CHANNEL: u32 = 1 << 20;

    /// The bit of a flag as `COMMAND INFO` names it; None for a name without one here
    /// (newer flags such as `module` mean nothing to routing).
    pub fn named(name: &str) -> Option<u32> {
        Some(match name {
            "write" => WRITE,
            "readonly" => READONLY,
            "denyoom" => DENYOOM,
            "admin" => ADMIN,
            "pubsub" => PUBSUB,
            "noscript" => NOSCRIPT,
            "blocking" => BLOCKING,
            "loading" => LOADING,
            "stale" => STALE,
            "skip_monitor" => SKIP_MONITOR,
            "skip_slowlog" => SKIP_SLOWLOG,
            "asking" => ASKING,
            "fast" => FAST,
            "no_auth" => NO_AUTH,
            "may_replicate" => MAY_REPLICATE,
            "no_mandatory_keys" => NO_MANDATORY_KEYS,
            "no_async_loading" => NO_ASYNC_LOADING,
            "no_multi" => NO_MULTI,
            "movablekeys" => MOVABLE_KEYS,
            "allow_busy" => ALLOW_BUSY,
            _ => return None,
        })
    }
}

/// What a key needs under ACL key permissions (`%R~`, `%W~`): Redis reads it from the flags
/// of the key spec that found the key (`ACLSelectorCheckKey`).
pub mod access {
    /// The spec has `ACCESS`: the key's value is read (or returned).
    pub const READ: u8 = 1;
    /// The spec has `INSERT`, `DELETE` or `UPDATE`: the key is written.
    pub const WRITE: u8 = 2;
}

/// One key spec of a command, as far as ACL key permissions need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAccess {
    /// An index-and-range spec's first position; 0 for a spec whose keys are found by a
    /// numkeys argument or a keyword.
    pub begin: u8,
    /// The range's last key: `begin + last` when `last >= 0`, else counted from the end of
    /// the arguments (-1: the last one).
    pub last: i8,
    pub step: u8,
    /// Bits from [`access`]; 0 when the spec names none (any key pattern will do).
    pub need: u8,
}

/// ACL category bits (`@read`, `@write`, ...), for per-user ACLs.
pub mod acl {
    /// `@keyspace`
    pub const KEYSPACE: u64 = 1 << 0;
    /// `@read`
    pub const READ: u64 = 1 << 1;
    /// `@write`
    pub const WRITE: u64 = 1 << 2;
    /// `@set`
    pub const SET: u64 = 1 << 3;
    /// `@sortedset`
    pub const SORTEDSET: u64 = 1 << 4;
    /// `@list`
    pub const LIST: u64 = 1 << 5;
    /// `@hash`
    pub const HASH: u64 = 1 << 6;
    /// `@string`
    pub const STRING: u64 = 1 << 7;
    /// `@bitmap`
    pub const BITMAP: u64 = 1 << 8;
    /// `@hyperloglog`
    pub const HYPERLOGLOG: u64 = 1 << 9;
    /// `@geo`
    pub const GEO: u64 = 1 << 10;
    /// `@stream`
    pub const STREAM: u64 = 1 << 11;
    /// `@pubsub`
    pub const PUBSUB: u64 = 1 << 12;
    /// `@admin`
    pub const ADMIN: u64 = 1 << 13;
    /// `@fast`
    pub const FAST: u64 = 1 << 14;
    /// `@slow`
    pub const SLOW: u64 = 1 << 15;
    /// `@blocking`
    pub const BLOCKING: u64 = 1 << 16;
    /// `@dangerous`
    pub const DANGEROUS: u64 = 1 << 17;
    /// `@connection`
    pub const CONNECTION: u64 = 1 << 18;
    /// `@transaction`
    pub const TRANSACTION: u64 = 1 << 19;
    /// `@scripting`
    pub const SCRIPTING: u64 = 1 << 20;
}

/// How a cluster client should fan a keyless or multi-key command out
/// (the `request_policy` tip of `COMMAND INFO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestPolicy {
    /// Route by key slot; keyless commands go to any node.
    Default,
    /// Send to every node, primaries and replicas.
    AllNodes,
    /// Send to every primary.
    AllShards,
    /// Split the keys by slot and send each part to its shard.
    MultiShard,
    /// Needs command-specific handling.
    Special,
}

/// How replies from a fanned-out command are merged (`response_policy` tip).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponsePolicy {
    /// Concatenate/forward (per the request policy's natural meaning).
    Default,
    /// Success if any node succeeded; return the first success.
    OneSucceeded,
    /// Success only if all succeeded; return one of the replies.
    AllSucceeded,
    /// Logical AND of integer replies.
    AggLogicalAnd,
    /// Logical OR of integer replies.
    AggLogicalOr,
    /// Minimum of integer replies.
    AggMin,
    /// Maximum of integer replies.
    AggMax,
    /// Sum of integer replies.
    AggSum,
    /// Needs command-specific handling.
    Special,
}

/// Which error texts a numkeys command answers with; the server's key specs
/// say where numkeys is but not this, and each family words it differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumKeysErrors {
    /// EVAL family: not an integer / can't be negative / more than args.
    Script,
    /// FCALL family: like `Script`, but a non-integer is "Bad number of keys".
    Function,
    /// ZUNION/ZINTER/ZDIFF(STORE), ZINTERCARD: not an integer / "at least 1
    /// input key is needed for '`<cmd>`' command" / syntax error.
    SortedSetOp,
    /// SINTERCARD: "numkeys should be greater than 0" / more than args.
    SetCard,
    /// LMPOP, ZMPOP, BLMPOP, BZMPOP: "numkeys should be greater than 0" /
    /// syntax error.
    MultiPop,
    /// A command learned from the nodes: a bad numkeys is the node's to answer (the router
    /// sends it to any node), so the texts here are only placeholders.
    Server,
}

/// What follows a keyword found by [`KeySpec::Keyword`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeywordTake {
    /// The argument right after every occurrence is a key (SORT STORE,
    /// GEORADIUS STORE/STOREDIST).
    EachNext,
    /// After the first occurrence come N keys then N values; the keys are
    /// the first half, rounded down (XREAD/XREADGROUP STREAMS).
    HalfOfRest,
    /// Every argument after the first occurrence is a key, and they replace
    /// the legacy key, which must then be empty (MIGRATE KEYS).
    RestReplacingEmptyKey,
}

/// How to find the keys of a command beyond (or instead of) the legacy range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySpec {
    /// The legacy first/last/step range is exact.
    Legacy,
    /// The legacy range (e.g. ZUNIONSTORE's destination, often empty), then
    /// `numkeys` keys: argument `numkeys_at` holds the count, the keys start
    /// at argument `first` and repeat every `step` arguments.
    NumKeys {
        numkeys_at: u8,
        first: u8,
        step: u8,
        errors: NumKeysErrors,
    },
    /// The legacy range, then keys located by a keyword (ASCII
    /// case-insensitive). The scan starts at argument `from`; an option in
    /// `skip` makes the scan jump over that many values, so an option value
    /// that happens to spell the keyword is not mistaken for it.
    Keyword {
        keywords: &'static [&'static str],
        from: u8,
        skip: &'static [(&'static str, u8)],
        take: KeywordTake,
    },
    /// The command has no keys.
    None,
    /// A learned command whose key specs the proxy cannot read (`unknown`, `incomplete`):
    /// refused, as routing it anywhere would be a guess and its keys would escape ACLs.
    Unreadable,
}

/// One row of the command table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// Lowercase name; subcommands are `"container|sub"`.
    pub name: &'static str,
    /// Redis arity: `> 0` exact argc, `< 0` at least `-arity` (argc counts
    /// the command name, and for subcommands the subcommand name too).
    pub arity: i16,
    /// Bits from [`flags`].
    pub flags: u32,
    /// Legacy `COMMAND INFO` first key position (0: none).
    pub first_key: i16,
    /// Legacy last key position; negative counts from the end (-1 = last).
    pub last_key: i16,
    /// Legacy key step.
    pub step: i16,
    /// How to find keys for movable-key commands.
    pub keys: KeySpec,
    /// The key specs' ACL needs, in the server's order.
    pub key_access: &'static [KeyAccess],
    /// Bits from [`acl`].
    pub acl_categories: u64,
    /// Cluster fan-out policy from the command tips.
    pub request_policy: RequestPolicy,
    /// Reply merge policy from the command tips.
    pub response_policy: ResponsePolicy,
    /// Subcommand rows, sorted by name (empty for plain commands).
    pub subcommands: &'static [CommandSpec],
}

/// Every generated top-level command, sorted by name (what the proxy knows with no node
/// asked; [`lookup`] also finds what the nodes taught it).
pub fn all() -> &'static [CommandSpec] {
    table::COMMANDS
}

/// Finds a command by name, ASCII case-insensitively, without allocating.
/// Also accepts `"container|sub"` for a subcommand row. Unknown → `None`.
/// A generated row the nodes know differently comes back as they know it, and a command
/// only the nodes know is found too (`learn.rs`).
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    match name.iter().position(|&b| b == b'|') {
        None => find_top(name),
        Some(bar) => {
            let container = find_top(&name[..bar])?;
            find_sub(container.subcommands, &name[bar + 1..])
        }
    }
}

/// The last top-level name [`find_top`] looked up on this thread, lowercased, if it fits
/// in 8 bytes, with the table it was found in and what it found. Requests in a row mostly
/// share their command (a pipeline of GETs), and every request's name is looked up.
#[derive(Clone, Copy)]
struct LastLookup {
    name: u64,
    len: usize,
    generation: usize,
    found: Option<&'static CommandSpec>,
}

std::thread_local! {
    static LAST_LOOKUP: std::cell::Cell<Option<LastLookup>> = const { std::cell::Cell::new(None) };
}

/// `name`, lowercased, packed in a word; None if longer than 8 bytes.
fn packed_lower(name: &[u8]) -> Option<u64> {
    if name.len() > 8 {
        return None;
    }
    // Byte by byte: a `copy_from_slice` of a variable length is a `memcpy` call, dearer
    // than the few bytes of a command name (every request passes here).
    let mut word = 0u64;
    for (i, &b) in name.iter().enumerate() {
        word |= u64::from(b.to_ascii_lowercase()) << (8 * i);
    }
    Some(word)
}

/// A top-level row: generated (or its learned replacement), else learned.
fn find_top(name: &[u8]) -> Option<&'static CommandSpec> {
    let Some(packed) = packed_lower(name) else {
        return search_top(name);
    };
    let generation = learn::generation();
    if let Some(last) = LAST_LOOKUP.get() {
        if last.name == packed && last.len == name.len() && last.generation == generation {
            return last.found;
        }
    }
    let found = search_top(name);
    LAST_LOOKUP.set(Some(LastLookup {
        name: packed,
        len: name.len(),
        generation,
        found,
    }));
    found
}

/// [`find_top`] without the memo: a binary search of the tables.
fn search_top(name: &[u8]) -> Option<&'static CommandSpec> {
    let rows = table::COMMANDS;
    // Every request's name passes here: lowercased once on the stack, so the search
    // compares slices; a name longer than any command's is searched as it is.
    let mut buf = [0u8; 32];
    let found = match buf.get_mut(..name.len()) {
        Some(lower) => {
            lower.copy_from_slice(name);
            lower.make_ascii_lowercase();
            let lower = &*lower;
            rows.binary_search_by(|row| row.name.as_bytes().cmp(lower))
        }
        None => rows.binary_search_by(|row| cmp_lower(row.name.as_bytes(), name)),
    };
    let learned = learn::current();
    match (found, learned) {
        (Ok(i), None) => rows.get(i),
        (Ok(i), Some(l)) => l.overrides.get(i).copied().flatten().or(rows.get(i)),
        (Err(_), None) => None,
        (Err(_), Some(l)) => {
            let i = l
                .extra
                .binary_search_by(|(row, _)| cmp_lower(row.name.as_bytes(), name))
                .ok()?;
            Some(l.extra[i].0)
        }
    }
}

/// The statistics slot of a top-level row: its place in the generated table, or for a
/// learned command a slot after them (below [`learn::stats_len`]).
pub fn stats_index(spec: &CommandSpec) -> Option<usize> {
    let rows = table::COMMANDS;
    // A generated row (every request's case): its address says where it is.
    let offset = (spec as *const CommandSpec as usize).checked_sub(rows.as_ptr() as usize);
    let at = offset.map(|o| o / std::mem::size_of::<CommandSpec>());
    if let Some(i) = at.filter(|&i| rows.get(i).is_some_and(|r| std::ptr::eq(r, spec))) {
        return Some(i);
    }
    if let Ok(i) = rows.binary_search_by(|row| row.name.cmp(spec.name)) {
        return Some(i);
    }
    let l = learn::current()?;
    let i = l
        .extra
        .binary_search_by(|(row, _)| row.name.cmp(spec.name))
        .ok()?;
    Some(l.extra[i].1)
}

/// Every top-level row [`lookup`] finds now: the generated ones (as the nodes know them),
/// then the learned ones.
pub fn every() -> impl Iterator<Item = &'static CommandSpec> {
    let learned = learn::current();
    let generated = table::COMMANDS.iter().enumerate().map(move |(i, row)| {
        learned
            .and_then(|l| l.overrides.get(i).copied().flatten())
            .unwrap_or(row)
    });
    let extra = learned
        .into_iter()
        .flat_map(|l| l.extra.iter().map(|(row, _)| *row));
    generated.chain(extra)
}

/// The row behind a statistics slot, as [`lookup`] finds it now (a subcommand's row for
/// the slots of `sub_stats.rs`).
pub fn at_stats_index(index: usize) -> Option<&'static CommandSpec> {
    let rows = table::COMMANDS;
    match (rows.get(index), learn::current()) {
        (Some(row), None) => Some(row),
        (Some(row), Some(l)) => Some(l.overrides.get(index).copied().flatten().unwrap_or(row)),
        (None, l) => match index - rows.len() {
            learned if learned < learn::MAX_LEARNED => l?.by_index.get(learned).copied().flatten(),
            _ => sub_stats::at(index),
        },
    }
}

/// Orders a lowercase table name against arbitrary-case input, as if the
/// input had been lowercased first.
fn cmp_lower(table_name: &[u8], input: &[u8]) -> Ordering {
    table_name
        .iter()
        .copied()
        .cmp(input.iter().map(u8::to_ascii_lowercase))
}

/// Subcommand rows are sorted by full name; with a shared container prefix
/// that is the same order as the part after the `|`.
fn find_sub(rows: &'static [CommandSpec], sub: &[u8]) -> Option<&'static CommandSpec> {
    let i = rows
        .binary_search_by(|row| cmp_lower(row.sub_name().as_bytes(), sub))
        .ok()?;
    rows.get(i)
}

impl CommandSpec {
    /// The part of the name after `|` (the whole name for top-level rows).
    fn sub_name(&self) -> &'static str {
        match self.name.split_once('|') {
            Some((_, sub)) => sub,
            None => self.name,
        }
    }

    /// For a container command (has subcommands) returns the subcommand row
    /// named by `arg(1)` when `argc >= 2` and it exists; otherwise `self`.
    /// `arg` is only called with indices below `argc`.
    pub fn resolve<'a>(
        &'static self,
        argc: usize,
        arg: impl Fn(usize) -> &'a [u8],
    ) -> &'static CommandSpec {
        if self.subcommands.is_empty() || argc < 2 {
            return self;
        }
        find_sub(self.subcommands, arg(1)).unwrap_or(self)
    }

    /// Whether `argc` (command name included) satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let need = usize::from(self.arity.unsigned_abs());
        if self.arity >= 0 {
            argc == need
        } else {
            argc >= need
        }
    }

    /// Whether every bit of `flag` (from [`flags`]) is set.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag == flag
    }

    /// Whether a call may write what replicas must then receive: `write` or
    /// `may_replicate`, or a script or function call that is not read-only (EVAL, EVALSHA,
    /// FCALL), or PUBLISH, SPUBLISH, PFCOUNT: Redis 7.0's `COMMAND INFO` does not report
    /// `may_replicate`, which its sources give exactly these six. WAIT counts the writes of
    /// a client by it, and CLIENT PAUSE WRITE holds them.
    pub fn replicates(&self) -> bool {
        const MAY_REPLICATE_7_0: [&str; 3] = ["publish", "spublish", "pfcount"];
        self.has(flags::WRITE)
            || self.has(flags::MAY_REPLICATE)
            // The code runners only: SCRIPT LOAD, FUNCTION LIST and the other `@scripting`
            // commands do not replicate (FUNCTION LOAD, DELETE, FLUSH are `write`).
            || (self.runs_code() && !self.has(flags::READONLY))
            || MAY_REPLICATE_7_0.contains(&self.name)
    }

    /// What the key at argument `pos` of a call with `argc` arguments needs (bits from
    /// [`access`]): from the range spec that covers it, else from the first spec found by
    /// numkeys or keyword, as Redis collects keys spec by spec. A position no spec
    /// explains needs both. SET and BITFIELD, whose spec says `VARIABLE_FLAGS`, are read
    /// from their arguments as Redis's `setGetKeys` and `bitfieldGetKeys` read them.
    pub fn key_need<'a>(&self, pos: usize, argc: usize, arg: impl Fn(usize) -> &'a [u8]) -> u8 {
        match self.name {
            "set" => return set_need(argc, arg),
            "bitfield" => return bitfield_need(argc, arg),
            _ => {}
        }
        let covers = |a: &KeyAccess| {
            let begin = usize::from(a.begin);
            let end = match usize::try_from(a.last) {
                Ok(last) => begin + last,
                Err(_) => argc.saturating_sub(usize::from(a.last.unsigned_abs())),
            };
            let step = usize::from(a.step.max(1));
            begin > 0 && (begin..=end).contains(&pos) && (pos - begin).is_multiple_of(step)
        };
        let found = self.key_access.iter().find(|a| covers(a));
        let found = found.or_else(|| self.key_access.iter().find(|a| a.begin == 0));
        found.map_or(access::READ | access::WRITE, |a| a.need)
    }

    /// Whether the command runs code on the node (EVAL, EVALSHA, FCALL and their `_RO`
    /// forms): code that names keys and commands of its own, beyond the declared ones.
    /// They are the `@scripting` commands whose keys may be none.
    pub fn runs_code(&self) -> bool {
        self.acl_categories & acl::SCRIPTING != 0 && self.has(flags::NO_MANDATORY_KEYS)
    }
}

/// SET reads its key only with GET (any argument from the third on spelling it).
fn set_need<'a>(argc: usize, arg: impl Fn(usize) -> &'a [u8]) -> u8 {
    match (3..argc).any(|i| arg(i).eq_ignore_ascii_case(b"get")) {
        true => access::READ | access::WRITE,
        false => access::WRITE,
    }
}

/// BITFIELD only reads when every operation is a GET (or OVERFLOW); anything else, a
/// syntax error included, counts as a write.
fn bitfield_need<'a>(argc: usize, arg: impl Fn(usize) -> &'a [u8]) -> u8 {
    let mut i = 2;
    while i < argc {
        let rest = argc - i - 1;
        let op = arg(i);
        if op.eq_ignore_ascii_case(b"get") && rest >= 2 {
            i += 3;
        } else if op.eq_ignore_ascii_case(b"overflow") && rest >= 1 {
            i += 2;
        } else {
            return access::READ | access::WRITE;
        }
    }
    access::READ
}
