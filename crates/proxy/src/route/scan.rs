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

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

use super::frames::{array_elements, bulk_body};

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

/// INFO's `# Keyspace` lines summed over the masters' `INFO` replies, per database
/// (`db3:keys=..,expires=..,avg_ttl=..`, avg_ttl weighted by keys); none without keys.
pub(crate) fn keyspace_lines(replies: &[&Bytes]) -> String {
    // Per database (Valkey 9 has numbered ones in cluster mode), each field in the order
    // the nodes print it (Redis 8 adds `subexpiry`): summed, except `avg_ttl`, which is
    // weighted by each node's key count.
    let mut dbs: BTreeMap<u64, Vec<(String, u128)>> = BTreeMap::new();
    for reply in replies.iter().filter(|r| !resp::is_error_frame(r)) {
        for line in bulk_body(reply).split(|&b| b == b'\n') {
            let Some((db, fields)) = db_line(line) else {
                continue;
            };
            let keys = u128::from(field(fields, "keys").unwrap_or(0));
            let sums = dbs.entry(db).or_default();
            for (name, value) in fields_of(fields) {
                let add = match name {
                    "avg_ttl" => u128::from(value) * keys,
                    _ => u128::from(value),
                };
                match sums.iter_mut().find(|(n, _)| n == name) {
                    Some((_, sum)) => *sum += add,
                    None => sums.push((name.to_string(), add)),
                }
            }
        }
    }
    let mut out = String::new();
    for (db, sums) in dbs {
        let keys = sums
            .iter()
            .find(|(n, _)| n == "keys")
            .map_or(0, |(_, k)| *k);
        if keys == 0 {
            continue;
        }
        let fields: Vec<String> = sums
            .iter()
            .map(|(name, sum)| match name.as_str() {
                "avg_ttl" => format!("{name}={}", sum / keys),
                _ => format!("{name}={sum}"),
            })
            .collect();
        out.push_str(&format!("db{db}:{}\r\n", fields.join(",")));
    }
    out
}

/// `db<N>:<fields>` as (N, fields).
fn db_line(line: &[u8]) -> Option<(u64, &[u8])> {
    let rest = line.strip_prefix(b"db")?;
    let colon = rest.iter().position(|&b| b == b':')?;
    let db = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    Some((db, &rest[colon + 1..]))
}

/// `name=value` pairs with a numeric value.
fn fields_of(fields: &[u8]) -> impl Iterator<Item = (&str, u64)> {
    let text = std::str::from_utf8(fields)
        .unwrap_or("")
        .trim_end_matches('\r');
    text.split(',').filter_map(|kv| {
        let (name, value) = kv.split_once('=')?;
        Some((name, value.parse().ok()?))
    })
}

fn field(fields: &[u8], name: &str) -> Option<u64> {
    fields_of(fields).find_map(|(n, v)| (n == name).then_some(v))
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

    #[test]
    fn keyspace_lines_keep_each_database_and_field() {
        // As Redis 8 prints them (subexpiry) and Valkey 9 with numbered databases.
        let a = b("$0\r\n# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0,subexpiry=1\r\ndb3:keys=1,expires=1,avg_ttl=300,subexpiry=0\r\n");
        let c = b("$0\r\n# Keyspace\r\ndb3:keys=3,expires=0,avg_ttl=100,subexpiry=0\r\n");
        assert_eq!(
            keyspace_lines(&[&a, &c]),
            "db0:keys=2,expires=0,avg_ttl=0,subexpiry=1\r\ndb3:keys=4,expires=1,avg_ttl=150,subexpiry=0\r\n"
        );
    }
}
