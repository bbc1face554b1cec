//! Hot keys (`[hotkeys]`, issue 27's detection): which keys the clients read and write most,
//! per worker and merged for INFO `hotkeys`.
//!
//! Each worker keeps a space-saving sketch (Metwally et al.) of the first key of the requests
//! the command statistics already sample (one in `SAMPLE_EVERY`), reads and writes apart, in
//! two windows: the current one and the one before, so a key that stopped being hot leaves
//! the board within two windows. A sketch holds `CAPACITY` keys: a key not on it takes the
//! place of the least counted one and inherits its count as its possible error, so the
//! board's counts are upper bounds, exact for any key counted more than the smallest entry.
//!
//! Cost: nothing for requests not sampled; for a sampled one, the key's position from the
//! command table, one hash lookup, and, for a key not on the board, a scan of its
//! `CAPACITY` entries and a copy of the key (keys over `MAX_KEY` bytes are cut). The board
//! sits under the worker's own uncontended lock; INFO reads every worker's: O(workers).
//!
//! When a sampled request is answered, its key is charged the time it took and the bytes
//! of request and reply (for HOTKEYS GET's `by-cpu-time-us` and `by-net-bytes`), and its
//! reply is offered to the list of big keys (`hotkeys/big.rs`).

use std::collections::HashMap;
use std::sync::Mutex;

mod big;
pub mod run;

pub use big::{BigKey, BigKeys};

/// Keys a sketch holds.
pub const CAPACITY: usize = crate::config::HotkeysConfig::SKETCH_KEYS;
/// Longest key kept whole; longer ones are counted by their first `MAX_KEY` bytes.
pub(crate) const MAX_KEY: usize = 128;

/// One window's counts of one kind (reads or writes).
#[derive(Debug, Default, Clone)]
pub struct Sketch {
    entries: Vec<Entry>,
    index: HashMap<Box<[u8]>, usize>,
}

#[derive(Debug, Clone)]
struct Entry {
    key: Box<[u8]>,
    count: u64,
    /// The count the key inherited when it took its place (its count is at most this
    /// much too high).
    error: u64,
    /// The sampled requests' time from dispatch to reply, and their request and reply
    /// bytes, charged as they are answered.
    time_ns: u64,
    net_bytes: u64,
}

impl Sketch {
    /// Count one sighting of `key`.
    pub fn offer(&mut self, key: &[u8]) {
        let key = &key[..key.len().min(MAX_KEY)];
        if let Some(&i) = self.index.get(key) {
            self.entries[i].count += 1;
            return;
        }
        if self.entries.len() < CAPACITY {
            self.index.insert(key.into(), self.entries.len());
            self.entries.push(Entry {
                key: key.into(),
                count: 1,
                error: 0,
                time_ns: 0,
                net_bytes: 0,
            });
            return;
        }
        let (i, least) = self
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.count)
            .map(|(i, e)| (i, e.count))
            .unwrap_or((0, 0));
        let old = std::mem::replace(
            &mut self.entries[i],
            Entry {
                key: key.into(),
                count: least + 1,
                error: least,
                time_ns: 0,
                net_bytes: 0,
            },
        );
        self.index.remove(&old.key);
        self.index.insert(key.into(), i);
    }

    /// Charge an answered request of `key` to its entry, if the key is still on the
    /// sketch (one that was displaced meanwhile is not charged).
    pub fn charge(&mut self, key: &[u8], time_ns: u64, net_bytes: u64) -> bool {
        let key = &key[..key.len().min(MAX_KEY)];
        let Some(&i) = self.index.get(key) else {
            return false;
        };
        let e = &mut self.entries[i];
        e.time_ns += time_ns;
        e.net_bytes += net_bytes;
        true
    }

    fn add_into(&self, totals: &mut HashMap<Box<[u8]>, Hot>) {
        for e in &self.entries {
            let t = totals.entry(e.key.clone()).or_insert_with(|| Hot {
                key: e.key.to_vec(),
                ..Hot::default()
            });
            t.count += e.count;
            t.error += e.error;
            t.time_ns += e.time_ns;
            t.net_bytes += e.net_bytes;
        }
    }
}

/// A worker's board: reads and writes, this window and the one before.
#[derive(Debug, Default)]
pub struct Board {
    window_started_ms: u64,
    reads: [Sketch; 2],
    writes: [Sketch; 2],
    big: [BigKeys; 2],
    /// Requests counted since start.
    pub sampled: u64,
}

/// A sampled request's reply, as the session hands it to the board.
#[derive(Debug, Clone, Copy)]
pub struct Answered<'a> {
    pub key: &'a [u8],
    pub write: bool,
    /// The command table's stats index.
    pub command: u16,
    pub request_bytes: u64,
    pub reply_bytes: u64,
    /// From dispatch to the reply handed to the writer.
    pub time_ns: u64,
}

impl Board {
    /// Count `key`, read or written, at `now_ms` (the worker's coarse clock); a window
    /// `window_ms` long ends first if its time has come.
    pub fn offer(&mut self, key: &[u8], write: bool, now_ms: u64, window_ms: u64) {
        self.roll(now_ms, window_ms);
        self.sampled += 1;
        match write {
            true => self.writes[0].offer(key),
            false => self.reads[0].offer(key),
        }
    }

    /// A sampled request answered: its key charged its time and bytes, its reply offered
    /// to the big keys.
    pub fn answered(&mut self, a: Answered<'_>, now_ms: u64, window_ms: u64) {
        self.roll(now_ms, window_ms);
        let sketch = match a.write {
            true => &mut self.writes[0],
            false => &mut self.reads[0],
        };
        sketch.charge(a.key, a.time_ns, a.request_bytes + a.reply_bytes);
        let key = &a.key[..a.key.len().min(MAX_KEY)];
        self.big[0].offer(key, a.reply_bytes, a.command);
    }

    fn roll(&mut self, now_ms: u64, window_ms: u64) {
        let age = now_ms.saturating_sub(self.window_started_ms);
        if age < window_ms {
            return;
        }
        // Two windows old: gone. One old: the previous.
        let skipped = age >= 2 * window_ms;
        for pair in [&mut self.reads, &mut self.writes] {
            pair[1] = match skipped {
                true => Sketch::default(),
                false => std::mem::take(&mut pair[0]),
            };
            pair[0] = Sketch::default();
        }
        self.big[1] = match skipped {
            true => BigKeys::default(),
            false => std::mem::take(&mut self.big[0]),
        };
        self.big[0] = BigKeys::default();
        self.window_started_ms = now_ms;
    }
}

/// One key of the merged board: its sampled count over the two windows, how much of it
/// may be the sketch's over-count, and what its answered requests cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hot {
    pub key: Vec<u8>,
    pub count: u64,
    pub error: u64,
    pub time_ns: u64,
    pub net_bytes: u64,
}

/// Every worker's board merged.
#[derive(Debug, Default)]
pub struct Merged {
    /// The `top` keys read and written, most counted first (ties by key, so the order is
    /// stable).
    pub reads: Vec<Hot>,
    pub writes: Vec<Hot>,
    /// The `top` largest replies by key.
    pub big: Vec<BigKey>,
    /// Requests counted since start.
    pub sampled: u64,
    /// Every key on any sketch, reads and writes together, unordered (HOTKEYS GET ranks
    /// them by time or bytes).
    pub all: Vec<Hot>,
}

/// Every worker's board merged, each with its worker's clock (`now_ms`): windows roll
/// only as requests are sampled, so an idle worker's windows are aged here, and a board
/// nobody sampled for two windows shows nothing. `top` keys of each list.
pub fn merged<'a>(
    boards: impl Iterator<Item = (&'a Mutex<Board>, u64)>,
    top: usize,
    window_ms: u64,
) -> Merged {
    let mut reads = HashMap::new();
    let mut writes = HashMap::new();
    let mut big = HashMap::new();
    let mut sampled = 0;
    for (board, now_ms) in boards {
        let b = board.lock().unwrap_or_else(|p| p.into_inner());
        sampled += b.sampled;
        let age = now_ms.saturating_sub(b.window_started_ms);
        // The windows still in the last two: both, the current one alone, or none.
        let live = match age {
            a if a < window_ms => 2,
            a if a < 2 * window_ms => 1,
            _ => 0,
        };
        for s in &b.reads[..live] {
            s.add_into(&mut reads);
        }
        for s in &b.writes[..live] {
            s.add_into(&mut writes);
        }
        for l in &b.big[..live] {
            l.add_into(&mut big);
        }
    }
    let mut all: HashMap<Box<[u8]>, Hot> = reads.clone();
    for (key, w) in &writes {
        let t = all.entry(key.clone()).or_insert_with(|| Hot {
            key: w.key.clone(),
            ..Hot::default()
        });
        t.count += w.count;
        t.error += w.error;
        t.time_ns += w.time_ns;
        t.net_bytes += w.net_bytes;
    }
    let rank = |totals: HashMap<Box<[u8]>, Hot>| {
        let mut all: Vec<Hot> = totals.into_values().collect();
        all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        all.truncate(top);
        all
    };
    Merged {
        reads: rank(reads),
        writes: rank(writes),
        big: big::ranked(big, top),
        sampled,
        all: all.into_values().collect(),
    }
}

/// A key as INFO shows it: printable ASCII as is, other bytes and the field separators
/// (`,`, `=`, `\`) as `\xHH`.
pub fn shown(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key {
        match b {
            b',' | b'=' | b'\\' => out.push_str(&format!("\\x{b:02x}")),
            0x21..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heavy_keys_survive_a_stream_of_light_ones() {
        let mut s = Sketch::default();
        for i in 0..100_000u64 {
            // Keys 0..5 take half the stream; the rest is spread over 50,000 keys.
            let key = match i % 2 {
                0 => format!("hot:{}", i % 5),
                _ => format!("cold:{}", i % 50_000),
            };
            s.offer(key.as_bytes());
        }
        let mut top: Vec<&Entry> = s.entries.iter().collect();
        top.sort_by_key(|e| std::cmp::Reverse(e.count));
        let names: Vec<String> = top[..5]
            .iter()
            .map(|e| String::from_utf8_lossy(&e.key).into_owned())
            .collect();
        for i in 0..5 {
            assert!(names.contains(&format!("hot:{i}")), "{names:?}");
        }
        assert!(top[0].count - top[0].error <= 10_000 && top[0].count >= 10_000);
        assert_eq!(s.entries.len(), CAPACITY);
        assert_eq!(s.index.len(), CAPACITY);
    }

    #[test]
    fn windows_age_out() {
        let m = Mutex::new(Board::default());
        m.lock().unwrap().offer(b"old", false, 0, 1000);
        m.lock().unwrap().offer(b"new", false, 1500, 1000);
        let reads = merged(std::iter::once((&m, 1500)), 10, 1000).reads;
        assert_eq!(reads.len(), 2, "the previous window still counts");
        let idle = merged(std::iter::once((&m, 2600)), 10, 1000).reads;
        assert_eq!(idle.len(), 1, "an idle worker's windows age too");
        assert!(merged(std::iter::once((&m, 3600)), 10, 1000)
            .reads
            .is_empty());
        m.lock().unwrap().offer(b"new", false, 3000, 1000);
        let Merged { reads, sampled, .. } = merged(std::iter::once((&m, 3000)), 10, 1000);
        let keys: Vec<&[u8]> = reads.iter().map(|h| h.key.as_slice()).collect();
        assert_eq!(keys, [b"new".as_slice()]);
        assert_eq!(sampled, 3);
    }

    #[test]
    fn answered_requests_charge_their_key_and_offer_big_replies() {
        let m = Mutex::new(Board::default());
        let mut b = m.lock().unwrap();
        b.offer(b"k", false, 0, 1000);
        let a = Answered {
            key: b"k",
            write: false,
            command: 3,
            request_bytes: 20,
            reply_bytes: 5000,
            time_ns: 7000,
        };
        b.answered(a, 10, 1000);
        b.answered(Answered { key: b"gone", ..a }, 10, 1000);
        drop(b);
        let all = merged(std::iter::once((&m, 10)), 10, 1000);
        assert_eq!((all.all[0].time_ns, all.all[0].net_bytes), (7000, 5020));
        assert_eq!(all.all.len(), 1, "a key not on the sketch is not charged");
        let big: Vec<&[u8]> = all.big.iter().map(|k| k.key.as_slice()).collect();
        assert_eq!(big, [b"gone".as_slice(), b"k"]);
        let mut b = m.lock().unwrap();
        b.answered(
            Answered {
                key: &[b'x'; 300],
                ..a
            },
            20,
            1000,
        );
        drop(b);
        let all = merged(std::iter::once((&m, 20)), 10, 1000);
        assert!(
            all.big.iter().any(|k| k.key.len() == MAX_KEY),
            "long keys are cut"
        );
    }

    #[test]
    fn keys_are_shown_safely() {
        assert_eq!(shown(b"user:1"), "user:1");
        assert_eq!(
            shown(b"a,b=c\\\r\n \xff"),
            "a\\x2cb\\x3dc\\x5c\\x0d\\x0a\\x20\\xff"
        );
    }
}
