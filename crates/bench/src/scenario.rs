//! `slotgate bench scenario NAME`: the field reports' experiments as commands. This file holds
//! the subcommand, the helpers they share (load in a pinned child, idle connections, fd limit)
//! and the two connection-count scenarios; the others live in `scen_*.rs`.

use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::procs;
use crate::systems::{self, System, GEN_CPU};

/// The scenarios.
#[derive(Subcommand, Debug)]
pub enum ScenarioCommand {
    /// Connect, PING, close: server CPU per connection with 0 and with N idle clients.
    ShortConn(ConnArgs),
    /// CPU per INFO with 1 client and with N idle clients.
    InfoIdle(ConnArgs),
    /// Clients pipeline GETs without ever reading; sample the server's RSS.
    SlowReaders(crate::scen_mem::SlowArgs),
    /// 10 pipelined SETs then GETs of 100 KB .. 100 MB values: time and peak RSS.
    BigValues(crate::scen_mem::BigArgs),
    /// slow-readers and big-values (a bystander's PING while 10×100 MB pass) on slotgate, in
    /// one run with the same fairness knobs, and both verdicts.
    Fairness(crate::scen_fair::FairArgs),
    /// Steady load while a third of the slots migrate live; errors, p99/s, topology calls.
    Reshard(crate::scen_reshard::ReshardArgs),
    /// Steady load, then kill -9 of a master with a replica: unavailability, crossed replies.
    Failover(crate::scen_failover::FailoverArgs),
    /// get:9,set:1 through slotgate with read_policy master, then prefer-replica: req/s and
    /// the CPU of masters and replicas.
    ReplicaReads(crate::scen_replicas::ReplicaArgs),
}

/// Flags shared by the connection-count scenarios.
#[derive(Args, Debug, Clone)]
pub struct ConnArgs {
    /// Systems to measure, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "redis,slotgate,nutcracker"
    )]
    pub systems: Vec<String>,
    /// Idle connections held open in the second measurement.
    #[arg(long, default_value_t = 10_000)]
    pub idle: usize,
    /// Requests (short-conn: connections) per measurement.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Open loop at this rate (per second) in both measurements. Per-connection cost
    /// depends on load (events batch per wakeup), and with thousands of idle connections
    /// the generator's own connect() slows (its port search), so only an equal offered
    /// load compares the two fairly. Omitted: closed loop, as fast as it goes.
    #[arg(long)]
    pub rate: Option<f64>,
}

/// Runs a scenario.
pub fn run(cmd: ScenarioCommand) -> Result<()> {
    match cmd {
        ScenarioCommand::ShortConn(a) => conn_scenario(&a, Kind::ShortConn),
        ScenarioCommand::InfoIdle(a) => conn_scenario(&a, Kind::InfoIdle),
        ScenarioCommand::SlowReaders(a) => crate::scen_mem::slow_readers(&a),
        ScenarioCommand::BigValues(a) => crate::scen_mem::big_values(&a).map(|_| ()),
        ScenarioCommand::Fairness(a) => crate::scen_fair::run(&a),
        ScenarioCommand::Reshard(a) => crate::scen_reshard::run(&a),
        ScenarioCommand::Failover(a) => crate::scen_failover::run(&a),
        ScenarioCommand::ReplicaReads(a) => crate::scen_replicas::run(&a),
    }
}

/// Runs `bench run --json` against `target` in a child pinned to the generator CPU.
pub fn load(target: SocketAddr, flags: &[&str]) -> Result<Value> {
    let out = procs::self_command(Some(GEN_CPU))?
        .args(["run", "--json", "--target", &target.to_string()])
        .args(flags)
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        bail!("load against {target} failed");
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Prepopulates the keyspace through `route` (`--target X` or `--cluster S`, plus key flags).
pub fn prepopulate_via(route: &[String]) -> Result<()> {
    let ok = procs::self_command(None)?
        .args(["run", "--prepopulate", "--requests", "1"])
        .args(route)
        .stdout(Stdio::null())
        .status()?
        .success();
    anyhow::ensure!(ok, "prepopulate failed");
    Ok(())
}

/// Starts `bench run --json` with `route` and `flags` in the background.
pub fn spawn_load(route: &[String], flags: &[String]) -> Result<std::process::Child> {
    Ok(procs::self_command(None)?
        .args(["run", "--json"])
        .args(flags)
        .args(route)
        .stdout(Stdio::piped())
        .spawn()?)
}

/// Waits for a background load and parses its report.
pub fn finish_load(child: std::process::Child) -> Result<Value> {
    let out = child.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "load failed");
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The per-second table of a load report.
pub fn print_seconds(load: &Value) {
    println!("second     ok   errors     p99 µs");
    for s in load["per_second"].as_array().into_iter().flatten() {
        println!(
            "{:>6} {:>6} {:>8} {:>10.0}",
            s["t"].as_u64().unwrap_or(0),
            s["ok"].as_u64().unwrap_or(0),
            s["errors"].as_u64().unwrap_or(0),
            s["p99_us"].as_f64().unwrap_or(0.0)
        );
    }
}

/// Opens `n` connections and keeps them (idle) until the vector drops.
pub fn hold_idle(addr: SocketAddr, n: usize) -> Result<Vec<TcpStream>> {
    raise_nofile(n + 1024)?;
    (0..n)
        .map(|i| TcpStream::connect(addr).with_context(|| format!("idle connection #{i}")))
        .collect()
}

/// Raises this process's soft fd limit to the hard limit when `need` exceeds it (children
/// started afterwards inherit it). Uses prlimit(1) because this crate forbids unsafe code.
pub fn raise_nofile(need: usize) -> Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits")?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .context("no fd limit")?;
    let nums: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    let (soft, hard) = (
        nums.first().copied().unwrap_or("0"),
        nums.get(1).copied().unwrap_or("0"),
    );
    let soft: usize = soft.parse().unwrap_or(usize::MAX);
    if soft >= need {
        return Ok(());
    }
    let pid = std::process::id().to_string();
    let ok = std::process::Command::new("prlimit")
        .args(["--pid", &pid, &format!("--nofile={hard}:{hard}")])
        .status()
        .is_ok_and(|s| s.success());
    let hard: usize = hard.parse().unwrap_or(usize::MAX);
    if !ok || hard < need {
        bail!("need {need} file descriptors; the limit is soft {soft}, hard {hard}");
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    ShortConn,
    InfoIdle,
}

fn conn_scenario(a: &ConnArgs, kind: Kind) -> Result<()> {
    raise_nofile(a.idle + 1024)?;
    let dir = std::env::temp_dir().join(format!("slotgate-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let names: Vec<&str> = a.systems.iter().map(String::as_str).collect();
    let systems = systems::start_named(&names, &dir)?;
    let unit = if kind == Kind::ShortConn {
        "connection"
    } else {
        "INFO"
    };
    println!(
        "system       idle   server CPU µs/{unit} (user-space part)   rate/s   errors   p99 µs"
    );
    for sys in &systems {
        let mut per = Vec::new();
        for idle in [0, a.idle] {
            let held = hold_idle(sys.addr(), idle)?;
            let (cpu, user, v) = measure_one(sys, kind, a.requests, a.rate)?;
            drop(held);
            println!(
                "{:<12} {idle:>5}   {cpu:>18.2} ({user:>6.2})   {:>7.0}   {:>6}   {:>7.0}",
                sys.name,
                v["throughput_rps"].as_f64().unwrap_or(0.0),
                v["errors"]["total"],
                v["p99_us"].as_f64().unwrap_or(0.0)
            );
            if v["errors"]["total"].as_f64() >= v["requests"].as_f64() {
                println!(
                    "{:<12} every request failed: this figure measures failures",
                    sys.name
                );
            }
            per.push((cpu, user));
        }
        println!(
            "{}: key figure: {idle} idle clients multiply the CPU per {unit} by {:.2} (user-space part by {:.2})",
            sys.name,
            per[1].0 / per[0].0,
            per[1].1 / per[0].1,
            idle = a.idle
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Server CPU µs per request for one load, the part of it spent in user space (the rest is
/// the kernel's, which every server pays alike), and the load's report.
fn measure_one(
    sys: &System,
    kind: Kind,
    requests: Option<u64>,
    rate: Option<f64>,
) -> Result<(f64, f64, Value)> {
    let (flags, n): (&[&str], u64) = match kind {
        Kind::ShortConn => (
            &["--reconnect", "--command", "PING", "--clients", "20"],
            20_000,
        ),
        Kind::InfoIdle => (&["--command", "INFO", "--clients", "1"], 2_000),
    };
    let n = requests.unwrap_or(n).to_string();
    let rate = rate.map(|r| r.to_string());
    let mut all: Vec<&str> = flags.to_vec();
    all.extend(["--requests", &n]);
    if let Some(r) = &rate {
        all.extend(["--rate", r]);
    }
    let pid = sys.sut.pid();
    let ticks0 = crate::cpu::user_sys_ticks(&pid).unwrap_or((0, 0));
    let cpu0 = sys.sut.cpu_ns()?;
    let v = load(sys.addr(), &all)?;
    let cpu1 = sys.sut.cpu_ns()?;
    let ticks1 = crate::cpu::user_sys_ticks(&pid).unwrap_or((0, 0));
    let reqs = v["requests"].as_f64().unwrap_or(0.0).max(1.0);
    let cpu = (cpu1 - cpu0) as f64 / 1000.0 / reqs;
    let (user, sys_t) = (ticks1.0 - ticks0.0, ticks1.1 - ticks0.1);
    let share = user as f64 / ((user + sys_t) as f64).max(1.0);
    Ok((cpu, cpu * share, v))
}
