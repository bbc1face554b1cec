//! The state file that lets `cluster down` / `cluster status` in another
//! process find the nodes a `cluster up` started. Plain text, one node per
//! line, so it needs no serialisation crate and is readable by hand.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

const FILE: &str = "cluster.state";
const HEADER: &str =
    "# slotgate devcluster state v1: node <addr> <pid> <id|-> <master-id|-> <node-dir>";

/// One recorded node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub addr: SocketAddr,
    pub pid: u32,
    /// Empty until the node's id is known.
    pub id: String,
    pub master_of: Option<String>,
    pub node_dir: PathBuf,
}

pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Writes atomically (temp file + rename) so a concurrent `status` never
/// reads half a file.
pub(crate) fn write(dir: &Path, entries: &[Entry]) -> Result<()> {
    let mut text = format!("{HEADER}\n");
    for e in entries {
        let id = if e.id.is_empty() { "-" } else { &e.id };
        let master = e.master_of.as_deref().unwrap_or("-");
        text.push_str(&format!(
            "node {} {} {id} {master} {}\n",
            e.addr,
            e.pid,
            e.node_dir.display()
        ));
    }
    let tmp = dir.join(format!("{FILE}.tmp"));
    fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
    fs::rename(&tmp, path(dir)).with_context(|| format!("rename to {}", path(dir).display()))
}

/// Reads the state file of `dir`; a missing file is an error that says so.
pub(crate) fn read(dir: &Path) -> Result<Vec<Entry>> {
    let p = path(dir);
    let text = fs::read_to_string(&p).with_context(|| {
        format!(
            "no devcluster state in {} (read {})",
            dir.display(),
            p.display()
        )
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            parse_line(l).with_context(|| format!("{}:{}: bad line {l:?}", p.display(), i + 1))
        })
        .collect()
}

fn parse_line(line: &str) -> Result<Entry> {
    // The node dir is last and taken verbatim, so it may contain spaces.
    let mut it = line.splitn(6, ' ');
    let mut field = || it.next().context("missing field");
    if field()? != "node" {
        bail!("expected `node`");
    }
    let addr = field()?.parse()?;
    let pid = field()?.parse()?;
    let id = field()?;
    let master = field()?;
    let node_dir = PathBuf::from(field()?);
    Ok(Entry {
        addr,
        pid,
        id: if id == "-" {
            String::new()
        } else {
            id.to_string()
        },
        master_of: (master != "-").then(|| master.to_string()),
        node_dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let dir =
            std::env::temp_dir().join(format!("devcluster-state-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let entries = vec![
            Entry {
                addr: "127.0.0.1:12000".parse().unwrap(),
                pid: 42,
                id: "abc".into(),
                master_of: None,
                node_dir: dir.join("node 000"),
            },
            Entry {
                addr: "127.0.0.1:12001".parse().unwrap(),
                pid: 43,
                id: String::new(),
                master_of: Some("abc".into()),
                node_dir: dir.join("node-001"),
            },
        ];
        write(&dir, &entries).unwrap();
        assert_eq!(read(&dir).unwrap(), entries);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let err = read(Path::new("/nonexistent/devcluster")).unwrap_err();
        assert!(format!("{err:#}").contains("no devcluster state"));
    }
}
