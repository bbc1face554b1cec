//! The processes a benchmark starts: redis-server, nutcracker and slotgate, each optionally
//! pinned to a CPU with `taskset` (which execs, so the pid we hold is the server's own pid and
//! its schedstat is the server's CPU alone). Every process is killed when its handle drops;
//! nothing else is ever touched.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A child server process on 127.0.0.1:`port`.
pub struct Proc {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    /// What it is, for reports.
    pub name: String,
}

impl Proc {
    /// Spawns `program args`, pinned to `cpu` when given, output discarded.
    pub fn spawn(
        name: &str,
        cpu: Option<u32>,
        program: &Path,
        args: &[String],
        port: u16,
    ) -> Result<Proc> {
        Proc::spawn_to(name, cpu, program, args, port, Stdio::null())
    }

    /// `spawn` with its stderr appended to `log`, for scenarios that read what it said on
    /// the way out (a panic's message, a stack overflow).
    pub fn spawn_logged(
        name: &str,
        cpu: Option<u32>,
        program: &Path,
        args: &[String],
        port: u16,
        log: &Path,
    ) -> Result<Proc> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        Proc::spawn_to(name, cpu, program, args, port, Stdio::from(file))
    }

    fn spawn_to(
        name: &str,
        cpu: Option<u32>,
        program: &Path,
        args: &[String],
        port: u16,
        stderr: Stdio,
    ) -> Result<Proc> {
        let mut cmd = match cpu {
            Some(c) => {
                let mut t = Command::new("taskset");
                t.arg("-c").arg(c.to_string()).arg(program);
                t
            }
            None => Command::new(program),
        };
        let child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let p = Proc {
            child,
            port,
            name: name.to_string(),
        };
        // A ceiling, not a wait: a JVM (camellia) on a busy machine takes seconds to start.
        p.wait_ready(Duration::from_secs(30))?;
        Ok(p)
    }

    /// The pid as a /proc path component.
    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// 127.0.0.1:port.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Waits until the server answers PING.
    fn wait_ready(&self, limit: Duration) -> Result<()> {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if ping(self.addr()).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!(
            "{} on port {} did not answer PING within {limit:?}",
            self.name,
            self.port
        )
    }

    /// On-CPU ns of this process so far (all threads).
    pub fn cpu_ns(&self) -> Result<u64> {
        crate::cpu::process_cpu_ns(&self.pid())
    }

    /// Resident memory in bytes.
    pub fn rss(&self) -> u64 {
        crate::cpu::rss_bytes(&self.pid()).unwrap_or(0)
    }

    /// Whether it has exited (reaped here if so), and how.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends SIGKILL now (failover tests) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One blocking PING round trip.
pub fn ping(addr: SocketAddr) -> Result<()> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    s.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf)?;
    if n == 0 || buf[0] != b'+' {
        bail!("unexpected PING reply");
    }
    Ok(())
}

/// A free port (never 6379: devcluster's picker excludes well-known ports).
pub fn free_port() -> Result<u16> {
    devcluster::free_port_pair()
}

/// A standalone, non-persistent redis-server.
pub fn redis(cpu: Option<u32>) -> Result<Proc> {
    let port = free_port()?;
    let args: Vec<String> = ["--port", &port.to_string(), "--bind", "127.0.0.1"]
        .iter()
        .map(|s| s.to_string())
        .chain(["--save", "", "--appendonly", "no", "--maxclients", "20000"].map(String::from))
        .collect();
    Proc::spawn("redis", cpu, Path::new("redis-server"), &args, port)
}

/// nutcracker `-v 4` in front of `backends`, hash_tag "{}", config written into `dir`.
pub fn nutcracker(cpu: Option<u32>, backends: &[SocketAddr], dir: &Path) -> Result<Proc> {
    let port = free_port()?;
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, b)| format!("    - {b}:1 s{i}\n"))
        .collect();
    let yml = format!(
        "bench:\n  listen: 127.0.0.1:{port}\n  hash: fnv1a_64\n  hash_tag: \"{{}}\"\n  \
         distribution: ketama\n  redis: true\n  auto_eject_hosts: false\n  servers:\n{servers}"
    );
    let conf = dir.join(format!("nutcracker-{port}.yml"));
    std::fs::write(&conf, yml)?;
    let args = [
        "-v",
        "4",
        "-c",
        &conf.to_string_lossy(),
        "-s",
        &free_port()?.to_string(),
    ]
    .map(String::from);
    Proc::spawn("nutcracker", cpu, Path::new("nutcracker"), &args, port)
}

/// `slotgate proxy` (the release binary) in front of the cluster at `seed`.
pub fn slotgate(cpu: Option<u32>, seed: SocketAddr, threads: usize) -> Result<Proc> {
    slotgate_with(cpu, seed, threads, &[])
}

/// `slotgate proxy` with `extra` flags (e.g. `--config FILE`) after the usual ones.
pub fn slotgate_with(
    cpu: Option<u32>,
    seed: SocketAddr,
    threads: usize,
    extra: &[String],
) -> Result<Proc> {
    let port = free_port()?;
    let mut args = vec![
        "proxy".to_string(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--seed".into(),
        seed.to_string(),
        "--threads".into(),
        threads.to_string(),
    ];
    args.extend_from_slice(extra);
    Proc::spawn("slotgate", cpu, &slotgate_binary()?, &args, port)
}

/// The slotgate release binary: this executable when it is slotgate, else target/release.
pub fn slotgate_binary() -> Result<PathBuf> {
    let me = std::env::current_exe()?;
    if me.file_name().is_some_and(|n| n == "slotgate") {
        return Ok(me);
    }
    let p = PathBuf::from("target/release/slotgate");
    if p.exists() {
        return Ok(p);
    }
    bail!("no slotgate binary: run `cargo build --release -p slotgate` first")
}

/// A command that runs this tool's `bench` subcommands (works from slotgate or an example).
pub fn self_command(cpu: Option<u32>) -> Result<Command> {
    let me = std::env::current_exe()?;
    let mut cmd = match cpu {
        Some(c) => {
            let mut t = Command::new("taskset");
            t.arg("-c").arg(c.to_string()).arg(&me);
            t
        }
        None => Command::new(&me),
    };
    if me.file_name().is_some_and(|n| n == "slotgate") {
        cmd.arg("bench");
    }
    Ok(cmd)
}
