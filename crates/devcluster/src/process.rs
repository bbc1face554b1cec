//! Spawning, recognising and stopping redis-server processes. Stopping goes
//! by recorded pid, so every signal is preceded by a check that the pid still
//! belongs to a node we started (pids get reused).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::Options;

/// Where node `index` lives inside the cluster dir. Named by index, not port,
/// so a node retried on a new port keeps its directory.
pub(crate) fn node_dir(cluster_dir: &Path, index: usize) -> PathBuf {
    cluster_dir.join(format!("node-{index:03}"))
}

pub(crate) fn log_path(node_dir: &Path) -> PathBuf {
    node_dir.join("redis.log")
}

/// Writes `redis.conf` for one node and removes a stale `nodes.conf`, which
/// would otherwise make the node rejoin a cluster from an earlier run.
pub(crate) fn write_config(
    opts: &Options,
    node_dir: &Path,
    port: u16,
    tls_port: Option<u16>,
) -> Result<PathBuf> {
    fs::create_dir_all(node_dir).with_context(|| format!("create {}", node_dir.display()))?;
    let stale = node_dir.join("nodes.conf");
    if stale.exists() {
        fs::remove_file(&stale).with_context(|| format!("remove {}", stale.display()))?;
    }
    let mut conf = format!(
        "port {port}\nbind 127.0.0.1\ndir \"{dir}\"\nlogfile \"{log}\"\n\
         daemonize no\ncluster-enabled yes\ncluster-config-file nodes.conf\n\
         cluster-node-timeout {timeout}\nsave \"\"\nappendonly no\n\
         enable-debug-command local\n",
        dir = node_dir.display(),
        log = log_path(node_dir).display(),
        timeout = opts.node_timeout_ms,
    );
    // Diskless sync waits 5 s by default for more replicas to batch; that
    // would dominate `up` time with replicas.
    conf.push_str("repl-diskless-sync-delay 0\n");
    if let (Some(tls), Some(tls_port)) = (&opts.tls, tls_port) {
        conf.push_str(&tls_config(tls, port, tls_port));
    }
    for (k, v) in &opts.extra_config {
        conf.push_str(&format!("{k} {v}\n"));
    }
    let path = node_dir.join("redis.conf");
    fs::write(&path, conf).with_context(|| format!("write {}", path.display()))?;
    Ok(path)
}

/// A TLS node: clients on `tls_port`, the bus in TLS on the plain port's usual bus
/// port (so forming the cluster over the plain port works as without TLS).
fn tls_config(tls: &crate::TlsFiles, port: u16, tls_port: u16) -> String {
    format!(
        "tls-port {tls_port}\ntls-cert-file \"{cert}\"\ntls-key-file \"{key}\"\n\
         tls-ca-cert-file \"{ca}\"\ntls-cluster yes\ntls-replication yes\n\
         tls-auth-clients {auth}\ncluster-port {bus}\n",
        cert = tls.cert.display(),
        key = tls.key.display(),
        ca = tls.ca.display(),
        auth = if tls.auth_clients { "yes" } else { "no" },
        bus = port + crate::BUS_OFFSET,
    )
}

/// Starts one node as a child process. Output goes to its logfile; standard
/// streams are detached so a CLI caller's pipe is not held open by the nodes.
pub(crate) fn spawn(redis_server: &Path, conf: &Path, node_dir: &Path) -> Result<Child> {
    Command::new(redis_server)
        .arg(conf)
        .current_dir(node_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("spawn {}", redis_server.display()))
}

/// True while the pid exists and is not a zombie. Zombies count as dead:
/// a detached node's parent may be an init that never reaps.
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The command name is parenthesised and may itself contain ") ", so the
    // state letter is found after the last ')'.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next());
    !matches!(state, Some('Z') | Some('X') | None)
}

/// True if `pid` is a server we started for this node: a Redis or Valkey
/// binary (Valkey's process title is its path, `…/valkey-9.1/server
/// 127.0.0.1:port [cluster]`, without "redis") whose working directory is the
/// node dir (the server chdirs to `dir`) or whose process title names our port.
pub(crate) fn pid_is_our_node(pid: u32, port: u16, node_dir: &Path) -> bool {
    let cmdline = fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default();
    if !(cmdline.contains("redis") || cmdline.contains("valkey")) {
        return false;
    }
    let cwd = fs::read_link(format!("/proc/{pid}/cwd")).ok();
    let want = node_dir.canonicalize().ok();
    (cwd.is_some() && cwd == want) || cmdline.contains(&format!(":{port} "))
}

/// Sends SIGKILL to the given pids with one `kill` invocation (the workspace
/// forbids `unsafe`, so no raw `libc::kill`). The nodes keep no data worth a
/// graceful shutdown, and SIGTERM would make a 7.x master wait for replicas.
pub(crate) fn sigkill(pids: &[u32]) -> Result<()> {
    if pids.is_empty() {
        return Ok(());
    }
    let status = Command::new("kill")
        .arg("-KILL")
        .args(pids.iter().map(u32::to_string))
        .stderr(Stdio::null())
        .status()
        .context("run kill")?;
    // kill fails if any pid vanished meanwhile, which is what we wanted anyway.
    if !status.success() && pids.iter().any(|&p| pid_alive(p)) {
        bail!("kill -KILL {pids:?} failed: {status}");
    }
    Ok(())
}

/// Waits until none of the pids is alive; returns those still alive at the
/// deadline.
pub(crate) fn wait_gone(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|&p| pid_alive(p)).collect();
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        sleep(Duration::from_millis(20));
    }
}

/// Last lines of a node's log, for error messages.
pub(crate) fn log_tail(node_dir: &Path, lines: usize) -> String {
    let text = fs::read_to_string(log_path(node_dir)).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for a node: `sleep` copied to `bin`, run in `cwd`.
    fn stand_in(bin: &Path, cwd: &Path) -> Child {
        fs::create_dir_all(bin.parent().unwrap()).unwrap();
        fs::copy("/bin/sleep", bin).unwrap();
        Command::new(bin)
            .arg("30")
            .current_dir(cwd)
            .spawn()
            .unwrap()
    }

    /// `slotgate cluster down` once left every Valkey node running: the check wanted "redis" in
    /// the process title, and a Valkey node's title is its binary's path.
    #[test]
    fn a_valkey_node_in_its_dir_is_ours_and_a_stranger_is_not() {
        let root = std::env::temp_dir().join(format!("devcluster-pid-{}", std::process::id()));
        let node_dir = root.join("node");
        fs::create_dir_all(&node_dir).unwrap();
        let mut valkey = stand_in(&root.join("valkey-9.1/server"), &node_dir);
        let mut stranger = stand_in(&root.join("other/server"), &node_dir);
        let ours = pid_is_our_node(valkey.id(), 1, &node_dir);
        let theirs = pid_is_our_node(stranger.id(), 1, &node_dir);
        for child in [&mut valkey, &mut stranger] {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&root);
        assert!(ours, "a Valkey binary running in the node dir is the node");
        assert!(!theirs, "a process that is neither Redis nor Valkey is not");
    }
}
