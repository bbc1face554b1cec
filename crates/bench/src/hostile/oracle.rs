//! What "no client can hurt another" means, as checks on one case: the proxy lives and
//! answers PING (no panic or overflow on its stderr), the bystander on the same worker kept
//! its worst PING under a bound, the proxy's RSS stayed within its stated memory budget plus
//! a slack, its file descriptors came back to their level once the case's connections
//! closed, and the nodes' memory did not grow by more than a slack (the proxy holds a stalled
//! client's replies itself, within its budget, and never leaves them piling up in Redis). The bounds are stated up front and printed, so a verdict can be argued with.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::bystander::Pings;

/// The limits a case is judged by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Worst bystander PING allowed during the case, ms.
    pub ping_ms: f64,
    /// The proxy's `limits.memory_budget_bytes`.
    pub budget: u64,
    /// RSS allowed above the budget (the process's base, allocator slack, kernel-side
    /// buffers counted as RSS).
    pub slack: u64,
    /// Descriptors allowed above the level before the case, after it.
    pub fd_slack: usize,
    /// How long the descriptors may take to come back.
    pub fd_ceiling: Duration,
    /// Growth allowed of the masters' RSS, summed, over the case.
    pub node_slack: u64,
}

impl Bounds {
    /// The RSS the proxy may reach.
    pub fn rss_limit(&self) -> u64 {
        self.budget + self.slack
    }
}

/// What was seen during and after one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub pings: Pings,
    pub peak_rss: u64,
    /// The masters' summed RSS before the case and at its peak.
    pub nodes_before: u64,
    pub nodes_peak: u64,
    pub fds_before: usize,
    /// None when the process was gone.
    pub fds_after: Option<usize>,
    /// Why the proxy is not alive and answering, if it is not.
    pub dead: Option<String>,
    /// stderr lines with `panicked` or `overflowed`.
    pub alarms: Vec<String>,
}

/// The oracles' verdict: the reasons the case failed, none when it passed.
pub fn verdict(o: &Observed, b: &Bounds) -> Vec<String> {
    let mut why = Vec::new();
    if let Some(d) = &o.dead {
        why.push(format!("alive: {d}"));
    }
    for line in &o.alarms {
        why.push(format!("stderr: {line}"));
    }
    if o.pings.failed {
        why.push(format!(
            "bystander: its connection failed after {} PINGs (last wait {:.0} ms)",
            o.pings.n, o.pings.max
        ));
    } else if o.pings.n == 0 {
        why.push("bystander: no PING answered".into());
    }
    if o.pings.max > b.ping_ms {
        why.push(format!(
            "bystander: worst PING {:.1} ms > {:.0} ms",
            o.pings.max, b.ping_ms
        ));
    }
    if o.peak_rss > b.rss_limit() {
        why.push(format!(
            "rss: peak {} MiB > budget {} MiB + slack {} MiB",
            mib(o.peak_rss),
            mib(b.budget),
            mib(b.slack)
        ));
    }
    let grown = o.nodes_peak.saturating_sub(o.nodes_before);
    if grown > b.node_slack {
        why.push(format!(
            "nodes: the masters' RSS grew by {} MiB (> {} MiB): replies piled up in Redis",
            mib(grown),
            mib(b.node_slack)
        ));
    }
    match o.fds_after {
        Some(after) if after > o.fds_before + b.fd_slack => why.push(format!(
            "fds: {after} after > {} before + {} within {:?}",
            o.fds_before, b.fd_slack, b.fd_ceiling
        )),
        _ => {}
    }
    why
}

/// Bytes as whole MiB, for reports.
pub fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

/// Samples VmRSS every few ms on a thread of its own: the proxy's, and the nodes' summed
/// (every 50 ms: it reads several files); keeps both peaks.
pub struct RssWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(u64, u64)>,
}

/// The summed VmRSS of `pids` (gone ones count 0).
pub fn rss_sum(pids: &[String]) -> u64 {
    pids.iter()
        .map(|p| crate::cpu::rss_bytes(p).unwrap_or(0))
        .sum()
}

impl RssWatch {
    /// Starts sampling `/proc/<pid>/status` of the proxy and of the nodes.
    pub fn start(pid: String, nodes: Vec<String>) -> RssWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut peak, mut nodes_peak) = (0, 0);
            for round in 0u64.. {
                peak = peak.max(crate::cpu::rss_bytes(&pid).unwrap_or(0));
                if round % 10 == 0 {
                    nodes_peak = nodes_peak.max(rss_sum(&nodes));
                }
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            (peak, nodes_peak.max(rss_sum(&nodes)))
        });
        RssWatch { stop, thread }
    }

    /// Stops sampling; the proxy's peak and the nodes' peak.
    pub fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or((0, 0))
    }
}

/// Polls `count` until it is at most `level + slack` or `ceiling` passed; the last count
/// (None once the process is gone). A ceiling rather than a sleep: closing takes the proxy
/// a moment after the client's FIN, and more when it has much to free.
pub fn settle_fds(
    count: impl Fn() -> Option<usize>,
    level: usize,
    slack: usize,
    ceiling: Duration,
) -> Option<usize> {
    let t0 = Instant::now();
    loop {
        let now = count()?;
        if now <= level + slack || t0.elapsed() >= ceiling {
            return Some(now);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> Bounds {
        Bounds {
            ping_ms: 250.0,
            budget: 256 << 20,
            slack: 256 << 20,
            fd_slack: 4,
            fd_ceiling: Duration::from_secs(10),
            node_slack: 256 << 20,
        }
    }

    fn fine() -> Observed {
        Observed {
            pings: Pings {
                n: 100,
                p99: 1.0,
                max: 3.0,
                failed: false,
            },
            peak_rss: 40 << 20,
            nodes_before: 30 << 20,
            nodes_peak: 40 << 20,
            fds_before: 20,
            fds_after: Some(22),
            dead: None,
            alarms: Vec::new(),
        }
    }

    #[test]
    fn a_quiet_case_passes() {
        assert!(verdict(&fine(), &bounds()).is_empty());
    }

    #[test]
    fn each_oracle_names_its_bound() {
        let mut o = fine();
        o.pings.max = 300.0;
        o.peak_rss = 600 << 20;
        o.fds_after = Some(30);
        o.nodes_peak = 14 << 30;
        o.dead = Some("the proxy exited: signal 6".into());
        o.alarms = vec!["thread 'slotgate-w0' has overflowed its stack".into()];
        let why = verdict(&o, &bounds()).join("\n");
        assert!(why.contains("worst PING 300.0 ms > 250 ms"), "{why}");
        assert!(
            why.contains("peak 600 MiB > budget 256 MiB + slack 256 MiB"),
            "{why}"
        );
        assert!(why.contains("fds: 30 after > 20 before + 4"), "{why}");
        assert!(why.contains("alive: the proxy exited"), "{why}");
        assert!(why.contains("grew by 14306 MiB (> 256 MiB)"), "{why}");
        assert!(
            why.contains("stderr: thread 'slotgate-w0' has overflowed"),
            "{why}"
        );
    }

    #[test]
    fn fds_settle_or_give_up_at_the_ceiling() {
        let n = std::cell::Cell::new(40);
        let count = || {
            n.set(n.get() - 5);
            Some(n.get())
        };
        assert_eq!(settle_fds(count, 20, 4, Duration::from_secs(5)), Some(20));
        assert_eq!(
            settle_fds(|| Some(99), 20, 4, Duration::from_millis(50)),
            Some(99)
        );
        assert_eq!(settle_fds(|| None, 20, 4, Duration::from_secs(5)), None);
    }
}
