//! The [`Cluster`] handle: starts a cluster, gives tests its addresses and a
//! way to talk to and kill nodes, and stops exactly what it started.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::form::{form, Layout, SLOTS};
use crate::launch::{kill_child, spawn_node, wait_ready, Proc, IO_TIMEOUT};
use crate::ports::{free_port_pair, BUS_OFFSET};
use crate::process::{pid_alive, pid_is_our_node};
use crate::resp::{Conn, Reply};
use crate::state::{self, Entry};
use crate::{Node, Options, TEMP_PREFIX};

/// Set to keep auto-created temp dirs (logs, configs) after a cluster stops.
const KEEP_DIR_ENV: &str = "SLOTGATE_KEEP_CLUSTER_DIR";

/// A running local cluster. Dropping it stops the nodes unless
/// [`Cluster::detach`] was called.
pub struct Cluster {
    dir: PathBuf,
    nodes: Vec<Node>,
    procs: Vec<Proc>,
    detached: bool,
    remove_dir: bool,
    /// For [`Cluster::restart`].
    redis_server: PathBuf,
}

impl Cluster {
    /// Starts `masters * (1 + replicas)` nodes, joins them (CLUSTER MEET),
    /// splits the slots evenly (ADDSLOTSRANGE), attaches replicas (CLUSTER
    /// REPLICATE), and returns once every node reports `cluster_state:ok`,
    /// agrees on the slot map and every replica's link is up. Writes
    /// `cluster.state` in `opts.dir`. On error the started nodes are stopped
    /// and the dir (with the logs) is kept.
    pub fn start(opts: &Options) -> Result<Cluster> {
        let layout = validate(opts)?;
        let existed = opts.dir.exists();
        let dir = prepare_dir(&opts.dir)?;
        let mut cluster = Cluster {
            dir,
            nodes: Vec::new(),
            procs: Vec::new(),
            detached: false,
            remove_dir: false,
            redis_server: opts.redis_server.clone(),
        };
        let context = format!("starting cluster in {}", cluster.dir.display());
        cluster.launch(opts, layout).context(context)?;
        cluster.remove_dir = !existed && is_auto_temp_dir(&cluster.dir);
        Ok(cluster)
    }

    fn launch(&mut self, opts: &Options, layout: Layout) -> Result<()> {
        let total = layout.total();
        let ports: Vec<u16> = match opts.base_port {
            // validate() checked that the whole range fits.
            Some(base) => (0..total).map(|i| base + i as u16).collect(),
            None => (0..total)
                .map(|_| free_port_pair())
                .collect::<Result<_>>()?,
        };
        for (index, &port) in ports.iter().enumerate() {
            let proc = spawn_node(opts, &self.dir, index, port)?;
            self.procs.push(proc);
        }
        // Recorded right away so `down` can clean up even if we die while forming.
        self.record(layout, &[])?;
        let n = total as u32;
        let deadline = Instant::now() + Duration::from_secs(10) + Duration::from_millis(100) * n;
        let free = opts.base_port.is_none();
        let mut conns = wait_ready(opts, &self.dir, &mut self.procs, free, deadline)?;
        self.record(layout, &[])?;
        let addrs: Vec<SocketAddr> = self.procs.iter().map(Proc::addr).collect();
        let deadline = Instant::now() + Duration::from_secs(20) + Duration::from_millis(300) * n;
        let ids = form(&mut conns, &addrs, layout, deadline)?;
        self.record(layout, &ids)
    }

    /// Rebuilds `nodes` from the processes and writes the state file.
    fn record(&mut self, layout: Layout, ids: &[String]) -> Result<()> {
        let id = |i: usize| ids.get(i).cloned().unwrap_or_default();
        self.nodes = (self.procs.iter().enumerate())
            .map(|(i, p)| Node {
                addr: p.addr(),
                pid: p.pid,
                id: id(i),
                master_of: layout.master_index(i).map(id).filter(|m| !m.is_empty()),
            })
            .collect();
        let entries: Vec<Entry> = (self.nodes.iter().zip(&self.procs))
            .map(|(n, p)| Entry {
                addr: n.addr,
                pid: n.pid,
                id: n.id.clone(),
                master_of: n.master_of.clone(),
                node_dir: p.node_dir.clone(),
            })
            .collect();
        state::write(&self.dir, &entries)
    }

    /// All nodes: masters first (in slot order), then replicas master by master.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Addresses of the nodes started as masters, in slot order.
    pub fn masters(&self) -> Vec<SocketAddr> {
        self.nodes
            .iter()
            .filter(|n| n.master_of.is_none())
            .map(|n| n.addr)
            .collect()
    }

    /// The first master; a good seed for clients and proxies.
    pub fn seed(&self) -> SocketAddr {
        self.nodes[0].addr
    }

    /// The TLS address of the node whose plain address is `addr` (TLS clusters only).
    pub fn tls_addr(&self, addr: SocketAddr) -> Option<SocketAddr> {
        self.procs
            .iter()
            .find(|p| p.addr() == addr)
            .and_then(Proc::tls_addr)
    }

    /// The directory holding node dirs, logs and the state file.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// SIGKILLs one node (for failover tests). It stays recorded, so a later
    /// [`Cluster::stop`] does not trip over it.
    pub fn kill(&mut self, addr: SocketAddr) -> Result<()> {
        let Some(p) = self.procs.iter_mut().find(|p| p.addr() == addr) else {
            bail!(
                "{addr} is not a node of the cluster in {}",
                self.dir.display()
            );
        };
        kill_child(p);
        Ok(())
    }

    /// Starts a node killed by [`Cluster::kill`] again on its port, with its `nodes.conf`,
    /// so it rejoins the cluster as the node it was (a restart after a crash, F9), and waits
    /// until it answers. Its new pid is in [`Cluster::nodes`].
    pub fn restart(&mut self, addr: SocketAddr) -> Result<()> {
        let Some(i) = self.procs.iter().position(|p| p.addr() == addr) else {
            bail!(
                "{addr} is not a node of the cluster in {}",
                self.dir.display()
            );
        };
        let p = &mut self.procs[i];
        if p.child.is_some() {
            bail!("{addr} is still running");
        }
        let conf = p.node_dir.join("redis.conf");
        let child = crate::process::spawn(&self.redis_server, &conf, &p.node_dir)?;
        p.pid = child.id();
        p.child = Some(child);
        self.nodes[i].pid = p.pid;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut c) = Conn::connect(addr, Duration::from_secs(1)) {
                // A node loading its data answers -LOADING, which is an answer too.
                if c.call(&["PING"]).is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                bail!("{addr} did not answer within 30 s of its restart");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops exactly the processes this cluster started (SIGKILL; the nodes
    /// persist nothing) and waits for them. Idempotent. Removes the dir only
    /// if it was invented by [`Options::default`] and did not exist before.
    pub fn stop(&mut self) -> Result<()> {
        // Signal everyone first, then reap, so 100 nodes die in parallel.
        for child in self.procs.iter_mut().filter_map(|p| p.child.as_mut()) {
            let _ = child.kill();
        }
        let mut errors = Vec::new();
        for p in &mut self.procs {
            if let Some(mut child) = p.child.take() {
                if let Err(e) = child.wait() {
                    errors.push(format!("pid {}: {e}", p.pid));
                }
            }
        }
        if !errors.is_empty() {
            bail!(
                "stopping cluster in {}: {}",
                self.dir.display(),
                errors.join("; ")
            );
        }
        if std::mem::take(&mut self.remove_dir) && !std::thread::panicking() {
            fs::remove_dir_all(&self.dir)
                .with_context(|| format!("remove {}", self.dir.display()))?;
        }
        Ok(())
    }

    /// Leaves the nodes running when this handle goes away (for `cluster up`);
    /// stop them later with [`crate::down`].
    pub fn detach(mut self) {
        self.detached = true;
        // Dropping a std Child neither kills nor waits for it.
        self.procs.iter_mut().for_each(|p| drop(p.child.take()));
    }

    /// Runs one command on a node over a fresh connection. Redis error
    /// replies (MOVED, WRONGTYPE, ...) come back as `Ok(Reply::Error)`.
    pub fn command(&self, addr: SocketAddr, args: &[&str]) -> Result<Reply> {
        Conn::connect(addr, IO_TIMEOUT)?.call(args)
    }

    /// Client addresses of the nodes not killed or stopped by this handle.
    pub(crate) fn live_addrs(&self) -> Vec<SocketAddr> {
        self.procs
            .iter()
            .filter(|p| p.child.is_some())
            .map(Proc::addr)
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.detached {
            if let Err(e) = self.stop() {
                eprintln!("devcluster: {e:#}");
            }
        }
    }
}

/// Checks the options and derives the layout.
fn validate(opts: &Options) -> Result<Layout> {
    let layout = Layout {
        masters: opts.masters,
        replicas: opts.replicas,
    };
    if opts.masters == 0 || opts.masters > usize::from(SLOTS) {
        bail!(
            "masters must be between 1 and {SLOTS}, got {}",
            opts.masters
        );
    }
    let total = opts
        .masters
        .checked_mul(1 + opts.replicas)
        .context("too many nodes")?;
    if opts.node_timeout_ms == 0 {
        bail!("node timeout must be positive");
    }
    if let Some(base) = opts.base_port {
        // TLS ports (base+N..) stay below the bus ports (base+10000..) as long as N does.
        let tls_fits = opts.tls.is_none() || 2 * total <= usize::from(BUS_OFFSET);
        let last = usize::from(base) + total - 1 + usize::from(BUS_OFFSET);
        if !tls_fits {
            bail!("{total} TLS nodes need more than {BUS_OFFSET} ports below the bus ports");
        }
        if base == 0 || last > usize::from(u16::MAX) {
            bail!(
                "ports {base}..{} plus bus offset {BUS_OFFSET} exceed 65535",
                usize::from(base) + total - 1
            );
        }
    }
    Ok(layout)
}

/// Creates the dir, makes it absolute (node configs and the state file hold
/// paths) and refuses to start over a cluster that is still running there.
fn prepare_dir(dir: &Path) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolve {}", dir.display()))?;
    if let Ok(entries) = state::read(&dir) {
        if let Some(e) = entries
            .iter()
            .find(|e| pid_alive(e.pid) && pid_is_our_node(e.pid, e.addr.port(), &e.node_dir))
        {
            bail!(
                "a cluster recorded in {} is still running (node {} pid {}); stop it with `slotgate cluster down --dir {}`",
                dir.display(),
                e.addr,
                e.pid,
                dir.display()
            );
        }
    }
    Ok(dir)
}

/// Only dirs named by [`Options::default`] directly under the temp dir are
/// ours to delete.
fn is_auto_temp_dir(dir: &Path) -> bool {
    let name_ok = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(TEMP_PREFIX));
    let parent_ok = dir.parent().map(Path::to_path_buf) == std::env::temp_dir().canonicalize().ok();
    name_ok && parent_ok && std::env::var_os(KEEP_DIR_ENV).is_none()
}
