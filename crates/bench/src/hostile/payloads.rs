//! The hand-picked extreme requests of the hostile cases, as bytes: the sizes and counts a
//! client chooses (huge counts, megabyte glob patterns, 200k arguments, 10 MiB names,
//! unfinished frames, RESP garbage). Kept pure, apart from the sockets, so each shape can be
//! checked without a proxy; the cases decide how and how often they are sent.

use crate::keys::Rng;

/// `i64::MAX`, `u64` overflows, `2^31` and other counts that must never size an allocation.
pub const HUGE: [&str; 8] = [
    "1000000000000000000",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "2147483648",
    "4294967296",
    "99999999999999999999999",
    "1e18",
];

/// One RESP multibulk from its arguments.
pub fn command<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Requests whose counts, ranges or numkeys are huge, over small prefilled collections (the
/// `hc:` keys of `prefill`), so a correct proxy answers them cheaply.
pub fn huge_counts() -> Vec<Vec<u8>> {
    let h = HUGE[1];
    let lines: Vec<Vec<&str>> = vec![
        vec!["LRANGE", "hc:{l}", "0", HUGE[0]],
        vec!["LRANGE", "hc:{l}", HUGE[2], h],
        vec!["ZRANGE", "hc:{z}", "0", HUGE[0]],
        vec![
            "ZRANGE", "hc:{z}", "-inf", "+inf", "BYSCORE", "LIMIT", "0", h,
        ],
        vec!["ZRANGEBYSCORE", "hc:{z}", "-inf", "+inf", "LIMIT", "0", h],
        vec!["SCAN", "0", "COUNT", h],
        vec!["SCAN", "0", "COUNT", HUGE[0], "MATCH", "*"],
        vec!["SCAN", "0", "COUNT", HUGE[3]],
        vec!["HSCAN", "hc:{h}", "0", "COUNT", h],
        vec!["SSCAN", "hc:{s}", "0", "COUNT", h],
        vec!["ZSCAN", "hc:{z}", "0", "COUNT", h],
        vec!["XRANGE", "hc:{x}", "-", "+", "COUNT", h],
        vec!["XREAD", "COUNT", h, "STREAMS", "hc:{x}", "0"],
        vec!["GETRANGE", "hc:{v}", "0", h],
        vec!["BITCOUNT", "hc:{v}", "0", h],
        vec!["ZUNIONSTORE", "hc:{z}d", HUGE[4], "hc:{z}", "hc:{z}"],
        vec!["ZUNION", HUGE[4], "hc:{z}"],
        vec!["ZINTERCARD", HUGE[5], "hc:{z}"],
        vec!["SINTERCARD", HUGE[4], "hc:{s}"],
        vec!["LMPOP", HUGE[4], "hc:{l}", "LEFT"],
        vec!["EVAL", "return 1", HUGE[4], "a"],
        vec!["EVAL", "return 1", h, "a"],
        vec!["FCALL", "f", HUGE[4], "a"],
        vec!["LPOS", "hc:{l}", "x", "COUNT", "0", "MAXLEN", "0"],
        vec!["LPOS", "hc:{l}", "x", "RANK", HUGE[2]],
        vec!["HRANDFIELD", "hc:{h}", h],
        vec!["SRANDMEMBER", "hc:{s}", h],
        vec!["ZRANDMEMBER", "hc:{z}", h],
        vec!["MEMORY", "USAGE", "hc:{z}", "SAMPLES", h],
        vec!["CLIENT", "LIST", "ID", h, HUGE[3]],
        vec!["BLPOP", "hc:{e}", h],
        vec!["WAIT", h, "1"],
        vec!["OBJECT", "FREQ", "hc:{z}"],
        vec!["SETRANGE", "hc:{w}", h, "x"],
        vec!["SUBSTR", "hc:{v}", HUGE[2], h],
    ];
    lines.iter().map(|a| command(a)).collect()
}

/// The collections `huge_counts` reads: a list, a zset, a hash, a set and a stream of `n`
/// members each, and a string, each on its own slot.
pub fn prefill(n: usize) -> Vec<Vec<u8>> {
    let mut out = vec![command(&["DEL", "hc:{l}"]), command(&["DEL", "hc:{z}"])];
    out.push(command(&["SET", "hc:{v}", "hostile"]));
    for i in 0..n {
        let m = format!("m{i}");
        let score = i.to_string();
        out.push(command(&["RPUSH", "hc:{l}", &m]));
        out.push(command(&["ZADD", "hc:{z}", &score, &m]));
        out.push(command(&["HSET", "hc:{h}", &m, "v"]));
        out.push(command(&["SADD", "hc:{s}", &m]));
        out.push(command(&[
            "XADD", "hc:{x}", "MAXLEN", "~", "1000", "*", "f", &m,
        ]));
    }
    out
}

/// The shapes of a megabyte glob pattern: what made naive matchers recurse (leading `*`),
/// backtrack (`*a*a…`) or scan for a closing bracket or an escaped byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Glob {
    Stars,
    Brackets,
    StarA,
    Backslashes,
    Mixed,
}

impl Glob {
    /// Every shape, in the order a case cycles through them.
    pub const ALL: [Glob; 5] = [
        Glob::Stars,
        Glob::Brackets,
        Glob::StarA,
        Glob::Backslashes,
        Glob::Mixed,
    ];

    /// A pattern of this shape, `len` bytes long.
    pub fn pattern(self, len: usize, rng: &mut Rng) -> Vec<u8> {
        let mut p: Vec<u8> = match self {
            Glob::Stars => vec![b'*'; len],
            Glob::Brackets => vec![b'['; len],
            Glob::StarA => b"*a".repeat(len / 2 + 1),
            Glob::Backslashes => vec![b'\\'; len],
            Glob::Mixed => {
                const ALPHABET: &[u8] = b"*?[]^-\\a";
                (0..len)
                    .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize])
                    .collect()
            }
        };
        p.truncate(len);
        p
    }
}

/// Where a glob pattern goes: PSUBSCRIBE (then PUNSUBSCRIBE), KEYS, SCAN MATCH, PUBSUB
/// CHANNELS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobUse {
    Psubscribe,
    Keys,
    ScanMatch,
    PubsubChannels,
}

/// The request(s) that use `pattern` as `how` says.
pub fn glob_request(how: GlobUse, pattern: &[u8]) -> Vec<u8> {
    match how {
        GlobUse::Psubscribe => {
            let mut out = command(&[b"PSUBSCRIBE".as_slice(), pattern]);
            out.extend(command(&[b"PUNSUBSCRIBE".as_slice(), pattern]));
            out
        }
        GlobUse::Keys => command(&[b"KEYS".as_slice(), pattern]),
        GlobUse::ScanMatch => command(&[
            b"SCAN".as_slice(),
            b"0",
            b"MATCH",
            pattern,
            b"COUNT",
            b"1000",
        ]),
        GlobUse::PubsubChannels => command(&[b"PUBSUB".as_slice(), b"CHANNELS", pattern]),
    }
}

/// A command naming `n` channels, keys or ids after its fixed head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wide {
    Subscribe,
    Ssubscribe,
    Psubscribe,
    Mget,
    Del,
    Numsub,
    ClientListId,
    Xack,
}

/// `head` followed by `n` generated arguments.
pub fn wide_request(kind: Wide, n: usize) -> Vec<u8> {
    let (head, arg): (&[&str], fn(usize) -> String) = match kind {
        Wide::Subscribe => (&["SUBSCRIBE"], |i| format!("ch:{i}")),
        // One slot, as SSUBSCRIBE demands: the worst case for one shard's bookkeeping.
        Wide::Ssubscribe => (&["SSUBSCRIBE"], |i| format!("{{t}}{i}")),
        Wide::Psubscribe => (&["PSUBSCRIBE"], |i| format!("p:{i}*")),
        Wide::Mget => (&["MGET"], |i| format!("k:{i}")),
        Wide::Del => (&["DEL"], |i| format!("k:{i}")),
        Wide::Numsub => (&["PUBSUB", "NUMSUB"], |i| format!("ch:{i}")),
        Wide::ClientListId => (&["CLIENT", "LIST", "ID"], |i| (i + 1).to_string()),
        Wide::Xack => (&["XACK", "hc:{x}", "g"], |i| format!("{i}-0")),
    };
    let mut args: Vec<Vec<u8>> = head.iter().map(|h| h.as_bytes().to_vec()).collect();
    args.extend((0..n).map(|i| arg(i).into_bytes()));
    command(&args)
}

/// A name of `n` bytes (a key, a client name, a channel), with no hash tag: a key's slot
/// then costs a pass over all of it.
pub fn huge_name(n: usize) -> Vec<u8> {
    vec![b'n'; n]
}

/// `*{count}\r\n` and nothing after: an array header whose elements never come.
pub fn unfinished_multibulk(count: u64) -> Vec<u8> {
    format!("*{count}\r\n").into_bytes()
}

/// A SET whose value is announced as `len` bytes; the body is sent slowly by the case.
pub fn unfinished_bulk(len: u64) -> Vec<u8> {
    format!("*3\r\n$3\r\nSET\r\n$6\r\nuf:{{b}}\r\n${len}\r\n").into_bytes()
}

/// `n` MGETs of 16 keys each, spread over the slots: one write of fan-out requests.
pub fn mget_pipeline(n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 16 * 20);
    for _ in 0..n {
        let keys: Vec<String> = (0..16)
            .map(|_| format!("k:{}", rng.below(1 << 20)))
            .collect();
        let mut args = vec!["MGET".to_string()];
        args.extend(keys);
        out.extend(command(&args));
    }
    out
}

/// `n` bytes of noise made mostly of RESP's own tokens, so the parser sees headers, lengths
/// and type bytes in every wrong place.
pub fn garbage(n: usize, rng: &mut Rng) -> Vec<u8> {
    const TOKENS: [&[u8]; 16] = [
        b"*",
        b"$",
        b"\r\n",
        b"\r",
        b"\n",
        b"-1",
        b"0",
        b"9",
        b"4294967296",
        b"+",
        b":",
        b"%",
        b"~",
        b">",
        b"_",
        b"\"",
    ];
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        if rng.below(4) == 0 {
            out.push(rng.next_u64() as u8);
        } else {
            out.extend_from_slice(TOKENS[rng.below(TOKENS.len() as u64) as usize]);
        }
    }
    out.truncate(n);
    out
}

/// RESP3 aggregate frames (map, set, push, attribute) nested `depth` deep, as if a client
/// could send them: HELLO 3 first, then the frames. Redis reads them as inline lines.
pub fn resp3_nested(depth: usize) -> Vec<u8> {
    let mut out = command(&["HELLO", "3"]);
    const OPEN: [&[u8]; 5] = [b"%1\r\n", b"~1\r\n", b">1\r\n", b"|1\r\n", b"*1\r\n"];
    for i in 0..depth {
        out.extend_from_slice(OPEN[i % OPEN.len()]);
    }
    out.extend_from_slice(b"$4\r\nPING\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(bytes: &[u8]) -> usize {
        let mut p = resp::RequestParser::default();
        let mut buf = bytes::BytesMut::from(bytes);
        let mut n = 0;
        while let Ok(resp::Progress::Done(resp::Parsed::Request(_))) = p.parse(&mut buf) {
            n += 1;
        }
        n
    }

    #[test]
    fn requests_are_well_formed() {
        assert_eq!(command(&["GET", "k"]), b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        assert_eq!(frames(&huge_counts().concat()), huge_counts().len());
        assert_eq!(frames(&wide_request(Wide::ClientListId, 1000)), 1);
        assert_eq!(frames(&mget_pipeline(100, &mut Rng::new(1))), 100);
        assert_eq!(frames(&glob_request(GlobUse::Psubscribe, b"**")), 2);
    }

    #[test]
    fn sizes_are_what_was_asked() {
        let mut rng = Rng::new(7);
        for g in Glob::ALL {
            assert_eq!(g.pattern(1001, &mut rng).len(), 1001, "{g:?}");
        }
        assert_eq!(huge_name(10).len(), 10);
        assert_eq!(garbage(333, &mut rng).len(), 333);
        assert_eq!(unfinished_multibulk(1_000_000), b"*1000000\r\n");
        assert_eq!(
            unfinished_bulk(512),
            b"*3\r\n$3\r\nSET\r\n$6\r\nuf:{b}\r\n$512\r\n"
        );
    }
}
