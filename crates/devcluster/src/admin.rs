//! `down` and `status` for a cluster started by another process: everything
//! goes through the state file and recorded pids, re-checked before use.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::form::info_field;
use crate::process::{pid_alive, pid_is_our_node, sigkill, wait_gone};
use crate::resp::Conn;
use crate::state::{self, Entry};

/// Stops the cluster recorded in `dir`. Only pids that still look like our
/// nodes (same working dir or port in the process title) are signalled; pids
/// reused by unrelated processes are left alone. Files are kept.
pub fn down(dir: &Path) -> Result<()> {
    let entries = state::read(dir)?;
    let ours: Vec<u32> = entries
        .iter()
        .filter(|e| is_running_node(e))
        .map(|e| e.pid)
        .collect();
    sigkill(&ours)?;
    let left = wait_gone(&ours, Duration::from_secs(10));
    if !left.is_empty() {
        bail!("pids {left:?} from {} survived SIGKILL", dir.display());
    }
    Ok(())
}

fn is_running_node(e: &Entry) -> bool {
    pid_alive(e.pid) && pid_is_our_node(e.pid, e.addr.port(), &e.node_dir)
}

/// A human-readable table of the cluster recorded in `dir`: each node's
/// address, current role (asked live; the recorded one if unreachable),
/// pid liveness and `cluster_state`.
pub fn status(dir: &Path) -> Result<String> {
    let entries = state::read(dir)?;
    let mut out = format!("cluster in {} ({} nodes)\n", dir.display(), entries.len());
    for e in &entries {
        let running = is_running_node(e);
        let alive = if running { "alive" } else { "dead" };
        // Never ask a dead node's port: someone else may listen there now.
        let live = running.then(|| live_view(e).ok()).flatten();
        let (role, cluster_state) =
            live.unwrap_or_else(|| (recorded_role(e), "unreachable".into()));
        let id = e.id.get(..8).unwrap_or("-");
        let _ = writeln!(
            out,
            "{:<21} {role:<16} pid {:<8} {alive:<5} cluster_state:{cluster_state} id {id}",
            e.addr, e.pid
        );
    }
    Ok(out)
}

fn recorded_role(e: &Entry) -> String {
    match &e.master_of {
        Some(_) => "replica (rec.)".into(),
        None => "master (rec.)".into(),
    }
}

/// Current role and cluster_state as the node itself reports them.
fn live_view(e: &Entry) -> Result<(String, String)> {
    let mut conn = Conn::connect(e.addr, Duration::from_millis(500))?;
    let role = conn
        .call(&["ROLE"])?
        .ok()?
        .lines()
        .first()
        .cloned()
        .unwrap_or_default();
    let role = if role == "slave" {
        "replica".to_string()
    } else {
        role
    };
    let info = conn.call_text(&["CLUSTER", "INFO"])?;
    let state = info_field(&info, "cluster_state").unwrap_or_else(|| "?".into());
    Ok((role, state))
}
