//! The open-loop schedule for `--rate`. Each client owns a fixed timetable of intended send
//! times; latency is measured from those, so a stalled server shows up as latency instead of
//! silently lowering the offered load (coordinated omission).

use std::time::{Duration, Instant};

/// One client's timetable: request i is due at `start + phase + i * interval`.
#[derive(Debug, Clone)]
pub struct Pacer {
    start: Instant,
    interval: Duration,
    sent: u64,
}

impl Pacer {
    /// Client `client` of `clients` sharing `total_rate` requests/s; clients are staggered
    /// evenly over one interval so the total arrival stream is smooth.
    pub fn new(start: Instant, total_rate: f64, client: u64, clients: u64) -> Pacer {
        let clients = clients.max(1);
        let per_client = (total_rate / clients as f64).max(1e-9);
        let interval = Duration::from_secs_f64(1.0 / per_client);
        let phase = interval.mul_f64(client as f64 / clients as f64);
        Pacer {
            start: start + phase,
            interval,
            sent: 0,
        }
    }

    /// When the next request is due.
    pub fn next_due(&self) -> Instant {
        self.start + self.interval.mul_f64(self.sent as f64)
    }

    /// How many requests are due at `now`, at most `max`.
    pub fn due(&self, now: Instant, max: usize) -> usize {
        let Some(elapsed) = now.checked_duration_since(self.start) else {
            return 0;
        };
        let due_total = (elapsed.as_nanos() / self.interval.as_nanos().max(1)) as u64 + 1;
        due_total.saturating_sub(self.sent).min(max as u64) as usize
    }

    /// Takes the next request off the timetable and returns its intended send time.
    pub fn take(&mut self) -> Instant {
        let t = self.next_due();
        self.sent += 1;
        t
    }
}

/// Sleeps until an instant with microsecond precision. tokio's timers tick in whole
/// milliseconds, which would add up to 1 ms of send lag to every paced request; a timerfd
/// (registered once with the reactor, re-armed per wait) wakes within a few µs.
pub struct PreciseSleep {
    fd: tokio::io::unix::AsyncFd<timerfd::TimerFd>,
}

impl PreciseSleep {
    /// A disarmed timer registered with the current runtime.
    // `AsyncFd::new` is deprecated because a wrapped type could close or swap its fd while
    // registered; `TimerFd` owns its fd for its whole life and never replaces it, and the
    // replacement (`register`) is `unsafe`, which this crate forbids.
    #[allow(deprecated)]
    pub fn new() -> std::io::Result<PreciseSleep> {
        let tfd = timerfd::TimerFd::new_custom(timerfd::ClockId::Monotonic, true, true)?;
        Ok(PreciseSleep {
            fd: tokio::io::unix::AsyncFd::new(tfd)?,
        })
    }

    /// Returns at (or just after) `due`.
    pub async fn until(&mut self, due: Instant) -> std::io::Result<()> {
        let wait = due.saturating_duration_since(Instant::now());
        if wait < Duration::from_micros(1) {
            return Ok(()); // a zero Oneshot would disarm the timer instead of firing it
        }
        let state = timerfd::TimerState::Oneshot(wait);
        self.fd
            .get_mut()
            .set_state(state, timerfd::SetTimeFlags::Default);
        // Re-arming resets the expiry count (the fd is no longer readable), so no read(2) is
        // needed to consume an expiry: one syscall per wait. The clock check guards against a
        // stale readiness edge waking us early.
        loop {
            let mut guard = self.fd.readable_mut().await?;
            guard.clear_ready();
            if Instant::now() >= due {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_is_evenly_spaced_and_staggered() {
        let t0 = Instant::now();
        // 1000 req/s over 4 clients: 4 ms apart per client, client 1 starts 1 ms late.
        let mut p = Pacer::new(t0, 1000.0, 1, 4);
        assert_eq!(p.take() - t0, Duration::from_millis(1));
        assert_eq!(p.take() - t0, Duration::from_millis(5));
        assert_eq!(p.next_due() - t0, Duration::from_millis(9));
    }

    #[test]
    fn due_counts_backlog_and_caps_it() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, 100.0, 0, 1); // every 10 ms
        assert_eq!(p.due(t0, 100), 1);
        assert_eq!(p.due(t0 + Duration::from_millis(35), 100), 4);
        assert_eq!(p.due(t0 + Duration::from_millis(35), 2), 2);
        p.take();
        p.take();
        assert_eq!(p.due(t0 + Duration::from_millis(35), 100), 2);
        assert_eq!(p.due(t0 + Duration::from_millis(5), 100), 0);
    }

    #[test]
    fn precise_sleep_wakes_on_time() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut s = PreciseSleep::new().unwrap();
            for us in [300u64, 0, 1500] {
                let due = Instant::now() + Duration::from_micros(us);
                s.until(due).await.unwrap();
                let late = Instant::now().saturating_duration_since(due);
                assert!(Instant::now() >= due);
                assert!(late < Duration::from_millis(50), "{late:?}");
            }
        });
    }
}
