//! Turns an outcome into the JSON object (`--json`) and the human-readable report. Both carry
//! the generator's own CPU per request, so a reader can tell whether the tool was the bottleneck.

use std::fmt::Write;

use serde_json::{json, Value};

use crate::engine::Outcome;
use crate::stats::{summarize, Errors, Summary};

/// What the run was, echoed into the report.
pub struct RunInfo {
    /// `target ADDR` or `cluster SEED (policy)`.
    pub endpoint: String,
    /// The command or mix as given.
    pub workload: String,
    pub clients: u64,
    pub threads: usize,
    pub pipeline: usize,
    pub rate: Option<f64>,
    /// CLUSTER SLOTS calls the generator made (cluster mode).
    pub topology_refreshes: u64,
}

fn summary_json(s: &Summary) -> Value {
    json!({
        "count": s.count, "mean": s.mean, "p50": s.p50, "p90": s.p90,
        "p99": s.p99, "p999": s.p999, "max": s.max,
    })
}

fn errors_json(e: &Errors) -> Value {
    json!({
        "total": e.total(), "moved": e.moved, "ask": e.ask, "clusterdown": e.clusterdown,
        "tryagain": e.tryagain, "other": e.other, "timeout": e.timeout,
        "connection": e.connection,
    })
}

/// The single JSON object `--json` prints.
pub fn to_json(info: &RunInfo, out: &Outcome) -> Value {
    let s = &out.stats;
    let secs = out.elapsed.as_secs_f64();
    let per_second: Vec<Value> = s
        .seconds
        .iter()
        .enumerate()
        .map(|(i, sec)| {
            let sum = summarize(&sec.hist);
            json!({"t": i, "ok": sum.count, "errors": sec.errors, "p50_us": sum.p50,
                   "p99_us": sum.p99, "p999_us": sum.p999, "max_us": sum.max})
        })
        .collect();
    json!({
        "endpoint": info.endpoint,
        "workload": info.workload,
        "clients": info.clients,
        "threads": info.threads,
        "pipeline": info.pipeline,
        "rate_target": info.rate,
        "requests": out.requests,
        "ok": s.ok_count(),
        "elapsed_s": secs,
        "throughput_rps": out.requests as f64 / secs.max(1e-9),
        "latency_us": summary_json(&summarize(&s.hist)),
        "p50_us": summarize(&s.hist).p50,
        "p99_us": summarize(&s.hist).p99,
        "p999_us": summarize(&s.hist).p999,
        "send_lag_us": info.rate.map(|_| summary_json(&summarize(&s.lag))),
        "errors": errors_json(&s.errors),
        "redirects_followed": {"moved": s.followed_moved, "ask": s.followed_ask},
        "topology_refreshes": info.topology_refreshes,
        "crossed_replies": s.crossed,
        "own_cpu_us_per_request": own_cpu_per_request(out),
        "own_cpu_ms": out.own_cpu_ns as f64 / 1e6,
        "loadavg": crate::cpu::loadavg(),
        "per_second": per_second,
    })
}

/// The generator's own CPU µs per request over the measured interval.
pub fn own_cpu_per_request(out: &Outcome) -> f64 {
    out.own_cpu_ns as f64 / 1000.0 / out.requests.max(1) as f64
}

/// The text report.
pub fn to_text(info: &RunInfo, out: &Outcome) -> String {
    let s = &out.stats;
    let l = summarize(&s.hist);
    let secs = out.elapsed.as_secs_f64();
    let rate = info
        .rate
        .map(|r| format!(" rate {r}/s"))
        .unwrap_or_default();
    let mut t = format!(
        "{} | {} | clients {} threads {} pipeline {}{rate}\n",
        info.endpoint, info.workload, info.clients, info.threads, info.pipeline,
    );
    let rps = out.requests as f64 / secs.max(1e-9);
    let _ = writeln!(
        t,
        "requests {} in {secs:.2}s = {rps:.0} req/s; ok {}",
        out.requests, l.count
    );
    let _ = writeln!(
        t,
        "latency µs: p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  mean {:.1}",
        l.p50, l.p90, l.p99, l.p999, l.max, l.mean
    );
    if info.rate.is_some() {
        let g = summarize(&s.lag);
        let _ = writeln!(
            t,
            "send lag µs (behind schedule): p50 {:.1}  p99 {:.1}  max {:.1}",
            g.p50, g.p99, g.max
        );
    }
    error_lines(&mut t, info, s);
    let _ = writeln!(
        t,
        "own CPU: {:.2} µs/request ({:.0} ms); loadavg {}",
        own_cpu_per_request(out),
        out.own_cpu_ns as f64 / 1e6,
        crate::cpu::loadavg()
    );
    t
}

/// Errors by kind, crossed replies, redirects and topology calls.
fn error_lines(t: &mut String, info: &RunInfo, s: &crate::stats::Stats) {
    let e = &s.errors;
    let _ =
        writeln!(
        t,
        "errors {}: moved {} ask {} clusterdown {} tryagain {} other {} timeout {} connection {}",
        e.total(), e.moved, e.ask, e.clusterdown, e.tryagain, e.other, e.timeout, e.connection
    );
    if s.crossed > 0 {
        let _ = writeln!(
            t,
            "CROSSED REPLIES: {} (a reply did not belong to its request)",
            s.crossed
        );
    }
    if s.followed_moved + s.followed_ask + info.topology_refreshes > 0 {
        let _ = writeln!(
            t,
            "redirects followed: moved {} ask {}; CLUSTER SLOTS calls {}",
            s.followed_moved, s.followed_ask, info.topology_refreshes
        );
    }
}
