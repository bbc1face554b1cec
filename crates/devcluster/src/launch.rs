//! Starting the node processes and waiting until each one answers. When we
//! chose the ports ourselves, a node that loses its port to a concurrent
//! process is restarted on a fresh pair instead of failing the whole cluster.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::ports::free_port_pair;
use crate::process::{log_path, log_tail, node_dir, spawn, write_config};
use crate::resp::{Conn, Reply};
use crate::Options;

/// Node connections time out after this; generous because 100+ nodes share
/// two cores while forming.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);
const PORT_RETRIES: usize = 5;
/// With a fixed base port, a TLS node's TLS port is its plain port plus the node count.
pub(crate) fn tls_offset(opts: &Options) -> u16 {
    (opts.masters * (1 + opts.replicas)) as u16
}

/// A node process we started.
pub(crate) struct Proc {
    /// `None` once reaped, or after detaching.
    pub child: Option<Child>,
    pub pid: u32,
    pub port: u16,
    /// The TLS client port, for TLS clusters.
    pub tls_port: Option<u16>,
    pub node_dir: PathBuf,
}

impl Proc {
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_port
            .map(|p| SocketAddr::from((Ipv4Addr::LOCALHOST, p)))
    }
}

/// Writes node `index`'s config and spawns it on `port`.
pub(crate) fn spawn_node(opts: &Options, dir: &Path, index: usize, port: u16) -> Result<Proc> {
    let nd = node_dir(dir, index);
    let tls_port = match (&opts.tls, opts.base_port) {
        (None, _) => None,
        // Right after the plain ports: base+N+i for node i of N (`validate` checked the fit).
        (Some(_), Some(_)) => Some(port + tls_offset(opts)),
        (Some(_), None) => Some(free_port_pair()?),
    };
    let conf = write_config(opts, &nd, port, tls_port)?;
    // A fresh log, so errors from an earlier attempt are not mistaken for ours.
    let _ = std::fs::remove_file(log_path(&nd));
    let child = spawn(&opts.redis_server, &conf, &nd)?;
    Ok(Proc {
        pid: child.id(),
        child: Some(child),
        port,
        tls_port,
        node_dir: nd,
    })
}

/// Waits until every node answers and is really ours, restarting nodes that
/// lost their port when `free_ports` allows it. Returns one connection each.
pub(crate) fn wait_ready(
    opts: &Options,
    dir: &Path,
    procs: &mut [Proc],
    free_ports: bool,
    deadline: Instant,
) -> Result<Vec<Conn>> {
    let mut conns = Vec::with_capacity(procs.len());
    for (index, p) in procs.iter_mut().enumerate() {
        let mut retries = 0;
        let conn = loop {
            match probe(p, deadline)? {
                Probe::Ready(conn) => break conn,
                Probe::PortTaken(_) if free_ports && retries < PORT_RETRIES => {
                    retries += 1;
                    kill_child(p);
                    *p = spawn_node(opts, dir, index, free_port_pair()?)?;
                }
                Probe::PortTaken(why) => {
                    bail!("node {} ({}): {why}", p.addr(), p.node_dir.display())
                }
            }
        };
        conns.push(conn);
    }
    Ok(conns)
}

enum Probe {
    Ready(Conn),
    /// Someone else holds the port (our node could not bind, or another
    /// server answered in its place).
    PortTaken(String),
}

/// Polls one node until it answers as itself, exits, or the deadline passes.
fn probe(p: &mut Proc, deadline: Instant) -> Result<Probe> {
    let addr = p.addr();
    loop {
        if let Some(status) = exited(p)? {
            let tail = log_tail(&p.node_dir, 8);
            if tail.contains("Address already in use") {
                return Ok(Probe::PortTaken(format!("could not bind: {tail}")));
            }
            let log = log_path(&p.node_dir);
            bail!(
                "node {addr} exited during startup ({status}); {}:\n{tail}",
                log.display()
            );
        }
        if let Ok(mut conn) = Conn::connect(addr, Duration::from_secs(1)) {
            if let Ok(reply) = conn.call(&["CONFIG", "GET", "dir"]) {
                let lines = reply.lines();
                let theirs = lines.get(1).map(String::as_str);
                if theirs == p.node_dir.to_str() {
                    conn.set_timeout(IO_TIMEOUT)?;
                    return Ok(Probe::Ready(conn));
                }
                if !matches!(reply, Reply::Error(_)) {
                    return Ok(Probe::PortTaken(format!(
                        "port answered by a server in {theirs:?}"
                    )));
                }
            }
        }
        if Instant::now() >= deadline {
            let log = log_path(&p.node_dir);
            bail!(
                "node {addr} did not start answering in time; see {}",
                log.display()
            );
        }
        sleep(Duration::from_millis(10));
    }
}

/// Reaps the child if it has exited, returning how it ended.
fn exited(p: &mut Proc) -> Result<Option<std::process::ExitStatus>> {
    let Some(child) = p.child.as_mut() else {
        return Ok(None);
    };
    let status = child
        .try_wait()
        .with_context(|| format!("wait for pid {}", p.pid))?;
    if status.is_some() {
        p.child = None;
    }
    Ok(status)
}

/// SIGKILLs and reaps a child we still own; a no-op once reaped.
pub(crate) fn kill_child(p: &mut Proc) {
    if let Some(mut child) = p.child.take() {
        // Errors mean it is already gone, which is the goal.
        let _ = child.kill();
        let _ = child.wait();
    }
}
