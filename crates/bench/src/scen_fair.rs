//! `scenario fairness`: the two sides of the worker's fairness in one run, same binary, same
//! knobs (`proxy.event_interval`, `proxy.turn_quantum_bytes`). A bystander's PING while 10×100
//! MB values pass must stay bounded (p99 ≤ 5 ms, worst ≤ 20 ms), and yielding more often must
//! not bring back the slow-readers regression a deferred wake once caused (the well-behaved
//! clients' p99 with slow readers within 2× of their p99 alone). Tuning one against the other
//! is only honest when both are reported together.

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::bystander::Measured;
use crate::knobs::Knobs;
use crate::scen_mem::{BigArgs, SlowArgs};

/// Flags of `scenario fairness`.
#[derive(Args, Debug, Clone)]
pub struct FairArgs {
    #[command(flatten)]
    pub knobs: Knobs,
    /// Largest value in MB for the bystander part (sizes 0.1, 1, 10, 100 MB up to this).
    #[arg(long, default_value_t = 100.0)]
    pub max_mb: f64,
    /// Rounds per value size.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// How long the slow readers stall (the well-behaved load runs in it).
    #[arg(long, default_value = "60s", value_parser = crate::args::parse_duration)]
    pub slow_duration: Duration,
    /// The well-behaved clients' run without slow readers (their baseline p99).
    #[arg(long, default_value = "10s", value_parser = crate::args::parse_duration)]
    pub baseline: Duration,
    /// Slow readers.
    #[arg(long, default_value_t = 1000)]
    pub slow_clients: usize,
    /// The well-behaved clients' total open-loop rate, requests/s.
    #[arg(long, default_value_t = 5000.0)]
    pub rate: f64,
}

/// Runs both parts on slotgate and prints their verdicts together.
pub fn run(a: &FairArgs) -> Result<()> {
    let slow = SlowArgs {
        systems: vec!["slotgate".into()],
        clients: a.slow_clients,
        value_size: 4096,
        duration: a.slow_duration,
        max_rss_mb: 1024,
        budget_mb: 512,
        socket_buffer_kb: 64,
        good_clients: 50,
        rate: a.rate,
        baseline: a.baseline,
        knobs: a.knobs.clone(),
    };
    let big = BigArgs {
        systems: vec!["slotgate".into()],
        max_mb: a.max_mb,
        reps: a.reps,
        knobs: a.knobs.clone(),
    };
    println!("== slotgate, {}: slow-readers", a.knobs.describe());
    crate::scenario::raise_nofile(a.slow_clients + 50 * 4 + 1024)?;
    let dir = std::env::temp_dir().join(format!("slotgate-fair-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ratio = crate::scen_slow::run(&slow, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let ratio = ratio?;
    println!(
        "== slotgate, {}: big-values with a bystander",
        a.knobs.describe()
    );
    let bystanders = crate::scen_mem::big_values(&big)?;
    println!("== fairness, slotgate, {}", a.knobs.describe());
    println!("{}", verdicts(&bystanders, ratio, a.max_mb));
    Ok(())
}

/// The summary lines: the bystander's PING against 5 ms / 20 ms beside the same run's floor
/// (an idle redis-server's PING), the slow-readers ratio against 2×.
fn verdicts(bystanders: &[Measured], ratio: f64, max_mb: f64) -> String {
    let ok = |b: bool| if b { "ok" } else { "NOT MET" };
    let mut s = String::new();
    for Measured {
        system,
        through: t,
        floor: f,
    } in bystanders
    {
        s += &format!(
            "{system}: bystander PING while 10×{max_mb} MB values pass: {} answered, \
             p99 {:.2} ms (≤ 5: {}), worst {:.2} ms (≤ 20: {}); \
             the floor (an idle redis-server, same run): p99 {:.2} ms, worst {:.2} ms\n",
            t.n,
            t.p99,
            ok(t.p99 <= 5.0),
            t.max,
            ok(t.max <= 20.0),
            f.p99,
            f.max
        );
    }
    s + &format!(
        "slow-readers: well-behaved p99 with slow readers ÷ alone = ×{ratio:.2} (≤ 2: {})",
        ok(ratio <= 2.0)
    )
}

#[cfg(test)]
mod tests {
    use crate::bystander::{Measured, Pings};

    #[test]
    fn verdicts_name_each_bound() {
        let pings = |p99, max| Pings {
            n: 100,
            p99,
            max,
            failed: false,
        };
        let measured = Measured {
            system: "slotgate",
            through: pings(3.0, 25.0),
            floor: pings(1.0, 9.0),
        };
        let s = super::verdicts(&[measured], 1.5, 100.0);
        assert!(
            s.contains("the floor (an idle redis-server, same run): p99 1.00 ms, worst 9.00 ms"),
            "{s}"
        );
        assert!(s.contains("p99 3.00 ms (≤ 5: ok)"), "{s}");
        assert!(s.contains("worst 25.00 ms (≤ 20: NOT MET)"), "{s}");
        assert!(s.contains("×1.50 (≤ 2: ok)"), "{s}");
    }
}
