//! Notices a node that stops answering without closing its connection (a paused process, a
//! network black hole): requests are owed, yet no reply arrives for a whole timeout.
//!
//! It costs no clock read per request: a coarse interval ticks four times per timeout, and a
//! reply seen since the last tick resets the count. Requests pinned to a session's dedicated
//! connection (a BLPOP may rightly wait forever) and pub/sub streams run without one.

use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Interval, MissedTickBehavior};

/// Ticks per timeout: the timeout is honoured within a quarter of itself.
const TICKS: u32 = 4;

pub(crate) struct Watchdog {
    tick: Option<Interval>,
    idle_ticks: u32,
    progressed: bool,
}

impl Watchdog {
    /// `timeout` zero disables it.
    pub(crate) fn new(timeout: Duration) -> Watchdog {
        let tick = (!timeout.is_zero()).then(|| {
            let mut interval =
                tokio::time::interval((timeout / TICKS).max(Duration::from_millis(10)));
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            interval
        });
        Watchdog {
            tick,
            idle_ticks: 0,
            progressed: false,
        }
    }

    /// A reply arrived.
    pub(crate) fn progress(&mut self) {
        self.progressed = true;
    }

    /// Ready when replies were `owed` for a whole timeout with none arriving.
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>, owed: bool) -> Poll<()> {
        let Some(tick) = self.tick.as_mut() else {
            return Poll::Pending;
        };
        while tick.poll_tick(cx).is_ready() {
            if owed && !self.progressed {
                self.idle_ticks += 1;
            } else {
                self.idle_ticks = 0;
            }
            self.progressed = false;
            if self.idle_ticks > TICKS {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}
