//! Whether an invalidation waits behind the replies its client is owed, or goes ahead of them.
//!
//! Redis writes an invalidation into the client's output when the key changes, with one
//! exception: a change made while the client's own command runs (its write, a key it read
//! that expired lazily, what its unblocked BLMOVE pushed, its FLUSHDB) is held until that
//! command's reply is written. So a key evicted to make room for the client's command is
//! told before that command's reply, and the client's own write after it. Through the proxy
//! the reply and the invalidation arrive on different connections, in either order, and the
//! session puts them back in Redis's order by the keys:
//!
//! ```text
//!   GETBIT big … (owed)  +  >invalidate [volatile]  ─▶ >invalidate, then GETBIT's reply
//!   HDEL h f (owed)      +  >invalidate [h]         ─▶ HDEL's reply, then >invalidate
//!   anything owed        +  >invalidate (null)      ─▶ after the replies owed (a flush)
//! ```
//!
//! "Ahead" means ahead of the replies that came in the same turn (`Session::forward_pushes`):
//! a reply already written stays written. The keys of the requests owed are kept as hashes
//! (a collision only makes an invalidation wait), at most `MAX_OWED`; past that, or behind a
//! command whose keys the proxy cannot tell, every invalidation waits until that request is
//! answered, which is always safe: late, never lost.

use std::collections::VecDeque;
use std::hash::BuildHasher;

use bytes::Bytes;
use resp::{Request, Value};

/// Key hashes kept for the requests owed (16 bytes each).
const MAX_OWED: usize = 4096;

/// Where the session's turn started: the oldest request owed a reply then, and whether any
/// was. What came in that turn is ordered against those replies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TurnMark {
    pub head: u64,
    pub owed: bool,
}

/// The keys of a tracking client's requests not yet answered.
#[derive(Default)]
pub(crate) struct OwedKeys {
    hasher: std::hash::RandomState,
    /// (the request's sequence number, a key's hash), oldest first.
    keys: VecDeque<(u64, u64)>,
    /// The keys of the commands queued in an open MULTI: owed from its EXEC on.
    queued: Vec<u64>,
    /// A command queued in the open MULTI has keys the proxy cannot tell.
    queued_blind: bool,
    /// The newest request whose keys the proxy cannot tell: every invalidation waits until
    /// it is answered.
    blind: Option<u64>,
}

impl OwedKeys {
    /// A request the client sent, whose reply is entry `seq`; `in_tx`: a MULTI is open
    /// (EXEC and DISCARD included), `head`: the oldest entry not yet written.
    pub(crate) fn note(&mut self, req: &Request, seq: u64, in_tx: bool, head: u64) {
        self.forget_answered(head);
        let name = req.arg(0);
        let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
        if in_tx && (is("multi") || is("discard")) {
            self.queued.clear();
            self.queued_blind = false;
            return;
        }
        if in_tx && is("exec") {
            let hashes = std::mem::take(&mut self.queued);
            self.keys.extend(hashes.into_iter().map(|h| (seq, h)));
            if std::mem::take(&mut self.queued_blind) {
                self.blind = Some(seq);
            }
            return;
        }
        let Some(spec) = cluster::lookup(name).map(|s| s.resolve(req.argc(), |i| req.arg(i)))
        else {
            self.not_told(seq, in_tx);
            return;
        };
        let Ok(positions) = spec.key_positions(req.argc(), |i| req.arg(i)) else {
            self.not_told(seq, in_tx);
            return;
        };
        if self.keys.len() + self.queued.len() + positions.iter().count() > MAX_OWED {
            self.not_told(seq, in_tx);
            return;
        }
        for i in positions.iter() {
            let hash = self.hasher.hash_one(req.arg(i));
            match in_tx {
                true => self.queued.push(hash),
                false => self.keys.push_back((seq, hash)),
            }
        }
    }

    fn not_told(&mut self, seq: u64, in_tx: bool) {
        match in_tx {
            true => self.queued_blind = true,
            false => self.blind = Some(seq),
        }
    }

    /// Drop what requests before `head` owed: their replies are written.
    fn forget_answered(&mut self, head: u64) {
        while self.keys.front().is_some_and(|&(seq, _)| seq < head) {
            self.keys.pop_front();
        }
        if self.blind.is_some_and(|seq| seq < head) {
            self.blind = None;
        }
    }

    /// Whether `push` (an invalidation from a node) waits behind the replies owed at `mark`:
    /// it names a key of one of those requests, or it is a flush (null) while any is owed.
    pub(crate) fn must_wait(&mut self, push: &Bytes, mark: TurnMark) -> bool {
        if !mark.owed {
            return false;
        }
        self.forget_answered(mark.head);
        if self.blind.is_some() {
            return true;
        }
        let Ok(Some((Value::Push(items), _))) = resp::decode(push) else {
            return true;
        };
        match items.as_slice() {
            [Value::BulkString(kind), Value::Array(keys)] if &kind[..] == b"invalidate" => {
                keys.iter().any(|k| match k {
                    Value::BulkString(k) => {
                        let hash = self.hasher.hash_one(&k[..]);
                        self.keys.iter().any(|&(_, h)| h == hash)
                    }
                    _ => true,
                })
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::tracking::keys::tests::{push, req};

    const OWED: TurnMark = TurnMark {
        head: 0,
        owed: true,
    };

    #[test]
    fn a_key_of_a_request_owed_waits_any_other_goes_first() {
        let mut owed = OwedKeys::default();
        owed.note(&req(&["GETBIT", "big", "0"]), 0, false, 0);
        assert!(owed.must_wait(&push(&["big"]), OWED));
        assert!(!owed.must_wait(&push(&["volatile"]), OWED));
        // Once GETBIT's reply is written, nothing of it is owed.
        assert!(!owed.must_wait(
            &push(&["big"]),
            TurnMark {
                head: 1,
                owed: true
            }
        ));
        assert!(!owed.must_wait(
            &push(&["big"]),
            TurnMark {
                head: 0,
                owed: false
            }
        ));
    }

    #[test]
    fn a_transaction_owes_its_queued_keys_from_its_exec() {
        let mut owed = OwedKeys::default();
        owed.note(&req(&["MULTI"]), 0, true, 0);
        owed.note(&req(&["INCR", "a"]), 1, true, 0);
        assert!(!owed.must_wait(&push(&["a"]), OWED));
        owed.note(&req(&["EXEC"]), 2, true, 2);
        assert!(owed.must_wait(
            &push(&["a"]),
            TurnMark {
                head: 2,
                owed: true
            }
        ));
        assert!(!owed.must_wait(
            &push(&["b"]),
            TurnMark {
                head: 2,
                owed: true
            }
        ));
    }

    #[test]
    fn a_flush_or_unknown_keys_wait_while_anything_is_owed() {
        let mut owed = OwedKeys::default();
        let flush = Bytes::from_static(b">2\r\n$10\r\ninvalidate\r\n_\r\n");
        assert!(owed.must_wait(&flush, OWED));
        assert!(!owed.must_wait(
            &flush,
            TurnMark {
                head: 0,
                owed: false
            }
        ));
        owed.note(&req(&["NOSUCHCOMMAND", "x"]), 0, false, 0);
        assert!(owed.must_wait(&push(&["y"]), OWED));
        assert!(!owed.must_wait(
            &push(&["y"]),
            TurnMark {
                head: 1,
                owed: true
            }
        ));
    }

    #[test]
    fn past_the_bound_every_invalidation_waits() {
        let mut owed = OwedKeys::default();
        let keys: Vec<String> = (0..MAX_OWED + 1).map(|i| format!("k{i}")).collect();
        let mut args = vec!["MGET"];
        args.extend(keys.iter().map(String::as_str));
        owed.note(&req(&args), 0, false, 0);
        assert!(owed.keys.is_empty());
        assert!(owed.must_wait(&push(&["other"]), OWED));
    }
}
