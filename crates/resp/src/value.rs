//! A decoded RESP2/RESP3 value, for the few replies the proxy must read
//! (`CLUSTER SLOTS`, `HELLO`, `INFO`...) and for building replies.
//!
//! Decoding frames first with [`ReplyFramer`] (so `decode` and the framer can
//! never disagree, and validation lives in one place) and then builds the tree
//! with an explicit stack; strings are `Bytes` slices of the input.

use bytes::Bytes;

use crate::error::FrameError;
use crate::header::{parse_header, Header, MAX_DEPTH};
use crate::num::{parse_double, parse_reply_int};
use crate::reply_framer::ReplyFramer;

/// One RESP value. RESP3-only variants have a documented RESP2 downgrade
/// ([`Value::encode_resp2`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `+text`.
    SimpleString(Bytes),
    /// `-text` or RESP3 `!` blob error; the text excludes `-` and CRLF.
    Error(Bytes),
    /// `:n`.
    Integer(i64),
    /// `$len` payload.
    BulkString(Bytes),
    /// `$-1` or RESP3 `_`.
    Null,
    /// `*-1`.
    NullArray,
    /// `*n`.
    Array(Vec<Value>),
    /// RESP3 `%n`, in wire order.
    Map(Vec<(Value, Value)>),
    /// RESP3 `~n`.
    Set(Vec<Value>),
    /// RESP3 `>n` out-of-band push.
    Push(Vec<Value>),
    /// RESP3 `,` double.
    Double(f64),
    /// RESP3 `#t` / `#f`.
    Boolean(bool),
    /// RESP3 `(` big number, as its decimal digits (optional sign).
    BigNumber(Bytes),
    /// RESP3 `=` verbatim string: a 3-byte `format` (`txt`, `mkd`) and `text`.
    Verbatim {
        /// The format tag, 3 bytes.
        format: Bytes,
        /// The text after `format:`.
        text: Bytes,
    },
    /// RESP3 `|` attributes decorating the value that follows them.
    Attribute {
        /// Attribute key/value pairs, in wire order.
        attrs: Vec<(Value, Value)>,
        /// The decorated value.
        value: Box<Value>,
    },
}

impl Value {
    /// The string content of a simple, bulk, verbatim (text part) or big number
    /// value; `None` for errors and everything else. Looks through attributes.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::SimpleString(b) | Value::BulkString(b) | Value::BigNumber(b) => Some(b),
            Value::Verbatim { text, .. } => Some(text),
            Value::Attribute { value, .. } => value.as_bytes(),
            _ => None,
        }
    }

    /// The value of an integer reply; `None` for anything else (strings are
    /// not parsed). Looks through attributes.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Integer(n) => Some(*n),
            Value::Attribute { value, .. } => value.as_int(),
            _ => None,
        }
    }

    /// The elements of an array, set or push; `None` otherwise (maps are
    /// pairs, see the `Map` variant). Looks through attributes.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(v) | Value::Set(v) | Value::Push(v) => Some(v),
            Value::Attribute { value, .. } => value.as_array(),
            _ => None,
        }
    }
}

/// Decodes one value from the start of `buf`: `Ok(Some((value, consumed)))`,
/// or `Ok(None)` when `buf` holds only part of a value. Strings in the value
/// are slices of `buf` (no payload copies). Accepts exactly what
/// [`ReplyFramer`] accepts, and `consumed` equals its frame length.
pub fn decode(buf: &Bytes) -> Result<Option<(Value, usize)>, FrameError> {
    let Some(len) = ReplyFramer::new().next_frame(buf)? else {
        return Ok(None);
    };
    let frame = buf.slice(..len);
    Ok(Some((build(&frame)?, len)))
}

/// An aggregate whose children are still being read.
struct Open {
    kind: u8,
    remaining: u64,
    items: Vec<Value>,
}

/// One element read from a validated frame.
enum Item {
    Leaf(Value),
    Aggregate { kind: u8, elements: u64 },
}

/// Builds the value of a frame the framer has validated, without recursion.
fn build(frame: &Bytes) -> Result<Value, FrameError> {
    let mut stack: Vec<Open> = Vec::new();
    let mut pos = 0;
    loop {
        let (item, next) = read_item(frame, pos)?;
        pos = next;
        let mut value = match item {
            Item::Leaf(v) => v,
            Item::Aggregate { kind, elements: 0 } => finish(kind, Vec::new())?,
            Item::Aggregate { kind, elements } => {
                // The framer frames any depth; a tree of values is capped, because dropping
                // one recurses once per level.
                if stack.len() >= MAX_DEPTH {
                    return Err(FrameError::TooDeep);
                }
                // The frame is complete, so each element needs >= 3 bytes of it.
                let cap = usize::try_from(elements).unwrap_or(usize::MAX);
                let cap = cap.min(frame.len().saturating_sub(pos) / 3 + 1);
                stack.push(Open {
                    kind,
                    remaining: elements,
                    items: Vec::with_capacity(cap),
                });
                continue;
            }
        };
        loop {
            let Some(top) = stack.last_mut() else {
                return Ok(value);
            };
            top.items.push(value);
            top.remaining -= 1;
            if top.remaining > 0 {
                break;
            }
            let Some(done) = stack.pop() else {
                return Err(FrameError::BadLength);
            };
            value = finish(done.kind, done.items)?;
        }
    }
}

/// Reads the element at `pos`; returns it and the offset after it.
fn read_item(frame: &Bytes, pos: usize) -> Result<(Item, usize), FrameError> {
    let kind = *frame.get(pos).ok_or(FrameError::BadLine)?;
    let line_start = pos + 1;
    let rest = frame.get(line_start..).ok_or(FrameError::BadLine)?;
    let cr = line_start
        + rest
            .iter()
            .position(|&b| b == b'\r')
            .ok_or(FrameError::BadLine)?;
    let line = frame.slice(line_start..cr);
    let next = cr + 2;
    let leaf = match parse_header(kind, &line, u64::MAX)? {
        Header::Line => line_value(kind, line)?,
        Header::NullBulk => Value::Null,
        Header::NullArray => Value::NullArray,
        Header::Aggregate { elements } => return Ok((Item::Aggregate { kind, elements }, next)),
        Header::Blob { len } => {
            let end = next.checked_add(len).ok_or(FrameError::BadLength)?;
            if end.checked_add(2).is_none_or(|e| e > frame.len()) {
                return Err(FrameError::BadLine);
            }
            return Ok((
                Item::Leaf(blob_value(kind, frame.slice(next..end))?),
                end + 2,
            ));
        }
    };
    Ok((Item::Leaf(leaf), next))
}

fn line_value(kind: u8, line: Bytes) -> Result<Value, FrameError> {
    let bad = FrameError::BadScalar(kind);
    Ok(match kind {
        b'+' => Value::SimpleString(line),
        b'-' => Value::Error(line),
        b':' => Value::Integer(parse_reply_int(&line).ok_or(bad)?),
        b'_' => Value::Null,
        b',' => Value::Double(parse_double(&line).ok_or(bad)?),
        b'#' => Value::Boolean(&line[..] == b"t"),
        b'(' => Value::BigNumber(line),
        _ => return Err(bad),
    })
}

fn blob_value(kind: u8, payload: Bytes) -> Result<Value, FrameError> {
    Ok(match kind {
        b'$' => Value::BulkString(payload),
        b'!' => Value::Error(payload),
        b'=' if payload.get(3) == Some(&b':') => Value::Verbatim {
            format: payload.slice(..3),
            text: payload.slice(4..),
        },
        _ => return Err(FrameError::BadScalar(kind)),
    })
}

/// Turns a completed aggregate's children into its value.
fn finish(kind: u8, mut items: Vec<Value>) -> Result<Value, FrameError> {
    Ok(match kind {
        b'*' => Value::Array(items),
        b'~' => Value::Set(items),
        b'>' => Value::Push(items),
        b'%' => Value::Map(pairs(items)),
        b'|' => {
            let value = items.pop().ok_or(FrameError::BadLength)?;
            Value::Attribute {
                attrs: pairs(items),
                value: Box::new(value),
            }
        }
        other => return Err(FrameError::BadType(other)),
    })
}

fn pairs(items: Vec<Value>) -> Vec<(Value, Value)> {
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    out
}
