//! `scenario reshard`: the refresh-storm experiment of seed 000. Clients keep a steady load
//! while a third of the slots migrate live (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT
//! NODE). It reports the errors clients saw, p99 per second, and how many CLUSTER
//! SLOTS/NODES/SHARDS each master answered: the storm, or its absence, in numbers.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use resp::Value;
use serde_json::Value as Json;

use crate::admin::{cmdstat_calls, Admin};
use crate::procs;

/// How the clients reach the cluster.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Via {
    /// Through `slotgate proxy` (release binary, separate process).
    Proxy,
    /// Cluster-aware clients that refresh the whole map per MOVED, fixed node order.
    DirectNaive,
    /// Cluster-aware clients that patch on MOVED and refresh ≤ 1/s from a random node.
    DirectSmart,
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
}

const TOPO_CMDS: [&str; 3] = ["cluster|slots", "cluster|nodes", "cluster|shards"];

/// Runs the scenario.
pub fn run(a: &ReshardArgs) -> Result<()> {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        ..Default::default()
    };
    let mut cluster = devcluster::Cluster::start(&opts)?;
    let result = with_cluster(&cluster, a);
    let _ = cluster.stop();
    result
}

fn with_cluster(cluster: &devcluster::Cluster, a: &ReshardArgs) -> Result<()> {
    let proxy = match a.via {
        Via::Proxy => Some(procs::slotgate(None, cluster.seed(), 1)?),
        _ => None,
    };
    let mut route: Vec<String> = match (&proxy, a.via) {
        (Some(p), _) => vec!["--target".into(), p.addr().to_string()],
        (None, Via::DirectNaive) => vec![
            "--cluster".into(),
            cluster.seed().to_string(),
            "--refresh-policy".into(),
            "naive".into(),
        ],
        (None, _) => vec![
            "--cluster".into(),
            cluster.seed().to_string(),
            "--refresh-policy".into(),
            "smart".into(),
        ],
    };
    route.extend(["--keyspace".into(), a.keyspace.to_string()]);
    let ok = procs::self_command(None)?
        .args(["run", "--prepopulate", "--requests", "1"])
        .args(&route)
        .stdout(Stdio::null())
        .status()?
        .success();
    anyhow::ensure!(ok, "prepopulate failed");
    let masters = cluster.masters();
    let before = topo_calls(&masters)?;
    let child = procs::self_command(None)?
        .args([
            "run",
            "--json",
            "--mix",
            "get:9,set:1",
            "--clients",
            &a.clients.to_string(),
        ])
        .args([
            "--rate",
            &a.rate.to_string(),
            "--duration",
            &format!("{}ms", a.duration.as_millis()),
        ])
        .args(&route)
        .stdout(Stdio::piped())
        .spawn()?;
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    let moved = migrate_third(cluster).context("migration")?;
    let took = t0.elapsed();
    let out = child.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "load failed");
    let after = topo_calls(&masters)?;
    let load: Json = serde_json::from_slice(&out.stdout)?;
    report(a, &load, &masters, &before, &after, moved, took);
    Ok(())
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

/// Moves every slot of the first master to the second, key by key; returns the slot count.
fn migrate_third(cluster: &devcluster::Cluster) -> Result<usize> {
    let nodes: Vec<_> = cluster
        .nodes()
        .iter()
        .filter(|n| n.master_of.is_none())
        .collect();
    if nodes.len() < 3 {
        bail!("need 3 masters");
    }
    let (src, dst) = (nodes[0], nodes[1]);
    let mut s = Admin::connect(src.addr)?;
    let mut d = Admin::connect(dst.addr)?;
    let mut others: Vec<Admin> = nodes[2..]
        .iter()
        .map(|n| Admin::connect(n.addr))
        .collect::<Result<_>>()?;
    let slots = owned_slots(&mut s, src.addr)?;
    let (host, port) = (dst.addr.ip().to_string(), dst.addr.port().to_string());
    for slot in &slots {
        let slot = slot.to_string();
        d.ok(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src.id])?;
        s.ok(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst.id])?;
        loop {
            let keys = s.ok(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"])?;
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
            if let Value::Error(e) = s.call(&args)? {
                bail!("MIGRATE slot {slot}: {}", String::from_utf8_lossy(&e));
            }
        }
        for node in std::iter::once(&mut d)
            .chain(std::iter::once(&mut s))
            .chain(others.iter_mut())
        {
            node.ok(&["CLUSTER", "SETSLOT", &slot, "NODE", &dst.id])?;
        }
    }
    Ok(slots.len())
}

/// The slots `addr` serves, from its own CLUSTER SLOTS.
fn owned_slots(a: &mut Admin, addr: SocketAddr) -> Result<Vec<u16>> {
    let map = cluster::slot_map::SlotMap::from_cluster_slots(
        1,
        &a.ok(&["CLUSTER", "SLOTS"])?,
        &addr.ip().to_string(),
    )?;
    let me = addr.to_string();
    Ok((0..16384u16)
        .filter(|s| map.node_of(*s).is_some_and(|n| n.addr == me))
        .collect())
}

fn report(
    a: &ReshardArgs,
    load: &Json,
    masters: &[SocketAddr],
    before: &[[u64; 3]],
    after: &[[u64; 3]],
    slots: usize,
    took: Duration,
) {
    println!(
        "reshard via {:?}: {slots} slots migrated in {:.1}s under {} clients at {}/s",
        a.via,
        took.as_secs_f64(),
        a.clients,
        a.rate
    );
    println!(
        "client errors: {}  redirects followed: {}  generator CLUSTER SLOTS calls: {}",
        load["errors"], load["redirects_followed"], load["topology_refreshes"]
    );
    println!("second   ok      errors   p99 µs");
    for s in load["per_second"].as_array().into_iter().flatten() {
        println!(
            "{:>6} {:>6} {:>8} {:>10.0}",
            s["t"].as_u64().unwrap_or(0),
            s["ok"].as_u64().unwrap_or(0),
            s["errors"].as_u64().unwrap_or(0),
            s["p99_us"].as_f64().unwrap_or(0.0)
        );
    }
    let mut total = 0;
    for (i, m) in masters.iter().enumerate() {
        let d: Vec<u64> = (0..3)
            .map(|k| after[i][k].saturating_sub(before[i][k]))
            .collect();
        total += d.iter().sum::<u64>();
        println!("{m}: CLUSTER SLOTS {} NODES {} SHARDS {}", d[0], d[1], d[2]);
    }
    println!(
        "key figure: {} client errors, {total} topology calls on the masters during the run",
        load["errors"]["total"]
    );
}
