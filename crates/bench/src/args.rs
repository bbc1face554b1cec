//! `slotgate bench run` flags and their translation into a run plan. Parsing is kept apart
//! from running so it can be unit-tested without a server.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::client::Plan;
use crate::keys::KeyDist;
use crate::topology::RefreshPolicy;
use crate::workload::{parse_mix, CommandSpec, Workload};

/// Flags of `slotgate bench run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Any RESP endpoint (a Redis, slotgate, nutcracker): all requests go there.
    #[arg(long, conflicts_with = "cluster", required_unless_present = "cluster")]
    pub target: Option<String>,
    /// A cluster seed (comma-separated): route by slot and follow MOVED/ASK.
    #[arg(long, value_delimiter = ',')]
    pub cluster: Vec<String>,
    /// smart: patch on MOVED, refresh ≤ 1/s from a random node; naive: CLUSTER SLOTS per MOVED.
    #[arg(long, default_value = "smart")]
    pub refresh_policy: RefreshPolicy,
    /// Concurrent clients (each has its own connection to each node).
    #[arg(long, default_value_t = 50)]
    pub clients: u64,
    /// Generator threads, each a single-threaded event loop.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Requests per client batch (closed loop), or most in flight per client (with --rate).
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// Total requests [default: 100000 unless --duration is given].
    #[arg(long)]
    pub requests: Option<u64>,
    /// Run for this long instead (e.g. 10s, 500ms, 2m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Open loop at this total rate (requests/s); latency counts from the intended send time.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Number of distinct keys.
    #[arg(long, default_value_t = 100_000)]
    pub keyspace: u64,
    /// uniform | sequential | zipf[:s]
    #[arg(long, default_value = "uniform")]
    pub key_dist: KeyDist,
    /// Keys are this prefix plus 12 digits (the default gives 16-byte keys).
    #[arg(long, default_value = "key:")]
    pub key_prefix: String,
    /// Bytes per value.
    #[arg(long, default_value_t = 64)]
    pub value_size: usize,
    /// get | set | incr | ping | mget:K | mset:K | "TEMPLATE with __key__ and __value__"
    #[arg(long, default_value = "get", conflicts_with = "mix")]
    pub command: CommandSpec,
    /// Weighted mix instead of one command, e.g. get:9,set:1
    #[arg(long)]
    pub mix: Option<String>,
    /// SET every key of the keyspace once before measuring.
    #[arg(long)]
    pub prepopulate: bool,
    /// A batch's replies must arrive within this, or its requests count as timeouts.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// With --rate, wait with tokio's 1 ms timers instead of a µs timerfd: less CPU, but
    /// requests may leave up to ~1 ms late (shown as send lag, counted in latency).
    #[arg(long)]
    pub coarse_timer: bool,
    /// Check every GET/SET reply belongs to its request (values carry their key; needs
    /// --value-size ≥ 25); mismatches are reported as crossed replies.
    #[arg(long)]
    pub verify: bool,
    /// Open a new connection for every batch and close it after (connection churn, S6).
    #[arg(long)]
    pub reconnect: bool,
    /// Seed of the key and mix generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// Parses `10`, `10s`, `250ms`, `2m` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration> {
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("duration {s:?}"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => bail!("duration unit must be ms, s or m: {s:?}"),
    };
    if !(secs.is_finite() && secs >= 0.0) {
        bail!("bad duration {s:?}");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Resolves `host:port` once, before the run (no DNS on the hot path).
pub fn resolve(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs()
        .with_context(|| format!("resolving {addr}"))?
        .next()
        .with_context(|| format!("{addr} resolves to nothing"))
}

impl RunArgs {
    /// Checks combinations clap cannot express.
    pub fn validate(&self) -> Result<()> {
        if self.clients == 0 || self.threads == 0 || self.pipeline == 0 {
            bail!("--clients, --threads and --pipeline must be at least 1");
        }
        if self.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            bail!("--rate must be a positive number");
        }
        if self.verify && self.value_size < crate::workload::TOKEN_LEN {
            bail!(
                "--verify needs --value-size of at least {}",
                crate::workload::TOKEN_LEN
            );
        }
        if self.keyspace == 0 || self.keyspace > 1_000_000_000_000 {
            bail!("--keyspace must be in 1..=10^12 (keys have 12 digits)");
        }
        Ok(())
    }

    /// The request budget: `--requests`, else unlimited under `--duration`, else 100000.
    pub fn request_budget(&self) -> Option<u64> {
        match (self.requests, self.duration) {
            (Some(r), _) => Some(r),
            (None, Some(_)) => None,
            (None, None) => Some(100_000),
        }
    }

    /// The plan every client shares.
    pub fn plan(&self) -> Result<Plan> {
        let mix = match &self.mix {
            Some(m) => parse_mix(m)?,
            None => vec![(1, self.command.clone())],
        };
        Ok(Plan {
            workload: Workload::new(&mix, self.key_prefix.as_bytes(), self.value_size),
            key_dist: self.key_dist.clone(),
            keyspace: self.keyspace,
            pipeline: self.pipeline,
            rate: self.rate,
            timeout: self.timeout,
            clients: self.clients,
            seed: self.seed,
            reconnect: self.reconnect,
            verify: self.verify,
            coarse_timer: self.coarse_timer,
        })
    }

    /// The plan that SETs every key once (sequential strides, pipelined, closed loop).
    pub fn prepopulate_plan(&self) -> Plan {
        let mix = [(1, CommandSpec::Set)];
        Plan {
            workload: Workload::new(&mix, self.key_prefix.as_bytes(), self.value_size),
            key_dist: KeyDist::Sequential,
            keyspace: self.keyspace,
            pipeline: 32,
            rate: None,
            timeout: self.timeout,
            clients: self.clients.min(50),
            seed: self.seed,
            reconnect: false,
            verify: false,
            coarse_timer: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.run)
    }

    #[test]
    fn defaults_and_flags() {
        let a = parse(&["--target", "127.0.0.1:1"]).unwrap();
        assert_eq!((a.clients, a.pipeline, a.value_size), (50, 1, 64));
        assert_eq!(a.request_budget(), Some(100_000));
        let a = parse(&[
            "--cluster",
            "a:1,b:2",
            "--duration",
            "2s",
            "--key-dist",
            "zipf:1.1",
        ])
        .unwrap();
        assert_eq!(a.cluster.len(), 2);
        assert_eq!(a.request_budget(), None);
        assert_eq!(a.key_dist, KeyDist::Zipf(1.1));
        let a = parse(&[
            "--target",
            "x:1",
            "--command",
            "mget:4",
            "--refresh-policy",
            "naive",
        ]);
        assert_eq!(a.unwrap().refresh_policy, RefreshPolicy::Naive);
    }

    #[test]
    fn rejects_bad_combinations() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["--target", "a:1", "--cluster", "b:1"]).is_err());
        assert!(parse(&["--target", "a:1", "--command", "get", "--mix", "get:1"]).is_err());
        assert!(parse(&["--target", "a:1", "--clients", "0"])
            .unwrap()
            .validate()
            .is_err());
        assert!(parse(&["--target", "a:1", "--rate=-5"])
            .unwrap()
            .validate()
            .is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("2h").is_err());
        assert!(parse_duration("x").is_err());
    }
}
