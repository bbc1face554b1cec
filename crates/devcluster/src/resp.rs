//! A tiny blocking RESP2 client used to form clusters and to poke nodes from
//! tests. It exists so that forming a 100-node cluster does not spawn hundreds
//! of `redis-cli` processes and so this crate needs no async runtime.

use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Refuse absurd lengths from a misbehaving peer instead of allocating them.
const MAX_BULK: usize = 512 * 1024 * 1024;
const MAX_DEPTH: usize = 32;

/// One RESP2 reply as returned by a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK` style simple string.
    Status(String),
    /// `-ERR ...` error string (without the leading `-`).
    Error(String),
    /// `:42` integer.
    Int(i64),
    /// `$n` bulk string; `None` for the null bulk.
    Bulk(Option<Vec<u8>>),
    /// `*n` array; `None` for the null array.
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// True for an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Turns an error reply into `Err`, so callers can use `?`.
    pub fn ok(self) -> Result<Reply> {
        match self {
            Reply::Error(e) => bail!("redis error: {e}"),
            other => Ok(other),
        }
    }

    /// The reply as a single string when it is a status, error, integer or
    /// bulk (lossy UTF-8); `None` for nulls and arrays.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Reply::Status(s) | Reply::Error(s) => Some(s.clone()),
            Reply::Int(i) => Some(i.to_string()),
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            Reply::Bulk(None) | Reply::Array(_) => None,
        }
    }

    /// The reply flattened into text lines: bulk strings are split on
    /// newlines (handy for `CLUSTER INFO` / `CLUSTER NODES`), arrays are
    /// flattened depth-first, nulls become `(nil)`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.push_lines(&mut out);
        out
    }

    fn push_lines(&self, out: &mut Vec<String>) {
        match self {
            Reply::Array(Some(items)) => items.iter().for_each(|i| i.push_lines(out)),
            Reply::Array(None) | Reply::Bulk(None) => out.push("(nil)".into()),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b)
                .lines()
                .for_each(|l| out.push(l.trim_end_matches('\r').to_string())),
            Reply::Error(e) => out.push(format!("ERR: {e}")),
            other => out.extend(other.as_text()),
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Status(s) => write!(f, "{s}"),
            Reply::Error(e) => write!(f, "(error) {e}"),
            Reply::Int(i) => write!(f, "(integer) {i}"),
            Reply::Bulk(None) | Reply::Array(None) => write!(f, "(nil)"),
            Reply::Bulk(Some(b)) => write!(f, "{}", String::from_utf8_lossy(b)),
            Reply::Array(Some(items)) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{}) {item}", i + 1)?;
                }
                Ok(())
            }
        }
    }
}

/// A blocking connection to one node.
pub(crate) struct Conn {
    reader: BufReader<TcpStream>,
    addr: SocketAddr,
}

impl Conn {
    /// Connects with the given timeout, also used for every read and write so
    /// a wedged node turns into an error instead of a hang.
    pub(crate) fn connect(addr: SocketAddr, timeout: Duration) -> Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .with_context(|| format!("connect to {addr}"))?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        // Commands are tiny request/response pairs; Nagle would only add latency.
        stream.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::new(stream),
            addr,
        })
    }

    /// Changes the read/write timeout, e.g. after a quick readiness probe.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> Result<()> {
        let stream = self.reader.get_mut();
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(())
    }

    /// Sends one command and reads its reply. Error replies are returned as
    /// `Ok(Reply::Error)`; only I/O and protocol failures are `Err`.
    pub(crate) fn call<S: AsRef<[u8]>>(&mut self, args: &[S]) -> Result<Reply> {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            let a = a.as_ref();
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a);
            buf.extend_from_slice(b"\r\n");
        }
        // Name the command in errors: "read reply to CLUSTER from ..." is
        // what tells a timeout on a busy node from a dead one.
        let what = args
            .first()
            .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned());
        let (addr, what) = (self.addr, what.unwrap_or_default());
        self.reader
            .get_mut()
            .write_all(&buf)
            .with_context(|| format!("send {what} to {addr}"))?;
        read_reply(&mut self.reader, 0).with_context(|| format!("read reply to {what} from {addr}"))
    }

    /// Like [`Conn::call`] but turns error replies into `Err` and expects text.
    pub(crate) fn call_text<S: AsRef<[u8]>>(&mut self, args: &[S]) -> Result<String> {
        let reply = self.call(args)?.ok()?;
        reply
            .as_text()
            .with_context(|| format!("unexpected reply from {}: {reply}", self.addr))
    }
}

fn read_line<R: BufRead>(r: &mut R) -> Result<String> {
    let mut line = Vec::new();
    let n = r.read_until(b'\n', &mut line)?;
    if n == 0 {
        bail!("connection closed");
    }
    if !line.ends_with(b"\r\n") {
        bail!("truncated line");
    }
    line.truncate(line.len() - 2);
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Parses a length header; `-1` (null) becomes `None`.
fn parse_len(s: &str) -> Result<Option<usize>> {
    let n: i64 = s.parse().with_context(|| format!("bad length {s:?}"))?;
    if n < 0 {
        return Ok(None);
    }
    let n = usize::try_from(n)?;
    if n > MAX_BULK {
        bail!("length {n} too large");
    }
    Ok(Some(n))
}

pub(crate) fn read_reply<R: BufRead>(r: &mut R, depth: usize) -> Result<Reply> {
    if depth > MAX_DEPTH {
        bail!("reply nested too deeply");
    }
    let line = read_line(r)?;
    let (kind, rest) = line.split_at(line.chars().next().map_or(0, char::len_utf8));
    Ok(match kind {
        "+" => Reply::Status(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Int(rest.parse().with_context(|| format!("bad int {rest:?}"))?),
        "$" => Reply::Bulk(match parse_len(rest)? {
            None => None,
            Some(n) => Some(read_exact_crlf(r, n)?),
        }),
        "*" => Reply::Array(match parse_len(rest)? {
            None => None,
            Some(n) => Some(
                (0..n)
                    .map(|_| read_reply(r, depth + 1))
                    .collect::<Result<_>>()?,
            ),
        }),
        _ => bail!("unknown reply type in {line:?}"),
    })
}

fn read_exact_crlf<R: BufRead>(r: &mut R, n: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; n + 2];
    r.read_exact(&mut buf)?;
    if !buf.ends_with(b"\r\n") {
        bail!("bulk string not terminated by CRLF");
    }
    buf.truncate(n);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Reply> {
        read_reply(&mut s.as_bytes(), 0)
    }

    #[test]
    fn parses_all_types() {
        assert_eq!(parse("+OK\r\n").unwrap(), Reply::Status("OK".into()));
        assert_eq!(parse("-ERR x\r\n").unwrap(), Reply::Error("ERR x".into()));
        assert_eq!(parse(":-5\r\n").unwrap(), Reply::Int(-5));
        assert_eq!(parse("$-1\r\n").unwrap(), Reply::Bulk(None));
        assert_eq!(
            parse("$2\r\nhi\r\n").unwrap(),
            Reply::Bulk(Some(b"hi".to_vec()))
        );
        let arr = parse("*2\r\n:1\r\n*-1\r\n").unwrap();
        assert_eq!(
            arr,
            Reply::Array(Some(vec![Reply::Int(1), Reply::Array(None)]))
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("?x\r\n").is_err());
        assert!(parse("$5\r\nhi\r\n").is_err());
        assert!(parse("+OK\n").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn lines_split_bulk_and_flatten() {
        let r = parse("*2\r\n$8\r\na:1\r\nb:2\r\n+x\r\n").unwrap();
        assert_eq!(r.lines(), vec!["a:1", "b:2", "x"]);
    }
}
