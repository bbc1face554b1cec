//! The `slotgate` binary: one thin CLI over the crates (proxy, devcluster).
//!
//! Every subcommand parses its flags here and hands a typed configuration to a library; no
//! behaviour lives in this file beyond wiring, signals and logging set-up.

mod demo;
mod nutcracker;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use proxy::{Config, ConfigSource, Proxy};
use tracing_subscriber::EnvFilter;

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
    /// Serve every pool of a nutcracker (twemproxy) YAML file, each on its own listen
    /// address, placing keys as nutcracker does (docs/nutcracker.md).
    #[arg(long, conflicts_with_all = ["config", "seed", "listen"])]
    nutcracker: Option<PathBuf>,
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
    flags(args)(&mut config);
    config.validate()?;
    Ok(config)
}

/// The flags that override the file, as a function a reload applies again.
fn flags(args: &ProxyArgs) -> impl Fn(&mut Config) + Send + Sync + 'static {
    let (listen, seed, threads) = (args.listen.clone(), args.seed.clone(), args.threads);
    move |config: &mut Config| {
        if let Some(listen) = &listen {
            config.proxy.listen = listen.clone();
        }
        if !seed.is_empty() {
            config.cluster.seeds = seed.clone();
        }
        if let Some(threads) = threads {
            config.proxy.threads = threads;
        }
    }
}

fn run_proxy(args: ProxyArgs) -> Result<()> {
    if let Some(path) = args.nutcracker {
        return nutcracker::run(path, args.threads, args.check_config);
    }
    let config = proxy_config(&args)?;
    if args.check_config {
        println!("configuration ok");
        return Ok(());
    }
    let log = init_logging(&config.log.level);
    // Before start: start-up takes a while (the topology's bootstrap), and a SIGHUP's
    // default action ends the process. One that arrives meanwhile waits in the stream and
    // reloads once the proxy is ready.
    let signals = Signals::install()?;
    let proxy = Proxy::start(config)?;
    if let Some(path) = args.config.clone() {
        proxy.set_config_source(ConfigSource {
            path,
            overrides: Box::new(flags(&args)),
            on_applied: Box::new(move |config| set_log_level(log.as_ref(), &config.log.level)),
        });
    }
    eprintln!("slotgate proxy listening on {}", proxy.local_addr());
    let reloader = proxy.reloader();
    signals.wait_for_stop(|| {
        // The outcome is logged and counted by the reload itself.
        let _ = reloader.reload();
    })?;
    let drain = proxy.drain_timeout();
    tracing::info!(?drain, "stopping: draining clients");
    proxy.shutdown_gracefully(drain);
    Ok(())
}

/// Changes the log level at run time; None when `RUST_LOG` decides it.
type LogHandle = tracing_subscriber::reload::Handle<EnvFilter, tracing_subscriber::Registry>;

/// Logs go to stderr, with colours only when it is a terminal (a journal or a file gets
/// plain text); `RUST_LOG` overrides the configured level, and then reloads leave it be.
pub(crate) fn init_logging(level: &str) -> Option<LogHandle> {
    use std::io::IsTerminal;
    use tracing_subscriber::prelude::*;
    let from_env = std::env::var_os("RUST_LOG").is_some();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init()
        .ok()?;
    (!from_env).then_some(handle)
}

/// A reload's `log.level`, when the level is ours to set.
fn set_log_level(handle: Option<&LogHandle>, level: &str) {
    if let Some(handle) = handle {
        if let Err(e) = handle.reload(EnvFilter::new(level)) {
            tracing::warn!(error = %e, "cannot change the log level");
        }
    }
}

/// The SIGHUP handler, installed before the proxy starts, and the runtime that waits for
/// the stop signals once it runs.
struct Signals {
    rt: tokio::runtime::Runtime,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let hup = {
            let _in_runtime = rt.enter();
            signal(SignalKind::hangup())?
        };
        Ok(Signals { rt, hup })
    }

    /// Block until Ctrl-C or SIGTERM (then the caller drains); every SIGHUP calls `on_hup`
    /// (a reload) meanwhile, one that came during start-up first. SIGTERM is left to its
    /// default until here, so a proxy stuck starting can still be stopped.
    fn wait_for_stop(self, on_hup: impl Fn()) -> Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        let Signals { rt, mut hup } = self;
        rt.block_on(async {
            let mut term = signal(SignalKind::terminate())?;
            loop {
                tokio::select! {
                    r = tokio::signal::ctrl_c() => return r,
                    _ = term.recv() => return Ok(()),
                    _ = hup.recv() => on_hup(),
                }
            }
        })?;
        Ok(())
    }
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
