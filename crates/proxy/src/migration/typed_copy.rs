//! Moving a key too big to DUMP at once (`[migration] dump_max_bytes`): its elements are
//! read from the source in slices and written to a temporary key beside it on the target,
//! which is renamed into place at the end. A DUMP of a huge key would be held whole in the
//! proxy's memory and could exceed what the target's RESTORE accepts (`proto-max-bulk-len`,
//! 512 MiB by default); slices keep both bounded.
//!
//! ```text
//!   source (key leased by the take)        target (the key's master)
//!   READ: lease still ours? renew it,  ->  WRITE: RPUSH/HSET/SADD/ZADD/APPEND the slice to
//!         then LRANGE/HSCAN/SSCAN/             `__slotgate:copy:{T}<token>`, which expires
//!         ZSCAN/GETRANGE one slice             unless written again (a dead mover's garbage)
//!   ... until the slices are done ...      FINISH: the key there already? drop the copy
//!                                              (the target's is kept); else RENAME the copy
//!                                              onto the key, with the key's TTL
//! ```
//!
//! Every proxy's gate holds requests for the key while the lease is held, so the key does not
//! change on the source mid-copy and no client sees the copy half-written. Types other than
//! strings, lists, hashes, sets and sorted sets (streams, modules' types) are DUMPed
//! whatever their size; hash fields' own TTLs are not copied (docs/migration.md).

use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use resp::Value;

use super::pipes::{shown, Conns, Side};
use super::Migration;

/// A string's slice, in bytes.
const STRING_SLICE: usize = 1 << 20;
/// A collection's slice, in elements (SCAN's COUNT, a hint the server may exceed a little).
const ITEMS_SLICE: usize = 128;

/// Renews our lease on the key and runs the read in `ARGV[3..]` on it: `{1, reply}`, or
/// `{0}` when the lease is no longer ours.
const READ: &[u8] = b"if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {0} end \
redis.call('PEXPIRE', KEYS[2], ARGV[2]) \
return {1, redis.call(ARGV[3], KEYS[1], unpack(ARGV, 4))}";

/// Runs the write in `ARGV[2..]` on the copy and gives it `ARGV[1]` ms more to live.
const WRITE: &[u8] = b"redis.call(ARGV[2], KEYS[1], unpack(ARGV, 3)) \
redis.call('PEXPIRE', KEYS[1], ARGV[1]) return 1";

/// The key already there: the copy dropped, 0. The copy gone (expired): -1. Else the copy
/// renamed onto the key with the TTL `ARGV[1]` (0: none), 1.
const FINISH: &[u8] = b"if redis.call('EXISTS', KEYS[1]) == 1 then \
redis.call('DEL', KEYS[2]) return 0 end \
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end \
redis.call('RENAME', KEYS[2], KEYS[1]) \
if tonumber(ARGV[1]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) \
else redis.call('PERSIST', KEYS[1]) end return 1";

/// The types copied by slices; the take script names them as TYPE does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    String,
    List,
    Hash,
    Set,
    ZSet,
}

impl Kind {
    pub(crate) fn parse(name: &[u8]) -> Option<Kind> {
        Some(match name {
            b"string" => Kind::String,
            b"list" => Kind::List,
            b"hash" => Kind::Hash,
            b"set" => Kind::Set,
            b"zset" => Kind::ZSet,
            _ => return None,
        })
    }
}

/// How a copy by slices ended.
pub(crate) enum Sliced {
    /// Renamed into place: the bytes read.
    Restored(u64),
    /// The target had the key: its copy kept, ours dropped.
    Kept,
}

/// What one move by slices needs to know.
pub(crate) struct SliceCopy<'a> {
    pub(crate) m: &'a Arc<Migration>,
    pub(crate) conns: &'a Rc<Conns>,
    pub(crate) topology: &'a topology::Topology,
    pub(crate) key: &'a [u8],
    pub(crate) source: &'a str,
    pub(crate) lease: &'a [u8],
    pub(crate) token: &'a [u8],
}

impl SliceCopy<'_> {
    /// Copies the key of type `kind` and puts it in place with `ttl` (RESTORE's: "0" for
    /// none). Err: the key stays on the source; the copy, if any, is dropped or expires.
    pub(crate) async fn run(&self, kind: Kind, ttl: &[u8]) -> Result<Sliced, String> {
        let m = self.m;
        let addr = m
            .target_of(self.topology, self.key)
            .ok_or("no master serves the key's slot")?;
        let mut temp = b"__slotgate:copy:{".to_vec();
        temp.extend_from_slice(super::slot_tag(cluster::key_slot(self.key)).as_bytes());
        temp.push(b'}');
        temp.extend_from_slice(self.token);
        let exists: &[&[u8]] = &[b"EXISTS", self.key];
        if self.on_target(&addr, exists).await? == Value::Integer(1) {
            return Ok(Sliced::Kept);
        }
        let copied = match self.slices(kind, &addr, &temp).await {
            Ok(bytes) => bytes,
            Err(e) => {
                let _ = self.on_target(&addr, &[b"DEL", &temp]).await;
                return Err(e);
            }
        };
        let finish: &[&[u8]] = &[b"EVAL", FINISH, b"2", self.key, &temp, ttl];
        match self.on_target(&addr, finish).await? {
            Value::Integer(1) => {
                m.stats
                    .sliced
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(Sliced::Restored(copied))
            }
            Value::Integer(0) => Ok(Sliced::Kept),
            _ => Err("the copy by slices expired before it was complete".into()),
        }
    }

    /// Every slice read and written; the bytes read.
    async fn slices(&self, kind: Kind, addr: &str, temp: &[u8]) -> Result<u64, String> {
        let mut copied = 0u64;
        let count = ITEMS_SLICE.to_string();
        let mut cursor = Bytes::from_static(b"0");
        let mut at = 0usize;
        loop {
            let (first, last) = (at.to_string(), (at + slice_of(kind) - 1).to_string());
            let read: Vec<&[u8]> = match kind {
                Kind::String => vec![b"GETRANGE", first.as_bytes(), last.as_bytes()],
                Kind::List => vec![b"LRANGE", first.as_bytes(), last.as_bytes()],
                Kind::Hash => vec![b"HSCAN", &cursor, b"COUNT", count.as_bytes()],
                Kind::Set => vec![b"SSCAN", &cursor, b"COUNT", count.as_bytes()],
                Kind::ZSet => vec![b"ZSCAN", &cursor, b"COUNT", count.as_bytes()],
            };
            let reply = self.read(&read).await?;
            let (items, next) = match (kind, reply) {
                (Kind::String, Value::BulkString(b)) => (vec![b], None),
                (Kind::List, Value::Array(items)) => (bulks(items)?, None),
                (_, Value::Array(mut parts)) if parts.len() == 2 => {
                    let Some(Value::Array(items)) = parts.pop() else {
                        return Err(unexpected());
                    };
                    let Some(Value::BulkString(next)) = parts.pop() else {
                        return Err(unexpected());
                    };
                    (bulks(items)?, Some(next))
                }
                _ => return Err(unexpected()),
            };
            let got = match kind {
                Kind::String => items.first().map_or(0, Bytes::len),
                _ => items.len(),
            };
            copied += items.iter().map(|b| b.len() as u64).sum::<u64>();
            if !items.is_empty() && got > 0 {
                self.write(kind, addr, temp, items).await?;
            }
            at += got;
            match next {
                Some(next) if next.as_ref() == b"0" => return Ok(copied),
                Some(next) => cursor = next,
                None if got < slice_of(kind) => return Ok(copied),
                None => {}
            }
        }
    }

    /// One read on the source under our lease, renewed.
    async fn read(&self, read: &[&[u8]]) -> Result<Value, String> {
        let lease_ms = self.m.lease_ms.to_string();
        let mut call: Vec<&[u8]> = vec![
            b"EVAL",
            READ,
            b"2",
            self.key,
            self.lease,
            self.token,
            lease_ms.as_bytes(),
        ];
        call.extend_from_slice(read);
        let reply = self
            .conns
            .calls(self.m, Side::Source, self.source, &[&call])
            .await?;
        let Value::Array(mut parts) = reply else {
            return Err(format!("reading a slice: {}", shown(&reply)));
        };
        match (parts.len(), parts.first()) {
            (2, Some(Value::Integer(1))) => Ok(parts.pop().unwrap_or(Value::Null)),
            _ => Err("the lease expired during a copy by slices".into()),
        }
    }

    /// One slice appended to the copy, which then lives two leases more.
    async fn write(
        &self,
        kind: Kind,
        addr: &str,
        temp: &[u8],
        items: Vec<Bytes>,
    ) -> Result<(), String> {
        let ttl = (self.m.lease_ms * 2).to_string();
        let mut call: Vec<&[u8]> = vec![b"EVAL", WRITE, b"1", temp, ttl.as_bytes()];
        call.push(match kind {
            Kind::String => b"APPEND",
            Kind::List => b"RPUSH",
            Kind::Hash => b"HSET",
            Kind::Set => b"SADD",
            Kind::ZSet => b"ZADD",
        });
        match kind {
            // ZSCAN gives member, score; ZADD takes score, member.
            Kind::ZSet => {
                for pair in items.chunks(2) {
                    let [member, score] = pair else {
                        return Err(unexpected());
                    };
                    call.extend([score.as_ref(), member.as_ref()]);
                }
            }
            _ => call.extend(items.iter().map(Bytes::as_ref)),
        }
        match self.on_target(addr, &call).await? {
            Value::Error(e) => Err(format!(
                "writing a slice on {addr}: {}",
                String::from_utf8_lossy(&e[..e.len().min(200)])
            )),
            _ => Ok(()),
        }
    }

    /// One call on the key's master. A redirect fails the move: the key's slot is moving on
    /// the target, and the next attempt starts over where it lives then.
    async fn on_target(&self, addr: &str, call: &[&[u8]]) -> Result<Value, String> {
        let reply = self
            .conns
            .calls(self.m, Side::Target, addr, &[call])
            .await?;
        if let Value::Error(e) = &reply {
            if cluster::parse_redirect(e).is_some() {
                self.topology.request_refresh_now();
                return Err("the key's slot moved on the target during a copy by slices".into());
            }
        }
        Ok(reply)
    }
}

fn slice_of(kind: Kind) -> usize {
    match kind {
        Kind::String => STRING_SLICE,
        _ => ITEMS_SLICE,
    }
}

fn bulks(items: Vec<Value>) -> Result<Vec<Bytes>, String> {
    items
        .into_iter()
        .map(|v| match v {
            Value::BulkString(b) => Ok(b),
            _ => Err(unexpected()),
        })
        .collect()
}

fn unexpected() -> String {
    "copy by slices: unexpected reply".into()
}
