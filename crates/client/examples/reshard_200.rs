//! Scenario (not a test): 200 tasks sharing ONE slotgate-client `Client`,
//! connected straight to a 3-master devcluster (no proxy), do SET then GET
//! with a value check at a steady rate while every slot of the first master
//! migrates live to the second (`bench::scen_reshard::migrate`: SETSLOT
//! IMPORTING/MIGRATING, MIGRATE ... KEYS, SETSLOT NODE on every master).
//!
//! ```text
//! cargo run --release -p slotgate-client --example reshard_200 [-- RATE_PER_TASK]
//! ```
//! Each task owns 50 keys (10,000 in all), so a GET must return exactly the
//! value the same task last SET. Reported: errors (failed calls and wrong
//! values), the client's counters, and the CLUSTER SLOTS/NODES/SHARDS calls
//! every master executed (INFO commandstats) between the start and the end of
//! the migration, per second of migration. The target is ≤ 1 topology query
//! per second for this client process and 0 errors.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slotgate_client::{Client, Config};

const TASKS: usize = 200;
const KEYS_PER_TASK: usize = 50;
const TOPO_CMDS: [&str; 3] = ["cluster|slots", "cluster|nodes", "cluster|shards"];

#[derive(Default)]
struct Counts {
    ops: AtomicU64,
    errors: AtomicU64,
    wrong: AtomicU64,
}

/// `calls=` of `cmdstat_<cmd>` in an INFO commandstats text, 0 when absent.
fn calls(info: &str, cmd: &str) -> u64 {
    let prefix = format!("cmdstat_{cmd}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Per master, the calls of each topology command.
fn topo_calls(cluster: &devcluster::Cluster) -> anyhow::Result<Vec<[u64; 3]>> {
    cluster
        .masters()
        .iter()
        .map(|m| match cluster.command(*m, &["INFO", "commandstats"])? {
            devcluster::Reply::Bulk(Some(b)) => {
                let info = String::from_utf8_lossy(&b).into_owned();
                Ok(TOPO_CMDS.map(|c| calls(&info, c)))
            }
            other => anyhow::bail!("INFO commandstats: {other:?}"),
        })
        .collect()
}

async fn worker(client: Client, t: usize, period: Duration, stop: Arc<AtomicBool>, c: Arc<Counts>) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Spread the tasks' first ticks over one period.
    tokio::time::sleep(period.mul_f64(t as f64 / TASKS as f64)).await;
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let key = format!("r:{t}:{}", seq as usize % KEYS_PER_TASK);
        let value = format!("{t}:{seq}:{}", "v".repeat(48));
        seq += 1;
        c.ops.fetch_add(2, Ordering::Relaxed);
        if let Err(e) = client.set(&key, &value).await {
            eprintln!("SET {key}: {e}");
            c.errors.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        match client.get(&key).await {
            Ok(Some(v)) if v == value.as_bytes() => {}
            Ok(other) => {
                eprintln!("GET {key}: wrong value {other:?}");
                c.wrong.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("GET {key}: {e}");
                c.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let rate: f64 = match std::env::args().nth(1) {
        Some(a) => a.parse()?,
        None => 20.0,
    };
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        extra_config: vec![("cluster-allow-replica-migration".into(), "no".into())],
        ..Default::default()
    };
    let cluster = Arc::new(devcluster::Cluster::start(&opts)?);
    let seeds: Vec<String> = cluster.masters().iter().map(|a| a.to_string()).collect();
    let client = Client::cluster_with(seeds, Config::default()).await?;

    // Every key exists before the migration starts, so MIGRATE has work.
    for t in 0..TASKS {
        let mut p = slotgate_client::Pipeline::with_capacity(KEYS_PER_TASK);
        for j in 0..KEYS_PER_TASK {
            p.cmd(["SET", &format!("r:{t}:{j}"), "init"]);
        }
        for r in client.execute(&p).await {
            r?;
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let period = Duration::from_secs_f64(1.0 / rate);
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            tokio::spawn(worker(
                client.clone(),
                t,
                period,
                stop.clone(),
                counts.clone(),
            ))
        })
        .collect();

    tokio::time::sleep(Duration::from_secs(2)).await;
    let stats0 = client.stats();
    let ops0 = counts.ops.load(Ordering::Relaxed);
    let before = topo_calls(&cluster)?;
    let t0 = Instant::now();
    let c2 = cluster.clone();
    let moved = tokio::task::spawn_blocking(move || bench::scen_reshard::migrate(&c2, usize::MAX))
        .await??;
    let secs = t0.elapsed().as_secs_f64();
    let after = topo_calls(&cluster)?;
    let stats1 = client.stats();
    let ops1 = counts.ops.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await?;
    }

    let per_cmd: Vec<u64> = (0..3)
        .map(|i| before.iter().zip(&after).map(|(b, a)| a[i] - b[i]).sum())
        .collect();
    // migrate() itself runs one CLUSTER SLOTS on the source master.
    let slots_by_client = per_cmd[0].saturating_sub(1);
    let errors = counts.errors.load(Ordering::Relaxed);
    let wrong = counts.wrong.load(Ordering::Relaxed);
    println!(
        "{TASKS} tasks on one Client, {rate} SET+GET pairs/s each; {moved} slots migrated in {secs:.1} s \
         ({:.0} commands/s during migration)",
        (ops1 - ops0) as f64 / secs
    );
    println!(
        "commands total {}, errors {errors}, wrong values {wrong}",
        counts.ops.load(Ordering::Relaxed)
    );
    println!(
        "INFO commandstats during migration, all masters: CLUSTER SLOTS {} (1 of them by the migration), \
         NODES {}, SHARDS {}",
        per_cmd[0], per_cmd[1], per_cmd[2]
    );
    println!(
        "client: refresh_performed {}, refresh_requested {}, throttled {}, moved {}, ask {}, tryagain {}",
        stats1.refresh_performed - stats0.refresh_performed,
        stats1.refresh_requested - stats0.refresh_requested,
        stats1.refresh_throttled - stats0.refresh_throttled,
        stats1.moved - stats0.moved,
        stats1.ask - stats0.ask,
        stats1.tryagain - stats0.tryagain,
    );
    let qps = slots_by_client as f64 / secs;
    println!(
        "topology queries per second of migration (1 client process): {qps:.2}  target ≤ 1: {}",
        if qps <= 1.0 { "met" } else { "MISSED" }
    );
    println!(
        "errors: {}  target 0: {}",
        errors + wrong,
        if errors + wrong == 0 { "met" } else { "MISSED" }
    );
    Ok(())
}
