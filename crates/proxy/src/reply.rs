//! Replies the proxy writes itself, in Redis's shapes: kept apart so any layer can answer
//! without depending on the router.

use bytes::Bytes;

/// What a request whose slot has no owner in the map gets once its retries are spent
/// (`session/send/mod.rs`): a node's own words for a slot nobody serves.
pub(crate) const NO_ROUTE: &[u8] = b"-CLUSTERDOWN Hash slot not served\r\n";

/// `-ERR <msg>\r\n`, with CR and LF in `msg` turned into spaces as Redis does.
pub(crate) fn error(msg: &str) -> Bytes {
    error_line(&format!("ERR {msg}"))
}

/// `-<line>\r\n` for a line that starts with its own error code (`TRYAGAIN …`), CR and
/// LF turned into spaces.
pub(crate) fn error_line(line: &str) -> Bytes {
    let clean: String = line
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect();
    Bytes::from(format!("-{clean}\r\n"))
}
