//! Benchmark (not a test) reproducing field report 004's pipeline experiment:
//! pipelines of 10 SETs with 100 KB, 1 MB, 10 MB and 100 MB values to one
//! node, 5 runs per size, mean of the middle 3 (the report's method), so the
//! time can be compared with hiredis's quadratic output buffer.
//!
//! ```text
//! cargo run --release -p slotgate-client --example bigpipe [[--single] host:port]
//! ```
//! Without an address it starts a one-master devcluster on free ports;
//! `--single` talks to a standalone server: `scripts/client_bench bigpipe` runs hiredis,
//! this, and a trivial-writer floor against the same one, for SETs and GETs.

use std::time::{Duration, Instant};

use bytes::Bytes;
use slotgate_client::{Client, Cmd, Config, Pipeline, ToArg, Value};

const SIZES: [(usize, &str); 4] = [
    (100 << 10, "100 KB"),
    (1 << 20, "1 MB"),
    (10 << 20, "10 MB"),
    (100 << 20, "100 MB"),
];
const COMMANDS: usize = 10;
const RUNS: usize = 5;

/// One pipeline of `COMMANDS` SETs of `value`, built and executed. A `&[u8]`
/// value is copied once into each command; a `Bytes` value is sent from the
/// caller's buffer.
async fn one_run(client: &Client, value: impl ToArg + Copy) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut p = Pipeline::with_capacity(COMMANDS);
    for i in 0..COMMANDS {
        // One hash tag: every key on the same node, as in the report.
        p.add(Cmd::new("SET").arg(format!("{{big}}:{i}")).arg(value));
    }
    for r in client.execute(&p).await {
        r?;
    }
    Ok(start.elapsed())
}

/// One pipeline of `COMMANDS` GETs of the values just set, each checked for
/// its length.
async fn one_get(client: &Client, size: usize) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut p = Pipeline::with_capacity(COMMANDS);
    for i in 0..COMMANDS {
        p.add(Cmd::new("GET").arg(format!("{{big}}:{i}")));
    }
    for r in client.execute(&p).await {
        match r? {
            Value::BulkString(b) if b.len() == size => {}
            other => anyhow::bail!(
                "GET: wanted {size} bytes, got {:?}",
                other.as_bytes().map(<[u8]>::len)
            ),
        }
    }
    Ok(start.elapsed())
}

/// Mean of the runs without the fastest and the slowest.
fn trimmed_mean(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    let middle = &runs[1..runs.len() - 1];
    middle.iter().sum::<Duration>() / middle.len() as u32
}

/// The client to measure with, and the devcluster it runs on when it was
/// started here (stopped when dropped).
async fn connect() -> anyhow::Result<(Client, Option<devcluster::Cluster>)> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = Config::default().with_timeout(Duration::from_secs(120));
    match args.as_slice() {
        [flag, addr] if flag == "--single" => {
            Ok((Client::single_with(addr.as_str(), cfg).await?, None))
        }
        [addr] => Ok((Client::cluster_with([addr.as_str()], cfg).await?, None)),
        _ => {
            let opts = devcluster::Options {
                masters: 1,
                replicas: 0,
                ..Default::default()
            };
            let cluster = devcluster::Cluster::start(&opts)?;
            let client = Client::cluster_with([cluster.seed().to_string()], cfg).await?;
            Ok((client, Some(cluster)))
        }
    }
}

/// Trimmed mean of `RUNS` runs.
async fn measure(client: &Client, value: impl ToArg + Copy) -> anyhow::Result<Duration> {
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        runs.push(one_run(client, value).await?);
    }
    Ok(trimmed_mean(runs))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let (client, _cluster) = connect().await?;
    println!(
        "slotgate-client: pipeline of {COMMANDS} SETs, mean of middle {} of {RUNS} runs",
        RUNS - 2
    );
    for (size, label) in SIZES {
        let value = Bytes::from(vec![b'x'; size]);
        let copied = measure(&client, &value[..]).await?;
        let shared = measure(&client, &value).await?;
        let mut gets = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            gets.push(one_get(&client, size).await?);
        }
        let get = trimmed_mean(gets);
        let mb_s = |t: Duration| (size * COMMANDS) as f64 / t.as_secs_f64() / 1e6;
        println!(
            "{label:>7}: SET {:>8.1} ms ({:>4.0} MB/s) copied arg | SET {:>8.1} ms ({:>4.0} MB/s) shared Bytes | GET {:>8.1} ms ({:>4.0} MB/s)",
            copied.as_secs_f64() * 1e3,
            mb_s(copied),
            shared.as_secs_f64() * 1e3,
            mb_s(shared),
            get.as_secs_f64() * 1e3,
            mb_s(get),
        );
    }
    let keys: Vec<String> = (0..COMMANDS).map(|i| format!("{{big}}:{i}")).collect();
    client.del(&keys).await?;
    Ok(())
}
