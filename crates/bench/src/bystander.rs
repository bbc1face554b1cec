//! A small client beside a heavy one: one PING per millisecond on its own connection. Its
//! worst latencies show whether a 100 MB value holds up everyone else (it must not).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::admin::Admin;

/// A small client beside the big values: one PING per millisecond on its own connection.
/// Its worst latencies show whether a 100 MB value holds up everyone else (it must not).
pub struct Bystander {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<f64>>,
}

impl Bystander {
    /// Starts pinging `addr` on a thread of its own.
    pub fn start(addr: std::net::SocketAddr) -> Result<Bystander> {
        let mut admin = Admin::connect(addr)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut ms = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                if admin.call(&[b"PING"]).is_err() {
                    break;
                }
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
                std::thread::sleep(Duration::from_millis(1));
            }
            ms
        });
        Ok(Bystander { stop, thread })
    }

    /// (PINGs answered, p99 ms, max ms).
    pub fn finish(self) -> (usize, f64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        let mut ms = self.thread.join().unwrap_or_default();
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms.get(((ms.len() as f64 * q) as usize).min(ms.len().saturating_sub(1)));
        let p99 = at(0.99).copied().unwrap_or(0.0);
        (ms.len(), p99, ms.last().copied().unwrap_or(0.0))
    }
}
