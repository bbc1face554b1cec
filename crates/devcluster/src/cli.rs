//! The `slotgate cluster ...` subcommands. The slotgate binary embeds
//! [`ClusterCommand`] in its own clap parser and hands it to [`run_cli`].

use std::path::PathBuf;

use anyhow::Result;

use crate::{down, status, Cluster, Options, TlsFiles};

/// `slotgate cluster up|down|status`.
#[derive(clap::Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start a local cluster, print its seed and masters, and leave it running.
    Up {
        /// Number of masters.
        #[arg(long, default_value_t = 3)]
        masters: usize,
        /// Replicas per master.
        #[arg(long, default_value_t = 1)]
        replicas: usize,
        /// First client port (node i of N uses port+i, port+i+10000 and, with TLS,
        /// port+N+i); free ports if omitted.
        #[arg(long)]
        port: Option<u16>,
        /// Directory for node dirs, logs and the state file; a fresh temp dir if omitted.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// cluster-node-timeout in milliseconds.
        #[arg(long, default_value_t = 2000)]
        node_timeout: u64,
        /// The server binary: redis-server or valkey-server of any version (default:
        /// $REDIS_SERVER, else `redis-server` on PATH).
        #[arg(long)]
        server: Option<PathBuf>,
        /// A config directive for every node, as `NAME=VALUE` (repeatable), e.g.
        /// `--config cluster-databases=16` for Valkey 9's numbered databases.
        #[arg(long = "config", value_name = "NAME=VALUE", value_parser = directive)]
        config: Vec<(String, String)>,
        #[command(flatten)]
        tls: TlsArgs,
    },
    /// Stop the cluster recorded in DIR.
    Down {
        /// Directory given to (or printed by) `cluster up`.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Show each node of the cluster recorded in DIR.
    Status {
        /// Directory given to (or printed by) `cluster up`.
        #[arg(long)]
        dir: PathBuf,
    },
}

/// TLS for `cluster up`: all three files, or none.
#[derive(clap::Args, Debug)]
pub struct TlsArgs {
    /// Also serve TLS on a port of each node (tls-cluster and tls-replication on): the
    /// node's certificate (PEM, with 127.0.0.1 in its subjectAltName).
    #[arg(long, requires_all = ["tls_key", "tls_ca"])]
    tls_cert: Option<PathBuf>,
    /// The node certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// CA certificates (PEM) for peers and clients.
    #[arg(long, requires = "tls_cert")]
    tls_ca: Option<PathBuf>,
    /// Accept TLS clients without a certificate (Redis `tls-auth-clients no`).
    #[arg(long, requires = "tls_cert")]
    tls_no_client_auth: bool,
}

impl TlsArgs {
    fn files(&self) -> Option<TlsFiles> {
        Some(TlsFiles {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
            ca: self.tls_ca.clone()?,
            auth_clients: !self.tls_no_client_auth,
        })
    }
}

/// Runs one `cluster` subcommand, printing to stdout.
pub fn run_cli(cmd: ClusterCommand) -> Result<()> {
    match cmd {
        ClusterCommand::Up {
            masters,
            replicas,
            port,
            dir,
            node_timeout,
            server,
            config,
            tls,
        } => {
            let defaults = Options::default();
            let opts = Options {
                masters,
                replicas,
                base_port: port,
                dir: dir.unwrap_or(defaults.dir),
                node_timeout_ms: node_timeout,
                redis_server: server.unwrap_or(defaults.redis_server),
                tls: tls.files(),
                extra_config: config,
            };
            let cluster = Cluster::start(&opts)?;
            let text = up_text(&cluster);
            // Detached before printing: the cluster outlives a reader that went away.
            cluster.detach();
            out(&text);
        }
        ClusterCommand::Down { dir } => {
            down(&dir)?;
            out(&format!("stopped cluster in {}\n", dir.display()));
        }
        ClusterCommand::Status { dir } => out(&status(&dir)?),
    }
    Ok(())
}

/// Stdout, ignoring a reader that closed it (`slotgate cluster up | head -1`): the work is
/// done, and `println!` would panic.
fn out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// `NAME=VALUE` as a config line's two words.
fn directive(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!("expected NAME=VALUE, got {arg:?}")),
    }
}

/// One `key: value` line each, easy for scripts to grep.
fn up_text(cluster: &Cluster) -> String {
    use std::fmt::Write;
    let mut text = String::new();
    let join = |v: Vec<String>| v.join(" ");
    let masters = cluster.masters().iter().map(ToString::to_string).collect();
    let replicas = (cluster.nodes().iter())
        .filter(|n| n.master_of.is_some())
        .map(|n| n.addr.to_string())
        .collect();
    let _ = writeln!(text, "seed: {}", cluster.seed());
    let _ = writeln!(text, "masters: {}", join(masters));
    let _ = writeln!(text, "replicas: {}", join(replicas));
    let tls: Vec<String> = (cluster.masters().iter())
        .filter_map(|a| cluster.tls_addr(*a))
        .map(|a| a.to_string())
        .collect();
    if !tls.is_empty() {
        let _ = writeln!(text, "tls seed: {}", tls[0]);
        let _ = writeln!(text, "tls masters: {}", join(tls));
    }
    let _ = writeln!(text, "dir: {}", cluster.dir().display());
    let dir = cluster.dir().display();
    let _ = writeln!(text, "stop with: slotgate cluster down --dir {dir}");
    text
}
