//! Waiting in tests for a state, never for a time: poll a condition until it holds, with a
//! ceiling that only a hang (or a bug) reaches. Shared by every crate's integration tests.

use std::time::{Duration, Instant};

/// Poll `condition` (every 20 ms) until it holds; panics, at the caller's line, if `ceiling`
/// passes first. Returns how long it took.
#[track_caller]
pub fn wait_until(ceiling: Duration, mut condition: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < ceiling,
            "condition still false after {ceiling:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    started.elapsed()
}
