//! What each request is. Every command is encoded once, at start-up, into a template with
//! fixed-width holes for key digits; a request is then one memcpy plus writing 12 digits.
//! That keeps the generator's own per-request work (and CPU) far below the server's.

use anyhow::{bail, Context, Result};

use crate::keys::{KeyGen, Rng};

/// Digits in every generated key; with the default `key:` prefix keys are 16 bytes.
pub const KEY_DIGITS: usize = 12;

/// A command with placeholders, as given on the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandSpec {
    /// `GET key`.
    Get,
    /// `SET key value`.
    Set,
    /// `INCR key`.
    Incr,
    /// `MGET k1 .. kK`.
    Mget(usize),
    /// `MSET k1 v1 .. kK vK`.
    Mset(usize),
    /// `PING`.
    Ping,
    /// Whitespace-separated arguments; `__key__` and `__value__` are substituted.
    Custom(String),
}

impl std::str::FromStr for CommandSpec {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<CommandSpec> {
        let multi = |x: &str| -> Result<usize> {
            let k: usize = x.parse().context("key count")?;
            if k == 0 {
                bail!("key count must be at least 1");
            }
            Ok(k)
        };
        Ok(match s.to_ascii_lowercase().as_str() {
            "get" => CommandSpec::Get,
            "set" => CommandSpec::Set,
            "incr" => CommandSpec::Incr,
            "ping" => CommandSpec::Ping,
            l if l.starts_with("mget:") => CommandSpec::Mget(multi(&l[5..])?),
            l if l.starts_with("mset:") => CommandSpec::Mset(multi(&l[5..])?),
            _ if s.contains(char::is_whitespace)
                || s.contains("__key__")
                || (!s.is_empty() && s.chars().all(|c| c.is_ascii_alphabetic())) =>
            {
                CommandSpec::Custom(s.to_string())
            }
            _ => bail!("unknown command {s:?} (get|set|incr|ping|mget:K|mset:K|\"TEMPLATE __key__ __value__\")"),
        })
    }
}

/// Parses `--mix get:9,set:1`: comma-separated `COMMAND:WEIGHT`, the weight after the last colon.
pub fn parse_mix(s: &str) -> Result<Vec<(u32, CommandSpec)>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let (cmd, w) = part
            .rsplit_once(':')
            .with_context(|| format!("mix entry {part:?} needs COMMAND:WEIGHT"))?;
        let w: u32 = w
            .trim()
            .parse()
            .with_context(|| format!("weight in {part:?}"))?;
        out.push((w, cmd.trim().parse()?));
    }
    if out.iter().map(|(w, _)| u64::from(*w)).sum::<u64>() == 0 {
        bail!("mix weights sum to 0");
    }
    Ok(out)
}

/// One argument before encoding: literal bytes, optionally with one key or value hole.
enum Arg {
    Lit(Vec<u8>),
    Key(Vec<u8>, Vec<u8>),
    Value(Vec<u8>, Vec<u8>),
}

fn spec_args(spec: &CommandSpec) -> Vec<Arg> {
    let lit = |s: &str| Arg::Lit(s.as_bytes().to_vec());
    let key = || Arg::Key(Vec::new(), Vec::new());
    let val = || Arg::Value(Vec::new(), Vec::new());
    match spec {
        CommandSpec::Get => vec![lit("GET"), key()],
        CommandSpec::Set => vec![lit("SET"), key(), val()],
        CommandSpec::Incr => vec![lit("INCR"), key()],
        CommandSpec::Ping => vec![lit("PING")],
        CommandSpec::Mget(k) => std::iter::once(lit("MGET"))
            .chain((0..*k).map(|_| key()))
            .collect(),
        CommandSpec::Mset(k) => std::iter::once(lit("MSET"))
            .chain((0..*k).flat_map(|_| [key(), val()]))
            .collect(),
        CommandSpec::Custom(t) => t.split_whitespace().map(custom_arg).collect(),
    }
}

fn custom_arg(word: &str) -> Arg {
    for (hole, is_key) in [("__key__", true), ("__value__", false)] {
        if let Some((a, b)) = word.split_once(hole) {
            let (a, b) = (a.as_bytes().to_vec(), b.as_bytes().to_vec());
            return if is_key {
                Arg::Key(a, b)
            } else {
                Arg::Value(a, b)
            };
        }
    }
    Arg::Lit(word.as_bytes().to_vec())
}

/// A pre-encoded request with the offsets of its key digit holes.
#[derive(Debug, Clone)]
pub struct Template {
    /// The whole RESP multibulk, keys zero-filled.
    pub bytes: Vec<u8>,
    /// Where each key's digits start.
    pub key_digits: Vec<usize>,
    /// Length of the key prefix just before each digit run.
    pub prefix_len: usize,
    /// Where each value starts, when values are long enough to carry a token.
    pub value_tokens: Vec<usize>,
}

/// A value at least this long starts with `<key digits>:<12 random digits>`, so a reply can be
/// traced to the key it was written for (crossed-reply checks, `--verify`).
pub const TOKEN_LEN: usize = 2 * KEY_DIGITS + 1;

impl Template {
    /// Encodes `spec` with keys `prefix` + 12 digits and values of `value_size` bytes.
    pub fn new(spec: &CommandSpec, prefix: &[u8], value_size: usize) -> Template {
        let args = spec_args(spec);
        let mut bytes = format!("*{}\r\n", args.len()).into_bytes();
        let mut key_digits = Vec::new();
        let mut value_tokens = Vec::new();
        for arg in &args {
            if let (Arg::Value(a, _), true) = (arg, value_size >= TOKEN_LEN) {
                let header = format!("${}\r\n", a.len() + value_size + arg_suffix_len(arg));
                value_tokens.push(bytes.len() + header.len() + a.len());
            }
            let (payload, digit_at) = match arg {
                Arg::Lit(l) => (l.clone(), None),
                Arg::Key(a, b) => {
                    let mut p = [a.as_slice(), prefix, &[b'0'; KEY_DIGITS]].concat();
                    let at = a.len() + prefix.len();
                    p.extend_from_slice(b);
                    (p, Some(at))
                }
                Arg::Value(a, b) => ([a.as_slice(), &vec![b'x'; value_size], b].concat(), None),
            };
            bytes.extend_from_slice(format!("${}\r\n", payload.len()).as_bytes());
            if let Some(at) = digit_at {
                key_digits.push(bytes.len() + at);
            }
            bytes.extend_from_slice(&payload);
            bytes.extend_from_slice(b"\r\n");
        }
        Template {
            bytes,
            key_digits,
            prefix_len: prefix.len(),
            value_tokens,
        }
    }

    /// Appends one request to `out` with fresh keys; returns the first key's span in `out`.
    pub fn write(
        &self,
        out: &mut Vec<u8>,
        keys: &mut KeyGen,
        rng: &mut Rng,
    ) -> Option<(usize, usize)> {
        let base = out.len();
        out.extend_from_slice(&self.bytes);
        for &at in &self.key_digits {
            write_digits(&mut out[base + at..base + at + KEY_DIGITS], keys.next(rng));
        }
        // Value j carries key j's digits (the first key's when there are fewer keys).
        for (j, &at) in self.value_tokens.iter().enumerate() {
            let key_at = self.key_digits.get(j).or(self.key_digits.first());
            let v = base + at;
            if let Some(&k) = key_at {
                out.copy_within(base + k..base + k + KEY_DIGITS, v);
            }
            out[v + KEY_DIGITS] = b':';
            let token = rng.below(1_000_000_000_000);
            write_digits(&mut out[v + KEY_DIGITS + 1..v + TOKEN_LEN], token);
        }
        self.key_digits.first().map(|&at| {
            let start = base + at - self.prefix_len;
            (start, base + at + KEY_DIGITS)
        })
    }
}

fn arg_suffix_len(arg: &Arg) -> usize {
    match arg {
        Arg::Value(_, b) | Arg::Key(_, b) => b.len(),
        Arg::Lit(_) => 0,
    }
}

/// Whether `reply` can be the reply to `request` (a GET or SET from a token template): a GET
/// gets nil or a value carrying its own key's digits, a SET gets +OK, an MGET each (see
/// `verify_mget`). Other pairs are not checked (true). Error replies are counted elsewhere.
pub fn reply_matches(request: &[u8], reply: &[u8]) -> bool {
    if let Some(ok) = crate::verify_mget::mget_matches(request, reply) {
        return ok;
    }
    if request.starts_with(b"*3\r\n$3\r\nSET\r\n") {
        return reply == b"+OK\r\n";
    }
    if !request.starts_with(b"*2\r\n$3\r\nGET\r\n") || request.len() < KEY_DIGITS + 2 {
        return true;
    }
    let key = &request[request.len() - 2 - KEY_DIGITS..request.len() - 2];
    if reply.starts_with(b"$-1") {
        return true;
    }
    let Some(nl) = reply.iter().position(|&b| b == b'\n') else {
        return false;
    };
    let payload = &reply[nl + 1..];
    reply[0] == b'$' && payload.len() >= TOKEN_LEN && &payload[..KEY_DIGITS] == key
}

/// Writes `n` zero-padded into `buf` (rightmost digits win if `n` is too wide). Two digits
/// per division: this runs once per key per request, on the generator's hot path.
pub fn write_digits(buf: &mut [u8], mut n: u64) {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut i = buf.len();
    while i >= 2 {
        let p = (n % 100) as usize * 2;
        n /= 100;
        buf[i - 2..i].copy_from_slice(&PAIRS[p..p + 2]);
        i -= 2;
    }
    if i == 1 {
        buf[0] = b'0' + (n % 10) as u8;
    }
}

/// A weighted set of templates.
#[derive(Debug, Clone)]
pub struct Workload {
    templates: Vec<Template>,
    /// Cumulative weights, last = total.
    cumulative: Vec<u64>,
}

impl Workload {
    /// Builds the workload from weighted specs.
    pub fn new(mix: &[(u32, CommandSpec)], prefix: &[u8], value_size: usize) -> Workload {
        let mut total = 0;
        let mut cumulative = Vec::new();
        let mut templates = Vec::new();
        for (w, spec) in mix {
            total += u64::from(*w);
            cumulative.push(total);
            templates.push(Template::new(spec, prefix, value_size));
        }
        Workload {
            templates,
            cumulative,
        }
    }

    /// Picks a template by weight (no draw when there is only one).
    pub fn pick(&self, rng: &mut Rng) -> &Template {
        if self.templates.len() == 1 {
            return &self.templates[0];
        }
        let total = self.cumulative.last().copied().unwrap_or(1);
        let x = rng.below(total);
        let i = self.cumulative.partition_point(|&c| c <= x);
        &self.templates[i.min(self.templates.len() - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyDist;

    #[test]
    fn set_template_is_valid_resp_with_16_byte_keys() {
        let t = Template::new(&CommandSpec::Set, b"key:", 4);
        let mut out = Vec::new();
        let mut keys = KeyGen::new(&KeyDist::Sequential, 1000, 42, 1);
        let span = t.write(&mut out, &mut keys, &mut Rng::new(1)).unwrap();
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000042\r\n$4\r\nxxxx\r\n"
        );
        assert_eq!(&out[span.0..span.1], b"key:000000000042");
    }

    #[test]
    fn custom_and_multi_key_templates() {
        let spec: CommandSpec = "HSET h:__key__ f __value__".parse().unwrap();
        let t = Template::new(&spec, b"k", 2);
        let mut out = Vec::new();
        let mut keys = KeyGen::new(&KeyDist::Sequential, 10, 7, 1);
        t.write(&mut out, &mut keys, &mut Rng::new(1));
        assert_eq!(
            out,
            b"*4\r\n$4\r\nHSET\r\n$15\r\nh:k000000000007\r\n$1\r\nf\r\n$2\r\nxx\r\n"
        );
        let m = Template::new(&"mget:3".parse().unwrap(), b"key:", 0);
        assert_eq!(m.key_digits.len(), 3);
    }

    #[test]
    fn digits_are_zero_padded() {
        for (n, width, want) in [
            (42u64, 12, "000000000042"),
            (7, 3, "007"),
            (123456, 5, "23456"),
            (0, 1, "0"),
        ] {
            let mut b = vec![b'x'; width];
            write_digits(&mut b, n);
            assert_eq!(b, want.as_bytes());
        }
    }

    #[test]
    fn parses_commands_and_mixes() {
        assert_eq!("GET".parse::<CommandSpec>().unwrap(), CommandSpec::Get);
        assert_eq!(
            "mset:4".parse::<CommandSpec>().unwrap(),
            CommandSpec::Mset(4)
        );
        assert!("mget:0".parse::<CommandSpec>().is_err());
        assert!("mget:x".parse::<CommandSpec>().is_err());
        assert!("".parse::<CommandSpec>().is_err());
        assert_eq!(
            "INFO".parse::<CommandSpec>().unwrap(),
            CommandSpec::Custom("INFO".into())
        );
        let mix = parse_mix("get:9,set:1").unwrap();
        assert_eq!(mix, vec![(9, CommandSpec::Get), (1, CommandSpec::Set)]);
        assert!(parse_mix("get").is_err());
        assert!(parse_mix("get:0").is_err());
    }

    #[test]
    fn values_carry_their_key_and_replies_are_checked() {
        let set = Template::new(&CommandSpec::Set, b"key:", 32);
        let get = Template::new(&CommandSpec::Get, b"key:", 32);
        let mut out = Vec::new();
        let mut rng = Rng::new(5);
        set.write(
            &mut out,
            &mut KeyGen::new(&KeyDist::Sequential, 100, 7, 1),
            &mut rng,
        );
        let value = &out[out.len() - 34..out.len() - 2];
        assert_eq!(&value[..13], b"000000000007:");
        let mut req = Vec::new();
        get.write(
            &mut req,
            &mut KeyGen::new(&KeyDist::Sequential, 100, 7, 1),
            &mut rng,
        );
        let reply = [b"$32\r\n".as_slice(), value, b"\r\n"].concat();
        assert!(reply_matches(&req, &reply));
        assert!(reply_matches(&req, b"$-1\r\n"));
        assert!(!reply_matches(&req, b"+OK\r\n"));
        let other = [b"$32\r\n000000000008".as_slice(), &value[12..], b"\r\n"].concat();
        assert!(!reply_matches(&req, &other));
        assert!(reply_matches(&out, b"+OK\r\n"));
        assert!(!reply_matches(&out, b"$-1\r\n"));
    }

    #[test]
    fn mix_respects_weights() {
        let w = Workload::new(&parse_mix("get:9,set:1").unwrap(), b"key:", 1);
        let mut rng = Rng::new(3);
        let sets = (0..10_000)
            .filter(|_| w.pick(&mut rng).bytes.starts_with(b"*3"))
            .count();
        assert!((800..1200).contains(&sets), "{sets}");
    }
}
