//! Turns one complete reply frame, already validated by the connection's
//! `ReplyFramer`, into a `Value`.
//!
//! Bulk and simple strings (nearly every reply a pipeline of reads gets) are
//! sliced straight out of the frame: the framer has already checked that the
//! frame is exactly one well-formed value. Everything else goes through
//! `resp::decode`, which frames the bytes again before building the tree,
//! passes the common case does not need.

use bytes::Bytes;
use resp::Value;

use crate::error::{Error, Result};

/// The value of `frame`, which holds exactly one complete reply.
pub(crate) fn value_of(frame: Bytes) -> Result<Value> {
    if let Some(v) = string_value(&frame) {
        return Ok(v);
    }
    match resp::decode(&frame) {
        Ok(Some((v, _))) => Ok(v),
        Ok(None) => Err(Error::Protocol("framer and decoder disagree".into())),
        Err(e) => Err(Error::Protocol(e.to_string())),
    }
}

/// `$<len>\r\n<payload>\r\n` (not the `$-1` null) or `+<text>\r\n`; `None`
/// for any other kind of frame.
fn string_value(frame: &Bytes) -> Option<Value> {
    let end = frame.len().checked_sub(2)?;
    match frame.first()? {
        b'+' => Some(Value::SimpleString(frame.slice(1..end))),
        b'$' if frame.get(1)?.is_ascii_digit() => {
            // The header holds no CR before its own CRLF; the payload may.
            let header = frame.iter().position(|&b| b == b'\r')?;
            let start = header + 2;
            (start <= end).then(|| Value::BulkString(frame.slice(start..end)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_full_decoder() {
        let frames: &[&[u8]] = &[
            b"$3\r\nabc\r\n",
            b"$0\r\n\r\n",
            b"$4\r\na\r\nb\r\n",
            b"$-1\r\n",
            b"+OK\r\n",
            b"+\r\n",
            b"-ERR x\r\n",
            b":42\r\n",
            b"*2\r\n$1\r\na\r\n:1\r\n",
            b"_\r\n",
        ];
        for f in frames {
            let frame = Bytes::from_static(f);
            let want = resp::decode(&frame).unwrap().unwrap().0;
            assert_eq!(value_of(frame.clone()).unwrap(), want, "{frame:?}");
        }
    }

    #[test]
    fn big_bulk_is_a_slice_of_the_frame() {
        let mut raw = b"$70000\r\n".to_vec();
        raw.extend(std::iter::repeat_n(b'x', 70_000));
        raw.extend_from_slice(b"\r\n");
        let frame = Bytes::from(raw);
        let Value::BulkString(b) = value_of(frame.clone()).unwrap() else {
            panic!("not a bulk string");
        };
        assert_eq!(b.len(), 70_000);
        assert_eq!(b.as_ptr(), frame[8..].as_ptr());
    }
}
