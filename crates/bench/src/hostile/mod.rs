//! `slotgate bench hostile`: a fuzzer of hostile clients against a live proxy (issue "No
//! client can hurt another", item 4). Unit and integration tests check the cases someone
//! thought of; this runs a catalogue of attacks (extreme counts and sizes, unfinished frames,
//! garbage, clients that never read, commands generated from the whole command table) one
//! after the other against a release proxy with one worker, beside a bystander that PINGs
//! that same worker, and judges each by the oracles in `oracle.rs`. A failure is shrunk and
//! printed as a command line that reproduces it. docs/hostile.md describes the cases and
//! bounds.

mod cases;
mod oracle;
mod payloads;
mod report;
mod shrink;
mod table_gen;
mod target;
mod wire;

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;

use crate::bystander::Bystander;
use crate::keys::Rng;
use cases::{Case, Ctx, CASES};
use oracle::{Bounds, Observed, RssWatch};
use report::Row;
use target::Target;

/// Flags of `slotgate bench hostile`.
#[derive(Args, Debug, Clone)]
pub struct HostileArgs {
    /// Time for the cases, in seconds: one pass over them at least, more passes (with the
    /// next seeds) while time is left [default: one pass, as if 60].
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Seed of the first pass [default: from the clock, printed].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Only these cases (comma-separated; `--list` names them).
    #[arg(long, value_delimiter = ',')]
    pub case: Vec<String>,
    /// Leave these cases out (comma-separated), e.g. known failures in a CI run.
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Every case at this size instead of its own default (a reproduction's size).
    #[arg(long)]
    pub size: Option<u64>,
    /// Seconds each case attacks [default: --seconds shared by the cases, 2 to 15 each].
    #[arg(long)]
    pub case_seconds: Option<f64>,
    /// The bystander's worst PING allowed during a case, ms (the acceptance on a
    /// 2-core machine, release build).
    #[arg(long, default_value_t = 250.0)]
    pub ping_ms: f64,
    /// The proxy's `limits.memory_budget_bytes`, MiB.
    #[arg(long, default_value_t = 256)]
    pub budget_mb: u64,
    /// RSS allowed above the budget, MiB.
    #[arg(long, default_value_t = 256)]
    pub slack_mb: u64,
    /// File descriptors allowed above their level before the case, once it closed.
    #[arg(long, default_value_t = 4)]
    pub fd_slack: usize,
    /// Growth of the masters' summed RSS allowed during a case, MiB.
    #[arg(long, default_value_t = 256)]
    pub node_slack_mb: u64,
    /// How long the fds may take to come back to their level, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub fd_ceiling: f64,
    /// Smaller sizes tried on a failure (each halves the last failing one).
    #[arg(long, default_value_t = 4)]
    pub shrink_tries: usize,
    /// Print the cases and exit.
    #[arg(long)]
    pub list: bool,
}

/// Runs the cases and prints a row each; fails when any case failed.
pub fn run(a: &HostileArgs) -> Result<()> {
    if a.list {
        for c in CASES {
            println!("{:<22} {:>10}  {}", c.name, c.size, c.what);
        }
        return Ok(());
    }
    let mut chosen = choose(&a.case)?;
    for name in &a.skip {
        anyhow::ensure!(
            cases::find(name).is_some(),
            "unknown case {name:?} in --skip"
        );
    }
    chosen.retain(|c| !a.skip.iter().any(|s| s == c.name));
    anyhow::ensure!(!chosen.is_empty(), "every case is skipped");
    if !a.skip.is_empty() {
        println!("hostile: skipping {}", a.skip.join(", "));
    }
    let seed = a.seed.unwrap_or_else(clock_seed);
    let seconds = a.seconds.unwrap_or(60.0);
    let case_secs = a
        .case_seconds
        .unwrap_or(((seconds / chosen.len() as f64).clamp(2.0, 15.0) * 10.0).floor() / 10.0);
    anyhow::ensure!(
        case_secs > 0.0 && case_secs <= 86_400.0 && seconds.is_finite(),
        "--case-seconds must be in (0, 86400] and --seconds finite"
    );
    let bounds = Bounds {
        ping_ms: a.ping_ms,
        budget: a.budget_mb << 20,
        slack: a.slack_mb << 20,
        fd_slack: a.fd_slack,
        fd_ceiling: Duration::from_secs_f64(a.fd_ceiling.clamp(0.0, 3600.0)),
        node_slack: a.node_slack_mb << 20,
    };
    // The attackers, the bystander and the cluster share CPU0; the proxy has CPU1 alone, as
    // in the other scenarios, so a slow PING is the proxy's and not the scheduler's.
    crate::systems::pin_this_thread_to_generator()?;
    crate::scenario::raise_nofile(4096)?;
    let dir = std::env::temp_dir().join(format!("slotgate-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut target = Target::start(&dir, bounds.budget)?;
    println!(
        "hostile: seed {seed}, {} cases × {case_secs:.1} s, proxy --threads 1 with \
         memory_budget_bytes {} MiB; bounds: worst PING ≤ {} ms, RSS ≤ {} MiB (budget + {} MiB), \
         fds within {} of their level after {:?}, masters' RSS growth ≤ {} MiB",
        chosen.len(),
        a.budget_mb,
        a.ping_ms,
        bounds.rss_limit() >> 20,
        a.slack_mb,
        a.fd_slack,
        bounds.fd_ceiling,
        a.node_slack_mb
    );
    println!("{}", report::header());
    let t0 = Instant::now();
    let (mut passed, mut failed) = (0, 0);
    let case_time = Duration::from_secs_f64(case_secs);
    'passes: for pass in 0u64.. {
        let pass_seed = seed.wrapping_add(pass);
        for case in &chosen {
            if pass > 0 && t0.elapsed().as_secs_f64() >= seconds {
                break 'passes;
            }
            let size = a.size.unwrap_or(case.size);
            let row = run_case(&mut target, case, pass_seed, size, case_time, &bounds)?;
            println!("{}", report::line(&row));
            if row.passed() {
                passed += 1;
                continue;
            }
            failed += 1;
            let smallest = shrink::shrink(size, case.min_size, a.shrink_tries, |s| {
                let r = run_case(&mut target, case, pass_seed, s, case_time, &bounds).ok()?;
                println!("  shrink: {}", report::line(&r));
                Some(!r.passed())
            });
            println!(
                "  reproduce: {}",
                report::repro(case.name, row.seed, smallest, case_secs)
            );
        }
        if a.seconds.is_none() || t0.elapsed().as_secs_f64() >= seconds {
            break;
        }
    }
    if failed > 0 {
        println!("proxy stderr kept in {}", target.log_path().display());
    }
    target.stop();
    if failed == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!("{}", report::closing(passed, failed));
    if failed > 0 {
        bail!("{failed} hostile case run(s) failed");
    }
    Ok(())
}

/// The cases named, or all of them.
fn choose(names: &[String]) -> Result<Vec<&'static Case>> {
    if names.is_empty() {
        return Ok(CASES.iter().collect());
    }
    names
        .iter()
        .map(|n| match cases::find(n) {
            Some(c) => Ok(c),
            None => {
                let known: Vec<&str> = CASES.iter().map(|c| c.name).collect();
                bail!("unknown case {n:?}; known: {}", known.join(", "))
            }
        })
        .collect()
}

/// A seed from the clock, for runs that do not name one.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 % 1_000_000_000)
        .unwrap_or(1)
}

/// The case's own random stream: the pass's seed mixed with its name, so two cases of a pass
/// differ and a reproduction of one case alone gets the same stream.
fn case_rng(seed: u64, name: &str) -> Rng {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Rng::new(seed ^ h)
}

/// One case at one size beside a bystander, then the oracles.
fn run_case(
    target: &mut Target,
    case: &Case,
    seed: u64,
    size: u64,
    time: Duration,
    bounds: &Bounds,
) -> Result<Row> {
    target.renew()?;
    target.flush();
    let fds_before = target.fds().unwrap_or(0);
    let log_from = target.log_len();
    let nodes_before = oracle::rss_sum(&target.node_pids());
    let watch = RssWatch::start(target.pid(), target.node_pids());
    let bystander = Bystander::start(target.addr())?;
    let floor = Bystander::start(target.floor_addr())?;
    let mut ctx = Ctx {
        addr: target.addr(),
        deadline: Instant::now() + time,
        rng: case_rng(seed, case.name),
        size,
    };
    let note = case
        .run(&mut ctx)
        .unwrap_or_else(|e| format!("case error: {e:#}"));
    let pings = bystander.finish();
    let floor = floor.finish();
    let dead = target.check_alive(Duration::from_secs(5)).err();
    let fds_after = oracle::settle_fds(
        || target.fds(),
        fds_before,
        bounds.fd_slack,
        bounds.fd_ceiling,
    );
    let (peak_rss, nodes_peak) = watch.finish();
    let mut bounds = *bounds;
    let mut note = note;
    if let Some(why) = case.nodes_unjudged {
        bounds.node_slack = u64::MAX;
        note.push_str(&format!("; nodes not judged: {why}"));
    }
    let observed = Observed {
        pings,
        peak_rss,
        nodes_before,
        nodes_peak,
        fds_before,
        fds_after,
        dead,
        alarms: target.alarming_lines(log_from),
    };
    Ok(Row {
        floor_ms: floor.max,
        case: case.name,
        seed,
        size,
        why: oracle::verdict(&observed, &bounds),
        observed,
        note,
    })
}
