//! Runs `slotgate bench` without the slotgate binary (handy while other crates are mid-change).

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: bench::BenchCommand,
}

fn main() -> anyhow::Result<()> {
    bench::run_cli(Cli::parse().cmd)
}
