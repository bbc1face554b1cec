//! `slotgate bench`: slotgate's load generator and scenario runner.
//!
//! It exists because a proxy benchmark is only as honest as its load generator (seed 003):
//! this one is lean enough not to be the bottleneck on a 2-core box, reports its own CPU per
//! request next to every result, measures latency from the intended send time under `--rate`,
//! and speaks both plain RESP and Redis Cluster (slot routing, MOVED/ASK, two refresh
//! policies) so the same tool can drive a proxy, twemproxy or the cluster directly.

pub mod acked;
pub mod admin;
pub mod args;
pub mod bystander;
pub mod camellia;
pub mod chart;
pub mod client;
pub mod compare;
pub mod conn;
pub mod cpu;
pub mod engine;
pub mod hostile;
pub mod keys;
pub mod knobs;
pub mod pacing;
pub mod procs;
pub mod report;
mod round;
pub mod run;
pub mod scen_failover;
pub mod scen_fair;
pub mod scen_mem;
pub mod scen_replicas;
pub mod scen_reshard;
pub mod scen_reshard_jedis;
pub mod scen_slow;
pub mod scenario;
pub mod selfcheck;
pub mod stats;
pub mod systems;
pub mod topology;
pub mod verify_mget;
pub mod workload;

use anyhow::Result;
use clap::Subcommand;

/// The `slotgate bench` subcommands.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Generate load against one RESP endpoint or a Redis Cluster and report latency,
    /// throughput, errors by kind and the generator's own CPU per request.
    Run(args::RunArgs),
    /// Measure this generator's CPU per request against redis-benchmark's, same load, same run.
    Selfcheck(selfcheck::SelfcheckArgs),
    /// Same workload against slotgate, camellia, nutcracker and Redis direct; CPU/syscalls per
    /// request.
    Compare(compare::CompareArgs),
    /// The field reports' experiments (short-conn, info-idle, slow-readers, big-values,
    /// reshard, failover, replica-reads).
    #[command(subcommand)]
    Scenario(scenario::ScenarioCommand),
    /// Hostile clients against a live proxy (one worker) beside a PINGing bystander: the
    /// proxy must live, the bystander stay fast, RSS stay in budget and fds come back.
    Hostile(hostile::HostileArgs),
    /// A paced INCR/SET/HSET/LPUSH load that records every acknowledged write (JSON), for
    /// Jepsen-style checks after a migration or failover.
    Acked(acked::AckedArgs),
}

/// Entry point for `slotgate bench ...`.
pub fn run_cli(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Run(a) => run::run(&a).map(|_| ()),
        BenchCommand::Selfcheck(a) => selfcheck::run(&a),
        BenchCommand::Compare(a) => compare::run(&a),
        BenchCommand::Scenario(c) => scenario::run(c),
        BenchCommand::Hostile(a) => hostile::run(&a),
        BenchCommand::Acked(a) => acked::run(&a),
    }
}
