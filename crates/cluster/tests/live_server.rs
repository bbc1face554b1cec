//! Live cross-checks against a real redis-server: key slots against CLUSTER
//! KEYSLOT, every table row against COMMAND INFO, key positions against
//! COMMAND GETKEYS, and numkeys error texts against the server's replies.
//! These FAIL (never skip) when redis-server is missing, because a silently
//! skipped check would let the table drift from the servers unnoticed.

mod common;

use cluster::{command, flags, key_slot, lookup, CommandSpec};
use common::{Reply, Server};

/// Deterministic xorshift64 so failures are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random keys biased towards braces so hash-tag rules are exercised.
fn random_key(rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(24) as usize;
    (0..len)
        .map(|_| match rng.below(8) {
            0 => b'{',
            1 => b'}',
            2 => rng.below(256) as u8,
            _ => b'a' + rng.below(4) as u8,
        })
        .collect()
}

#[test]
fn key_slot_matches_cluster_keyslot() {
    let server = Server::start(true);
    let mut conn = server.conn();
    let mut rng = Rng(0x5107_6a7e_c0ff_ee11);
    let keys: Vec<Vec<u8>> = (0..1000).map(|_| random_key(&mut rng)).collect();
    for key in &keys {
        conn.send(&[b"CLUSTER", b"KEYSLOT", key]);
    }
    for key in &keys {
        let want = conn.read().int();
        assert_eq!(i64::from(key_slot(key)), want, "key {key:?}");
    }
}

fn all_rows() -> impl Iterator<Item = &'static CommandSpec> {
    command::all()
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands))
}

fn flag_bit(name: &str) -> u32 {
    flags::named(name).unwrap_or_else(|| panic!("server reports unknown flag {name}"))
}

/// Checks one COMMAND INFO entry (and its subcommands); returns rows seen.
fn check_info(entry: &Reply) -> usize {
    let f = entry.items();
    let name = f[0].text();
    let row = lookup(name.as_bytes()).unwrap_or_else(|| panic!("{name} missing from table"));
    assert_eq!(row.name, name);
    assert_eq!(i64::from(row.arity), f[1].int(), "{name} arity");
    let legacy = (row.first_key, row.last_key, row.step);
    let want = (f[3].int(), f[4].int(), f[5].int());
    assert_eq!(
        (
            i64::from(legacy.0),
            i64::from(legacy.1),
            i64::from(legacy.2)
        ),
        want,
        "{name} first/last/step"
    );
    let bits = f[2].items().iter().fold(0, |b, r| b | flag_bit(&r.text()));
    assert_eq!(row.flags & !flags::SHARD_CHANNEL, bits, "{name} flags");
    let subs = f[9].items();
    assert_eq!(row.subcommands.len(), subs.len(), "{name} subcommands");
    1 + subs.iter().map(check_info).sum::<usize>()
}

#[test]
fn command_info_matches_table() {
    let server = Server::start(true);
    let mut conn = server.conn();
    let info = conn.line("COMMAND INFO");
    let seen: usize = info.items().iter().map(check_info).sum();
    assert_eq!(info.items().len(), command::all().len(), "top-level count");
    assert_eq!(seen, all_rows().count(), "rows in table but not on server");
}

/// What COMMAND GETKEYS says for `args` versus what the table says.
fn compare_getkeys(conn: &mut common::Conn, args: &[&[u8]]) -> Result<(), String> {
    let mut call: Vec<&[u8]> = vec![b"COMMAND", b"GETKEYS"];
    call.extend_from_slice(args);
    let server = conn.call(&call);
    let row = lookup(args[0]).ok_or("unknown command")?;
    let row = row.resolve(args.len(), |i| args[i]);
    let ours = row.key_positions(args.len(), |i| args[i]);
    let ours: Vec<&[u8]> = match &ours {
        Ok(pos) => pos.iter().map(|p| args[p]).collect(),
        Err(e) => return Err(format!("table error {e}, server {server:?}")),
    };
    let agrees = match &server {
        Reply::Array(Some(keys)) => keys
            .iter()
            .map(Reply::text)
            .eq(ours.iter().map(|k| String::from_utf8_lossy(k))),
        Reply::Error(e) if e.contains("has no key arguments") => {
            ours.is_empty() || row.has(flags::SHARD_CHANNEL)
        }
        _ => false,
    };
    if agrees {
        Ok(())
    } else {
        Err(format!("server {server:?}, table {ours:?}"))
    }
}

/// Distinct placeholder arguments, so positions map to unique values.
fn synthetic_args(row: &CommandSpec, argc: usize) -> Vec<Vec<u8>> {
    let mut args: Vec<Vec<u8>> = row.name.split('|').map(|s| s.as_bytes().to_vec()).collect();
    while args.len() < argc {
        args.push(format!("arg{}", args.len()).into_bytes());
    }
    args
}

/// PFMERGE with only a destination: 7.0's key spec for the (empty) source
/// range makes GETKEYS answer "Invalid arguments", but the command is valid
/// and writes its destination, so the table reports position 1.
const KNOWN_DIVERGENCES: &[&str] = &["pfmerge arg1"];

#[test]
fn getkeys_matches_every_fixed_position_command() {
    let server = Server::start(true);
    let mut conn = server.conn();
    let mut failures = Vec::new();
    let mut checked = 0;
    for row in all_rows().filter(|r| !r.has(flags::MOVABLE_KEYS) && r.subcommands.is_empty()) {
        let base = usize::from(row.arity.unsigned_abs());
        let counts: &[usize] = if row.arity < 0 { &[0, 1, 3] } else { &[0] };
        for argc in counts.iter().map(|extra| base + extra).filter(|&n| n >= 2) {
            let owned = synthetic_args(row, argc);
            let args: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            let line = String::from_utf8_lossy(&args.join(&b' ')).into_owned();
            let known = KNOWN_DIVERGENCES.contains(&line.as_str());
            match compare_getkeys(&mut conn, &args) {
                Err(e) if !known => failures.push(format!("{line}: {e}")),
                Ok(()) if known => failures.push(format!("{line}: divergence is gone")),
                _ => {}
            }
            checked += 1;
        }
    }
    assert!(checked > 400, "only {checked} argument lists checked");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Concrete, valid argument lists for every movable-key command (and a few
/// fixed ones whose positions are easy to get wrong). `''` is empty.
const SAMPLES: &[&str] = &[
    "eval s 0",
    "eval s 2 a b x",
    "evalsha sha 1 a",
    "eval_ro s 1 a x y",
    "evalsha_ro sha 2 a b",
    "fcall f 1 a x",
    "fcall_ro f 0 x",
    "zunion 2 a b",
    "zunionstore d 2 a b weights 1 2",
    "zinterstore d 1 a aggregate max",
    "zdiffstore d 2 a b",
    "zinter 1 a withscores",
    "zdiff 2 a b",
    "zintercard 2 a b limit 1",
    "sintercard 2 a b",
    "lmpop 2 a b left",
    "zmpop 1 a min count 2",
    "blmpop 0 2 a b right",
    "bzmpop 0 1 a max",
    "xread streams a 0",
    "xread count 5 block 10 streams a b 0 0",
    "xreadgroup group g c streams a >",
    "xreadgroup group g c count 1 noack streams a b > >",
    "migrate h 1 k 0 10",
    "migrate h 1 '' 0 10 keys a b",
    "migrate h 1 '' 0 10 copy replace auth pw keys a",
    "migrate h 1 '' 0 10 auth2 u p keys a b",
    "migrate h 1 '' 0 10 auth keys keys a",
    "sort k",
    "sort k store d",
    "sort k by w_* get o_* limit 0 10 store d",
    "sort k by store store d",
    "sort k get store",
    "sort_ro k by w_* get #",
    "georadius k 1 2 3 m store d",
    "georadius k 1 2 3 m withdist count 2 storedist d",
    "georadius k 1 2 3 m withcoord",
    "georadiusbymember k m 3 km store d",
    "georadiusbymember k m 3 km",
    "mset a 1 b 2 c 3",
    "bitop and d a b c",
    "blpop a b 0",
    "object encoding k",
    "xinfo stream k full",
    "memory usage k samples 0",
];

#[test]
fn getkeys_matches_movable_key_samples() {
    let server = Server::start(true);
    let mut conn = server.conn();
    let movable: Vec<&str> = all_rows()
        .filter(|r| r.has(flags::MOVABLE_KEYS))
        .map(|r| r.name)
        .collect();
    for name in &movable {
        let covered = SAMPLES.iter().any(|s| s.split(' ').next() == Some(name));
        assert!(covered, "no sample for movable-key command {name}");
    }
    let mut failures = Vec::new();
    for line in SAMPLES {
        let args: Vec<&[u8]> = line
            .split(' ')
            .map(|w| if w == "''" { &b""[..] } else { w.as_bytes() })
            .collect();
        if let Err(e) = compare_getkeys(&mut conn, &args) {
            failures.push(format!("{line}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Lines whose numkeys (or arity) is bad: the table's error text must be
/// exactly what the server itself answers.
const BAD_LINES: &[&str] = &[
    "get",
    "object encoding",
    "eval return 3 a b",
    "eval return -1 a",
    "eval return x a",
    "evalsha_ro 0000000000000000000000000000000000000000 01 a",
    "fcall f x a",
    "fcall f -1 a",
    "fcall_ro f 4 a",
    "zunionstore d 0 a",
    "zinter -3 a",
    "zunion 3 a b",
    "zdiff 1.5 a",
    "zintercard 0 a",
    "sintercard 0 a",
    "sintercard x a",
    "sintercard 3 a",
    "lmpop 0 a left",
    "zmpop 9223372036854775808 a min",
    "lmpop 9 a left",
    "blmpop 0 x a left",
    "bzmpop 0 5 a min",
    "migrate 127.0.0.1 1 k 0 10 keys a",
];

#[test]
fn key_errors_match_server_replies() {
    let server = Server::start(false);
    let mut conn = server.conn();
    let lib = b"#!lua name=lib\nredis.register_function('f', function(k, a) return 1 end)";
    assert_eq!(conn.call(&[b"FUNCTION", b"LOAD", lib]).text(), "lib");
    for line in BAD_LINES {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let row = lookup(args[0])
            .expect("known")
            .resolve(args.len(), |i| args[i]);
        let ours = match row.key_positions(args.len(), |i| args[i]) {
            Err(e) => format!("ERR {e}"),
            Ok(p) => panic!("{line}: table accepted {p:?}"),
        };
        assert_eq!(conn.call(&args), Reply::Error(ours), "{line}");
    }
}
