//! `scenario failover`: steady verified load (every value carries its key, every reply is
//! checked against its request), then `kill -9` of a master that has a replica. Reports the
//! unavailability window, errors by kind, and crossed replies, which must be 0 (seed 002:
//! pipelines that mixed up replies after a backend failure).

use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use serde_json::Value;

use crate::procs;
use crate::scenario::{finish_load, prepopulate_via, print_seconds, spawn_load};

/// How the clients reach the cluster.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum FailVia {
    /// Through `slotgate proxy` (release binary).
    Proxy,
    /// Cluster-aware clients (smart refresh).
    Direct,
}

/// Flags of `scenario failover`.
#[derive(Args, Debug, Clone)]
pub struct FailoverArgs {
    /// Path of the clients.
    #[arg(long, value_enum, default_value = "proxy")]
    pub via: FailVia,
    /// Concurrent clients.
    #[arg(long, default_value_t = 50)]
    pub clients: u64,
    /// Open-loop total rate.
    #[arg(long, default_value_t = 5000.0)]
    pub rate: f64,
    /// Length of the load; the kill happens 3 s in.
    #[arg(long, default_value = "20s", value_parser = crate::args::parse_duration)]
    pub duration: Duration,
}

/// Runs the scenario.
pub fn run(a: &FailoverArgs) -> Result<()> {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 1,
        ..Default::default()
    };
    let mut cluster = devcluster::Cluster::start(&opts)?;
    let result = with_cluster(&mut cluster, a);
    let _ = cluster.stop();
    result
}

fn with_cluster(cluster: &mut devcluster::Cluster, a: &FailoverArgs) -> Result<()> {
    let proxy = match a.via {
        FailVia::Proxy => Some(procs::slotgate(None, cluster.seed(), 1)?),
        FailVia::Direct => None,
    };
    let mut route = match &proxy {
        Some(p) => vec!["--target".to_string(), p.addr().to_string()],
        None => vec!["--cluster".to_string(), cluster.seed().to_string()],
    };
    route.extend(["--keyspace=10000", "--value-size=32", "--timeout=1s"].map(String::from));
    prepopulate_via(&route)?;
    let victim = cluster.masters()[0];
    let flags = [
        "--verify".to_string(),
        "--mix=get:1,set:1".into(),
        format!("--clients={}", a.clients),
        format!("--rate={}", a.rate),
        format!("--duration={}ms", a.duration.as_millis()),
    ];
    let child = spawn_load(&route, &flags)?;
    std::thread::sleep(Duration::from_secs(3));
    let killed = cluster.kill(victim).context("killing the master");
    let load = finish_load(child)?;
    killed?;
    report(a, &load, &victim.to_string());
    Ok(())
}

/// First and last second with errors, from the per-second breakdown.
pub fn error_window(load: &Value) -> Option<(u64, u64)> {
    let secs = load["per_second"].as_array()?;
    let bad: Vec<u64> = secs
        .iter()
        .filter(|s| s["errors"].as_u64().unwrap_or(0) > 0)
        .filter_map(|s| s["t"].as_u64())
        .collect();
    Some((*bad.first()?, *bad.last()?))
}

fn report(a: &FailoverArgs, load: &Value, victim: &str) {
    println!(
        "failover via {:?}: kill -9 of master {victim} 3 s after the load process started, {} clients at {}/s",
        a.via, a.clients, a.rate
    );
    print_seconds(load);
    println!("errors: {}", load["errors"]);
    let window = match error_window(load) {
        Some((a, b)) => format!("errors from second {a} to {b} (≈{} s)", b - a + 1),
        None => "no errors".into(),
    };
    println!(
        "key figure: {window}; crossed replies {} (must be 0)",
        load["crossed_replies"]
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn window_from_per_second() {
        let v = serde_json::json!({"per_second": [
            {"t": 0, "errors": 0}, {"t": 1, "errors": 3}, {"t": 2, "errors": 0}, {"t": 3, "errors": 1}]});
        assert_eq!(super::error_window(&v), Some((1, 3)));
        assert_eq!(
            super::error_window(&serde_json::json!({"per_second": []})),
            None
        );
    }
}
