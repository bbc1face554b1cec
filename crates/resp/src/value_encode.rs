//! Encoding [`Value`]s, natively (RESP3) or downgraded for RESP2 clients.
//!
//! A RESP2 client cannot parse RESP3 types, so the proxy must downgrade
//! replies it builds or re-encodes; Redis's own RESP2 mapping is followed.
//! Encoders never emit an unframed CR/LF: text that cannot carry one is
//! sanitised (CR/LF become spaces, as Redis does for error text).

use bytes::{BufMut, BytesMut};

use crate::encode::{write_bulk, write_error, write_header, write_int, write_null, write_simple};
use crate::num::put_f64;
use crate::value::Value;

/// Which protocol version to write.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    Resp2,
    Resp3,
}

impl Value {
    /// Appends the native encoding: RESP2 types as RESP2, RESP3 types in their
    /// RESP3 form (`Null` as `_`). Simple strings and big numbers have CR/LF
    /// replaced by spaces; an error containing CR/LF is written as a `!` blob
    /// error so it survives intact. A verbatim `format` that is not 3 bytes is
    /// written as `txt`.
    pub fn encode(&self, out: &mut BytesMut) {
        encode_value(self, out, Proto::Resp3);
    }

    /// Appends the RESP2 downgrade: map → flat array of key, value, ...;
    /// set/push → array; double → bulk string; boolean → integer 1/0;
    /// `Null` → `$-1`; big number → bulk string; verbatim → bulk string of its
    /// text; attributes are dropped (only the decorated value is written).
    /// Error text has CR/LF replaced by spaces.
    pub fn encode_resp2(&self, out: &mut BytesMut) {
        encode_value(self, out, Proto::Resp2);
    }
}

/// Recursion depth equals the value's nesting, which the caller built (or
/// `decode` capped at 1024 levels), so it stays small.
fn encode_value(value: &Value, out: &mut BytesMut, proto: Proto) {
    let resp3 = proto == Proto::Resp3;
    match value {
        Value::SimpleString(s) => write_simple(out, s),
        Value::Error(e) if resp3 && e.iter().any(|&b| b == b'\r' || b == b'\n') => {
            write_header(out, b'!', e.len());
            out.put_slice(e);
            out.put_slice(b"\r\n");
        }
        Value::Error(e) => write_error(out, e),
        Value::Integer(n) => write_int(out, *n),
        Value::BulkString(b) => write_bulk(out, b),
        Value::Null if resp3 => out.put_slice(b"_\r\n"),
        Value::Null => write_null(out),
        Value::NullArray => out.put_slice(b"*-1\r\n"),
        Value::Array(items) => encode_seq(out, b'*', items, proto),
        Value::Set(items) => encode_seq(out, if resp3 { b'~' } else { b'*' }, items, proto),
        Value::Push(items) => encode_seq(out, if resp3 { b'>' } else { b'*' }, items, proto),
        Value::Map(pairs) if resp3 => encode_pairs(out, b'%', pairs.len(), pairs, proto),
        Value::Map(pairs) => encode_pairs(out, b'*', pairs.len().saturating_mul(2), pairs, proto),
        Value::Double(d) => encode_double(out, *d, proto),
        Value::Boolean(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Value::Boolean(b) => write_int(out, i64::from(*b)),
        Value::BigNumber(n) if resp3 => {
            out.put_u8(b'(');
            out.extend(
                n.iter()
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
            out.put_slice(b"\r\n");
        }
        Value::BigNumber(n) => write_bulk(out, n),
        Value::Verbatim { format, text } if resp3 => encode_verbatim(out, format, text),
        Value::Verbatim { text, .. } => write_bulk(out, text),
        Value::Attribute { attrs, value } => {
            if resp3 {
                encode_pairs(out, b'|', attrs.len(), attrs, proto);
            }
            encode_value(value, out, proto);
        }
    }
}

fn encode_seq(out: &mut BytesMut, kind: u8, items: &[Value], proto: Proto) {
    write_header(out, kind, items.len());
    for item in items {
        encode_value(item, out, proto);
    }
}

fn encode_pairs(
    out: &mut BytesMut,
    kind: u8,
    count: usize,
    pairs: &[(Value, Value)],
    proto: Proto,
) {
    write_header(out, kind, count);
    for (k, v) in pairs {
        encode_value(k, out, proto);
        encode_value(v, out, proto);
    }
}

fn encode_double(out: &mut BytesMut, d: f64, proto: Proto) {
    if proto == Proto::Resp3 {
        out.put_u8(b',');
        put_f64(out, d);
        out.put_slice(b"\r\n");
    } else {
        let mut text = BytesMut::with_capacity(32);
        put_f64(&mut text, d);
        write_bulk(out, &text);
    }
}

fn encode_verbatim(out: &mut BytesMut, format: &[u8], text: &[u8]) {
    let format: &[u8] = if format.len() == 3 { format } else { b"txt" };
    write_header(out, b'=', 4 + text.len());
    out.put_slice(format);
    out.put_u8(b':');
    out.put_slice(text);
    out.put_slice(b"\r\n");
}
