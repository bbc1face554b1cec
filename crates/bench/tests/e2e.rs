//! End-to-end: the generator against a real redis-server (and a real 3-master cluster) on
//! free ports. Proves the numbers it reports are what happened: request counts, errors by
//! kind, crossed-reply checks, pacing and the JSON shape. About 3 s in all.

use bench::args::RunArgs;
use bench::procs::Proc;
use clap::Parser;
use serde_json::Value;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn run(args: &[&str]) -> Value {
    let cli = Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
        .expect("valid flags");
    bench::run::run_quiet(&cli.run, false).expect("run").0
}

/// A fresh redis-server. A test that cannot run fails: `make test` installs redis-server.
fn redis() -> (Proc, String) {
    match bench::procs::redis(None) {
        Ok(p) => {
            let addr = p.addr().to_string();
            (p, addr)
        }
        Err(e) => panic!("redis-server not available ({e}): run `make deps`"),
    }
}

#[test]
fn closed_loop_counts_and_json_shape() {
    let (_redis, target) = redis();
    let v = run(&[
        "--target",
        &target,
        "--requests",
        "3000",
        "--clients",
        "8",
        "--pipeline",
        "4",
        "--keyspace",
        "500",
        "--prepopulate",
        "--threads",
        "2",
    ]);
    assert_eq!(v["requests"], 3000);
    assert_eq!(v["ok"], 3000);
    assert_eq!(v["errors"]["total"], 0);
    for k in [
        "p50_us",
        "p99_us",
        "p999_us",
        "own_cpu_us_per_request",
        "throughput_rps",
    ] {
        assert!(v[k].as_f64().expect(k) > 0.0, "{k}: {v}");
    }
    assert!(v["per_second"].as_array().is_some_and(|a| !a.is_empty()));
}

#[test]
fn error_replies_are_counted_by_kind() {
    let (_redis, target) = redis();
    // A wrong-type command on about half the requests: counted, not hidden.
    let v = run(&[
        "--target",
        &target,
        "--requests",
        "400",
        "--clients",
        "4",
        "--mix",
        "get:1,HINCRBY __key__ f 1:1",
        "--keyspace",
        "10",
    ]);
    assert_eq!(v["requests"], 400);
    let other = v["errors"]["other"].as_u64().unwrap();
    assert!(other > 100 && other < 300, "{v}");
    assert_eq!(v["ok"].as_u64().unwrap() + other, 400);
}

#[test]
fn verified_replies_never_cross_and_open_loop_paces() {
    let (_redis, target) = redis();
    let v = run(&[
        "--target",
        &target,
        "--requests",
        "2000",
        "--clients",
        "4",
        "--pipeline",
        "8",
        "--mix",
        "get:1,set:1",
        "--value-size",
        "32",
        "--verify",
        "--keyspace",
        "50",
    ]);
    assert_eq!(v["ok"], 2000, "{v}");
    assert_eq!(v["crossed_replies"], 0, "{v}");
    // Open loop: ~500 requests at 1000/s over 0.5 s, with the send lag reported.
    let v = run(&[
        "--target",
        &target,
        "--duration",
        "500ms",
        "--rate",
        "1000",
        "--clients",
        "5",
    ]);
    let n = v["requests"].as_u64().unwrap();
    assert!((400..=560).contains(&n), "{v}");
    assert!(v["send_lag_us"]["p99"].is_number());
}

#[test]
fn cluster_routing_against_a_real_cluster() {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        ..Default::default()
    };
    let mut cluster = devcluster::Cluster::start(&opts)
        .expect("a local cluster starts (redis-server missing? run `make deps`)");
    let seed = cluster.seed().to_string();
    // Slot-routed: every request reaches its owner.
    let v = run(&[
        "--cluster",
        &seed,
        "--requests",
        "3000",
        "--clients",
        "6",
        "--pipeline",
        "8",
        "--command",
        "set",
        "--keyspace",
        "1000",
    ]);
    assert_eq!(v["ok"], 3000, "{v}");
    assert_eq!(v["errors"]["total"], 0, "{v}");
    // Pointed at one node as a plain endpoint: about 2/3 of the keys answer MOVED, counted.
    let v = run(&[
        "--target",
        &seed,
        "--requests",
        "900",
        "--clients",
        "3",
        "--keyspace",
        "1000",
    ]);
    let moved = v["errors"]["moved"].as_u64().unwrap();
    assert!((450..750).contains(&moved), "{v}");
    cluster.stop().expect("stop cluster");
}

#[test]
fn redirects_are_followed_while_slots_migrate() {
    let opts = devcluster::Options {
        masters: 3,
        replicas: 0,
        ..Default::default()
    };
    let mut cluster = devcluster::Cluster::start(&opts)
        .expect("a local cluster starts (redis-server missing? run `make deps`)");
    let seed = cluster.seed().to_string();
    let load = std::thread::spawn(move || {
        run(&[
            "--cluster",
            &seed,
            "--duration",
            "2s",
            "--rate",
            "2000",
            "--clients",
            "8",
            "--keyspace",
            "300",
            "--mix",
            "get:1,set:1",
            "--value-size",
            "32",
            "--verify",
        ])
    });
    // Migrate once the load is flowing: the first master (whose slots move) has served
    // some of its SETs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while sets_on_first_master(&cluster) < 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the load never reached the cluster"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let moved = bench::scen_reshard::migrate(&cluster, 400).expect("migrate");
    let v = load.join().expect("load thread");
    cluster.stop().expect("stop cluster");
    assert_eq!(moved, 400);
    assert_eq!(v["errors"]["total"], 0, "{v}");
    assert_eq!(v["crossed_replies"], 0, "{v}");
    assert!(
        v["redirects_followed"]["moved"].as_u64().unwrap() > 0,
        "{v}"
    );
}

/// SET calls on the master whose slots `scen_reshard::migrate` moves (the first one).
fn sets_on_first_master(cluster: &devcluster::Cluster) -> u64 {
    let first = cluster.nodes().iter().find(|n| n.master_of.is_none());
    let first = first.expect("a master").addr;
    let stats = cluster.command(first, &["INFO", "commandstats"]);
    let stats = stats.map(|r| r.lines()).unwrap_or_default();
    stats
        .iter()
        .find_map(|l| {
            l.strip_prefix("cmdstat_set:calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}
