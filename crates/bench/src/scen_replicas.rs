//! `scenario replica-reads`: the same read-heavy load (get:9,set:1) through slotgate in front
//! of a 3x1 cluster, once with `read_policy = "master"` and once with `"prefer-replica"`, in
//! one run. Reports requests/s, errors and p99, and the CPU the masters and the replicas
//! spent per second of load (schedstat of their pids), plus the GETs each side served (INFO
//! commandstats deltas): issue 15's acceptance figure is replicas ≥ 80% of the GETs under
//! `prefer-replica`, and the masters' CPU falling accordingly.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use serde_json::Value;

use crate::admin::{cmdstat_calls, Admin};
use crate::cpu::process_cpu_ns;
use crate::procs;
use crate::scenario::{load, prepopulate_via};

/// Flags of `scenario replica-reads`.
#[derive(Args, Debug, Clone)]
pub struct ReplicaArgs {
    /// Concurrent clients.
    #[arg(long, default_value_t = 50)]
    pub clients: u64,
    /// Length of each policy's load.
    #[arg(long, default_value = "10s", value_parser = crate::args::parse_duration)]
    pub duration: Duration,
    /// Proxy worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Distinct keys (prepopulated once).
    #[arg(long, default_value_t = 10_000)]
    pub keyspace: u64,
}

/// The policies compared, in order.
const POLICIES: [&str; 2] = ["master", "prefer-replica"];

/// One policy's figures.
struct Row {
    policy: &'static str,
    load: Value,
    masters_cpu: f64,
    replicas_cpu: f64,
    master_gets: u64,
    replica_gets: u64,
}

/// Runs the scenario.
pub fn run(a: &ReplicaArgs) -> Result<()> {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 1,
        ..Default::default()
    };
    let mut cluster = devcluster::Cluster::start(&opts)?;
    let result = with_cluster(&cluster, a);
    let _ = cluster.stop();
    result
}

fn with_cluster(cluster: &devcluster::Cluster, a: &ReplicaArgs) -> Result<()> {
    let masters = nodes(cluster, false);
    let replicas = nodes(cluster, true);
    wait(|| replicas_in_sync(&cluster.masters()), "replicas in sync")?;
    let dir = std::env::temp_dir().join(format!("slotgate-replica-reads-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut rows = Vec::new();
    for (i, policy) in POLICIES.into_iter().enumerate() {
        let config = dir.join(format!("{policy}.toml"));
        std::fs::write(&config, format!("[cluster]\nread_policy = \"{policy}\"\n"))?;
        let extra = ["--config".to_string(), config.display().to_string()];
        let proxy = procs::slotgate_with(None, cluster.seed(), a.threads, &extra)?;
        let keys = [
            "--target".to_string(),
            proxy.addr().to_string(),
            format!("--keyspace={}", a.keyspace),
            "--value-size=32".into(),
        ];
        if i == 0 {
            prepopulate_via(&keys)?;
        }
        if policy != "master" {
            wait(
                || usable_replicas(proxy.addr()) == replicas.len(),
                "replicas usable",
            )?;
        }
        rows.push(measure(policy, &keys, a, &masters, &replicas)?);
    }
    report(a, &rows);
    Ok(())
}

/// The load for one policy, with the nodes' CPU and GETs around it.
fn measure(
    policy: &'static str,
    keys: &[String],
    a: &ReplicaArgs,
    masters: &[(SocketAddr, String)],
    replicas: &[(SocketAddr, String)],
) -> Result<Row> {
    let gets = |nodes: &[(SocketAddr, String)]| -> Result<u64> {
        let mut sum = 0;
        for (addr, _) in nodes {
            sum += cmdstat_calls(&Admin::connect(*addr)?.info("commandstats")?, "get");
        }
        Ok(sum)
    };
    let cpu = |nodes: &[(SocketAddr, String)]| -> u64 {
        nodes
            .iter()
            .map(|(_, pid)| process_cpu_ns(pid).unwrap_or(0))
            .sum()
    };
    let (g_m, g_r, c_m, c_r) = (gets(masters)?, gets(replicas)?, cpu(masters), cpu(replicas));
    let started = Instant::now();
    let mut flags: Vec<&str> = keys[2..].iter().map(String::as_str).collect();
    let (clients, duration) = (
        format!("--clients={}", a.clients),
        format!("--duration={}ms", a.duration.as_millis()),
    );
    flags.extend(["--mix=get:9,set:1", &clients, &duration]);
    let load = load(keys[1].parse()?, &flags)?;
    let secs = started.elapsed().as_secs_f64();
    Ok(Row {
        policy,
        load,
        masters_cpu: (cpu(masters) - c_m) as f64 / 1e9 / secs,
        replicas_cpu: (cpu(replicas) - c_r) as f64 / 1e9 / secs,
        master_gets: gets(masters)? - g_m,
        replica_gets: gets(replicas)? - g_r,
    })
}

/// The cluster's masters (or replicas) with their pids, as text for /proc.
fn nodes(cluster: &devcluster::Cluster, replicas: bool) -> Vec<(SocketAddr, String)> {
    cluster
        .nodes()
        .iter()
        .filter(|n| n.master_of.is_some() == replicas)
        .map(|n| (n.addr, n.pid.to_string()))
        .collect()
}

fn replicas_in_sync(masters: &[SocketAddr]) -> bool {
    masters.iter().all(|m| {
        Admin::connect(*m)
            .and_then(|mut a| a.info("replication"))
            .is_ok_and(|i| i.contains("connected_slaves:1") && i.contains("state=online"))
    })
}

/// Replicas the proxy's INFO backends shows as usable.
fn usable_replicas(proxy: SocketAddr) -> usize {
    let info = Admin::connect(proxy).and_then(|mut a| a.info("backends"));
    info.map_or(0, |i| {
        i.lines()
            .filter(|l| l.starts_with("replica") && l.contains("state=up"))
            .count()
    })
}

/// Poll `ready` every 100 ms for up to 30 s.
fn wait(mut ready: impl FnMut() -> bool, what: &str) -> Result<()> {
    let started = Instant::now();
    while !ready() {
        if started.elapsed() > Duration::from_secs(30) {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn report(a: &ReplicaArgs, rows: &[Row]) {
    println!(
        "replica-reads: get:9,set:1, {} clients, {:?} per policy, slotgate --threads {}, 3x1 cluster, load average {}",
        a.clients,
        a.duration,
        a.threads,
        crate::cpu::loadavg()
    );
    println!("policy              req/s   errors   p99 µs   masters CPU s/s   replicas CPU s/s   GETs on replicas");
    for r in rows {
        let total = r.master_gets + r.replica_gets;
        let share = match total {
            0 => 0.0,
            n => 100.0 * r.replica_gets as f64 / n as f64,
        };
        println!(
            "{:<16} {:>8.0} {:>8} {:>8.0} {:>17.3} {:>18.3} {:>17.1}%",
            r.policy,
            r.load["throughput_rps"].as_f64().unwrap_or(0.0),
            r.load["errors"]["total"].as_u64().unwrap_or(0),
            r.load["p99_us"].as_f64().unwrap_or(0.0),
            r.masters_cpu,
            r.replicas_cpu,
            share
        );
    }
}
