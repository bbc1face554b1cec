//! Inline (telnet-style) command splitting, matching Redis's `sdssplitargs`.
//!
//! `redis-cli`-less clients (telnet, `nc`, health checks) send commands as a
//! plain line. Redis splits them with `sdssplitargs`, whose quoting rules are
//! quirky (a quote can open mid-token, `\xHH` needs two hex digits, a closing
//! quote must be followed by whitespace); the proxy must split identically or
//! it would route and forward something different from what Redis would run.
//!
//! Valkey 9 loosened one rule (its `sdsparsearg`): a closing quote may be followed by more
//! of the same argument, quoted or not, as in a shell (`"a"b'c'` is `abc`). The parser is
//! told which server's rule to follow (`InlineQuotes`).
//!
//! Deviation: Redis's line search (`strchr`) stops at a NUL byte, so Redis
//! never runs a line containing NUL and instead waits for more input. Here NUL
//! is an ordinary argument byte.

use crate::error::ProtocolError;
use crate::request::{encode_recording, ArgRanges, Request};

/// C `isspace` in the C locale: where arguments are separated and what may
/// follow a closing quote.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// What may follow a closing quote inside an inline line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InlineQuotes {
    /// Redis (and Valkey before 9): only a space or the line's end; anything else is
    /// `unbalanced quotes`.
    #[default]
    Strict,
    /// Valkey 9: more of the same argument, quoted or not.
    Mixed,
}

/// Where the scanner is inside the current token.
#[derive(Clone, Copy)]
enum Mode {
    Bare,
    Double,
    Single,
}

/// Splits one inline line (without its line terminator) into a multibulk
/// [`Request`]. `Ok(None)` when the line holds no argument at all.
pub(crate) fn parse_inline_line(
    line: &[u8],
    quotes: InlineQuotes,
) -> Result<Option<Request>, ProtocolError> {
    let mut scratch = Vec::with_capacity(line.len());
    let mut ranges = ArgRanges::new();
    let mut i = 0;
    loop {
        while line.get(i).copied().is_some_and(is_c_space) {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        let start = scratch.len();
        i = read_token(line, i, &mut scratch, quotes)?;
        ranges.push(crate::request::span(start, scratch.len()));
    }
    if ranges.is_empty() {
        return Ok(None);
    }
    let args: SmallArgs = ranges
        .iter()
        .map(|&(s, e)| &scratch[s as usize..e as usize])
        .collect();
    let (raw, ranges) = encode_recording(&args);
    Ok(Some(Request::from_parts(raw, ranges, true)))
}

type SmallArgs<'a> = smallvec::SmallVec<[&'a [u8]; 8]>;

/// Reads one token starting at `i` (a non-space byte), appending its decoded
/// bytes to `out`. Returns the index just past the token.
fn read_token(
    line: &[u8],
    mut i: usize,
    out: &mut Vec<u8>,
    quotes: InlineQuotes,
) -> Result<usize, ProtocolError> {
    let mut mode = Mode::Bare;
    loop {
        let cur = line.get(i).copied();
        let next = line.get(i + 1).copied();
        match (mode, cur) {
            (Mode::Bare, None | Some(b' ' | b'\n' | b'\r' | b'\t')) => return Ok(i),
            (Mode::Bare, Some(b'"')) => mode = Mode::Double,
            (Mode::Bare, Some(b'\'')) => mode = Mode::Single,
            (Mode::Double | Mode::Single, None) => return Err(ProtocolError::UnbalancedQuotes),
            (Mode::Double, Some(b'\\')) if next.is_some() => {
                i += double_escape(line, i, out);
                continue;
            }
            (Mode::Single, Some(b'\\')) if next == Some(b'\'') => {
                out.push(b'\'');
                i += 1;
            }
            (Mode::Double, Some(b'"')) | (Mode::Single, Some(b'\''))
                if quotes == InlineQuotes::Mixed =>
            {
                mode = Mode::Bare;
            }
            (Mode::Double, Some(b'"')) | (Mode::Single, Some(b'\'')) => {
                return match next {
                    Some(b) if !is_c_space(b) => Err(ProtocolError::UnbalancedQuotes),
                    _ => Ok(i + 1),
                };
            }
            (_, Some(b)) => out.push(b),
        }
        i += 1;
    }
}

/// Decodes the escape whose backslash is at `i` (a byte follows it) inside
/// double quotes; returns how many input bytes it used.
fn double_escape(line: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    let at = |k: usize| line.get(i + k).copied();
    if at(1) == Some(b'x') {
        if let (Some(hi), Some(lo)) = (at(2).and_then(hex_value), at(3).and_then(hex_value)) {
            out.push(hi * 16 + lo);
            return 4;
        }
    }
    let decoded = match at(1) {
        Some(b'n') => b'\n',
        Some(b'r') => b'\r',
        Some(b't') => b'\t',
        Some(b'b') => 0x08,
        Some(b'a') => 0x07,
        Some(other) => other,
        None => b'\\',
    };
    out.push(decoded);
    2
}

#[cfg(test)]
mod tests {
    use super::*;

    type Split = Result<Vec<Vec<u8>>, ProtocolError>;

    fn split(line: &[u8]) -> Split {
        split_as(line, InlineQuotes::Strict)
    }

    fn split_as(line: &[u8], quotes: InlineQuotes) -> Split {
        Ok(match parse_inline_line(line, quotes)? {
            None => vec![],
            Some(req) => req.args().map(<[u8]>::to_vec).collect(),
        })
    }

    fn ok(args: &[&[u8]]) -> Split {
        Ok(args.iter().map(|a| a.to_vec()).collect())
    }

    #[test]
    fn valkey_9_joins_quoted_and_unquoted_parts() {
        let bad = Err(ProtocolError::UnbalancedQuotes);
        let mixed = |line: &[u8]| split_as(line, InlineQuotes::Mixed);
        // Valkey 9.1's own suite (unit/protocol).
        let set = b"set \"\"\"tes\"t-'k'e\"y\" \"test\"'-'value";
        assert_eq!(mixed(set), ok(&[b"set", b"test-key", b"test-value"]));
        assert_eq!(mixed(b"get test'-'key"), ok(&[b"get", b"test-key"]));
        assert_eq!(mixed(b"set foo 'b'a'r"), bad.clone());
        assert_eq!(mixed(b"set foo \"b\"a\"r"), bad.clone());
        assert_eq!(mixed(b"ECHO \"a\"b c"), ok(&[b"ECHO", b"ab", b"c"]));
        assert_eq!(mixed(b"ECHO \"\" ''"), ok(&[b"ECHO", b"", b""]));
        // Redis's rule refuses the first.
        assert_eq!(split(set), bad);
    }

    #[test]
    fn sdssplitargs_table() {
        let bad = Err(ProtocolError::UnbalancedQuotes);
        let cases: &[(&[u8], Split)] = &[
            (b"PING", ok(&[b"PING"])),
            (b"  set  k\tv ", ok(&[b"set", b"k", b"v"])),
            (b"", ok(&[])),
            (b" \t\x0b\x0c ", ok(&[])),
            (b"ECHO \"a\\x41b\"", ok(&[b"ECHO", b"aAb"])),
            (
                b"ECHO \"\\n\\r\\t\\b\\a\\\\\\\"\"",
                ok(&[b"ECHO", b"\n\r\t\x08\x07\\\""]),
            ),
            (b"ECHO \"\\x4\"", ok(&[b"ECHO", b"x4"])),
            (b"ECHO \"\\xZ1\"", ok(&[b"ECHO", b"xZ1"])),
            (b"ECHO \"\\q\"", ok(&[b"ECHO", b"q"])),
            (b"ECHO 'a\\'b'", ok(&[b"ECHO", b"a'b"])),
            (b"ECHO 'a\\nb'", ok(&[b"ECHO", b"a\\nb"])),
            (b"ECHO a\"b c\"", ok(&[b"ECHO", b"ab c"])),
            (b"ECHO \"\" ''", ok(&[b"ECHO", b"", b""])),
            (b"ECHO a\x0bb", ok(&[b"ECHO", b"a\x0bb"])),
            (b"ECHO \"x\"\x0bY", ok(&[b"ECHO", b"x", b"Y"])),
            (b"ECHO a\\", ok(&[b"ECHO", b"a\\"])),
            (b"ECHO a\x00b", ok(&[b"ECHO", b"a\x00b"])),
            (b"ECHO \"a\"b", bad.clone()),
            (b"ECHO 'a'b", bad.clone()),
            (b"ECHO \"abc", bad.clone()),
            (b"ECHO 'abc", bad.clone()),
            (b"ECHO \"\\", bad.clone()),
            (b"ECHO \"\\x4\"\"", bad.clone()),
        ];
        for (line, want) in cases {
            assert_eq!(
                &split(line),
                want,
                "line {:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn inline_request_is_reencoded() {
        let req = parse_inline_line(b"GET \"k y\"", InlineQuotes::Strict)
            .ok()
            .flatten();
        let req = req.unwrap_or_else(|| Request::from_args(&[]));
        assert!(req.is_inline());
        assert_eq!(&req.raw()[..], b"*2\r\n$3\r\nGET\r\n$3\r\nk y\r\n");
    }
}
