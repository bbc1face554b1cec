//! The keys a client in tracking's default mode has read, so that it gets the invalidations
//! of those keys and no others, as from one Redis.
//!
//! Redis remembers, per client, the keys of the read-only commands it ran, and sends one
//! invalidation when such a key changes, then forgets the key until it is read again. The
//! proxy's reads run on the worker's shared tracked connections (`READS`, `own.rs`), so
//! the nodes remember them per connection, not per client: the session keeps its client's
//! table itself, and an invalidation reaches the client only for keys in its table:
//!
//! ```text
//!   GET a ──▶ table {a}            (read-only command: its keys; OPTIN/OPTOUT as CLIENT CACHING says)
//!   >invalidate [a, b] from a master ──▶ >invalidate [a] to the client; table {}
//!   >invalidate (null), a flush ──▶ passed on; table {}
//! ```
//!
//! A key is remembered when its read is sent, not when answered: an invalidation that
//! arrives before the read's reply then still reaches the client, after that reply
//! (`owed.rs`). Sending one invalidation too many is safe (the client reads the key
//! again); missing one is not, so every doubt goes the safe way: a NOLOOP client past
//! `own.rs`'s bound still hears of its own writes, and a read inside MULTI is remembered
//! when queued.

use std::collections::HashSet;

use bytes::{Bytes, BytesMut};
use cluster::command::flags::READONLY;
use resp::{Request, Value};

use crate::reply::error;

/// Keys remembered per client; past it, a key is forgotten and invalidated, as Redis does
/// past `tracking-table-max-keys` (whose default, 1M, is for the whole server).
pub(crate) const MAX_KEYS: usize = 100_000;

/// Which reads are remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Every read.
    All,
    /// Only the command right after `CLIENT CACHING yes`.
    OptIn,
    /// Every read but the command right after `CLIENT CACHING no`.
    OptOut,
}

/// One client's tracked keys.
pub(crate) struct KeyTable {
    keys: HashSet<Bytes>,
    mode: Mode,
    /// What `CLIENT CACHING` said for the next command, until that command is sent.
    next: Option<bool>,
}

impl KeyTable {
    pub(crate) fn new(mode: Mode) -> KeyTable {
        KeyTable {
            keys: HashSet::new(),
            mode,
            next: None,
        }
    }

    /// CLIENT TRACKING ON again: the new options replace the old (the keys stay).
    pub(crate) fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether no key is tracked.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether a `CLIENT CACHING` waits for the next command (TRACKINGINFO's
    /// `caching-yes`/`caching-no`).
    pub(crate) fn caching_asked(&self) -> bool {
        self.next.is_some()
    }

    /// `CLIENT CACHING yes|no`, with Redis's error texts.
    pub(crate) fn caching(&mut self, arg: &[u8]) -> Result<(), Bytes> {
        let yes = match arg.to_ascii_lowercase().as_slice() {
            b"yes" => true,
            b"no" => false,
            _ => return Err(error("syntax error")),
        };
        match (self.mode, yes) {
            (Mode::OptIn, true) | (Mode::OptOut, false) => {
                self.next = Some(yes);
                Ok(())
            }
            (_, true) => Err(error(
                "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            )),
            (_, false) => Err(error(
                "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            )),
        }
    }

    /// A request being sent: remember its keys if it reads and the mode says so. Returns
    /// the keys forgotten to stay under `MAX_KEYS` (the client must be told).
    pub(crate) fn note_request(&mut self, req: &Request, in_tx: bool) -> Vec<Bytes> {
        let spec = cluster::lookup(req.arg(0)).map(|s| s.resolve(req.argc(), |i| req.arg(i)));
        if spec.is_some_and(|s| s.name.starts_with("client|")) {
            // As Redis: a CLIENT command (CACHING, TRACKINGINFO…) leaves CACHING's word
            // for the command after it.
            return Vec::new();
        }
        let caching = match self.mode {
            Mode::All => true,
            Mode::OptIn => self.next == Some(true),
            Mode::OptOut => self.next != Some(false),
        };
        // As Redis: CLIENT CACHING covers the next command, or a whole transaction.
        let ends_tx = [&b"exec"[..], b"discard"]
            .iter()
            .any(|n| req.arg(0).eq_ignore_ascii_case(n));
        if !in_tx || ends_tx {
            self.next = None;
        }
        let Some(spec) = spec.filter(|s| caching && (s.has(READONLY) || runs_code(s.name))) else {
            return Vec::new();
        };
        let Ok(positions) = spec.key_positions(req.argc(), |i| req.arg(i)) else {
            return Vec::new();
        };
        for i in positions.iter() {
            // A copy: a slice of the read buffer would keep the whole chunk it came in
            // alive for as long as the key is tracked (review S9).
            let key = req.arg(i);
            if !self.keys.contains(key) {
                self.keys.insert(Bytes::copy_from_slice(key));
            }
        }
        self.evict()
    }

    fn evict(&mut self) -> Vec<Bytes> {
        let over = self.keys.len().saturating_sub(MAX_KEYS);
        let gone: Vec<Bytes> = self.keys.iter().take(over).cloned().collect();
        gone.iter().for_each(|k| {
            self.keys.remove(k);
        });
        gone
    }

    /// An `invalidate` push from a master: the one the client gets, if any. A flush (null)
    /// empties the table and is passed on; so is anything that is not an invalidation.
    pub(crate) fn filter(&mut self, frame: &Bytes) -> Option<Bytes> {
        let Ok(Some((Value::Push(items), _))) = resp::decode(frame) else {
            return Some(frame.clone());
        };
        let keys = match items.as_slice() {
            [Value::BulkString(kind), Value::Array(keys)] if &kind[..] == b"invalidate" => keys,
            _ => {
                self.keys.clear();
                return Some(frame.clone());
            }
        };
        let ours: Vec<Bytes> = keys
            .iter()
            .filter_map(|k| match k {
                Value::BulkString(k) if self.keys.remove(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        (!ours.is_empty()).then(|| invalidation(&ours))
    }
}

/// A script or function call: Redis tracks the keys its code reads. The table keeps every
/// key the call declares; the node, which sees what the code read, tells only of those
/// (the default mode's connections are tracked by the nodes: `own.rs`).
fn runs_code(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// An `invalidate` push with only the keys `keep` accepts: None when none is left. A flush
/// (null) and anything else pass as they are.
pub(crate) fn keep_only(frame: &Bytes, keep: impl Fn(&[u8]) -> bool) -> Option<Bytes> {
    let Ok(Some((Value::Push(items), _))) = resp::decode(frame) else {
        return Some(frame.clone());
    };
    let [Value::BulkString(kind), Value::Array(keys)] = items.as_slice() else {
        return Some(frame.clone());
    };
    if &kind[..] != b"invalidate" {
        return Some(frame.clone());
    }
    let kept: Vec<Bytes> = keys
        .iter()
        .filter_map(|k| match k {
            Value::BulkString(k) if keep(k) => Some(k.clone()),
            _ => None,
        })
        .collect();
    match kept.len() {
        0 => None,
        n if n == keys.len() => Some(frame.clone()),
        _ => Some(invalidation(&kept)),
    }
}

/// An invalidation cut into one per group: `group` names each key's group (None: drop
/// it); the messages come in the groups' order. Anything but an invalidation of keys
/// passes whole.
pub(crate) fn split_by(frame: &Bytes, group: impl Fn(&[u8]) -> Option<usize>) -> Vec<Bytes> {
    let Ok(Some((Value::Push(items), _))) = resp::decode(frame) else {
        return vec![frame.clone()];
    };
    let [Value::BulkString(kind), Value::Array(keys)] = items.as_slice() else {
        return vec![frame.clone()];
    };
    if &kind[..] != b"invalidate" {
        return vec![frame.clone()];
    }
    let mut grouped: Vec<(usize, Bytes)> = keys
        .iter()
        .filter_map(|k| match k {
            Value::BulkString(k) => group(k).map(|g| (g, k.clone())),
            _ => None,
        })
        .collect();
    // Stable: keys keep their order within a group.
    grouped.sort_by_key(|(g, _)| *g);
    grouped
        .chunk_by(|a, b| a.0 == b.0)
        .map(|run| invalidation(&run.iter().map(|(_, k)| k.clone()).collect::<Vec<_>>()))
        .collect()
}

/// `>2 invalidate [keys…]`, as Redis sends it.
pub(crate) fn invalidation(keys: &[Bytes]) -> Bytes {
    let mut out = BytesMut::new();
    out.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    resp::write_array_header(&mut out, keys.len());
    keys.iter().for_each(|k| resp::write_bulk(&mut out, k));
    out.freeze()
}

/// CLIENT CACHING outside OPTIN/OPTOUT tracking.
pub(crate) fn not_opt() -> Bytes {
    error("CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::session::tracking) fn req(args: &[&str]) -> Request {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        Request::from_args(&args)
    }

    /// An `invalidate` push naming `keys`.
    pub(in crate::session::tracking) fn push(keys: &[&str]) -> Bytes {
        let keys: Vec<Bytes> = keys.iter().map(|k| Bytes::from(k.to_string())).collect();
        invalidation(&keys)
    }

    #[test]
    fn only_keys_read_are_invalidated_once() {
        let mut t = KeyTable::new(Mode::All);
        t.note_request(&req(&["GET", "a"]), false);
        t.note_request(&req(&["SET", "b", "1"]), false);
        t.note_request(&req(&["MGET", "c", "d"]), false);
        assert_eq!(t.filter(&push(&["a", "b", "x"])), Some(push(&["a"])));
        assert_eq!(t.filter(&push(&["a"])), None, "forgotten once invalidated");
        assert_eq!(t.filter(&push(&["d", "c"])), Some(push(&["d", "c"])));
    }

    #[test]
    fn a_flush_empties_the_table_and_passes() {
        let mut t = KeyTable::new(Mode::All);
        t.note_request(&req(&["GET", "a"]), false);
        let flush = Bytes::from_static(b">2\r\n$10\r\ninvalidate\r\n_\r\n");
        assert_eq!(t.filter(&flush), Some(flush.clone()));
        assert_eq!(t.filter(&push(&["a"])), None);
    }

    #[test]
    fn optin_and_optout_follow_client_caching() {
        let mut t = KeyTable::new(Mode::OptIn);
        t.note_request(&req(&["GET", "a"]), false);
        assert!(t.caching(b"yes").is_ok());
        t.note_request(&req(&["CLIENT", "CACHING", "yes"]), false);
        t.note_request(&req(&["GET", "b"]), false);
        t.note_request(&req(&["GET", "c"]), false);
        assert_eq!(t.filter(&push(&["a", "b", "c"])), Some(push(&["b"])));
        assert!(t.caching(b"no").is_err());

        let mut t = KeyTable::new(Mode::OptOut);
        assert!(t.caching(b"no").is_ok());
        t.note_request(&req(&["MULTI"]), true);
        t.note_request(&req(&["GET", "a"]), true);
        t.note_request(&req(&["EXEC"]), true);
        t.note_request(&req(&["GET", "b"]), false);
        assert_eq!(t.filter(&push(&["a", "b"])), Some(push(&["b"])));
        assert!(KeyTable::new(Mode::All).caching(b"yes").is_err());
    }

    #[test]
    fn the_table_is_bounded() {
        let mut t = KeyTable::new(Mode::All);
        let mut gone = 0;
        for i in 0..MAX_KEYS + 10 {
            gone += t
                .note_request(&req(&["GET", &format!("k{i}")]), false)
                .len();
        }
        assert_eq!((t.keys.len(), gone), (MAX_KEYS, 10));
    }
}
