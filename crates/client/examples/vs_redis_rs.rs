//! Benchmark (not a test): pipelined GET throughput and client CPU per request,
//! slotgate-client against redis-rs's async `ClusterClient`, in the same
//! process, on the same 3-master devcluster, interleaved.
//!
//! ```text
//! cargo run --release -p slotgate-client --example vs_redis_rs [-- ROUNDS [REPS]]
//! ```
//! (`scripts/client_bench` runs it pinned: this process on CPU1, the
//! redis-servers on CPU0.)
//!
//! Workload: 50 tasks; each round a task pipelines 16 GETs and checks every
//! reply; `ROUNDS` rounds per task (default 500, i.e. 400,000 GETs per run).
//! redis-rs's cluster pipelines must stay in one slot ("crossed slots" error
//! otherwise), so the 16 keys of one round share a hash tag; the tag changes
//! every round, so the rounds spread over all three masters. 1,000 tags × 16
//! keys = 16,000 keys of 64 bytes are written first.
//!
//! CPU is this process's on-CPU time, the sum of `/proc/self/task/*/schedstat`
//! (all threads: runtime workers and anything the clients spawn) before and
//! after each run. One discarded warm-up round of both, then `REPS` (default
//! 5) reps; the order of the two clients alternates between reps.

use std::time::{Duration, Instant};

use redis::AsyncCommands as _;
use slotgate_client::{Client, Config, Pipeline, Value};

const TASKS: usize = 50;
const DEPTH: usize = 16;
const TAGS: usize = 1000;
const VALUE_LEN: usize = 64;

fn key(tag: usize, i: usize) -> String {
    format!("{{t{tag}}}:k{i}")
}

/// On-CPU nanoseconds of every thread of this process.
fn cpu_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The tag task `t` uses in round `r`.
fn tag_of(t: usize, r: usize) -> usize {
    (t * 7919 + r) % TAGS
}

async fn run_slotgate(client: &Client, rounds: usize) -> anyhow::Result<u64> {
    let mut tasks = Vec::with_capacity(TASKS);
    for t in 0..TASKS {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut bad = 0u64;
            let mut p = Pipeline::with_capacity(DEPTH);
            for r in 0..rounds {
                p.clear();
                let tag = tag_of(t, r);
                for i in 0..DEPTH {
                    p.cmd(["GET", key(tag, i).as_str()]);
                }
                for reply in client.execute(&p).await {
                    match reply {
                        Ok(Value::BulkString(b)) if b.len() == VALUE_LEN => {}
                        _ => bad += 1,
                    }
                }
            }
            bad
        }));
    }
    let mut bad = 0;
    for t in tasks {
        bad += t.await?;
    }
    Ok(bad)
}

async fn run_redis_rs(
    conn: &redis::cluster_async::ClusterConnection,
    rounds: usize,
) -> anyhow::Result<u64> {
    let mut tasks = Vec::with_capacity(TASKS);
    for t in 0..TASKS {
        let mut conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let mut bad = 0u64;
            for r in 0..rounds {
                let tag = tag_of(t, r);
                let mut p = redis::pipe();
                for i in 0..DEPTH {
                    p.get(key(tag, i));
                }
                match p.query_async::<Vec<Option<Vec<u8>>>>(&mut conn).await {
                    Ok(vals) => {
                        bad += vals
                            .iter()
                            .filter(|v| v.as_ref().map(Vec::len) != Some(VALUE_LEN))
                            .count() as u64;
                        bad += DEPTH.saturating_sub(vals.len()) as u64;
                    }
                    Err(_) => bad += DEPTH as u64,
                }
            }
            bad
        }));
    }
    let mut bad = 0;
    for t in tasks {
        bad += t.await?;
    }
    Ok(bad)
}

struct Sample {
    secs: f64,
    cpu_ns: u64,
    bad: u64,
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Pins the redis-servers to CPU0 when this process was started pinned to
/// one CPU (`taskset -c 1`), so the clients have their core to themselves.
fn pin_servers(cluster: &devcluster::Cluster) {
    if std::env::var_os("PIN_SERVERS").is_none() {
        return;
    }
    for n in cluster.nodes() {
        let _ = std::process::Command::new("taskset")
            .args(["-pc", "0", &n.pid.to_string()])
            .stdout(std::process::Stdio::null())
            .status();
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let rounds = args.first().copied().unwrap_or(500);
    let reps = args.get(1).copied().unwrap_or(5);
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        ..Default::default()
    };
    let cluster = devcluster::Cluster::start(&opts)?;
    pin_servers(&cluster);
    let seeds: Vec<String> = cluster.masters().iter().map(|a| a.to_string()).collect();

    let ours = Client::cluster_with(seeds.clone(), Config::default()).await?;
    let theirs = redis::cluster::ClusterClient::new(
        seeds
            .iter()
            .map(|s| format!("redis://{s}"))
            .collect::<Vec<_>>(),
    )?
    .get_async_connection()
    .await?;

    // Prepopulate through slotgate-client, check through redis-rs.
    let value = [b'v'; VALUE_LEN];
    for tag in 0..TAGS {
        let mut p = Pipeline::with_capacity(DEPTH);
        for i in 0..DEPTH {
            p.add(
                slotgate_client::Cmd::new("SET")
                    .arg(key(tag, i))
                    .arg(&value[..]),
            );
        }
        for r in ours.execute(&p).await {
            r?;
        }
    }
    let mut check = theirs.clone();
    let got: Option<Vec<u8>> = check.get(key(TAGS - 1, DEPTH - 1)).await?;
    anyhow::ensure!(
        got.as_deref() == Some(&value[..]),
        "prepopulation not visible"
    );

    let total = (TASKS * DEPTH * rounds) as f64;
    println!(
        "{TASKS} tasks x {rounds} rounds x pipelines of {DEPTH} GETs ({total} GETs per run), \
         3 masters, {VALUE_LEN}-byte values; 1 warm-up + {reps} interleaved reps"
    );
    let mut ours_s = Vec::new();
    let mut theirs_s = Vec::new();
    for rep in 0..=reps {
        for which in [rep % 2, 1 - rep % 2] {
            let (c0, t0) = (cpu_ns(), Instant::now());
            let bad = if which == 0 {
                run_slotgate(&ours, rounds).await?
            } else {
                run_redis_rs(&theirs, rounds).await?
            };
            let s = Sample {
                secs: t0.elapsed().as_secs_f64(),
                cpu_ns: cpu_ns() - c0,
                bad,
            };
            let name = ["slotgate-client", "redis-rs"][which];
            println!(
                "rep {rep}{} {name:>15}: {:>9.0} req/s  {:>6.3} µs CPU/req  bad replies {}",
                if rep == 0 { " (warm-up)" } else { "" },
                total / s.secs,
                s.cpu_ns as f64 / 1e3 / total,
                s.bad
            );
            if rep > 0 {
                [&mut ours_s, &mut theirs_s][which].push(s);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let summary = |v: &[Sample]| {
        (
            median(v.iter().map(|s| total / s.secs).collect()),
            median(v.iter().map(|s| s.cpu_ns as f64 / 1e3 / total).collect()),
            v.iter().map(|s| s.bad).sum::<u64>(),
        )
    };
    let (o_rps, o_cpu, o_bad) = summary(&ours_s);
    let (t_rps, t_cpu, t_bad) = summary(&theirs_s);
    println!(
        "\n| client | req/s median (min–max) | client CPU µs/req median (min–max) | bad replies |"
    );
    println!("|---|---|---|---|");
    for (name, rps, cpu, bad) in [
        ("slotgate-client", o_rps, o_cpu, o_bad),
        ("redis-rs", t_rps, t_cpu, t_bad),
    ] {
        println!(
            "| {name} | {:.0} ({:.0}–{:.0}) | {:.3} ({:.3}–{:.3}) | {bad} |",
            rps.0, rps.1, rps.2, cpu.0, cpu.1, cpu.2
        );
    }
    println!(
        "\nslotgate-client ÷ redis-rs: throughput {:.2}×, CPU/req {:.2}×",
        o_rps.0 / t_rps.0,
        o_cpu.0 / t_cpu.0
    );
    Ok(())
}
