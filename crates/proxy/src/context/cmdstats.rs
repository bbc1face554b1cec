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

    /// Add this worker's counters for `command` into `into`.
    pub fn add_to(&self, command: usize, into: &mut CommandTotals) {
        let get = |v: &[AtomicU64], i: usize| v.get(i).map_or(0, |c| c.load(Ordering::Relaxed));
        into.calls += get(&self.calls, command);
        into.samples += get(&self.samples, command);
        into.sampled_ns += get(&self.sampled_ns, command);
        for (i, b) in into.buckets.iter_mut().enumerate() {
            *b += get(&self.buckets, command * BUCKETS + i);
        }
    }
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
}
