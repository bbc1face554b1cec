//! Stand-alone front end for the `cluster` subcommands, so the crate can be
//! exercised and timed by hand without building the whole slotgate binary:
//! `cargo run -p devcluster --example devcluster -- up --masters 100 --replicas 0`.

use clap::Parser;
use devcluster::{run_cli, ClusterCommand};

/// Local Redis Cluster control.
#[derive(Parser, Debug)]
struct Args {
    #[command(subcommand)]
    cmd: ClusterCommand,
}

fn main() -> anyhow::Result<()> {
    run_cli(Args::parse().cmd)
}
