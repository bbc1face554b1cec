//! Per-client time limits, and the client count limit.
//!
//! - `maxclients`: one global counter, checked at accept: O(1), no client list.
//! - Idle timeout (Redis's `timeout`, 0 = off): a client with nothing in flight, not blocked
//!   and not subscribed, that sends nothing for that long is closed silently.
//! - Request deadline (slowloris): a request whose bytes have started to arrive must be
//!   complete within the deadline, or the client is closed.
//!
//! Timers are armed only when they can fire: an idle connection with an empty buffer and no
//! idle timeout holds no timer at all, so 10,000 idle clients cost nothing per second.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::config::LimitsConfig;

/// Which limit the armed timer enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimerKind {
    Idle,
    RequestDeadline,
}

/// The session's single timer.
#[derive(Default)]
pub(crate) struct Timer {
    armed: Option<(TimerKind, Pin<Box<Sleep>>)>,
}

// === impl Timer ===

impl Timer {
    /// Activity was seen (`Idle`) or a request completed (`RequestDeadline`): that timer
    /// starts over at the next arming.
    pub(crate) fn reset(&mut self, which: TimerKind) {
        if matches!(&self.armed, Some((kind, _)) if *kind == which) {
            self.armed = None;
        }
    }

    /// Before the session sleeps: arm the timer for the limit that applies (`wanted`),
    /// keeping one already running for the same limit, and report whether it has expired.
    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        wanted: Option<(TimerKind, Duration)>,
    ) -> Poll<TimerKind> {
        match (&self.armed, wanted) {
            (_, None) => self.armed = None,
            (Some((kind, _)), Some((want, _))) if *kind == want => {}
            (_, Some((want, after))) => {
                self.armed = Some((
                    want,
                    Box::pin(tokio::time::sleep_until(Instant::now() + after)),
                ))
            }
        }
        let Some((kind, sleep)) = self.armed.as_mut() else {
            return Poll::Pending;
        };
        let kind = *kind;
        sleep.as_mut().poll(cx).map(|()| kind)
    }
}

/// Which limit applies now, with its duration: the request deadline while a request has
/// started to arrive (`partial`), else the idle timeout while the client is `idle` (nothing
/// in flight or to write, not subscribed).
pub(crate) fn wanted(
    limits: &LimitsConfig,
    partial: bool,
    idle: bool,
) -> Option<(TimerKind, Duration)> {
    if limits.request_deadline_ms > 0 && partial {
        return Some((
            TimerKind::RequestDeadline,
            Duration::from_millis(limits.request_deadline_ms),
        ));
    }
    (limits.idle_timeout_ms > 0 && idle).then(|| {
        (
            TimerKind::Idle,
            Duration::from_millis(limits.idle_timeout_ms),
        )
    })
}
