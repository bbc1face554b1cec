//! Typed errors for both directions of the protocol.
//!
//! [`ProtocolError`] is what a client did wrong; its `Display` is Redis's exact
//! error text so the proxy answers malformed input byte-for-byte like a Redis
//! server would. [`FrameError`] is what a server reply did wrong; it never goes
//! to a client verbatim, it only tells the proxy to drop the backend connection.

use bytes::{BufMut, Bytes, BytesMut};

/// A malformed client request. The caller should send [`ProtocolError::to_resp`]
/// and then close the connection, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// `*N` where N is not a number (Redis's `string2ll` rules) or exceeds the limit.
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$N` where N is not a number, is negative or exceeds the limit.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// A bulk header line did not start with `$`; carries the offending byte.
    #[error("Protocol error: expected '$', got '{}'", display_byte(*.0))]
    ExpectedDollar(u8),
    /// The `*N` line exceeded `max_inline_len` bytes without a `\r`.
    #[error("Protocol error: too big mbulk count string")]
    TooBigMbulkCount,
    /// A `$N` line exceeded `max_inline_len` bytes without a `\r`.
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// An inline request exceeded `max_inline_len` bytes without a `\n`.
    #[error("Protocol error: too big inline request")]
    TooBigInline,
    /// An inline request has an unterminated quote or a closing quote not
    /// followed by whitespace.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// More than 10 arguments before authentication.
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// A bulk longer than 16384 bytes before authentication.
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// A bulk payload not followed by `\r\n` (stricter than Redis, which skips
    /// two bytes without looking at them; Valkey 9 checks too, in these words).
    #[error("Protocol error: invalid CRLF in request")]
    MissingCrlfAfterBulk,
    /// A `*N`/`$N` line whose `\r` is not followed by `\n` (stricter than Redis,
    /// which skips the byte after `\r` without looking at it; Valkey 9 checks too).
    #[error("Protocol error: invalid CRLF in request")]
    MissingCrlfAfterLength,
}

/// How Redis prints the byte in "expected '$', got '%c'": CR and LF become
/// spaces (Redis sanitises error text). Non-ASCII bytes cannot be shown in a
/// `String` as-is, so `Display` uses `\xHH` for them; [`ProtocolError::to_resp`]
/// writes the raw byte like Redis.
fn display_byte(b: u8) -> String {
    match b {
        b'\r' | b'\n' => " ".to_string(),
        0x20..=0x7e => char::from(b).to_string(),
        _ => format!("\\x{b:02x}"),
    }
}

impl ProtocolError {
    /// The complete RESP error reply, `-ERR <text>\r\n`, byte-identical to Redis.
    pub fn to_resp(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(64);
        out.put_slice(b"-ERR ");
        match self {
            ProtocolError::ExpectedDollar(b) => {
                out.put_slice(b"Protocol error: expected '$', got '");
                out.put_u8(if matches!(b, b'\r' | b'\n') { b' ' } else { *b });
                out.put_slice(b"'");
            }
            other => out.put_slice(other.to_string().as_bytes()),
        }
        out.put_slice(b"\r\n");
        out.freeze()
    }
}

/// A malformed server reply. The stream cannot be resynchronised after one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The first byte of a value is not a RESP2/RESP3 type byte.
    #[error("invalid reply type byte 0x{0:02x}")]
    BadType(u8),
    /// A length or count is not a number, is out of range, or the line holding
    /// it is too long. Streamed (`?`) lengths are not supported.
    #[error("invalid length in reply")]
    BadLength,
    /// Aggregates nested deeper than the framer's limit.
    #[error("reply nested too deeply")]
    TooDeep,
    /// A `\r` not followed by `\n`, or a payload not followed by `\r\n`.
    #[error("malformed line in reply")]
    BadLine,
    /// The content of a scalar line (`:`, `,`, `#`, `_`, `(`) or a verbatim
    /// string's format prefix is invalid; carries the type byte.
    #[error("invalid content for reply type '{}'", char::from(*.0))]
    BadScalar(u8),
}
