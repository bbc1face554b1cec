//! Reading and writing the reply frames the merges work on: an array's elements as slices
//! of the frame (no copy), an integer, a bulk string's text. The leaf every merge uses.

use bytes::Bytes;
use resp::ReplyFramer;

/// The elements of an array reply, each as its own frame (a slice, no copy).
pub(crate) fn array_elements(frame: &Bytes) -> Option<Vec<Bytes>> {
    let header_end = frame.windows(2).position(|w| w == b"\r\n")?;
    if !matches!(frame.first(), Some(b'*' | b'~' | b'>')) {
        return None;
    }
    let n: i64 = std::str::from_utf8(&frame[1..header_end])
        .ok()?
        .parse()
        .ok()?;
    let mut pos = header_end + 2;
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for _ in 0..n.max(0) {
        let len = ReplyFramer::new().next_frame(&frame[pos..]).ok()??;
        out.push(frame.slice(pos..pos + len));
        pos += len;
    }
    Some(out)
}

pub(crate) fn parse_int(frame: &Bytes) -> Option<i64> {
    let body = frame.strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    std::str::from_utf8(body).ok()?.parse().ok()
}

pub(crate) fn int_reply(n: i64) -> Bytes {
    Bytes::from(format!(":{n}\r\n"))
}

/// The text of a bulk string frame (`$n\r\ntext\r\n`), or the frame itself if it is not one.
pub(crate) fn bulk_body(frame: &Bytes) -> &[u8] {
    let mut start = frame.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    if frame.first() == Some(&b'=') {
        // A RESP3 verbatim string (Redis 7's INFO over RESP3): `txt:` before the text.
        start += 4;
    }
    frame
        .get(start..frame.len().saturating_sub(2))
        .unwrap_or_default()
}
