//! The C view of a reply: an owned tree the C caller reads through accessor
//! functions and frees once, so no Rust type layout leaks into the header.

use std::ffi::{c_char, c_int, c_longlong};

use resp::Value;

use crate::error::{Error, Result};

/// Reply types, numbered like hiredis's `REDIS_REPLY_*` for familiarity.
pub const SG_REPLY_STRING: c_int = 1;
pub const SG_REPLY_ARRAY: c_int = 2;
pub const SG_REPLY_INTEGER: c_int = 3;
pub const SG_REPLY_NIL: c_int = 4;
pub const SG_REPLY_STATUS: c_int = 5;
pub const SG_REPLY_ERROR: c_int = 6;
pub const SG_REPLY_DOUBLE: c_int = 7;
pub const SG_REPLY_BOOL: c_int = 8;
pub const SG_REPLY_MAP: c_int = 9;

/// One reply (or one element of an aggregate reply), as C sees it.
#[derive(Debug)]
pub struct SgReply {
    kind: c_int,
    integer: i64,
    double: f64,
    /// The string with a NUL appended (not counted in `len`), if any.
    text: Option<Vec<u8>>,
    elements: Vec<SgReply>,
}

impl SgReply {
    fn scalar(kind: c_int) -> SgReply {
        SgReply {
            kind,
            integer: 0,
            double: 0.0,
            text: None,
            elements: Vec::new(),
        }
    }

    fn text(kind: c_int, bytes: &[u8]) -> SgReply {
        let mut text = Vec::with_capacity(bytes.len() + 1);
        text.extend_from_slice(bytes);
        text.push(0);
        SgReply {
            text: Some(text),
            ..SgReply::scalar(kind)
        }
    }

    fn array(kind: c_int, elements: Vec<SgReply>) -> SgReply {
        SgReply {
            elements,
            ..SgReply::scalar(kind)
        }
    }

    /// A client-side or server error as an error reply.
    pub fn error(e: &Error) -> SgReply {
        let text = match e {
            Error::Server(t) => t.clone(),
            other => format!("ERR slotgate: {other}"),
        };
        SgReply::text(SG_REPLY_ERROR, text.as_bytes())
    }

    pub fn from_result(r: Result<Value>) -> SgReply {
        match r {
            Ok(v) => SgReply::from_value(&v),
            Err(e) => SgReply::error(&e),
        }
    }

    pub fn from_results(rs: Vec<Result<Value>>) -> SgReply {
        SgReply::array(
            SG_REPLY_ARRAY,
            rs.into_iter().map(SgReply::from_result).collect(),
        )
    }

    fn from_value(v: &Value) -> SgReply {
        let all = |vs: &[Value]| vs.iter().map(SgReply::from_value).collect();
        match v {
            Value::SimpleString(b) => SgReply::text(SG_REPLY_STATUS, b),
            Value::Error(b) => SgReply::text(SG_REPLY_ERROR, b),
            Value::BulkString(b) | Value::BigNumber(b) => SgReply::text(SG_REPLY_STRING, b),
            Value::Verbatim { text, .. } => SgReply::text(SG_REPLY_STRING, text),
            Value::Integer(n) => SgReply {
                integer: *n,
                ..SgReply::scalar(SG_REPLY_INTEGER)
            },
            Value::Boolean(b) => SgReply {
                integer: i64::from(*b),
                ..SgReply::scalar(SG_REPLY_BOOL)
            },
            Value::Double(d) => SgReply {
                double: *d,
                ..SgReply::scalar(SG_REPLY_DOUBLE)
            },
            Value::Null | Value::NullArray => SgReply::scalar(SG_REPLY_NIL),
            Value::Array(vs) | Value::Set(vs) | Value::Push(vs) => {
                SgReply::array(SG_REPLY_ARRAY, all(vs))
            }
            Value::Map(pairs) => SgReply::array(
                SG_REPLY_MAP,
                pairs
                    .iter()
                    .flat_map(|(k, v)| [SgReply::from_value(k), SgReply::from_value(v)])
                    .collect(),
            ),
            Value::Attribute { value, .. } => SgReply::from_value(value),
        }
    }

    pub fn kind(&self) -> c_int {
        self.kind
    }

    pub fn integer(&self) -> c_longlong {
        self.integer
    }

    pub fn double(&self) -> f64 {
        self.double
    }

    /// The NUL-terminated string and its length without the NUL.
    pub fn str(&self) -> Option<(*const c_char, usize)> {
        self.text
            .as_ref()
            .map(|t| (t.as_ptr().cast::<c_char>(), t.len() - 1))
    }

    pub fn elements(&self) -> &[SgReply] {
        &self.elements
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn converts_nested_values_and_errors() {
        let v = Value::Array(vec![
            Value::BulkString(Bytes::from_static(b"x")),
            Value::Integer(7),
            Value::Null,
        ]);
        let r = SgReply::from_value(&v);
        assert_eq!(r.kind(), SG_REPLY_ARRAY);
        assert_eq!(r.elements().len(), 3);
        assert_eq!(r.elements()[0].str().map(|(_, n)| n), Some(1));
        assert_eq!(r.elements()[1].integer(), 7);
        assert_eq!(r.elements()[2].kind(), SG_REPLY_NIL);
        let e = SgReply::error(&Error::Timeout);
        assert_eq!(e.kind(), SG_REPLY_ERROR);
    }
}
