//! The proxy under attack: a 3-master devcluster and one `slotgate proxy --threads 1` in front
//! of it, with a config that states the memory budget the RSS oracle holds it to, and its
//! stderr kept in a file so a panic or a stack overflow is seen even when the process dies.
//! One worker thread means the hostile client and the bystander share a worker, which is the
//! promise under test. A proxy that died is started again, so one crash does not end the run.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::admin::Admin;
use crate::procs::{self, Proc};
use crate::systems::SUT_CPU;

/// The cluster and the proxy in front of it.
pub struct Target {
    cluster: devcluster::Cluster,
    proxy: Proc,
    config: PathBuf,
    log: PathBuf,
    /// How many times the proxy had to be started again.
    pub restarts: usize,
}

impl Target {
    /// Starts the cluster and the proxy, its config (with `budget` bytes of
    /// `limits.memory_budget_bytes`) and log in `dir`.
    pub fn start(dir: &Path, budget: u64) -> Result<Target> {
        let config = dir.join("slotgate-hostile.toml");
        std::fs::write(&config, config_toml(budget))?;
        let log = dir.join("slotgate-hostile.stderr");
        let cluster = crate::systems::bench_cluster()?;
        let proxy = spawn(&cluster, &config, &log)?;
        let mut t = Target {
            cluster,
            proxy,
            config,
            log,
            restarts: 0,
        };
        t.warm_up()?;
        Ok(t)
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.proxy.addr()
    }

    /// The proxy's pid, for /proc.
    pub fn pid(&self) -> String {
        self.proxy.pid()
    }

    /// The proxy's stderr file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Bytes written to the stderr file so far, where a case's own lines will start.
    pub fn log_len(&self) -> u64 {
        std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0)
    }

    /// The stderr lines written since `from` that tell of a panic or an abort.
    pub fn alarming_lines(&self, from: u64) -> Vec<String> {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let tail = text.get(from as usize..).unwrap_or_default();
        String::from_utf8_lossy(tail)
            .lines()
            .filter(|l| l.contains("panicked") || l.contains("overflowed"))
            .map(|l| l.chars().take(300).collect())
            .collect()
    }

    /// Open file descriptors of the proxy (`/proc/PID/fd`), None once it is gone.
    pub fn fds(&self) -> Option<usize> {
        let dir = format!("/proc/{}/fd", self.pid());
        std::fs::read_dir(dir).ok().map(|d| d.count())
    }

    /// Whether the process still runs and answers PING within `ceiling`; why not otherwise.
    pub fn check_alive(&mut self, ceiling: Duration) -> Result<(), String> {
        if let Some(status) = self.proxy.exited() {
            return Err(format!("the proxy exited: {status}"));
        }
        let t0 = Instant::now();
        loop {
            match procs::ping(self.addr()) {
                Ok(()) => return Ok(()),
                Err(e) if t0.elapsed() >= ceiling => {
                    return Err(format!("no PONG within {ceiling:?}: {e}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Starts the proxy again when it is dead or deaf, so the next case has one.
    pub fn ensure_alive(&mut self) -> Result<()> {
        if self.check_alive(Duration::from_secs(2)).is_ok() {
            return Ok(());
        }
        self.proxy.kill();
        self.proxy = spawn(&self.cluster, &self.config, &self.log)?;
        self.restarts += 1;
        self.warm_up()
    }

    /// Opens the connections every later client shares for good (the RESP2 and RESP3 pools
    /// to each master, WAIT's probes), so the fd oracle compares like with like.
    fn warm_up(&mut self) -> Result<()> {
        for proto in ["2", "3"] {
            let mut a = Admin::connect(self.addr())?;
            a.ok(&["HELLO", proto])?;
            a.ok(&["DBSIZE"])?;
            for tag in 0..16 {
                a.ok(&["GET", &format!("warm:{{{tag}}}")])?;
            }
            a.ok(&["WAIT", "0", "0"])?;
        }
        Ok(())
    }

    /// Empties every master (directly, not through the proxy), so what one case stored does
    /// not slow the next or pile up over a long run.
    pub fn flush(&self) -> Result<()> {
        for m in self.cluster.masters() {
            Admin::connect(m)?.ok(&["FLUSHALL"])?;
        }
        Ok(())
    }

    /// Stops the proxy, then the cluster.
    pub fn stop(mut self) {
        self.proxy.kill();
        let _ = self.cluster.stop();
    }
}

/// The proxy's config: the stated budget; everything else at slotgate's defaults (listed in
/// docs/hostile.md), since those are what a deployment meets first.
fn config_toml(budget: u64) -> String {
    format!("[limits]\nmemory_budget_bytes = {budget}\n")
}

fn spawn(cluster: &devcluster::Cluster, config: &Path, log: &Path) -> Result<Proc> {
    let port = procs::free_port()?;
    let args: Vec<String> = [
        "proxy",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--seed",
        &cluster.seed().to_string(),
        "--threads",
        "1",
        "--config",
        &config.to_string_lossy(),
    ]
    .map(String::from)
    .to_vec();
    Proc::spawn_logged(
        "slotgate",
        Some(SUT_CPU),
        &procs::slotgate_binary()?,
        &args,
        port,
        log,
    )
    .context("starting slotgate proxy")
}
