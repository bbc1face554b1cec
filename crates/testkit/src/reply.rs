//! What a script answers, and helpers that encode the common RESP2 replies.

use bytes::BytesMut;

use crate::Range;

/// A script's decision for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The built-in answer (`State::default_reply`).
    Default,
    /// These exact bytes (one or more RESP frames, or a deliberately broken one).
    Bytes(Vec<u8>),
    /// Never answer this request nor any later one on this connection (a stuck node).
    Hang,
    /// Write these bytes (possibly half a frame), then close the connection.
    CloseAfter(Vec<u8>),
    /// Answer with these bytes after a pause (a slow node); the connection waits meanwhile.
    Delayed(std::time::Duration, Vec<u8>),
}

fn encoded(f: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut out = BytesMut::new();
    f(&mut out);
    out.to_vec()
}

pub fn ok() -> Vec<u8> {
    simple("OK")
}

pub fn simple(s: &str) -> Vec<u8> {
    encoded(|o| resp::write_simple(o, s.as_bytes()))
}

/// An error reply; `msg` excludes the leading `-`.
pub fn error(msg: &str) -> Vec<u8> {
    encoded(|o| resp::write_error(o, msg.as_bytes()))
}

pub fn bulk(b: &[u8]) -> Vec<u8> {
    encoded(|o| resp::write_bulk(o, b))
}

pub fn null() -> Vec<u8> {
    encoded(resp::write_null)
}

pub fn int(n: i64) -> Vec<u8> {
    encoded(|o| resp::write_int(o, n))
}

/// `-MOVED <slot> <addr>`.
pub fn moved(slot: u16, addr: impl std::fmt::Display) -> Vec<u8> {
    error(&format!("MOVED {slot} {addr}"))
}

/// `-ASK <slot> <addr>`.
pub fn ask(slot: u16, addr: impl std::fmt::Display) -> Vec<u8> {
    error(&format!("ASK {slot} {addr}"))
}

/// A `CLUSTER SLOTS` reply: `[start, end, [host, port, id]]` per range (no replicas).
pub fn cluster_slots(ranges: &[Range]) -> Vec<u8> {
    encoded(|o| {
        resp::write_array_header(o, ranges.len());
        for r in ranges {
            resp::write_array_header(o, 3);
            resp::write_int(o, i64::from(r.start));
            resp::write_int(o, i64::from(r.end));
            resp::write_array_header(o, 3);
            resp::write_bulk(o, r.host.as_bytes());
            resp::write_int(o, i64::from(r.port));
            resp::write_bulk(o, r.id.as_bytes());
        }
    })
}

/// The CRC16 (XMODEM) hash slot of `key`, honouring `{hash tags}`, as Redis computes it.
pub fn slot_of(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(tagged) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on a real server.
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        assert_eq!(slot_of(b"{}x"), slot_of(b"{}x"));
    }
}
