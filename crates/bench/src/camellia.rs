//! camellia-redis-proxy (Java/netty, NetEase; Maven Central `com.netease.nim`) as a peer: the
//! full-featured cluster proxy users compare one with, where nutcracker is a single-threaded
//! sharder. `scripts/install-camellia` builds `scripts/camellia` (a few lines of main around
//! camellia's own starter) and writes its classpath; without that, `compare` says so and
//! measures the others.
//!
//! The JVM is measured as one process: every thread (netty's, the JIT's, the GC's) counts in
//! its schedstat CPU, as every thread of slotgate does.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::procs::{self, Proc};

/// What `install-camellia` leaves: the built main and the dependency classpath.
const JAR: &str = "target/camellia-proxy.jar";
const CLASSPATH: &str = "target/classpath.txt";
const MAIN: &str = "io.slotgate.bench.CamelliaProxy";

/// A fixed heap, so RSS does not wander with the collector's sizing between runs.
const JVM_FLAGS: [&str; 3] = ["-Xms512m", "-Xmx512m", "-XX:+UseG1GC"];

/// The Maven project: `scripts/camellia` under the working directory, else in this source tree.
fn project_dir() -> PathBuf {
    let here = PathBuf::from("scripts/camellia");
    if here.join("pom.xml").exists() {
        return here;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/camellia")
}

/// The `-cp` argument when camellia is installed; why not otherwise.
pub fn classpath() -> Result<String> {
    let dir = project_dir();
    let (jar, cp) = (dir.join(JAR), dir.join(CLASSPATH));
    if !jar.exists() || !cp.exists() {
        bail!("not installed (run scripts/install-camellia)");
    }
    let deps = std::fs::read_to_string(&cp).with_context(|| cp.display().to_string())?;
    let ok = std::process::Command::new("java")
        .arg("-version")
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        bail!("not installed (no java on PATH)");
    }
    Ok(format!("{}:{}", jar.display(), deps.trim()))
}

/// The route camellia is given: the cluster's masters, `redis-cluster://@host:port,...`.
pub fn route(masters: &[SocketAddr]) -> String {
    let nodes: Vec<String> = masters.iter().map(SocketAddr::to_string).collect();
    format!("redis-cluster://@{}", nodes.join(","))
}

/// camellia on a free port in front of `masters`, with `threads` netty workers, pinned to
/// `cpu` when given. Ready once it answers PING (through to the cluster).
pub fn start(cpu: Option<u32>, masters: &[SocketAddr], threads: usize) -> Result<Proc> {
    let cp = classpath()?;
    let port = procs::free_port()?;
    let mut args: Vec<String> = JVM_FLAGS.iter().map(|s| s.to_string()).collect();
    args.extend([
        "-cp".into(),
        cp,
        MAIN.into(),
        port.to_string(),
        route(masters),
        threads.to_string(),
    ]);
    // The JVM takes a few seconds to start; Proc::spawn waits up to its own limit.
    Proc::spawn("camellia", cpu, Path::new("java"), &args, port)
}

#[cfg(test)]
mod tests {
    #[test]
    fn route_lists_every_master() {
        let m = [
            "127.0.0.1:7000".parse().unwrap(),
            "127.0.0.1:7001".parse().unwrap(),
        ];
        assert_eq!(
            super::route(&m),
            "redis-cluster://@127.0.0.1:7000,127.0.0.1:7001"
        );
    }
}
