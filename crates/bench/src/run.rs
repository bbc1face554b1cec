//! `slotgate bench run`: resolve the endpoint, optionally prepopulate, run, report.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{bail, Result};
use serde_json::Value;

use crate::args::{resolve, RunArgs};
use crate::client::Route;
use crate::engine::{self, Limits, Outcome};
use crate::report::{self, RunInfo};
use crate::topology::Topology;

/// Runs the load `args` describes and prints the report; returns the JSON form too.
pub fn run(args: &RunArgs) -> Result<Value> {
    let (value, text) = run_quiet(args, true)?;
    if args.json {
        println!("{value}");
    } else {
        print!("{text}");
    }
    Ok(value)
}

/// Runs without printing the report (for `compare` and scenarios): (JSON, text).
pub fn run_quiet(args: &RunArgs, progress: bool) -> Result<(Value, String)> {
    args.validate()?;
    let route = make_route(args)?;
    if args.prepopulate {
        prepopulate(args, &route)?;
    }
    let plan = Arc::new(args.plan()?);
    let lim = Limits {
        clients: args.clients,
        threads: args.threads,
        requests: args.request_budget(),
        duration: args.duration,
        progress,
    };
    let out = engine::run(plan, route.clone(), lim)?;
    let info = info(args, &route);
    Ok((report::to_json(&info, &out), report::to_text(&info, &out)))
}

fn make_route(args: &RunArgs) -> Result<Route> {
    if let Some(t) = &args.target {
        return Ok(Route::Fixed(resolve(t)?));
    }
    let seeds = args
        .cluster
        .iter()
        .map(|s| resolve(s))
        .collect::<Result<Vec<_>>>()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let topo = rt.block_on(Topology::load(&seeds, args.refresh_policy))?;
    Ok(Route::Cluster(topo))
}

fn info(args: &RunArgs, route: &Route) -> RunInfo {
    let (endpoint, refreshes) = match route {
        Route::Fixed(a) => (format!("target {a}"), 0),
        Route::Cluster(t) => (
            format!("cluster {} ({:?})", args.cluster.join(","), t.policy),
            t.refreshes.load(Ordering::Relaxed),
        ),
    };
    RunInfo {
        endpoint,
        workload: args
            .mix
            .clone()
            .unwrap_or_else(|| format!("{:?}", args.command)),
        clients: args.clients,
        threads: args.threads,
        pipeline: args.pipeline,
        rate: args.rate,
        topology_refreshes: refreshes,
    }
}

/// SETs every key once; any error aborts (a benchmark on a half-filled keyspace would lie).
fn prepopulate(args: &RunArgs, route: &Route) -> Result<()> {
    let plan = Arc::new(args.prepopulate_plan());
    let lim = Limits {
        clients: plan.clients,
        threads: args.threads,
        requests: Some(args.keyspace),
        duration: None,
        progress: false,
    };
    let out: Outcome = engine::run(plan, route.clone(), lim)?;
    let errors = out.stats.errors.total();
    if errors > 0 {
        bail!("prepopulate: {errors} of {} SETs failed", args.keyspace);
    }
    Ok(())
}
