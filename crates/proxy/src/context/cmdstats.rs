//! Per-command statistics: calls (every request) and latency (sampled), per worker.
//!
//! Counting a call is one relaxed atomic add on the worker's own array. Latency needs two
//! clock reads, so only one request in `SAMPLE_EVERY` is timed, from dispatch to the moment
//! its reply is handed to the writer. INFO's `usec` is extrapolated from those samples, and
//! the histograms count samples; both say so in `docs/metrics.md`.
//!
//! Buckets are powers of two in microseconds: bucket `i` holds samples below `2^i` µs
//! (bucket 0: below 1 µs), the last bucket everything above.

use std::sync::atomic::{AtomicU64, Ordering};

/// One request in this many is timed.
pub const SAMPLE_EVERY: u32 = 16;
/// Latency buckets: < 1 µs, < 2 µs, … < 2^22 µs (~4 s), and above.
pub const BUCKETS: usize = 24;

/// Counters indexed by the command's position in the command table.
#[derive(Debug)]
pub struct CommandStats {
    calls: Box<[AtomicU64]>,
    /// Error replies: refused before the command ran (Redis's `rejected_calls`), and
    /// failed while it ran (`failed_calls`).
    rejected: Box<[AtomicU64]>,
    failed: Box<[AtomicU64]>,
    samples: Box<[AtomicU64]>,
    sampled_ns: Box<[AtomicU64]>,
    buckets: Box<[AtomicU64]>,
}

impl Default for CommandStats {
    fn default() -> Self {
        let n = cluster::command::learn::stats_len();
        let zeros = |len: usize| (0..len).map(|_| AtomicU64::new(0)).collect::<Box<[_]>>();
        CommandStats {
            calls: zeros(n),
            rejected: zeros(n),
            failed: zeros(n),
            samples: zeros(n),
            sampled_ns: zeros(n),
            buckets: zeros(n * BUCKETS),
        }
    }
}

/// What one command's counters add up to, over all workers.
#[derive(Debug, Default, Clone)]
pub struct CommandTotals {
    pub calls: u64,
    pub rejected: u64,
    pub failed: u64,
    pub samples: u64,
    pub sampled_ns: u64,
    pub buckets: [u64; BUCKETS],
}

impl CommandStats {
    pub fn call(&self, command: usize) {
        if let Some(c) = self.calls.get(command) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn sample(&self, command: usize, ns: u64) {
        let (Some(count), Some(total)) = (self.samples.get(command), self.sampled_ns.get(command))
        else {
            return;
        };
        count.fetch_add(1, Ordering::Relaxed);
        total.fetch_add(ns, Ordering::Relaxed);
        let bucket = bucket_of(ns / 1000);
        if let Some(b) = self.buckets.get(command * BUCKETS + bucket) {
            b.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An error reply to a call of `command`: rejected when the proxy refused it before it
    /// ran, or when a node's error is one Redis answers before running a command (its
    /// `rejectCommand` call sites: ACL, OOM, cluster redirects, a replica's or a loading
    /// node's refusal…); failed otherwise.
    pub fn fail(&self, command: usize, refused: bool, reply: &[u8]) {
        let rejected = refused || rejection(reply);
        let counters = match rejected {
            true => &self.rejected,
            false => &self.failed,
        };
        if let Some(c) = counters.get(command) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        if rejected && !refused {
            // Counted as a call when sent; Redis counts only the calls that ran.
            if let Some(c) = self.calls.get(command) {
                let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            }
        }
    }

    /// CONFIG RESETSTAT: every counter back to zero.
    pub fn reset(&self) {
        let all = [
            &self.calls,
            &self.rejected,
            &self.failed,
            &self.samples,
            &self.sampled_ns,
            &self.buckets,
        ];
        for counters in all {
            counters.iter().for_each(|c| c.store(0, Ordering::Relaxed));
        }
    }

    /// Add this worker's counters for `command` into `into`.
    pub fn add_to(&self, command: usize, into: &mut CommandTotals) {
        let get = |v: &[AtomicU64], i: usize| v.get(i).map_or(0, |c| c.load(Ordering::Relaxed));
        into.calls += get(&self.calls, command);
        into.rejected += get(&self.rejected, command);
        into.failed += get(&self.failed, command);
        into.samples += get(&self.samples, command);
        into.sampled_ns += get(&self.sampled_ns, command);
        for (i, b) in into.buckets.iter_mut().enumerate() {
            *b += get(&self.buckets, command * BUCKETS + i);
        }
    }
}

/// Error codes Redis answers before a command runs (counted as `rejected_calls`).
const REJECTIONS: &[&[u8]] = &[
    b"NOPERM",
    b"NOAUTH",
    b"OOM",
    b"MOVED",
    b"ASK",
    b"CROSSSLOT",
    b"TRYAGAIN",
    b"CLUSTERDOWN",
    b"READONLY",
    b"LOADING",
    b"BUSY",
    b"MASTERDOWN",
    b"MISCONF",
    b"NOREPLICAS",
    b"EXECABORT",
];

/// Whether an error reply (`-CODE text`) is one of `REJECTIONS`.
fn rejection(reply: &[u8]) -> bool {
    let body = reply.strip_prefix(b"-").unwrap_or(reply);
    let code = body
        .split(|&b| b == b' ' || b == b'\r')
        .next()
        .unwrap_or_default();
    REJECTIONS.contains(&code)
}

/// The bucket of a latency in microseconds.
pub fn bucket_of(us: u64) -> usize {
    ((u64::BITS - us.leading_zeros()) as usize).min(BUCKETS - 1)
}

/// Upper bound of bucket `i`, in microseconds (None for the last, open bucket).
pub fn bucket_bound_us(i: usize) -> Option<u64> {
    (i + 1 < BUCKETS).then(|| 1u64 << i)
}

impl CommandTotals {
    /// Estimated total time, extrapolated from the samples.
    pub fn estimated_usec(&self) -> u64 {
        match self.samples {
            0 => 0,
            n => {
                (u128::from(self.sampled_ns) * u128::from(self.calls) / u128::from(n) / 1000) as u64
            }
        }
    }

    /// Upper bound (µs) of the bucket holding the `q` quantile of the samples.
    pub fn percentile_us(&self, q: f64) -> Option<u64> {
        let rank = (q * self.samples as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bucket_bound_us(i).unwrap_or(1 << (BUCKETS - 1)));
            }
        }
        None
    }
}

/// The position of a top-level command in the table (subcommands count for their container).
pub fn command_index(spec: &'static cluster::CommandSpec) -> Option<usize> {
    cluster::command::stats_index(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_percentiles() {
        assert_eq!(
            (bucket_of(0), bucket_of(1), bucket_of(3), bucket_of(1000)),
            (0, 1, 2, 10)
        );
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        let stats = CommandStats::default();
        let get = command_index(cluster::lookup(b"get").unwrap()).unwrap();
        assert_eq!(cluster::command::all()[get].name, "get");
        for _ in 0..99 {
            stats.sample(get, 3_000);
        }
        stats.sample(get, 900_000);
        stats.call(get);
        let mut t = CommandTotals::default();
        stats.add_to(get, &mut t);
        assert_eq!((t.calls, t.samples), (1, 100));
        assert_eq!(t.percentile_us(0.5), Some(4));
        assert_eq!(
            t.percentile_us(0.999),
            Some(1 << 10),
            "900 µs is below 1024 µs"
        );
    }

    #[test]
    fn errors_count_as_failed_or_rejected_calls_and_resetstat_clears_all() {
        let stats = CommandStats::default();
        let set = command_index(cluster::lookup(b"set").unwrap()).unwrap();
        stats.call(set);
        stats.fail(set, false, b"-WRONGTYPE Operation against a key\r\n");
        stats.call(set);
        stats.fail(set, false, b"-OOM command not allowed\r\n");
        stats.fail(set, true, b"-ERR wrong number of arguments\r\n");
        let mut t = CommandTotals::default();
        stats.add_to(set, &mut t);
        assert_eq!((t.calls, t.failed, t.rejected), (1, 1, 2));
        stats.reset();
        let mut t = CommandTotals::default();
        stats.add_to(set, &mut t);
        assert_eq!((t.calls, t.failed, t.rejected), (0, 0, 0));
    }
}
