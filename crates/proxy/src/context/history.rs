//! The status page's recent past: a bounded ring of points, one every `STEP_MS` for the
//! last `POINTS` steps (5 minutes), taken by the admin thread (`admin/status.rs`), so the
//! page's charts of requests/s and latency per master survive a reload of the page and
//! cost the workers nothing: each point is the counters they keep anyway, read once.
//!
//! A point holds cumulative counters; rates are the differences between neighbours, taken
//! when `/status.json` is rendered.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Milliseconds between two points.
pub const STEP_MS: u64 = 2_000;
/// Points kept: 5 minutes.
pub const POINTS: usize = 150;

/// One moment's counters.
#[derive(Debug, Clone, Default)]
pub struct Point {
    pub unix_ms: u64,
    /// Requests processed by the proxy, every worker.
    pub requests: u64,
    /// Sampled requests answered and their summed latency, every command.
    pub samples: u64,
    pub sampled_ns: u64,
    /// Per master (address): its sampled requests and their summed latency.
    pub masters: Vec<(String, u64, u64)>,
}

/// The ring, under a lock only the admin thread takes.
#[derive(Debug, Default)]
pub struct History {
    points: Mutex<VecDeque<Point>>,
}

impl History {
    /// Add `point`, dropping the oldest past `POINTS`.
    pub fn push(&self, point: Point) {
        let mut points = self.points.lock().unwrap_or_else(|p| p.into_inner());
        if points.len() == POINTS {
            points.pop_front();
        }
        points.push_back(point);
    }

    /// The points, oldest first.
    pub fn points(&self) -> Vec<Point> {
        let points = self.points.lock().unwrap_or_else(|p| p.into_inner());
        points.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_last_points() {
        let h = History::default();
        for i in 0..POINTS as u64 + 10 {
            h.push(Point {
                unix_ms: i,
                ..Point::default()
            });
        }
        let points = h.points();
        assert_eq!(points.len(), POINTS);
        assert_eq!(points[0].unix_ms, 10);
    }
}
