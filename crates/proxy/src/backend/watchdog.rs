//! Notices a node that stops answering without closing its connection (a paused process, a
//! network black hole): requests are owed, yet no reply arrives for a whole deadline.
//!
//! Deadlines fit the command (`patience.rs`). A connection is failed when it owes replies
//! and none has arrived for the longest deadline among the requests it owes: most commands
//! allow `request_timeout_ms`; while a slow command (KEYS, FLUSHALL, EVAL, SCRIPT, DEBUG,
//! SAVE, MIGRATE, SORT…) is owed, the whole connection allows `slow_command_timeout_ms`, since
//! a node running one command is busy, not dead, and the requests queued behind it on a
//! shared connection (other clients') must not fail for it; a blocking command on a
//! session's dedicated connection allows its own timeout plus `request_timeout_ms`, and with
//! timeout 0 never expires. WATCH, EXEC and other dedicated requests are timed like shared
//! ones. Pub/sub streams owe no replies, so they have no deadline: TCP keepalive
//! (`keepalive.rs`) is what notices a vanished node there.
//!
//! It costs no clock read per request: a coarse interval ticks four times per
//! `request_timeout_ms`, a reply seen since the last tick resets the count, and each
//! deadline is a number of ticks.

use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Interval, MissedTickBehavior};

use crate::patience::Patience;

/// Ticks per request timeout: the timeout is honoured within a quarter of itself.
const TICKS: u32 = 4;
/// The tick never runs faster than this, whatever the timeout.
const MIN_TICK: Duration = Duration::from_millis(10);
/// The limit of an unbounded request: never reached.
const NEVER: u32 = u32::MAX;

pub(crate) struct Watchdog {
    tick: Option<Interval>,
    period: Duration,
    request_timeout: Duration,
    slow_timeout: Duration,
    idle_ticks: u32,
    progressed: bool,
    /// Requests owed with a longer deadline than the default, as (ticks allowed, how many).
    /// A handful of distinct values at most: slow, a blocking command's, never.
    extended: Vec<(u32, u32)>,
}

impl Watchdog {
    /// `request_timeout` zero disables it; `slow_timeout` below it counts as equal.
    pub(crate) fn new(request_timeout: Duration, slow_timeout: Duration) -> Watchdog {
        let period = (request_timeout / TICKS).max(MIN_TICK);
        let tick = (!request_timeout.is_zero()).then(|| {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            interval
        });
        Watchdog {
            tick,
            period,
            request_timeout,
            slow_timeout: slow_timeout.max(request_timeout),
            idle_ticks: 0,
            progressed: false,
            extended: Vec::new(),
        }
    }

    /// A reply arrived.
    pub(crate) fn progress(&mut self) {
        self.progressed = true;
    }

    /// A request with `patience` is now owed; returns its limit, to hand back to `paid`.
    pub(crate) fn owe(&mut self, patience: Patience) -> u32 {
        let limit = match patience {
            Patience::Normal => return 0,
            Patience::Slow => self.ticks(self.slow_timeout),
            Patience::Blocks(t) => self.ticks(t.saturating_add(self.request_timeout)),
            Patience::Unbounded => NEVER,
        };
        match self.extended.iter_mut().find(|(l, _)| *l == limit) {
            Some((_, n)) => *n += 1,
            None => self.extended.push((limit, 1)),
        }
        limit
    }

    /// The request `owe` gave `limit` for is answered (or failed).
    pub(crate) fn paid(&mut self, limit: u32) {
        if limit == 0 {
            return;
        }
        if let Some(i) = self.extended.iter().position(|(l, _)| *l == limit) {
            self.extended[i].1 -= 1;
            if self.extended[i].1 == 0 {
                self.extended.swap_remove(i);
            }
        }
    }

    /// The deadline now in force, for the error message.
    pub(crate) fn deadline(&self) -> Duration {
        self.period.saturating_mul(self.limit())
    }

    /// Ticks without a reply allowed now: the longest deadline among the requests owed.
    fn limit(&self) -> u32 {
        let longest = self.extended.iter().map(|(l, _)| *l).max().unwrap_or(0);
        longest.max(self.ticks(self.request_timeout))
    }

    fn ticks(&self, d: Duration) -> u32 {
        let n = d.as_nanos().div_ceil(self.period.as_nanos().max(1));
        u32::try_from(n).unwrap_or(NEVER - 1)
    }

    /// Ready when replies were `owed` for a whole deadline with none arriving.
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>, owed: bool) -> Poll<()> {
        let Some(tick) = self.tick.as_mut() else {
            return Poll::Pending;
        };
        let mut ticked = false;
        while tick.poll_tick(cx).is_ready() {
            ticked = true;
            if owed && !self.progressed {
                self.idle_ticks = self.idle_ticks.saturating_add(1);
            } else {
                self.idle_ticks = 0;
            }
            self.progressed = false;
        }
        match ticked && self.idle_ticks > self.limit() {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn deadlines_follow_the_longest_owed_request() {
        let ms = Duration::from_millis;
        let mut w = Watchdog::new(ms(300), ms(9_000));
        assert_eq!(w.deadline(), ms(300));
        let slow = w.owe(Patience::Slow);
        let blocks = w.owe(Patience::Blocks(ms(1_000)));
        assert_eq!(w.owe(Patience::Normal), 0);
        assert_eq!(w.deadline(), ms(9_000), "slow owed: the slow deadline");
        w.paid(slow);
        assert_eq!(w.deadline(), ms(1_350), "1 s + 300 ms, in 75 ms ticks");
        let never = w.owe(Patience::Unbounded);
        assert!(w.deadline() > Duration::from_secs(3600 * 24));
        w.paid(never);
        w.paid(blocks);
        assert_eq!(w.deadline(), ms(300), "back to the request timeout");
    }

    #[tokio::test]
    async fn a_slow_timeout_below_the_request_timeout_counts_as_equal() {
        let ms = Duration::from_millis;
        let mut w = Watchdog::new(ms(400), ms(0));
        w.owe(Patience::Slow);
        assert_eq!(w.deadline(), ms(400));
    }
}
