//! What a run measured: latency histograms (overall and per second), counts, and errors by
//! kind. Each thread owns one `Stats` and records without locks; the runner merges them.

use std::time::Duration;

use anyhow::Result;
use hdrhistogram::Histogram;

/// Longest latency the histograms can hold (longer values are clamped): one minute.
const MAX_NS: u64 = 60_000_000_000;

/// Error replies and failures, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Errors {
    /// `-MOVED` given back as the final reply (not followed, or too many hops).
    pub moved: u64,
    /// `-ASK` given back as the final reply.
    pub ask: u64,
    /// `-CLUSTERDOWN`.
    pub clusterdown: u64,
    /// `-TRYAGAIN`.
    pub tryagain: u64,
    /// Any other error reply.
    pub other: u64,
    /// No reply within `--timeout`.
    pub timeout: u64,
    /// The connection failed (refused, reset, closed) with the request unanswered.
    pub connection: u64,
}

impl Errors {
    /// Sum over all kinds.
    pub fn total(&self) -> u64 {
        self.moved
            + self.ask
            + self.clusterdown
            + self.tryagain
            + self.other
            + self.timeout
            + self.connection
    }

    fn add(&mut self, o: &Errors) {
        self.moved += o.moved;
        self.ask += o.ask;
        self.clusterdown += o.clusterdown;
        self.tryagain += o.tryagain;
        self.other += o.other;
        self.timeout += o.timeout;
        self.connection += o.connection;
    }

    /// Counts an error reply frame by its first word.
    pub fn count_frame(&mut self, frame: &[u8]) {
        match cluster::error_kind(frame) {
            cluster::ErrorKind::Moved => self.moved += 1,
            cluster::ErrorKind::Ask => self.ask += 1,
            cluster::ErrorKind::ClusterDown => self.clusterdown += 1,
            cluster::ErrorKind::TryAgain => self.tryagain += 1,
            _ => self.other += 1,
        }
    }
}

/// One second of the run.
#[derive(Debug, Clone)]
pub struct Second {
    /// Latency of the successful replies that arrived in this second.
    pub hist: Histogram<u64>,
    /// Errors of any kind in this second.
    pub errors: u64,
}

impl Second {
    fn new() -> Second {
        Second {
            hist: new_hist(2),
            errors: 0,
        }
    }
}

/// Everything one thread (or, merged, the whole run) measured.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Latency of successful replies in ns (from intended send time under `--rate`).
    pub hist: Histogram<u64>,
    /// Open loop only: how late the generator sent each request versus its schedule, in ns.
    pub lag: Histogram<u64>,
    /// Per-second breakdown, index = whole seconds since the measured start.
    pub seconds: Vec<Second>,
    /// Final error replies and failures.
    pub errors: Errors,
    /// Redirects followed (cluster mode): MOVED and ASK.
    pub followed_moved: u64,
    /// ASK redirects followed.
    pub followed_ask: u64,
    /// Successful replies that did not belong to their request (`--verify`); must be 0.
    pub crossed: u64,
    /// First set-up error (a client that could not connect), reported after the run.
    pub setup_error: Option<String>,
}

fn new_hist(sigfig: u8) -> Histogram<u64> {
    // Bounds are constants known to be valid, so this cannot fail.
    Histogram::new_with_bounds(1, MAX_NS, sigfig).expect("valid histogram bounds")
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

impl Stats {
    /// Empty statistics.
    pub fn new() -> Stats {
        Stats {
            hist: new_hist(3),
            lag: new_hist(3),
            seconds: Vec::new(),
            errors: Errors::default(),
            followed_moved: 0,
            followed_ask: 0,
            crossed: 0,
            setup_error: None,
        }
    }

    fn second(&mut self, at: Duration) -> &mut Second {
        let i = at.as_secs() as usize;
        while self.seconds.len() <= i {
            self.seconds.push(Second::new());
        }
        &mut self.seconds[i]
    }

    /// A successful reply `latency` after its (intended) send, `at` after the start.
    pub fn ok(&mut self, latency: Duration, at: Duration) {
        self.ok_n(latency, at, 1);
    }

    /// `n` successful replies with the same latency and arrival (one pipelined read).
    pub fn ok_n(&mut self, latency: Duration, at: Duration, n: u64) {
        let ns = (latency.as_nanos() as u64).clamp(1, MAX_NS);
        self.hist.saturating_record_n(ns, n);
        self.second(at).hist.saturating_record_n(ns, n);
    }

    /// Records that something failed `at` after the start; the caller bumps the kind counter.
    pub fn error_at(&mut self, at: Duration) {
        self.second(at).errors += 1;
    }

    /// Successful replies.
    pub fn ok_count(&self) -> u64 {
        self.hist.len()
    }

    /// Folds `o` into `self`.
    pub fn merge(&mut self, o: &Stats) -> Result<()> {
        self.hist.add(&o.hist)?;
        self.lag.add(&o.lag)?;
        self.errors.add(&o.errors);
        self.followed_moved += o.followed_moved;
        self.followed_ask += o.followed_ask;
        self.crossed += o.crossed;
        for (i, s) in o.seconds.iter().enumerate() {
            let mine = self.second(Duration::from_secs(i as u64));
            mine.hist.add(&s.hist)?;
            mine.errors += s.errors;
        }
        if self.setup_error.is_none() {
            self.setup_error.clone_from(&o.setup_error);
        }
        Ok(())
    }
}

/// Latency summary in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// Percentiles of a ns histogram, in µs (zeros when empty).
pub fn summarize(h: &Histogram<u64>) -> Summary {
    let us = |ns: u64| ns as f64 / 1000.0;
    if h.is_empty() {
        return Summary {
            count: 0,
            mean: 0.0,
            p50: 0.0,
            p90: 0.0,
            p99: 0.0,
            p999: 0.0,
            max: 0.0,
        };
    }
    Summary {
        count: h.len(),
        mean: h.mean() / 1000.0,
        p50: us(h.value_at_quantile(0.50)),
        p90: us(h.value_at_quantile(0.90)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut s = Stats::new();
        for i in 1..=1000u64 {
            s.ok(Duration::from_micros(i), Duration::from_millis(i));
        }
        let sum = summarize(&s.hist);
        assert_eq!(sum.count, 1000);
        assert!((sum.p50 - 500.0).abs() <= 1.0, "{sum:?}");
        assert!((sum.p99 - 990.0).abs() <= 1.0, "{sum:?}");
        assert!((sum.p999 - 999.0).abs() <= 1.0, "{sum:?}");
        assert!((sum.max - 1000.0).abs() <= 1.0, "{sum:?}");
        assert_eq!(s.seconds.len(), 2);
        assert_eq!(s.seconds[0].hist.len(), 999);
    }

    #[test]
    fn merge_adds_counts_errors_and_seconds() {
        let mut a = Stats::new();
        let mut b = Stats::new();
        a.ok(Duration::from_micros(10), Duration::ZERO);
        b.ok(Duration::from_micros(30), Duration::from_secs(2));
        b.errors.count_frame(b"-MOVED 1 127.0.0.1:1\r\n");
        b.errors.count_frame(b"-ERR wrong\r\n");
        b.errors.timeout += 1;
        b.error_at(Duration::from_secs(2));
        a.merge(&b).unwrap();
        assert_eq!(a.ok_count(), 2);
        assert_eq!(a.errors.moved, 1);
        assert_eq!(a.errors.other, 1);
        assert_eq!(a.errors.total(), 3);
        assert_eq!(a.seconds.len(), 3);
        assert_eq!(a.seconds[2].errors, 1);
    }

    #[test]
    fn empty_summary_is_zero() {
        assert_eq!(summarize(&Stats::new().hist).count, 0);
    }
}
