//! Cluster-wide iteration and counts that one node cannot give: SCAN over every master with a
//! cursor that says which master it is on, and INFO's keyspace summed over the masters.
//!
//! SCAN cursor layout: `node_cursor << 10 | master_index`. A full iteration starts at master
//! 0, cursor 0; when a master's own cursor comes back 0 the next call moves to the next
//! master, and the proxy returns 0 after the last one. Every key is thus returned by exactly
//! one master, and Redis's SCAN guarantee (each key present throughout is returned at least
//! once) holds per master. The master order is the slot map's; a topology change in the
//! middle of an iteration may make it revisit or skip a master's keys, as resharding does
//! for any cluster-wide SCAN.

use bytes::{Bytes, BytesMut};

use crate::route::merge::array_elements;

/// Bits of the cursor that hold the master index (up to 1024 masters).
const NODE_BITS: u32 = 10;

/// A client's SCAN cursor, split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScanCursor {
    pub node: usize,
    pub node_cursor: u64,
}

/// Parse a client cursor; Err carries Redis's error text.
pub(crate) fn parse_cursor(arg: &[u8], masters: usize) -> Result<ScanCursor, &'static str> {
    let n: u64 = std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("invalid cursor")?;
    let node = (n & ((1 << NODE_BITS) - 1)) as usize;
    if node >= masters.max(1) {
        return Err("invalid cursor");
    }
    Ok(ScanCursor {
        node,
        node_cursor: n >> NODE_BITS,
    })
}

/// The master's SCAN reply `[next, [keys…]]` with `next` turned into the proxy's cursor.
pub(crate) fn rewrite_reply(reply: &Bytes, node: usize, masters: usize) -> Bytes {
    let Some(parts) = array_elements(reply).filter(|p| p.len() == 2) else {
        return reply.clone();
    };
    let next = std::str::from_utf8(bulk_body(&parts[0]))
        .ok()
        .and_then(|s| s.parse::<u64>().ok());
    let Some(next) = next else {
        return reply.clone();
    };
    let cursor = match next {
        0 if node + 1 < masters => (node + 1) as u64,
        0 => 0,
        n if n >> (64 - NODE_BITS) != 0 => {
            return crate::reply::error("slotgate: SCAN cursor out of range")
        }
        n => (n << NODE_BITS) | node as u64,
    };
    let mut out = BytesMut::new();
    resp::write_array_header(&mut out, 2);
    resp::write_bulk(&mut out, cursor.to_string().as_bytes());
    out.extend_from_slice(&parts[1]);
    out.freeze()
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

/// INFO's `# Keyspace` lines summed over the masters' `INFO` replies
/// (`db0:keys=..,expires=..,avg_ttl=..`, avg_ttl weighted by keys); none without keys.
pub(crate) fn keyspace_lines(replies: &[&Bytes]) -> String {
    let (mut keys, mut expires, mut ttl_weighted) = (0u64, 0u64, 0u128);
    for reply in replies.iter().filter(|r| !resp::is_error_frame(r)) {
        for line in bulk_body(reply).split(|&b| b == b'\n') {
            let Some(fields) = line.strip_prefix(b"db0:") else {
                continue;
            };
            let get = |name: &str| field(fields, name).unwrap_or(0);
            keys += get("keys");
            expires += get("expires");
            ttl_weighted += u128::from(get("avg_ttl")) * u128::from(get("keys"));
        }
    }
    if keys == 0 {
        return String::new();
    }
    let avg_ttl = ttl_weighted.checked_div(u128::from(keys)).unwrap_or(0);
    format!("db0:keys={keys},expires={expires},avg_ttl={avg_ttl}\r\n")
}

fn field(fields: &[u8], name: &str) -> Option<u64> {
    let text = std::str::from_utf8(fields).ok()?.trim_end_matches('\r');
    text.split(',')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn cursors_walk_the_masters_in_order() {
        assert_eq!(
            parse_cursor(b"0", 3),
            Ok(ScanCursor {
                node: 0,
                node_cursor: 0
            })
        );
        assert_eq!(parse_cursor(b"x", 3), Err("invalid cursor"));
        assert_eq!(parse_cursor(b"5", 3), Err("invalid cursor"));
        let page = b("*2\r\n$2\r\n17\r\n*1\r\n$1\r\na\r\n");
        assert_eq!(
            rewrite_reply(&page, 1, 3),
            b("*2\r\n$5\r\n17409\r\n*1\r\n$1\r\na\r\n")
        );
        assert_eq!(
            parse_cursor(b"17409", 3),
            Ok(ScanCursor {
                node: 1,
                node_cursor: 17
            })
        );
        let last = b("*2\r\n$1\r\n0\r\n*0\r\n");
        assert_eq!(rewrite_reply(&last, 1, 3), b("*2\r\n$1\r\n2\r\n*0\r\n"));
        assert_eq!(rewrite_reply(&last, 2, 3), b("*2\r\n$1\r\n0\r\n*0\r\n"));
    }

    #[test]
    fn keyspace_lines_are_summed() {
        let a = b("$47\r\n# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=100\r\n\r\n");
        let c = b("$13\r\n# Keyspace\r\n\r\n");
        let err = b("-ERR down\r\n");
        assert_eq!(
            keyspace_lines(&[&a, &a, &c, &err]),
            "db0:keys=6,expires=2,avg_ttl=100\r\n"
        );
        assert_eq!(keyspace_lines(&[&c]), "");
    }
}
