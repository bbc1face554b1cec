//! `slotgate proxy --nutcracker FILE`: every pool of a nutcracker (twemproxy) YAML file
//! served as nutcracker serves it, each on its own listen address, so replacing nutcracker
//! is one changed line in a service file. Each pool is a proxy of its own (its workers,
//! its placement); SIGHUP re-reads the file and reloads each pool, SIGTERM drains them all.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use proxy::config::nutcracker::{self, NutcrackerPool};
use proxy::Proxy;

/// The file's pools, each checked, with the `--threads` flag applied.
fn pools(path: &Path, threads: Option<usize>) -> Result<Vec<NutcrackerPool>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut pools = nutcracker::read(&text).with_context(|| format!("in {}", path.display()))?;
    for pool in &mut pools {
        if let Some(threads) = threads {
            pool.config.proxy.threads = threads;
        }
        pool.config
            .validate()
            .with_context(|| format!("pool {} in {}", pool.name, path.display()))?;
    }
    Ok(pools)
}

pub(crate) fn run(path: PathBuf, threads: Option<usize>, check_only: bool) -> Result<()> {
    let pools = pools(&path, threads)?;
    if check_only {
        println!("configuration ok ({} pools)", pools.len());
        return Ok(());
    }
    crate::init_logging("info");
    let signals = crate::Signals::install()?;
    let mut running: Vec<(String, Proxy)> = Vec::new();
    for pool in pools {
        for why in &pool.ignored {
            tracing::warn!(pool = %pool.name, "accepted, not applied: {why}");
        }
        let proxy = Proxy::start(pool.config).with_context(|| format!("pool {}", pool.name))?;
        eprintln!(
            "slotgate proxy listening on {} (nutcracker pool {})",
            proxy.local_addr(),
            pool.name
        );
        running.push((pool.name, proxy));
    }
    signals.wait_for_stop(|| reload(&path, threads, &running))?;
    let handles: Vec<_> = running
        .into_iter()
        .map(|(_, proxy)| {
            let drain = proxy.drain_timeout();
            std::thread::spawn(move || proxy.shutdown_gracefully(drain))
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

/// SIGHUP: the file read again; each running pool reloads its part (restart-only
/// settings, the servers among them, are reported by the reload); pools added or removed
/// wait for a restart.
fn reload(path: &Path, threads: Option<usize>, running: &[(String, Proxy)]) {
    let pools = match pools(path, threads) {
        Ok(pools) => pools,
        Err(e) => {
            return tracing::error!(error = %format!("{e:#}"), "reload refused; nothing changed")
        }
    };
    for pool in &pools {
        match running.iter().find(|(name, _)| *name == pool.name) {
            Some((_, proxy)) => match proxy.reload_with(pool.config.clone()) {
                Ok(report) if !report.needs_restart.is_empty() => {
                    tracing::warn!(pool = %pool.name, keys = ?report.needs_restart, "changed keys take effect only after a restart")
                }
                Ok(_) => {}
                Err(e) => tracing::error!(pool = %pool.name, error = %e, "reload refused"),
            },
            None => tracing::warn!(pool = %pool.name, "a new pool is served only after a restart"),
        }
    }
    for (name, _) in running {
        if !pools.iter().any(|p| p.name == *name) {
            tracing::warn!(pool = %name, "a removed pool is served until a restart");
        }
    }
}
