//! `slotgate bench compare`: the same workload against slotgate, camellia-redis-proxy,
//! nutcracker and Redis direct, interleaved, after a warm-up (longer for the JVM, whose JIT
//! compiles under load), with the system under test alone on CPU1. It reports what
//! bounds a proxy (CPU µs and syscalls per request, RSS) next to what users see (rate,
//! latency), plus the generator's own CPU so a reader can check it was equal across systems.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use crate::procs;
use crate::selfcheck::median;
use crate::systems::{self, SyscallCounter, System, GEN_CPU};

/// The workloads of performance.md §6 that `compare` knows.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Preset {
    /// P1 GET, 50 clients, 16-byte keys, 64-byte values, prepopulated.
    S1,
    /// GET pipelined 16 deep, 50 clients.
    S3,
    /// Connection churn: connect, one GET, close (CPU per connection).
    S6,
    /// Fan-out: MGET of 10 keys (in as many slots, so split by a cluster proxy), 50 clients.
    Fanout,
}

/// Flags of `slotgate bench compare`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Which workload.
    #[arg(long, value_enum)]
    pub preset: Preset,
    /// Measured repetitions per system (after one warm-up round).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Requests per run [default: S1 100000, S3 800000, S6 20000, fanout 50000].
    #[arg(long)]
    pub requests: Option<u64>,
    /// Results go to DIR/<preset>-<timestamp>/.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Also replace this preset's section of BENCHMARKS.md (between
    /// `<!-- compare:<preset>:start -->` and `<!-- compare:<preset>:end -->`, appended if absent).
    #[arg(long)]
    pub update_benchmarks_md: Option<PathBuf>,
    /// Which systems, in report order (one not installed is skipped with a note).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "slotgate,camellia,nutcracker,redis"
    )]
    pub systems: Vec<String>,
    /// Seconds of this preset's load a JVM (camellia) gets before the warm-up round, so its
    /// JIT has compiled the hot path before anything is measured.
    #[arg(long, default_value_t = 20)]
    pub jit_warmup_secs: u64,
}

impl Preset {
    /// `bench run` flags for this preset (target added by the caller).
    pub fn flags(self, requests: Option<u64>) -> Vec<String> {
        let (extra, n): (&[&str], u64) = match self {
            Preset::S1 => (&["--clients", "50", "--pipeline", "1"], 100_000),
            Preset::S3 => (&["--clients", "50", "--pipeline", "16"], 800_000),
            Preset::S6 => (&["--clients", "20", "--reconnect"], 20_000),
            Preset::Fanout => (&["--clients", "50", "--pipeline", "1"], 50_000),
        };
        let n = requests.unwrap_or(n).to_string();
        let command = match self {
            Preset::Fanout => "mget:10",
            _ => "get",
        };
        let base = [
            "--command",
            command,
            "--keyspace",
            "100000",
            "--value-size",
            "64",
        ];
        base.iter()
            .chain(extra)
            .map(|s| s.to_string())
            .chain(["--requests".to_string(), n])
            .collect()
    }
}

/// One measurement of one system.
fn measure(sys: &System, flags: &[String], dir: &Path) -> Result<Value> {
    let perf = SyscallCounter::start(&sys.sut.pid(), dir);
    let cpu0 = sys.sut.cpu_ns()?;
    let out = procs::self_command(Some(GEN_CPU))?
        .args(["run", "--json", "--target", &sys.addr().to_string()])
        .args(flags)
        .stderr(Stdio::inherit())
        .output()?;
    let cpu1 = sys.sut.cpu_ns()?;
    let syscalls = perf.and_then(SyscallCounter::stop);
    if !out.status.success() {
        bail!("load against {} failed", sys.name);
    }
    let run: Value = serde_json::from_slice(&out.stdout)?;
    let n = run["requests"].as_f64().unwrap_or(0.0).max(1.0);
    Ok(json!({
        "system": sys.name,
        "cpu_us_per_req": (cpu1 - cpu0) as f64 / 1000.0 / n,
        "syscalls_per_req": syscalls.map(|s| s as f64 / n),
        "rss_mb": sys.sut.rss() as f64 / 1048576.0,
        "rps": run["throughput_rps"], "p50_us": run["p50_us"], "p99_us": run["p99_us"],
        "p999_us": run["p999_us"], "errors": run["errors"]["total"],
        "generator_cpu_us_per_req": run["own_cpu_us_per_request"],
    }))
}

/// Runs the comparison and writes results.{json,md} and cpu.svg.
pub fn run(a: &CompareArgs) -> Result<()> {
    let preset = format!("{:?}", a.preset).to_lowercase();
    let dir = a.out.join(format!("{preset}-{}", timestamp()));
    std::fs::create_dir_all(&dir)?;
    let names: Vec<&str> = a.systems.iter().map(String::as_str).collect();
    let mut notes = Vec::new();
    let systems = systems::start_noting(&names, &dir, &[], &mut notes)?;
    let flags = a.preset.flags(a.requests);
    if !matches!(a.preset, Preset::S6) {
        for s in &systems {
            prepopulate(s)?;
        }
    }
    for s in systems.iter().filter(|s| s.needs_jit_warmup()) {
        jit_warmup(s, &flags, a.jit_warmup_secs)?;
    }
    let mut samples: Vec<Vec<Value>> = vec![Vec::new(); systems.len()];
    for rep in 0..=a.reps {
        for (i, s) in systems.iter().enumerate() {
            let m = measure(s, &flags, &dir)?;
            eprintln!("rep {rep}{} {m}", if rep == 0 { " (warm-up)" } else { "" });
            if rep > 0 {
                samples[i].push(m);
            }
        }
    }
    let summary = summarize(&systems, &samples);
    let doc = json!({
        "preset": format!("{:?}", a.preset), "flags": flags, "reps": a.reps,
        "loadavg": crate::cpu::loadavg(), "systems": summary, "samples": samples,
        "notes": notes,
    });
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&doc)?,
    )?;
    let md = crate::chart::markdown(&doc);
    std::fs::write(dir.join("results.md"), &md)?;
    std::fs::write(dir.join("cpu.svg"), crate::chart::svg(&doc))?;
    print!("{md}");
    println!("written to {}", dir.display());
    if let Some(path) = &a.update_benchmarks_md {
        update_section(path, &preset, &dir, &md)?;
        println!("updated {}", path.display());
    }
    Ok(())
}

/// Put this run's table, with its command and plot, in the preset's marked section.
fn update_section(
    path: &std::path::Path,
    preset: &str,
    dir: &std::path::Path,
    md: &str,
) -> Result<()> {
    let (start, end) = (
        format!("<!-- compare:{preset}:start -->"),
        format!("<!-- compare:{preset}:end -->"),
    );
    let command: Vec<String> = std::env::args().collect();
    let body = format!(
        "{start}\nCommand: `{}`\n\n{md}\nPlot: `{}/cpu.svg`\n{end}",
        command.join(" "),
        dir.display()
    );
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let updated = match (text.find(&start), text.find(&end)) {
        (Some(i), Some(j)) if j > i => format!("{}{body}{}", &text[..i], &text[j + end.len()..]),
        _ => format!("{}\n\n{body}\n", text.trim_end()),
    };
    std::fs::write(path, updated)?;
    Ok(())
}

/// `secs` of the preset's load, unmeasured: the JIT's compilations happen here.
fn jit_warmup(s: &System, flags: &[String], secs: u64) -> Result<()> {
    if secs == 0 {
        return Ok(());
    }
    eprintln!("{}: {secs} s of JIT warm-up", s.name);
    let ok = procs::self_command(Some(GEN_CPU))?
        .args(["run", "--target", &s.addr().to_string()])
        .args(warmup_flags(flags, secs))
        .stdout(Stdio::null())
        .status()?
        .success();
    anyhow::ensure!(ok, "JIT warm-up through {} failed", s.name);
    Ok(())
}

/// The preset's flags with its request count replaced by a duration.
fn warmup_flags(flags: &[String], secs: u64) -> Vec<String> {
    let mut out = Vec::with_capacity(flags.len());
    let mut it = flags.iter();
    while let Some(f) = it.next() {
        if f == "--requests" {
            it.next();
            continue;
        }
        out.push(f.clone());
    }
    out.extend(["--duration".to_string(), format!("{secs}s")]);
    out
}

fn prepopulate(s: &System) -> Result<()> {
    let ok = procs::self_command(Some(GEN_CPU))?
        .args([
            "run",
            "--target",
            &s.addr().to_string(),
            "--prepopulate",
            "--requests",
            "1",
        ])
        .args(["--keyspace", "100000", "--value-size", "64"])
        .stdout(Stdio::null())
        .status()?
        .success();
    anyhow::ensure!(ok, "prepopulating through {} failed", s.name);
    Ok(())
}

const METRICS: [&str; 9] = [
    "cpu_us_per_req",
    "syscalls_per_req",
    "rss_mb",
    "rps",
    "p50_us",
    "p99_us",
    "p999_us",
    "errors",
    "generator_cpu_us_per_req",
];

/// Median, min and max of metric `k` over `samples` (null when no sample has it).
fn spread(samples: &[Value], k: &str) -> Value {
    let mut xs: Vec<f64> = samples.iter().filter_map(|m| m[k].as_f64()).collect();
    if xs.is_empty() {
        return Value::Null;
    }
    let (lo, hi) = xs
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    json!({"median": median(&mut xs), "min": lo, "max": hi})
}

/// Median, min and max of each metric per system, plus CPU ratios against the others.
fn summarize(systems: &[System], samples: &[Vec<Value>]) -> Vec<Value> {
    let mut out: Vec<Value> = systems
        .iter()
        .zip(samples)
        .map(|(s, xs)| {
            let mut o = json!({"system": s.name});
            for k in METRICS {
                o[k] = spread(xs, k);
            }
            o
        })
        .collect();
    let cpu: Vec<Option<f64>> = out
        .iter()
        .map(|o| o["cpu_us_per_req"]["median"].as_f64())
        .collect();
    for (i, o) in out.iter_mut().enumerate() {
        for (j, s) in systems.iter().enumerate() {
            if let (Some(a), Some(b)) = (cpu[i], cpu[j]) {
                o["cpu_ratio_vs"][s.name] = json!(a / b);
            }
        }
    }
    out
}

/// UTC `YYYYMMDDTHHMMSSZ` without a date crate.
pub fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_presets() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(timestamp().len(), 16);
        let f = Preset::S3.flags(Some(10));
        assert!(f.windows(2).any(|w| w == ["--pipeline", "16"]));
        assert!(f.windows(2).any(|w| w == ["--requests", "10"]));
        assert!(Preset::S6.flags(None).contains(&"--reconnect".to_string()));
        assert!(Preset::Fanout.flags(None).contains(&"mget:10".to_string()));
        let w = warmup_flags(&f, 20);
        assert!(!w.iter().any(|x| x == "--requests" || x == "10"));
        assert!(w.windows(2).any(|w| w == ["--duration", "20s"]));
    }
}
