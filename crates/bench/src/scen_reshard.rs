//! `scenario reshard`: the refresh-storm experiment of seed 000. Clients keep a steady load
//! while a third of the slots migrate live (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT
//! NODE). It reports the errors clients saw, p99 per second, and how many CLUSTER
//! SLOTS/NODES/SHARDS each master answered: the storm, or its absence, in numbers.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use resp::Value;
use serde_json::Value as Json;

use crate::admin::{cmdstat_calls, Admin};
use crate::procs;
use crate::scen_reshard_jedis as jedis;
use crate::scenario::{finish_load, prepopulate_via, print_seconds, spawn_load};

/// How the clients reach the cluster.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Via {
    /// Through `slotgate proxy` (release binary, separate process).
    Proxy,
    /// Cluster-aware clients that refresh the whole map per MOVED, fixed node order.
    DirectNaive,
    /// Cluster-aware clients that patch on MOVED and refresh ≤ 1/s from a random node.
    DirectSmart,
    /// Jedis's JedisCluster (Java, scripts/jedis; built with mvn when the jar is missing).
    Jedis,
}

/// Flags of `scenario reshard`.
#[derive(Args, Debug, Clone)]
pub struct ReshardArgs {
    /// Path of the clients.
    #[arg(long, value_enum, default_value = "proxy")]
    pub via: Via,
    /// Concurrent clients.
    #[arg(long, default_value_t = 100)]
    pub clients: u64,
    /// Keys (prepopulated).
    #[arg(long, default_value_t = 30_000)]
    pub keyspace: u64,
    /// Length of the load; migration starts 2 s in.
    #[arg(long, default_value = "20s", value_parser = crate::args::parse_duration)]
    pub duration: Duration,
    /// Open-loop total rate, so every path gets the same offered load.
    #[arg(long, default_value_t = 5000.0)]
    pub rate: f64,
    /// Masters in the cluster (seed 000's scale is 100); every slot of the first one moves.
    #[arg(long, default_value_t = 3)]
    pub masters: usize,
    /// Slots moved per second; 0 moves them as fast as the driver can (about 800/s here,
    /// with 8 round trips and a MIGRATE per slot), the way `redis-cli --cluster reshard` does.
    #[arg(long, default_value_t = 0.0)]
    pub slots_per_sec: f64,
}

const TOPO_CMDS: [&str; 3] = ["cluster|slots", "cluster|nodes", "cluster|shards"];

/// Runs the scenario.
pub fn run(a: &ReshardArgs) -> Result<()> {
    // Fail before starting anything when the Java side cannot run.
    let jar = match a.via {
        Via::Jedis => Some(jedis::ensure_jar()?),
        _ => None,
    };
    // All of one master's slots move away; Redis 7 would then turn the emptied master into a
    // replica (cluster-allow-replica-migration) and refuse the last SETSLOT calls to it.
    let opts = devcluster::Options {
        masters: a.masters,
        replicas: 0,
        extra_config: vec![("cluster-allow-replica-migration".into(), "no".into())],
        ..Default::default()
    };
    let mut cluster = devcluster::Cluster::start(&opts)?;
    let result = with_cluster(&cluster, a, jar.as_deref());
    let _ = cluster.stop();
    result
}

fn with_cluster(
    cluster: &devcluster::Cluster,
    a: &ReshardArgs,
    jar: Option<&std::path::Path>,
) -> Result<()> {
    // Held until the end: dropping it stops the proxy.
    let proxy = match a.via {
        Via::Proxy => Some(procs::slotgate(None, cluster.seed(), 1)?),
        _ => None,
    };
    let route = client_route(cluster, a, proxy.as_ref());
    prepopulate_via(&route)?;
    let masters = cluster.masters();
    let before = topo_calls(&masters)?;
    let child = start_load(cluster, a, jar, &route)?;
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    let moved = migrate_paced(cluster, usize::MAX, a.slots_per_sec).context("migration");
    let took = t0.elapsed();
    // Even when migration failed: the load is bounded.
    let load = match child {
        Load::Bench(c) => finish_load(c)?,
        Load::Jedis(j) => j.finish()?,
    };
    let moved = moved?;
    let after = topo_calls(&masters)?;
    print_headline(a, moved, took);
    report(&load, &masters, &before, &after);
    p99_summary(&load, 2.0, 2.0 + took.as_secs_f64());
    Ok(())
}

/// `bench run` flags that send the load through the proxy or straight at the cluster with
/// the chosen refresh policy, over the prepopulated keyspace.
fn client_route(
    cluster: &devcluster::Cluster,
    a: &ReshardArgs,
    proxy: Option<&procs::Proc>,
) -> Vec<String> {
    let seed = cluster.seed().to_string();
    let mut route: Vec<String> = match (proxy, a.via) {
        (Some(p), _) => vec!["--target".into(), p.addr().to_string()],
        (None, Via::DirectNaive) => vec!["--cluster".into(), seed, "--refresh-policy=naive".into()],
        (None, _) => vec!["--cluster".into(), seed, "--refresh-policy=smart".into()],
    };
    route.extend(["--keyspace".into(), a.keyspace.to_string()]);
    route
}

/// Start the steady load in the background: `bench run`, or Jedis when a jar is given.
fn start_load(
    cluster: &devcluster::Cluster,
    a: &ReshardArgs,
    jar: Option<&std::path::Path>,
    route: &[String],
) -> Result<Load> {
    let flags = [
        "--mix=get:9,set:1".to_string(),
        format!("--clients={}", a.clients),
        format!("--rate={}", a.rate),
        format!("--duration={}ms", a.duration.as_millis()),
    ];
    Ok(match jar {
        // Jedis prepopulates through `bench run` (same key names), then loads on its own.
        Some(jar) => Load::Jedis(jedis::start(
            jar,
            &jedis::Load {
                seed: cluster.seed(),
                clients: a.clients,
                rate: a.rate,
                duration_ms: a.duration.as_millis(),
                keyspace: a.keyspace,
            },
        )?),
        None => Load::Bench(spawn_load(route, &flags)?),
    })
}

/// The run's one-line summary, before the per-master table.
fn print_headline(a: &ReshardArgs, moved: usize, took: Duration) {
    let pace = match a.slots_per_sec {
        p if p > 0.0 => format!(", paced at {p} slots/s"),
        _ => String::new(),
    };
    println!(
        "reshard via {:?}: {moved} slots migrated in {:.1}s under {} clients at {}/s{pace}",
        a.via,
        took.as_secs_f64(),
        a.clients,
        a.rate
    );
}

/// Issue 4's latency figure: the median of the per-second p99s of the seconds that lie
/// wholly inside the migration, against the median of those wholly outside it.
fn p99_summary(load: &Json, start: f64, end: f64) {
    let (mut during, mut steady) = (Vec::new(), Vec::new());
    for s in load["per_second"].as_array().into_iter().flatten() {
        let (t, p99) = (s["t"].as_f64().unwrap_or(0.0), s["p99_us"].as_f64());
        match p99 {
            Some(p) if t >= start && t + 1.0 <= end => during.push(p),
            Some(p) if t + 1.0 <= start || t >= end => steady.push(p),
            _ => {}
        }
    }
    let (Some(d), Some(st)) = (median(&mut during), median(&mut steady)) else {
        return println!("p99: not enough whole seconds inside and outside the migration");
    };
    println!(
        "p99 µs, median of per-second p99s: steady {st:.0} ({} s), during migration {d:.0} ({} s), ratio {:.2}",
        steady.len(),
        during.len(),
        d / st
    );
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// The load in the background: `bench run` or the Jedis program.
enum Load {
    Bench(std::process::Child),
    Jedis(jedis::Running),
}

/// At seed 000's scale, a summary instead of one line per master: how many topology calls
/// the whole cluster got, how many masters got any, and what one CLUSTER SLOTS cost them.
fn report_many(load: &Json, masters: &[SocketAddr], before: &[[u64; 3]], after: &[[u64; 3]]) {
    let deltas: Vec<u64> = (0..masters.len())
        .map(|i| {
            (0..3)
                .map(|k| after[i][k].saturating_sub(before[i][k]))
                .sum()
        })
        .collect();
    let total: u64 = deltas.iter().sum();
    let hit = deltas.iter().filter(|d| **d > 0).count();
    let max = deltas.iter().max().copied().unwrap_or(0);
    let usec: Vec<f64> = masters
        .iter()
        .filter_map(|m| Admin::connect(*m).ok()?.info("commandstats").ok())
        .filter_map(|info| crate::admin::cmdstat_field(&info, "cluster|slots", "usec_per_call"))
        .collect();
    let mean_usec = usec.iter().sum::<f64>() / usec.len().max(1) as f64;
    println!(
        "{} masters: {total} topology calls in all, on {hit} masters, at most {max} on one; CLUSTER SLOTS usec_per_call (mean over {} masters that served one) {mean_usec:.1}",
        masters.len(),
        usec.len()
    );
    println!(
        "key figure: {} client errors, {total} topology calls on the masters during the run",
        load["errors"]["total"]
    );
}

/// Calls of CLUSTER SLOTS/NODES/SHARDS per master.
fn topo_calls(masters: &[SocketAddr]) -> Result<Vec<[u64; 3]>> {
    masters
        .iter()
        .map(|m| {
            let info = Admin::connect(*m)?.info("commandstats")?;
            Ok(TOPO_CMDS.map(|c| cmdstat_calls(&info, c)))
        })
        .collect()
}

/// The three masters' control connections and ids: source, destination, the rest.
struct Movers {
    src: Admin,
    dst: Admin,
    others: Vec<Admin>,
    src_id: String,
    dst_id: String,
}

/// Moves up to `limit` slots of the first master (all of them: a third of the cluster) to the
/// second, key by key, live, as fast as it can; returns how many moved.
pub fn migrate(cluster: &devcluster::Cluster, limit: usize) -> Result<usize> {
    migrate_paced(cluster, limit, 0.0)
}

/// [`migrate`] at `slots_per_sec` (0 = unpaced). An operator resharding a loaded cluster
/// paces it; unpaced, the migration's own commands outnumber the clients' requests.
pub fn migrate_paced(
    cluster: &devcluster::Cluster,
    limit: usize,
    slots_per_sec: f64,
) -> Result<usize> {
    let nodes: Vec<_> = cluster
        .nodes()
        .iter()
        .filter(|n| n.master_of.is_none())
        .collect();
    if nodes.len() < 3 {
        bail!("need 3 masters");
    }
    let mut m = Movers {
        src: Admin::connect(nodes[0].addr)?,
        dst: Admin::connect(nodes[1].addr)?,
        others: nodes[2..]
            .iter()
            .map(|n| Admin::connect(n.addr))
            .collect::<Result<_>>()?,
        src_id: nodes[0].id.clone(),
        dst_id: nodes[1].id.clone(),
    };
    let mut slots = owned_slots(&mut m.src)?;
    slots.truncate(limit);
    let t0 = Instant::now();
    for (i, slot) in slots.iter().enumerate() {
        if slots_per_sec > 0.0 {
            let due = t0 + Duration::from_secs_f64(i as f64 / slots_per_sec);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        migrate_slot(&mut m, *slot)?;
    }
    Ok(slots.len())
}

/// The documented live-resharding sequence for one slot.
fn migrate_slot(m: &mut Movers, slot: u16) -> Result<()> {
    let slot = slot.to_string();
    let (host, port) = (m.dst.addr.ip().to_string(), m.dst.addr.port().to_string());
    m.dst
        .ok(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &m.src_id])?;
    m.src
        .ok(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &m.dst_id])?;
    loop {
        let keys = m.src.ok(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"])?;
        let keys: Vec<&[u8]> = keys
            .as_array()
            .unwrap_or(&[])
            .iter()
            .filter_map(Value::as_bytes)
            .collect();
        if keys.is_empty() {
            break;
        }
        let mut args: Vec<&[u8]> = vec![
            b"MIGRATE",
            host.as_bytes(),
            port.as_bytes(),
            b"",
            b"0",
            b"5000",
            b"KEYS",
        ];
        args.extend(keys);
        if let Value::Error(e) = m.src.call(&args)? {
            bail!("MIGRATE slot {slot}: {}", String::from_utf8_lossy(&e));
        }
    }
    let dst_id = m.dst_id.clone();
    for node in [&mut m.dst, &mut m.src]
        .into_iter()
        .chain(m.others.iter_mut())
    {
        node.ok(&["CLUSTER", "SETSLOT", &slot, "NODE", &dst_id])?;
    }
    Ok(())
}

/// The slots the node behind `a` serves, from its own CLUSTER SLOTS.
fn owned_slots(a: &mut Admin) -> Result<Vec<u16>> {
    let reply = a.ok(&["CLUSTER", "SLOTS"])?;
    let map = cluster::slot_map::SlotMap::from_cluster_slots(1, &reply, &a.addr.ip().to_string())?;
    let me = a.addr.to_string();
    Ok((0..16384u16)
        .filter(|s| map.node_of(*s).is_some_and(|n| n.addr == me))
        .collect())
}

fn report(load: &Json, masters: &[SocketAddr], before: &[[u64; 3]], after: &[[u64; 3]]) {
    let known = |v: &Json| match v {
        Json::Null => "n/a".to_string(),
        v => v.to_string(),
    };
    println!(
        "client errors: {}  redirects followed: {}  generator CLUSTER SLOTS calls: {}",
        load["errors"],
        known(&load["redirects_followed"]),
        known(&load["topology_refreshes"])
    );
    if let Some(v) = load["jedis_version"].as_str() {
        println!(
            "jedis {v}: p50 {} µs, p99 {} µs, GET misses {}, first error per class {}",
            load["p50_us"], load["p99_us"], load["get_misses"], load["error_samples"]
        );
    }
    print_seconds(load);
    let mut total = 0;
    if masters.len() > 5 {
        return report_many(load, masters, before, after);
    }
    for (i, m) in masters.iter().enumerate() {
        let d: Vec<u64> = (0..3)
            .map(|k| after[i][k].saturating_sub(before[i][k]))
            .collect();
        total += d.iter().sum::<u64>();
        // migrate() moves the first master's slots to the second; the first is also the seed.
        let role = ["  (source, seed)", "  (destination)"]
            .get(i)
            .unwrap_or(&"");
        println!(
            "{m}: CLUSTER SLOTS {} NODES {} SHARDS {}{role}",
            d[0], d[1], d[2]
        );
    }
    println!(
        "key figure: {} client errors, {total} topology calls on the masters during the run",
        load["errors"]["total"]
    );
}
