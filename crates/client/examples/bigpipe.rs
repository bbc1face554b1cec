//! Benchmark (not a test) reproducing field report 004's pipeline experiment:
//! pipelines of 10 SETs with 100 KB, 1 MB, 10 MB and 100 MB values to one
//! node, 5 runs per size, mean of the middle 3 (the report's method), so the
//! time can be compared with hiredis's quadratic output buffer.
//!
//! ```text
//! cargo run --release -p slotgate-client --example bigpipe [host:port]
//! ```
//! Without an address it starts a one-master devcluster on free ports.

use std::time::{Duration, Instant};

use slotgate_client::{Client, Cmd, Pipeline};

const SIZES: [(usize, &str); 4] = [
    (100 << 10, "100 KB"),
    (1 << 20, "1 MB"),
    (10 << 20, "10 MB"),
    (100 << 20, "100 MB"),
];
const COMMANDS: usize = 10;
const RUNS: usize = 5;

/// One pipeline of `COMMANDS` SETs of `value`, built and executed.
async fn one_run(client: &Client, value: &[u8]) -> anyhow::Result<Duration> {
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

/// Mean of the runs without the fastest and the slowest.
fn trimmed_mean(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    let middle = &runs[1..runs.len() - 1];
    middle.iter().sum::<Duration>() / middle.len() as u32
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let (_cluster, seed) = match std::env::args().nth(1) {
        Some(addr) => (None, addr),
        None => {
            let opts = devcluster::Options {
                masters: 1,
                replicas: 0,
                ..Default::default()
            };
            let c = devcluster::Cluster::start(&opts)?;
            let seed = c.seed().to_string();
            (Some(c), seed)
        }
    };
    let cfg = slotgate_client::Config::default().with_timeout(Duration::from_secs(120));
    let client = Client::cluster_with([seed.as_str()], cfg).await?;
    println!(
        "pipeline of {COMMANDS} SETs, mean of middle {} of {RUNS} runs",
        RUNS - 2
    );
    for (size, label) in SIZES {
        let value = vec![b'x'; size];
        let mut runs = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            runs.push(one_run(&client, &value).await?);
        }
        let t = trimmed_mean(runs);
        let mb_s = (size * COMMANDS) as f64 / t.as_secs_f64() / 1e6;
        println!(
            "{label:>7}: {:>9.1} ms  ({mb_s:.0} MB/s)",
            t.as_secs_f64() * 1e3
        );
    }
    client
        .del(
            &(0..COMMANDS)
                .map(|i| format!("{{big}}:{i}"))
                .collect::<Vec<_>>(),
        )
        .await?;
    Ok(())
}
