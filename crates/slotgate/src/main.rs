//! The `slotgate` binary: one thin CLI over the crates (proxy, devcluster).
//!
//! Every subcommand parses its flags here and hands a typed configuration to a library; no
//! behaviour lives in this file beyond wiring, signals and logging set-up.

mod demo;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use proxy::{Config, Proxy};

#[derive(Parser, Debug)]
#[command(
    name = "slotgate",
    version,
    about = "A fast, storm-proof access layer for Redis Cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the proxy: clients speak plain RESP to it; it routes by slot to a Redis Cluster.
    Proxy(ProxyArgs),
    /// Start, stop or inspect a local Redis Cluster made of real redis-server processes.
    #[command(subcommand)]
    Cluster(devcluster::ClusterCommand),
    /// Start a local 3-master cluster and the proxy in front of it; Ctrl-C tears both down.
    Demo(demo::DemoArgs),
    /// Load generator and benchmark scenarios (see docs/bench.md).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

#[derive(Args, Debug)]
struct ProxyArgs {
    /// Address to accept clients on [default: 127.0.0.1:7777].
    #[arg(long)]
    listen: Option<String>,
    /// Cluster node(s) to learn the topology from, comma-separated host:port.
    #[arg(long, value_delimiter = ',')]
    seed: Vec<String>,
    /// Worker threads (0 = one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// TOML configuration file (see config/proxy.example.toml); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Check the configuration and exit.
    #[arg(long)]
    check_config: bool,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Proxy(args) => run_proxy(args),
        Command::Cluster(cmd) => devcluster::run_cli(cmd),
        Command::Demo(args) => demo::run(args),
        Command::Bench(cmd) => bench::run_cli(cmd),
    }
}

/// Build the configuration: file first, then flags on top.
fn proxy_config(args: &ProxyArgs) -> Result<Config> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Config::from_toml(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => Config::default(),
    };
    if let Some(listen) = &args.listen {
        config.proxy.listen = listen.clone();
    }
    if !args.seed.is_empty() {
        config.cluster.seeds = args.seed.clone();
    }
    if let Some(threads) = args.threads {
        config.proxy.threads = threads;
    }
    config.validate()?;
    Ok(config)
}

fn run_proxy(args: ProxyArgs) -> Result<()> {
    let config = proxy_config(&args)?;
    if args.check_config {
        println!("configuration ok");
        return Ok(());
    }
    init_logging(&config.log.level);
    let proxy = Proxy::start(config)?;
    eprintln!("slotgate proxy listening on {}", proxy.local_addr());
    wait_for_signal(None)?;
    proxy.shutdown();
    Ok(())
}

/// Logs go to stderr; `RUST_LOG` overrides the configured level.
pub(crate) fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Block until Ctrl-C or SIGTERM, or until `limit` has passed.
pub(crate) fn wait_for_signal(limit: Option<Duration>) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let sleep = async {
            match limit {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
            _ = sleep => {}
        }
        Ok::<(), std::io::Error>(())
    })?;
    Ok(())
}
