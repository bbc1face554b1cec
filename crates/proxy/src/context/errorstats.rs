//! INFO errorstats and `total_error_replies`: the error replies the proxy's clients got,
//! counted by error code (the first word: `ERR`, `WRONGTYPE`, a script's own code), as
//! Redis counts the errors it sends. Counted when a whole reply is handed to the writer
//! (`ClientCell::pop_ready` notes it, the session records it here), whoever produced it:
//! the proxy or a node. Errors nested in a reply (EXEC's array) are not counted.
//!
//! Per worker, under the worker's own lock, taken only for an error reply; INFO sums the
//! workers. At most `MAX_CODES` codes are kept, as Redis stops tracking new ones past 128
//! (a client choosing error codes must not grow the map).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Redis's `ERRORSTATS_LIMIT`.
const MAX_CODES: usize = 128;

/// One worker's counts.
#[derive(Debug, Default)]
pub struct ErrorStats {
    total: AtomicU64,
    by_code: Mutex<BTreeMap<String, u64>>,
}

impl ErrorStats {
    /// An error reply (`-CODE text` or a RESP3 blob error) was handed to a client.
    pub(crate) fn record(&self, reply: &[u8]) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let text = match reply.split_first() {
            Some((b'-', rest)) => rest,
            // `!<len>\r\n<text>\r\n`
            Some((b'!', rest)) => match rest.windows(2).position(|w| w == b"\r\n") {
                Some(at) => &rest[at + 2..],
                None => return,
            },
            _ => return,
        };
        let end = text
            .iter()
            .position(|&b| b == b' ' || b == b'\r')
            .unwrap_or(text.len());
        let code = String::from_utf8_lossy(&text[..end.min(128)]);
        let mut map = self.by_code.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(code.as_ref()) {
            *n += 1;
        } else if map.len() < MAX_CODES {
            map.insert(code.into_owned(), 1);
        }
    }

    /// CONFIG RESETSTAT.
    pub(crate) fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.by_code
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Add this worker's counts by code to `into`.
    pub(crate) fn add_to(&self, into: &mut BTreeMap<String, u64>) {
        let map = self.by_code.lock().unwrap_or_else(|e| e.into_inner());
        for (code, n) in map.iter() {
            *into.entry(code.clone()).or_default() += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_first_word_and_bounded() {
        let stats = ErrorStats::default();
        stats.record(b"-ERR unknown command\r\n");
        stats.record(b"-MY_ERR_CODE custom msg\r\n");
        stats.record(b"-ERR again\r\n");
        stats.record(b"!21\r\nSYNTAX invalid syntax\r\n");
        for i in 0..500 {
            stats.record(format!("-CODE{i} x\r\n").as_bytes());
        }
        let mut all = BTreeMap::new();
        stats.add_to(&mut all);
        assert_eq!(all.get("ERR"), Some(&2));
        assert_eq!(all.get("MY_ERR_CODE"), Some(&1));
        assert_eq!(all.get("SYNTAX"), Some(&1));
        assert_eq!(all.len(), MAX_CODES);
        assert_eq!(stats.total(), 504);
        stats.reset();
        assert_eq!(stats.total(), 0);
    }
}
