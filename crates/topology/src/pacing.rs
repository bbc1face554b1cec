//! How often things may happen: the refresh throttle, jitter that keeps a fleet of proxies
//! and clients out of lockstep, and the retry budget both sides apply to redirects and to
//! "not executed" errors (topology.md R3, R12).

use std::time::Duration;

use cluster::redirect::ErrorKind;
use rand::Rng;

/// MOVED/ASK hops per request (the most common default among clients, R12).
pub const MAX_REDIRECTS: u8 = 5;

/// Refresh pacing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// Least time between two refreshes, whatever asks for them.
    pub min_interval: Duration,
    /// Up to this much (uniform) is added to each `min_interval` wait.
    pub max_extra: Duration,
    /// Periodic check, ±20%, so a dead master is noticed even without a MOVED.
    pub periodic: Duration,
}

/// Retry delays: exponential from `base`, capped at `cap`, each drawn from [full/2, full]
/// so retries of many requests spread out instead of arriving together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Backoff {
    /// 10 ms doubling to 1 s (R12: go-redis's range; neither busy nor a 1 s floor).
    pub const DEFAULT: Backoff = Backoff {
        base: Duration::from_millis(10),
        cap: Duration::from_secs(1),
    };

    /// The wait before retry number `attempt` (0 waits about `base`).
    pub fn delay(&self, attempt: u32) -> Duration {
        let full = self.base.saturating_mul(1 << attempt.min(16)).min(self.cap);
        full / 2 + jitter_up_to(full / 2)
    }
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::DEFAULT
    }
}

/// Errors that mean the node refused the command before running it, so resending it is
/// safe whatever the command: TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY, LOADING, and the
/// UNBLOCKED a blocked command gets when its master is demoted (it had not popped anything).
pub fn not_executed(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::TryAgain
            | ErrorKind::ClusterDown
            | ErrorKind::MasterDown
            | ErrorKind::ReadOnly
            | ErrorKind::Loading
            | ErrorKind::Demoted
    )
}

/// `base` ± base/`div`, so many instances do not act in lockstep.
pub fn jittered(base: Duration, div: u32) -> Duration {
    let spread = base / div.max(1);
    base.saturating_sub(spread) + jitter_up_to(spread * 2)
}

/// Uniform in [0, max], at millisecond resolution.
pub fn jitter_up_to(max: Duration) -> Duration {
    let ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rand::thread_rng().gen_range(0..=ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let b = Backoff::DEFAULT;
        for attempt in 0..40 {
            let d = b.delay(attempt);
            assert!(d <= b.cap, "{attempt}: {d:?}");
        }
        assert!(b.delay(0) >= Duration::from_millis(5));
        assert!(b.delay(1) <= Duration::from_millis(20));
        assert!(b.delay(12) >= b.cap / 2);
    }

    #[test]
    fn jitter_stays_in_its_band() {
        let base = Duration::from_millis(1000);
        for _ in 0..200 {
            let d = jittered(base, 5);
            assert!((800..=1200).contains(&d.as_millis()), "{d:?}");
            assert!(jitter_up_to(base) <= base);
        }
        assert_eq!(jitter_up_to(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn only_refusals_are_safe_to_resend() {
        for (kind, safe) in [
            (ErrorKind::TryAgain, true),
            (ErrorKind::ClusterDown, true),
            (ErrorKind::MasterDown, true),
            (ErrorKind::ReadOnly, true),
            (ErrorKind::Loading, true),
            (ErrorKind::Demoted, true),
            (ErrorKind::Moved, false),
            (ErrorKind::Ask, false),
            (ErrorKind::CrossSlot, false),
            (ErrorKind::Other, false),
        ] {
            assert_eq!(not_executed(kind), safe, "{kind:?}");
        }
    }
}
