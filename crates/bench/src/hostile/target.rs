//! The proxy under attack: a 3-master devcluster and one `slotgate proxy --threads 1` in front
//! of it, with a config that states the memory budget the RSS oracle holds it to, and its
//! stderr kept in a file so a panic or a stack overflow is seen even when the process dies.
//! One worker thread means the hostile client and the bystander share a worker, which is the
//! promise under test. Every case gets a proxy process of its own (the cluster stays): the
//! allocator keeps an earlier case's high-water mark as RSS, and a case that killed the
//! proxy or leaked its descriptors must not be blamed on the next one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::admin::Admin;
use crate::procs::{self, Proc};
use crate::systems::SUT_CPU;

/// Redis's own default `cluster-node-timeout`, not devcluster's 2 s: a case may keep a node
/// busy for seconds (a megabyte KEYS pattern is the node's work), and the cluster must not
/// declare it failed and go down for the cases after.
const NODE_TIMEOUT_MS: u64 = 15_000;

/// A safety net, not a bound under test: a node closes a connection of the proxy whose
/// unread replies pass this. Without it, replies the proxy left unread on its node
/// connections grew one node past 14 GB in a 4 s case and put the shared host at risk of
/// the OOM killer. The node-memory oracle fails long before it (`oracle.rs`).
const NODE_OUTPUT_CAP: &str = "1gb";

/// The cluster and the proxy in front of it.
pub struct Target {
    cluster: devcluster::Cluster,
    proxy: Proc,
    /// An idle redis-server placed like the attackers and the bystander (CPU0): PINGs to it
    /// during a case are the floor, what the machine alone adds to a round trip.
    floor: Proc,
    config: PathBuf,
    log: PathBuf,
}

impl Target {
    /// Starts the cluster and the proxy, its config (with `budget` bytes of
    /// `limits.memory_budget_bytes`) and log in `dir`.
    pub fn start(dir: &Path, budget: u64) -> Result<Target> {
        let config = dir.join("slotgate-hostile.toml");
        std::fs::write(&config, config_toml(budget))?;
        let log = dir.join("slotgate-hostile.stderr");
        let cluster = crate::systems::bench_cluster_with(devcluster::Options {
            node_timeout_ms: NODE_TIMEOUT_MS,
            extra_config: vec![(
                "client-output-buffer-limit".into(),
                format!("normal {NODE_OUTPUT_CAP} {NODE_OUTPUT_CAP} 0"),
            )],
            ..Default::default()
        })?;
        let proxy = spawn(&cluster, &config, &log)?;
        let floor = procs::redis(Some(crate::systems::GEN_CPU))?;
        let mut t = Target {
            cluster,
            proxy,
            floor,
            config,
            log,
        };
        t.warm_up()?;
        Ok(t)
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.proxy.addr()
    }

    /// The idle redis-server whose PING is the floor.
    pub fn floor_addr(&self) -> SocketAddr {
        self.floor.addr()
    }

    /// The masters' pids, for /proc.
    pub fn node_pids(&self) -> Vec<String> {
        self.cluster
            .nodes()
            .iter()
            .map(|n| n.pid.to_string())
            .collect()
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

    /// The stderr lines written since `from` that tell of a panic or an abort, each with
    /// the line after it (a panic's message follows its location), repeats counted once.
    pub fn alarming_lines(&self, from: u64) -> Vec<String> {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let tail = text.get(from as usize..).unwrap_or_default();
        let text = String::from_utf8_lossy(tail);
        let lines: Vec<&str> = text.lines().collect();
        let mut seen: Vec<(String, usize)> = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if !(l.contains("panicked") || l.contains("overflowed")) {
                continue;
            }
            let next = lines.get(i + 1).copied().unwrap_or_default();
            let alarm: String = format!("{l} {next}").chars().take(400).collect();
            match seen.iter_mut().find(|(a, _)| *a == alarm) {
                Some((_, n)) => *n += 1,
                None => seen.push((alarm, 1)),
            }
        }
        seen.into_iter()
            .map(|(a, n)| if n > 1 { format!("{n}× {a}") } else { a })
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

    /// Replaces the proxy with a fresh process, for the next case, once every master says
    /// the cluster is ok (an earlier case may have kept one busy).
    pub fn renew(&mut self) -> Result<()> {
        self.wait_cluster_ok(Duration::from_secs(60));
        self.proxy.kill();
        self.proxy = spawn(&self.cluster, &self.config, &self.log)?;
        self.warm_up()
    }

    /// Opens the connections every later client shares for good (the RESP2 and RESP3 pools
    /// to each master, WAIT's probes), so the fd oracle compares like with like. Error
    /// replies do not matter here, only that the connections were made.
    fn warm_up(&mut self) -> Result<()> {
        for proto in ["2", "3"] {
            let mut a = Admin::connect(self.addr())?;
            a.call(&[b"HELLO", proto.as_bytes()])?;
            a.call(&[b"DBSIZE"])?;
            for tag in 0..16 {
                a.call(&[b"GET", format!("warm:{{{tag}}}").as_bytes()])?;
            }
            a.call(&[b"WAIT", b"0", b"0"])?;
        }
        Ok(())
    }

    /// Waits, up to `ceiling`, until every master answers `cluster_state:ok`; says so when
    /// one does not (the case then runs anyway: the oracles judge the proxy, not the nodes).
    fn wait_cluster_ok(&self, ceiling: Duration) {
        let t0 = Instant::now();
        let ok = |m| {
            Admin::connect(m)
                .and_then(|mut a| a.info_cluster())
                .is_ok_and(|s| s.contains("cluster_state:ok"))
        };
        while !self.cluster.masters().into_iter().all(ok) {
            if t0.elapsed() >= ceiling {
                eprintln!("note: the cluster is not ok after {ceiling:?}; going on");
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Empties every master (directly, not through the proxy), so what one case stored does
    /// not slow the next or pile up over a long run.
    /// A node still busy with an earlier case's work is reported, not waited for.
    pub fn flush(&self) {
        for m in self.cluster.masters() {
            if let Err(e) = Admin::connect(m).and_then(|mut a| a.ok(&["FLUSHALL"])) {
                eprintln!("note: FLUSHALL on {m} failed ({e:#}); the next case starts anyway");
            }
        }
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
