//! The systems `compare` puts under the same load: slotgate and camellia-redis-proxy, each in
//! front of its own 3-master Redis Cluster, nutcracker `-v 4` in front of 3 standalone Redis,
//! and one Redis direct.
//! Backends are pinned to CPU0 with the load generator; the system under test gets CPU1 alone.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result};

use crate::procs::{self, Proc};

/// CPU of the load generator and the backends.
pub const GEN_CPU: u32 = 0;
/// CPU of the system under test.
pub const SUT_CPU: u32 = 1;

/// One system under test and what it needs alive.
pub struct System {
    /// `slotgate`, `camellia`, `nutcracker` or `redis`.
    pub name: &'static str,
    /// The measured process.
    pub sut: Proc,
    /// Backends kept alive for as long as the system runs.
    _backends: Vec<Proc>,
    cluster: Option<devcluster::Cluster>,
}

impl System {
    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.sut.addr()
    }

    /// Every redis-server that serves this system's data: the cluster's masters behind
    /// slotgate, nutcracker's backends, or Redis itself.
    pub fn redis_nodes(&self) -> Vec<SocketAddr> {
        match (&self.cluster, self.name) {
            (Some(c), _) => c.masters(),
            (None, "redis") => vec![self.sut.addr()],
            (None, _) => self._backends.iter().map(Proc::addr).collect(),
        }
    }

    /// A JVM, whose JIT compiles the hot path only after a while under load: measured after a
    /// longer warm-up than one round.
    pub fn needs_jit_warmup(&self) -> bool {
        self.name == "camellia"
    }

    /// The Redis Cluster behind slotgate or camellia (None for the other systems).
    pub fn cluster(&self) -> Option<&devcluster::Cluster> {
        self.cluster.as_ref()
    }
}

impl Drop for System {
    fn drop(&mut self) {
        if let Some(c) = self.cluster.as_mut() {
            let _ = c.stop();
        }
    }
}

/// Every system `compare` knows, in its report order.
pub const ALL: [&str; 4] = ["slotgate", "camellia", "nutcracker", "redis"];

/// Starts all the systems (slotgate and camellia are skipped, with a note, when missing).
pub fn start_all(dir: &std::path::Path) -> Result<Vec<System>> {
    start_named(&ALL, dir)
}

/// Starts the named systems in order; slotgate without its binary and camellia when not
/// installed are skipped, with a note on stderr and in `notes`.
pub fn start_named(names: &[&str], dir: &std::path::Path) -> Result<Vec<System>> {
    start_with(names, dir, &[])
}

/// `start_named` with `slotgate_extra` flags for slotgate (e.g. `--config FILE`).
pub fn start_with(
    names: &[&str],
    dir: &std::path::Path,
    slotgate_extra: &[String],
) -> Result<Vec<System>> {
    start_noting(names, dir, slotgate_extra, &mut Vec::new())
}

/// `start_with`, collecting the skipped systems' notes (e.g. "camellia: not installed").
pub fn start_noting(
    names: &[&str],
    dir: &std::path::Path,
    slotgate_extra: &[String],
    notes: &mut Vec<String>,
) -> Result<Vec<System>> {
    let mut out = Vec::new();
    let mut skip = |note: String| {
        eprintln!("note: {note}");
        notes.push(note);
    };
    for name in names {
        match *name {
            "slotgate" => match procs::slotgate_binary() {
                Ok(_) => out.push(slotgate(slotgate_extra)?),
                Err(e) => skip(format!("slotgate: not measured: {e}")),
            },
            "camellia" => match crate::camellia::classpath() {
                Ok(_) => out.push(camellia()?),
                Err(e) => skip(format!("camellia: {e}")),
            },
            "nutcracker" => out.push(nutcracker(dir)?),
            "redis" => out.push(System {
                name: "redis",
                sut: procs::redis(Some(SUT_CPU))?,
                _backends: Vec::new(),
                cluster: None,
            }),
            other => {
                anyhow::bail!("unknown system {other:?} (slotgate|camellia|nutcracker|redis)")
            }
        }
    }
    Ok(out)
}

/// A new 3-master cluster, its nodes on the generator's CPU.
fn bench_cluster() -> Result<devcluster::Cluster> {
    bench_cluster_with(devcluster::Options::default())
}

/// A new 3-master cluster without replicas, built from `opts` otherwise, its nodes on the
/// generator's CPU.
pub fn bench_cluster_with(opts: devcluster::Options) -> Result<devcluster::Cluster> {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        ..opts
    };
    let cluster = devcluster::Cluster::start(&opts).context("starting the 3-master cluster")?;
    for node in cluster.nodes() {
        pin(node.pid, GEN_CPU)?;
    }
    Ok(cluster)
}

/// camellia-redis-proxy (one netty worker, like slotgate's one worker) in front of a new
/// 3-master cluster.
fn camellia() -> Result<System> {
    let cluster = bench_cluster()?;
    let sut = crate::camellia::start(Some(SUT_CPU), &cluster.masters(), 1)?;
    Ok(System {
        name: "camellia",
        sut,
        _backends: Vec::new(),
        cluster: Some(cluster),
    })
}

/// slotgate (`--threads 1`, plus `extra` flags) in front of a new 3-master cluster.
pub fn slotgate(extra: &[String]) -> Result<System> {
    let cluster = bench_cluster()?;
    let sut = procs::slotgate_with(Some(SUT_CPU), cluster.seed(), 1, extra)?;
    Ok(System {
        name: "slotgate",
        sut,
        _backends: Vec::new(),
        cluster: Some(cluster),
    })
}

fn nutcracker(dir: &std::path::Path) -> Result<System> {
    let backends = (0..3)
        .map(|_| procs::redis(Some(GEN_CPU)))
        .collect::<Result<Vec<_>>>()?;
    let addrs: Vec<SocketAddr> = backends.iter().map(Proc::addr).collect();
    let sut = procs::nutcracker(Some(SUT_CPU), &addrs, dir)?;
    Ok(System {
        name: "nutcracker",
        sut,
        _backends: backends,
        cluster: None,
    })
}

/// Moves the calling thread (and the threads it starts later) onto the generator's CPU, for
/// scenarios whose load runs in-process: on the proxy's CPU it would take turns with the
/// proxy's worker, and a bystander's latency would measure the OS scheduler instead.
pub fn pin_this_thread_to_generator() -> Result<()> {
    let me = std::fs::read_link("/proc/thread-self")?;
    let tid = me
        .file_name()
        .and_then(|t| t.to_str()?.parse::<u32>().ok())
        .ok_or_else(|| anyhow::anyhow!("no thread id in {}", me.display()))?;
    let ok = Command::new("taskset")
        .args(["-p", "-c", &GEN_CPU.to_string(), &format!("{tid}")])
        .stdout(Stdio::null())
        .status()?
        .success();
    anyhow::ensure!(ok, "taskset -p {tid} failed");
    Ok(())
}

/// Moves a process we started (a devcluster node) onto `cpu`.
fn pin(pid: u32, cpu: u32) -> Result<()> {
    let ok = Command::new("taskset")
        .args(["-a", "-p", "-c", &cpu.to_string(), &pid.to_string()])
        .stdout(Stdio::null())
        .status()?
        .success();
    anyhow::ensure!(ok, "taskset -p {pid} failed");
    Ok(())
}

/// A running `perf stat -e raw_syscalls:sys_enter -p PID`, stopped with SIGINT.
pub struct SyscallCounter {
    child: Child,
    out: std::path::PathBuf,
}

impl SyscallCounter {
    /// Starts counting; `None` when perf is unavailable.
    pub fn start(pid: &str, dir: &std::path::Path) -> Option<SyscallCounter> {
        let out = dir.join(format!("perf-{pid}.csv"));
        let child = Command::new("perf")
            .args([
                "stat",
                "-x",
                ",",
                "-e",
                "raw_syscalls:sys_enter",
                "-p",
                pid,
                "-o",
            ])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // perf needs a moment to attach before the load starts.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Some(SyscallCounter { child, out })
    }

    /// Stops perf and returns the count (`None` if perf failed).
    pub fn stop(mut self) -> Option<u64> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out).ok()?;
        let _ = std::fs::remove_file(&self.out);
        parse_perf_count(&text)
    }
}

impl Drop for SyscallCounter {
    fn drop(&mut self) {
        // Only if stop() was not called (an error path): do not leave perf attached.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The count field of `perf stat -x,` output for the first event line.
pub fn parse_perf_count(text: &str) -> Option<u64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains("sys_enter"))
        .find_map(|l| l.split(',').next()?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_perf_csv() {
        let t = "# started on x\n\n1412670,,raw_syscalls:sys_enter,2698734671,100.00,,\n";
        assert_eq!(super::parse_perf_count(t), Some(1412670));
        assert_eq!(
            super::parse_perf_count("<not counted>,,raw_syscalls:sys_enter"),
            None
        );
    }
}
