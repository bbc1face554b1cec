//! The fault harness's workload and its checks (reliability.md §C, as Jepsen and
//! redis-cluster-proxy's tests do). Each client appends `key|client|seq` to its own list and
//! reads the tail back now and then, so a reply meant for another request shows at once (a
//! wrong length, or a value naming another key or client). At the end the list is compared
//! with what was acknowledged: lost = acknowledged but absent; phantom = present but neither
//! acknowledged nor of unknown outcome; duplicated = present twice (run twice).

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use resp::Value;

use super::wire::{Outcome, Target, Wire};

/// What one client saw.
#[derive(Default, Debug)]
pub struct Seen {
    pub key: String,
    pub acked: Vec<u64>,
    /// Sequence numbers whose outcome is unknown (connection lost, or the proxy said so).
    pub unknown: Vec<u64>,
    /// Error replies by kind (the kind is the error's first word, or a short label).
    pub errors: BTreeMap<String, u64>,
    /// Replies that cannot be this request's: a crossed or misrouted reply.
    pub misrouted: Vec<String>,
    /// The longest time between two acknowledged writes.
    pub max_gap: Duration,
    pub redirects: u64,
}

/// Clients running until [`Load::stop`].
pub struct Load {
    stop: Arc<AtomicBool>,
    acks: Arc<AtomicU64>,
    /// Error replies and lost connections so far, all clients together.
    faults: Arc<AtomicU64>,
    threads: Vec<JoinHandle<Seen>>,
}

impl Load {
    /// One client per key; `proxy` or directly to `nodes`.
    pub fn start(keys: &[String], proxy: Option<SocketAddr>, nodes: &[SocketAddr]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(AtomicU64::new(0));
        let faults = Arc::new(AtomicU64::new(0));
        let threads = (keys.iter().enumerate())
            .map(|(id, key)| {
                let target = match proxy {
                    Some(p) => Target::Proxy(p),
                    None => Target::Direct(nodes.to_vec()),
                };
                let (key, stop) = (key.clone(), stop.clone());
                let counters = [acks.clone(), faults.clone()];
                std::thread::spawn(move || run(Wire::new(target), key, id, &stop, &counters))
            })
            .collect();
        Load {
            stop,
            acks,
            faults,
            threads,
        }
    }

    /// Acknowledged writes so far, all clients together.
    pub fn acked(&self) -> u64 {
        self.acks.load(Ordering::Relaxed)
    }

    /// Waits until the clients saw a failure (an error reply or a lost connection), 60 s at most.
    pub fn wait_failure(&self) {
        let started = Instant::now();
        while self.faults.load(Ordering::Relaxed) == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no failure seen"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until `n` more writes were acknowledged (the load is flowing), at most 60 s.
    pub fn wait_acks(&self, n: u64) {
        let target = self.acked() + n;
        let started = Instant::now();
        while self.acked() < target {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the load made no progress"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn stop(self) -> Vec<Seen> {
        self.stop.store(true, Ordering::Relaxed);
        (self.threads.into_iter())
            .map(|t| t.join().expect("a client thread panicked"))
            .collect()
    }
}

/// One client's loop; `counters` are the load's acknowledged writes and failures.
fn run(
    mut w: Wire,
    key: String,
    id: usize,
    stop: &AtomicBool,
    counters: &[Arc<AtomicU64>; 2],
) -> Seen {
    let mut seen = Seen {
        key: key.clone(),
        ..Seen::default()
    };
    let (mut seq, mut last_ack) = (0u64, Instant::now());
    let mine = format!("{key}|{id}|");
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let value = format!("{mine}{seq}");
        let outcome = loop {
            match w.call(&[b"RPUSH", key.as_bytes(), value.as_bytes()]) {
                // Never written: the same write again, later (a cluster client's retry).
                Outcome::NotSent if !stop.load(Ordering::Relaxed) => {
                    std::thread::sleep(Duration::from_millis(10)); // a retry's pacing
                }
                other => break other,
            }
        };
        if record(&mut seen, outcome, seq, counters) {
            seen.max_gap = seen.max_gap.max(last_ack.elapsed());
            last_ack = Instant::now();
        }
        if seq % 8 == 0 {
            check_tail(&mut w, &key, &mine, &mut seen);
        }
        std::thread::sleep(Duration::from_millis(1)); // pacing the writer
    }
    seen.redirects = w.redirects;
    seen
}

/// Notes what became of write `seq`; true if it was acknowledged.
fn record(seen: &mut Seen, outcome: Outcome, seq: u64, counters: &[Arc<AtomicU64>; 2]) -> bool {
    let [acks, faults] = counters;
    match outcome {
        Outcome::NotSent => {}
        Outcome::Lost => {
            faults.fetch_add(1, Ordering::Relaxed);
            seen.unknown.push(seq);
        }
        Outcome::Reply(Value::Integer(n)) => {
            if n < 1 {
                seen.misrouted.push(format!("RPUSH #{seq}: length {n}"));
            }
            seen.acked.push(seq);
            acks.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        Outcome::Reply(Value::Error(e)) => {
            faults.fetch_add(1, Ordering::Relaxed);
            error(seen, &e, seq);
        }
        Outcome::Reply(other) => seen.misrouted.push(format!("RPUSH: {other:?}")),
    }
    false
}

/// The list's last element must be one of ours.
fn check_tail(w: &mut Wire, key: &str, mine: &str, seen: &mut Seen) {
    match w.call(&[b"LINDEX", key.as_bytes(), b"-1"]) {
        Outcome::Reply(Value::BulkString(b)) if b.starts_with(mine.as_bytes()) => {}
        Outcome::Reply(Value::Null) | Outcome::Lost | Outcome::NotSent => {}
        Outcome::Reply(Value::Error(e)) => *seen.errors.entry(kind(&e)).or_default() += 1,
        Outcome::Reply(other) => seen.misrouted.push(format!("LINDEX {key}: {other:?}")),
    }
}

fn error(seen: &mut Seen, e: &[u8], seq: u64) {
    let k = kind(e);
    if k == "unknown-outcome" {
        seen.unknown.push(seq);
    }
    *seen.errors.entry(k).or_default() += 1;
}

/// A short label for an error reply.
pub fn kind(e: &[u8]) -> String {
    let text = String::from_utf8_lossy(e);
    if text.contains("may or may not have run") {
        return "unknown-outcome".into();
    }
    for (needle, label) in [("unreachable", "unreachable"), ("timed out", "timeout")] {
        if text.contains(needle) {
            return label.into();
        }
    }
    text.split(' ').next().unwrap_or("?").to_string()
}

/// The final check of one client against the list as the cluster holds it now.
#[derive(Debug, Default)]
pub struct Verdict {
    pub lost: Vec<u64>,
    pub phantom: Vec<u64>,
    pub duplicated: Vec<u64>,
}

pub fn verdict(seen: &Seen, id: usize, stored: &[Vec<u8>]) -> Verdict {
    let prefix = format!("{}|{id}|", seen.key);
    let mut present = HashSet::new();
    let mut v = Verdict::default();
    for item in stored {
        let seq = std::str::from_utf8(item)
            .ok()
            .and_then(|s| s.strip_prefix(&prefix))
            .and_then(|s| s.parse::<u64>().ok());
        match seq {
            Some(s) if !present.insert(s) => v.duplicated.push(s),
            Some(_) => {}
            // Another client's value in my list: a write went to the wrong key.
            None => v.phantom.push(0),
        }
    }
    let acked: HashSet<u64> = seen.acked.iter().copied().collect();
    let unknown: HashSet<u64> = seen.unknown.iter().copied().collect();
    v.lost = seen
        .acked
        .iter()
        .copied()
        .filter(|s| !present.contains(s))
        .collect();
    v.phantom.extend(
        present
            .iter()
            .copied()
            .filter(|s| !acked.contains(s) && !unknown.contains(s)),
    );
    v
}
