//! What operators read about replica reads: the read policy's counters (INFO `stats`,
//! `slotgate_reads_total`), and each replica's sampled state and the reads it was sent
//! (INFO `backends`, `slotgate_replica_*{node}`). O(workers × nodes) per read.

use std::fmt::Write;

use crate::admin::exposition::{sample, Described};
use crate::config::read_policy::ALL;
use crate::context::Shared;

/// This file's metrics, listed with the others' (`metrics::METRICS`).
pub const METRICS: &[crate::admin::exposition::Metric] = &[
    (
        "slotgate_reads_total",
        "counter",
        "Read-only commands under a read policy other than master, by policy and by where they went (replica, master, refused).",
    ),
    (
        "slotgate_replica_reads_total",
        "counter",
        "Reads sent to the node as a replica, by node.",
    ),
    (
        "slotgate_replica_usable",
        "gauge",
        "1 when the replica may serve reads (answers, not loading, in sync, within max_replica_lag), by node.",
    ),
    (
        "slotgate_replica_lag_bytes",
        "gauge",
        "Replication offset the replica is behind its master, as last sampled, by node.",
    ),
];

/// INFO `stats` lines: the policy in force and the reads by policy and destination.
pub(crate) fn info_stats(shared: &Shared, out: &mut String) {
    let policy = shared.live.load().config.cluster.read_policy;
    let t = shared.read_totals();
    let _ = write!(out, "read_policy:{}\r\n", policy.name());
    for p in &ALL[1..] {
        let name = p.name().replace('-', "_");
        let i = p.index();
        let _ = write!(
            out,
            "reads_{name}_replica:{}\r\nreads_{name}_master:{}\r\n",
            t.to_replica[i], t.to_master[i]
        );
    }
    let _ = write!(out, "reads_replica_refused:{}\r\n", t.refused);
}

/// INFO `backends` lines, one per replica of the map, after the masters'.
pub(crate) fn info_backends(shared: &Shared, out: &mut String) {
    let view = shared.replicas.view();
    let totals = crate::admin::backends::totals(shared);
    for (i, r) in view.replicas.iter().enumerate() {
        let reads = totals.get(&r.addr).map_or(0, |t| t.replica_reads);
        let _ = write!(
            out,
            "replica{i}:addr={},master={},state={},lag_bytes={},rtt_us={},reads={reads}\r\n",
            r.addr,
            r.master,
            r.fitness.name(),
            r.lag,
            r.rtt_us,
        );
    }
}

/// The `slotgate_reads_total` and `slotgate_replica_*` samples.
pub(crate) fn metrics(shared: &Shared, out: &mut String, described: &mut Described) {
    let t = shared.read_totals();
    for p in &ALL[1..] {
        let i = p.index();
        for (to, n) in [("replica", t.to_replica[i]), ("master", t.to_master[i])] {
            let labels = format!("policy=\"{}\",to=\"{to}\"", p.name());
            sample(out, described, "slotgate_reads_total", &labels, n);
        }
    }
    let labels = "policy=\"replica\",to=\"refused\"";
    sample(out, described, "slotgate_reads_total", labels, t.refused);
    let view = shared.replicas.view();
    let totals = crate::admin::backends::totals(shared);
    for r in &view.replicas {
        let label = format!("node=\"{}\"", r.addr);
        let reads = totals.get(&r.addr).map_or(0, |t| t.replica_reads);
        let usable = u64::from(r.fitness == crate::topology::replicas::Fitness::Up);
        sample(
            out,
            described,
            "slotgate_replica_reads_total",
            &label,
            reads,
        );
        sample(out, described, "slotgate_replica_usable", &label, usable);
        sample(out, described, "slotgate_replica_lag_bytes", &label, r.lag);
    }
}
