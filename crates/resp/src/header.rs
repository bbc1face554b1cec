//! Classification of one reply header line, shared by the framer and `decode`.
//!
//! Keeping every validity rule in one function is what makes [`crate::ReplyFramer`]
//! and [`crate::decode`] agree on which inputs are frames and how long they are.

use crate::error::FrameError;
use crate::num::{parse_double, parse_reply_int};

/// Longest accepted content of a numeric header line (`$`, `*`, `:`...). Real
/// ones are at most 20 digits; the cap stops a broken server from making the
/// framer buffer an endless "number".
pub(crate) const MAX_NUMERIC_LINE: usize = 32;

/// Deepest aggregate nesting `decode` builds into a [`crate::Value`] (the framer has no cap).
pub(crate) const MAX_DEPTH: usize = 1024;

/// What a header line announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Header {
    /// A complete one-line value (`+ - : _ , # (`), content already validated.
    Line,
    /// `len` payload bytes plus CRLF follow (`$`, `!`, `=`).
    Blob { len: usize },
    /// `$-1`.
    NullBulk,
    /// `*-1`.
    NullArray,
    /// An aggregate of `elements` child values: a map or attribute's count is
    /// already doubled, and an attribute also counts the value it decorates.
    Aggregate { elements: u64 },
}

/// The longest line allowed for type `kind`, or `BadType` when `kind` is not a
/// RESP2/RESP3 type byte. `None` means unbounded (string-like lines).
pub(crate) fn line_cap(kind: u8) -> Result<Option<usize>, FrameError> {
    match kind {
        b'+' | b'-' | b',' | b'(' => Ok(None),
        b'$' | b'!' | b'=' | b'*' | b'%' | b'~' | b'>' | b'|' | b':' | b'#' | b'_' => {
            Ok(Some(MAX_NUMERIC_LINE))
        }
        other => Err(FrameError::BadType(other)),
    }
}

/// The error for a capped line that ran past its cap.
pub(crate) fn too_long_error(kind: u8) -> FrameError {
    match kind {
        b':' | b'#' | b'_' => FrameError::BadScalar(kind),
        _ => FrameError::BadLength,
    }
}

/// Validates the content of a header line of type `kind` (without type byte
/// and CRLF) and says what follows it.
pub(crate) fn parse_header(kind: u8, line: &[u8], max_bulk: u64) -> Result<Header, FrameError> {
    let scalar_ok = |ok: bool| {
        if ok {
            Ok(Header::Line)
        } else {
            Err(FrameError::BadScalar(kind))
        }
    };
    match kind {
        // A big number's text is whatever a script gave Redis (`{big_number='123  123'}`
        // reaches the client as `(123  123`): a line like a status, or a shared node
        // connection would be dropped for a reply the server legitimately sent.
        b'+' | b'-' | b'(' => Ok(Header::Line),
        b':' => scalar_ok(parse_reply_int(line).is_some()),
        b'_' => scalar_ok(line.is_empty()),
        b',' => scalar_ok(parse_double(line).is_some()),
        b'#' => scalar_ok(line == b"t" || line == b"f"),
        b'$' | b'!' | b'=' => blob_header(kind, line, max_bulk),
        b'*' | b'%' | b'~' | b'>' | b'|' => aggregate_header(kind, line),
        other => Err(FrameError::BadType(other)),
    }
}

fn blob_header(kind: u8, line: &[u8], max_bulk: u64) -> Result<Header, FrameError> {
    let n = parse_reply_int(line).ok_or(FrameError::BadLength)?;
    if n == -1 && kind == b'$' {
        return Ok(Header::NullBulk);
    }
    let len = u64::try_from(n).map_err(|_| FrameError::BadLength)?;
    if len > max_bulk {
        return Err(FrameError::BadLength);
    }
    // A verbatim string always starts with a 3-byte format and ':'.
    if kind == b'=' && len < 4 {
        return Err(FrameError::BadScalar(kind));
    }
    let len = usize::try_from(len).map_err(|_| FrameError::BadLength)?;
    Ok(Header::Blob { len })
}

fn aggregate_header(kind: u8, line: &[u8]) -> Result<Header, FrameError> {
    let n = parse_reply_int(line).ok_or(FrameError::BadLength)?;
    if n == -1 && kind == b'*' {
        return Ok(Header::NullArray);
    }
    let count = u64::try_from(n).map_err(|_| FrameError::BadLength)?;
    // count <= i64::MAX, so doubling plus one cannot overflow a u64.
    let elements = match kind {
        b'%' => count * 2,
        b'|' => count * 2 + 1,
        _ => count,
    };
    Ok(Header::Aggregate { elements })
}

/// Validates a complete blob payload of type `kind`.
pub(crate) fn check_blob(kind: u8, payload: &[u8]) -> Result<(), FrameError> {
    if kind == b'=' && payload.get(3) != Some(&b':') {
        return Err(FrameError::BadScalar(kind));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_table() {
        let max = u64::MAX;
        let cases: &[(u8, &[u8], Result<Header, FrameError>)] = &[
            (b'+', b"OK", Ok(Header::Line)),
            (b':', b"-12", Ok(Header::Line)),
            (b':', b"1x", Err(FrameError::BadScalar(b':'))),
            (b'_', b"", Ok(Header::Line)),
            (b'_', b"x", Err(FrameError::BadScalar(b'_'))),
            (b',', b"-inf", Ok(Header::Line)),
            (b',', b"one", Err(FrameError::BadScalar(b','))),
            (b'#', b"t", Ok(Header::Line)),
            (b'#', b"true", Err(FrameError::BadScalar(b'#'))),
            (b'(', b"-123", Ok(Header::Line)),
            (b'(', b"123  123", Ok(Header::Line)),
            (b'$', b"-1", Ok(Header::NullBulk)),
            (b'$', b"-2", Err(FrameError::BadLength)),
            (b'$', b"?", Err(FrameError::BadLength)),
            (b'!', b"-1", Err(FrameError::BadLength)),
            (b'=', b"3", Err(FrameError::BadScalar(b'='))),
            (b'$', b"5", Ok(Header::Blob { len: 5 })),
            (b'*', b"-1", Ok(Header::NullArray)),
            (b'%', b"-1", Err(FrameError::BadLength)),
            (b'%', b"2", Ok(Header::Aggregate { elements: 4 })),
            (b'|', b"1", Ok(Header::Aggregate { elements: 3 })),
            (
                b'*',
                b"9223372036854775807",
                Ok(Header::Aggregate {
                    elements: i64::MAX as u64,
                }),
            ),
            (b'x', b"", Err(FrameError::BadType(b'x'))),
        ];
        for (kind, line, want) in cases {
            assert_eq!(
                &parse_header(*kind, line, max),
                want,
                "{} {:?}",
                char::from(*kind),
                line
            );
        }
        assert_eq!(parse_header(b'$', b"11", 10), Err(FrameError::BadLength));
    }
}
