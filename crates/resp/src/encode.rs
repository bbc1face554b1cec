//! Writers that append RESP2 wire forms to a buffer.
//!
//! The proxy builds its own replies (errors, `CLUSTER` answers, `PONG`) and
//! commands to backends with these, so every encoder in the crate goes through
//! one place and the output is always well-framed.

use bytes::{BufMut, BytesMut};

use crate::num::{decimal_len, put_i64, put_u64};

/// Appends a multibulk command (`*N` followed by one `$len` bulk per argument).
pub fn encode_command(out: &mut BytesMut, args: &[&[u8]]) {
    out.reserve(command_len(args));
    write_array_header(out, args.len());
    for arg in args {
        write_bulk(out, arg);
    }
}

/// Exact encoded size of [`encode_command`]'s output, so callers reserve once.
pub(crate) fn command_len(args: &[&[u8]]) -> usize {
    let header = 3 + decimal_len(args.len() as u64);
    args.iter().fold(header, |acc, a| {
        acc.saturating_add(5 + decimal_len(a.len() as u64) + a.len())
    })
}

/// Appends `+s\r\n`. CR and LF inside `s` become spaces: a simple string
/// cannot carry them and emitting them would desynchronise the client.
pub fn write_simple(out: &mut BytesMut, s: &[u8]) {
    out.reserve(s.len() + 3);
    out.put_u8(b'+');
    put_sanitized(out, s);
    out.put_slice(b"\r\n");
}

/// Appends `-msg\r\n`; `msg` excludes the `-` and the CRLF (e.g. `ERR oops`).
/// CR and LF inside `msg` become spaces, as Redis does for error replies.
pub fn write_error(out: &mut BytesMut, msg: &[u8]) {
    out.reserve(msg.len() + 3);
    out.put_u8(b'-');
    put_sanitized(out, msg);
    out.put_slice(b"\r\n");
}

/// Appends `:n\r\n`.
pub fn write_int(out: &mut BytesMut, n: i64) {
    out.put_u8(b':');
    put_i64(out, n);
    out.put_slice(b"\r\n");
}

/// Appends `$len\r\nb\r\n`.
pub fn write_bulk(out: &mut BytesMut, b: &[u8]) {
    out.reserve(b.len() + 25);
    out.put_u8(b'$');
    put_u64(out, b.len() as u64);
    out.put_slice(b"\r\n");
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// Appends the RESP2 null bulk string `$-1\r\n`.
pub fn write_null(out: &mut BytesMut) {
    out.put_slice(b"$-1\r\n");
}

/// Appends `*n\r\n`; the caller then writes `n` values.
pub fn write_array_header(out: &mut BytesMut, n: usize) {
    write_header(out, b'*', n);
}

/// Appends the RESP3 map header `%n\r\n`; the caller then writes `n` key-value pairs.
pub fn write_map_header(out: &mut BytesMut, n: usize) {
    write_header(out, b'%', n);
}

/// Appends `<kind>n\r\n` for any length-prefixed type.
pub(crate) fn write_header(out: &mut BytesMut, kind: u8, n: usize) {
    out.put_u8(kind);
    put_u64(out, n as u64);
    out.put_slice(b"\r\n");
}

fn put_sanitized(out: &mut BytesMut, s: &[u8]) {
    if s.iter().any(|&b| b == b'\r' || b == b'\n') {
        out.extend(
            s.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
    } else {
        out.put_slice(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(f: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
        let mut out = BytesMut::new();
        f(&mut out);
        out.to_vec()
    }

    #[test]
    fn writers_produce_resp2() {
        assert_eq!(written(|o| write_simple(o, b"OK")), b"+OK\r\n");
        assert_eq!(written(|o| write_simple(o, b"a\r\nb")), b"+a  b\r\n");
        assert_eq!(written(|o| write_error(o, b"ERR x\ny")), b"-ERR x y\r\n");
        assert_eq!(written(|o| write_int(o, -42)), b":-42\r\n");
        assert_eq!(written(|o| write_bulk(o, b"")), b"$0\r\n\r\n");
        assert_eq!(written(|o| write_bulk(o, b"hi")), b"$2\r\nhi\r\n");
        assert_eq!(written(write_null), b"$-1\r\n");
        assert_eq!(written(|o| write_array_header(o, 3)), b"*3\r\n");
    }

    #[test]
    fn command_len_is_exact() {
        let args: &[&[u8]] = &[b"SET", b"key", b"", &[b'x'; 1234]];
        let out = written(|o| encode_command(o, args));
        assert_eq!(out.len(), command_len(args));
        assert!(out.starts_with(b"*4\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n$1234\r\n"));
    }
}
