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
    thread: std::thread::JoinHandle<(Vec<f64>, bool)>,
}

impl Bystander {
    /// Starts pinging `addr` on a thread of its own.
    pub fn start(addr: std::net::SocketAddr) -> Result<Bystander> {
        let mut admin = Admin::connect(addr)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut ms = Vec::new();
            let mut failed = false;
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                let answered = admin.call(&[b"PING"]).is_ok();
                // A PING that never came back (timeout, closed) still counts its wait, so a
                // stall of the worker cannot hide behind the error.
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
                if !answered {
                    failed = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            (ms, failed)
        });
        Ok(Bystander { stop, thread })
    }

    /// Stops pinging; the latencies it saw.
    pub fn finish(self) -> Pings {
        self.stop.store(true, Ordering::Relaxed);
        let (mut ms, failed) = self.thread.join().unwrap_or((Vec::new(), true));
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms.get(((ms.len() as f64 * q) as usize).min(ms.len().saturating_sub(1)));
        let p99 = at(0.99).copied().unwrap_or(0.0);
        Pings {
            n: ms.len(),
            p99,
            max: ms.last().copied().unwrap_or(0.0),
            failed,
        }
    }
}

/// What a bystander saw: PINGs sent, their p99 and worst latency in ms, and whether its
/// connection failed (the last PING then got no answer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pings {
    pub n: usize,
    pub p99: f64,
    pub max: f64,
    pub failed: bool,
}

/// A bystander's result beside the machine's floor in the same run: the same PINGs sent to
/// an idle redis-server of its own, which no proxy can beat on a shared machine.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub system: &'static str,
    pub through: Pings,
    pub floor: Pings,
}
