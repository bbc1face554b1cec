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
}
