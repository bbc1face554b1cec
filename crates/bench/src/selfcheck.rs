//! `slotgate bench selfcheck`: is the generator cheaper than redis-benchmark for the same load?
//! Both run pinned to CPU0 against one redis-server pinned to CPU1, interleaved, and each one's
//! CPU per request is measured over the same request count (redis-benchmark's with
//! `/usr/bin/time`, ours from its own schedstat report). This is seed 003's lesson as a command.

use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::procs;

/// Flags of `slotgate bench selfcheck`.
#[derive(Args, Debug, Clone)]
pub struct SelfcheckArgs {
    /// Interleaved repetitions (the first pair is a discarded warm-up).
    #[arg(long, default_value_t = 4)]
    pub reps: usize,
    /// Requests per run.
    #[arg(long, default_value_t = 200_000)]
    pub requests: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 50)]
    pub clients: u64,
    /// Requests per pipeline.
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
}

/// One measured run: CPU µs per request and achieved requests/s.
#[derive(Debug, Clone, Copy)]
struct Sample {
    cpu_us: f64,
    rps: f64,
}

/// Runs the comparison and prints a table plus the median ratio.
pub fn run(a: &SelfcheckArgs) -> Result<()> {
    let redis = procs::redis(Some(1))?;
    let port = redis.port.to_string();
    prepopulate(&port)?;
    let (mut rb, mut me) = (Vec::new(), Vec::new());
    println!("rep  redis-benchmark µs/req (rps)   slotgate bench µs/req (rps)   loadavg");
    for rep in 0..a.reps {
        let r = redis_benchmark(&port, a)?;
        let m = ours(&port, a)?;
        println!(
            "{rep:>3}  {:>10.2} ({:>8.0})            {:>10.2} ({:>8.0})           {}{}",
            r.cpu_us,
            r.rps,
            m.cpu_us,
            m.rps,
            crate::cpu::loadavg(),
            if rep == 0 {
                "  (warm-up, discarded)"
            } else {
                ""
            }
        );
        if rep > 0 {
            rb.push(r.cpu_us);
            me.push(m.cpu_us);
        }
    }
    let (rb, me) = (median(&mut rb), median(&mut me));
    println!(
        "median CPU µs/request: redis-benchmark {rb:.2}, slotgate bench {me:.2}; ratio {:.2} (target ≤ 0.75)",
        me / rb
    );
    Ok(())
}

fn prepopulate(port: &str) -> Result<()> {
    let out = procs::self_command(Some(0))?
        .args([
            "run",
            "--target",
            &format!("127.0.0.1:{port}"),
            "--prepopulate",
            "--requests",
            "1",
        ])
        .stdout(Stdio::null())
        .status()?;
    if !out.success() {
        bail!("prepopulate failed");
    }
    Ok(())
}

fn redis_benchmark(port: &str, a: &SelfcheckArgs) -> Result<Sample> {
    let timing =
        std::env::temp_dir().join(format!("slotgate-selfcheck-{}.time", std::process::id()));
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%U %S", "-o"])
        .arg(&timing)
        .args([
            "taskset",
            "-c",
            "0",
            "redis-benchmark",
            "-p",
            port,
            "-t",
            "get",
            "--csv",
        ])
        .args(["-c", &a.clients.to_string(), "-n", &a.requests.to_string()])
        .args(["-P", &a.pipeline.to_string(), "-r", "100000", "-d", "64"])
        .stderr(Stdio::null())
        .output()
        .context("running redis-benchmark under /usr/bin/time")?;
    let times = std::fs::read_to_string(&timing)?;
    let _ = std::fs::remove_file(&timing);
    let cpu_s: f64 = times
        .split_whitespace()
        .filter_map(|x| x.parse::<f64>().ok())
        .sum();
    let csv = String::from_utf8_lossy(&out.stdout);
    let rps = csv
        .lines()
        .find(|l| l.starts_with("\"GET\""))
        .and_then(|l| l.split(',').nth(1))
        .and_then(|x| x.trim_matches('"').parse().ok())
        .unwrap_or(0.0);
    Ok(Sample {
        cpu_us: cpu_s * 1e6 / a.requests as f64,
        rps,
    })
}

fn ours(port: &str, a: &SelfcheckArgs) -> Result<Sample> {
    let out = procs::self_command(Some(0))?
        .args(["run", "--json", "--target", &format!("127.0.0.1:{port}")])
        .args([
            "--clients",
            &a.clients.to_string(),
            "--requests",
            &a.requests.to_string(),
        ])
        .args(["--pipeline", &a.pipeline.to_string()])
        .output()?;
    if !out.status.success() {
        bail!("bench run failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    Ok(Sample {
        cpu_us: v["own_cpu_us_per_request"].as_f64().unwrap_or(f64::NAN),
        rps: v["throughput_rps"].as_f64().unwrap_or(0.0),
    })
}

/// Median (sorts in place); NaN when empty.
pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn medians() {
        assert_eq!(super::median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(super::median(&mut []).is_nan());
    }
}
