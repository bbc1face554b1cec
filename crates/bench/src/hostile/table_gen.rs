//! Requests generated from the command table (`cluster::command::all()`): every command and
//! subcommand the proxy knows, with an argument count its arity allows (sometimes a very wide
//! one) and arguments drawn from the extremes (huge counts, megabyte patterns and names,
//! keys over many slots). The hand-written cases cover the shapes the reviews named; this
//! covers the rest of the table, including commands nobody thought of.

use cluster::command::{acl, flags, CommandSpec};

use super::payloads::{command, Glob, HUGE};
use crate::keys::Rng;

/// Dangerous commands still worth sending: their cost is the point.
const DANGEROUS_KEPT: [&str; 3] = ["keys", "sort", "sort_ro"];

/// Words many commands parse as options, so options are reached, not just syntax errors.
const KEYWORDS: [&str; 20] = [
    "COUNT",
    "MATCH",
    "LIMIT",
    "STREAMS",
    "WITHSCORES",
    "REV",
    "BYSCORE",
    "BYLEX",
    "TYPE",
    "BLOCK",
    "IDLE",
    "RANK",
    "MAXLEN",
    "STORE",
    "GET",
    "BY",
    "NX",
    "KEEPTTL",
    "WITHVALUES",
    "ID",
];

/// The rows a hostile client may send: everything except commands that would change the
/// cluster or wipe it for the other cases (ADMIN, most of @dangerous). The proxy refuses
/// admin commands anyway; leaving them out keeps the time for commands it forwards.
pub fn rows() -> Vec<&'static CommandSpec> {
    let mut out = Vec::new();
    for c in cluster::command::all() {
        let subs: Vec<&'static CommandSpec> = c.subcommands.iter().collect();
        if subs.is_empty() {
            out.push(c);
        } else {
            out.extend(subs);
        }
    }
    out.retain(|c| {
        let dangerous = c.acl_categories & acl::DANGEROUS != 0;
        !c.has(flags::ADMIN) && (!dangerous || DANGEROUS_KEPT.contains(&c.name))
    });
    out
}

/// One generated request. `size` bounds its big arguments (bytes) and its argument count.
pub fn request(rows: &[&'static CommandSpec], rng: &mut Rng, size: usize) -> Vec<u8> {
    let Some(spec) = rows.get(rng.below(rows.len().max(1) as u64) as usize) else {
        return command(&["PING"]);
    };
    let mut args: Vec<Vec<u8>> = spec
        .name
        .split('|')
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let need = usize::from(spec.arity.unsigned_abs()).max(args.len());
    let argc = if spec.arity > 0 {
        need
    } else {
        need + extra_args(rng, size)
    };
    // One argument of `size` bytes at most per request, so a wide request is wide in count
    // and a big one in bytes, and neither multiplies the other.
    let mut big_left = true;
    for pos in args.len()..argc {
        let key = is_key_position(spec, pos, argc);
        args.push(argument(rng, size, key, &mut big_left));
    }
    command(&args)
}

/// Extra arguments for a variadic command: usually a few, sometimes as many as `size`
/// allows (up to 200k).
fn extra_args(rng: &mut Rng, size: usize) -> usize {
    match rng.below(10) {
        0..=5 => rng.below(4) as usize,
        6..=8 => rng.below(32) as usize,
        _ => (size / 8).clamp(1, 200_000),
    }
}

/// Whether the legacy key range of `spec` covers argument `pos` of `argc`.
fn is_key_position(spec: &CommandSpec, pos: usize, argc: usize) -> bool {
    if spec.first_key <= 0 {
        return false;
    }
    let first = spec.first_key as usize;
    let last = if spec.last_key < 0 {
        argc as i64 + i64::from(spec.last_key)
    } else {
        i64::from(spec.last_key)
    };
    let step = spec.step.max(1) as usize;
    pos >= first && (pos as i64) <= last && (pos - first).is_multiple_of(step)
}

fn argument(rng: &mut Rng, size: usize, key: bool, big_left: &mut bool) -> Vec<u8> {
    let big = *big_left && rng.below(20) == 0;
    if big {
        *big_left = false;
        let shape = Glob::ALL[rng.below(Glob::ALL.len() as u64) as usize];
        return match rng.below(2) {
            0 => shape.pattern(size, rng),
            _ => super::payloads::huge_name(size),
        };
    }
    if key {
        // A few tags: several keys of one request often share a slot, and often do not.
        return format!("t:{{{}}}{}", rng.below(8), rng.below(64)).into_bytes();
    }
    match rng.below(6) {
        0 | 1 => HUGE[rng.below(HUGE.len() as u64) as usize]
            .as_bytes()
            .to_vec(),
        2 => KEYWORDS[rng.below(KEYWORDS.len() as u64) as usize]
            .as_bytes()
            .to_vec(),
        3 => ["0", "-1", "1", "*", "$", ">", "+", "-", "inf", "-inf", ""][rng.below(11) as usize]
            .as_bytes()
            .to_vec(),
        _ => format!("t:{{{}}}{}", rng.below(8), rng.below(64)).into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_forwarded_commands_and_leaves_out_the_wrecking_ones() {
        let rows = rows();
        let has = |n: &str| rows.iter().any(|c| c.name == n);
        assert!(has("get") && has("keys") && !has("client|list"));
        assert!(has("pubsub|numsub") && has("xack") && has("eval"));
        assert!(!has("flushall") && !has("shutdown") && !has("config|set"));
    }

    #[test]
    fn arity_is_respected_and_sizes_bounded() {
        let rows = rows();
        let mut rng = Rng::new(3);
        for _ in 0..2000 {
            let req = request(&rows, &mut rng, 4096);
            let mut p = resp::RequestParser::default();
            let mut buf = bytes::BytesMut::from(req.as_slice());
            let Ok(resp::Progress::Done(resp::Parsed::Request(r))) = p.parse(&mut buf) else {
                panic!("not one request");
            };
            assert!(buf.is_empty());
            let name = String::from_utf8_lossy(r.arg(0)).to_lowercase();
            let spec = cluster::lookup(name.as_bytes()).expect("a table command");
            let spec = spec.resolve(r.argc(), |i| r.arg(i));
            assert!(spec.arity_ok(r.argc()), "{name} with {}", r.argc());
            assert!(req.len() < 4096 + 64 * 512 + 8192, "{}", req.len());
        }
    }
}
