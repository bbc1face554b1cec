//! One fault harness for the catalogue of reliability.md §C: the same clients run through
//! the proxy and, beside them, straight against the cluster, while a test injects a fault.
//! At the end every run is held to the same checks (no reply crossed, no write lost unless
//! the test says Redis itself loses it, nothing phantom or run twice, a bounded count of
//! unknown outcomes, the topology converged, `redis-cli --cluster check` passes) and prints
//! one row of the report in docs/faults.md (also appended to `$FAULTS_REPORT` if set).

pub mod load;
pub mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use load::{verdict, Load, Seen, Verdict};
use resp::Value;
use wire::{Outcome, Target, Wire};

use super::{text, Client, Harness};

/// What the fault is allowed to cost.
pub struct Expect {
    /// Acknowledged writes Redis itself may lose, through the proxy or not: replication is
    /// asynchronous, so a primary killed or stopped may have acknowledged writes its replica
    /// never got (F1, F2: a few, at the instant of the fault; F4, F6: by design, many).
    pub max_lost: usize,
    /// Unknown outcomes allowed through the proxy (requests in flight at the fault).
    pub max_unknown: usize,
    /// The fault must cost the proxy's clients no error reply at all (only a pause).
    pub no_errors: bool,
}

impl Expect {
    /// Nothing lost, at most `max_unknown` unknown outcomes, errors allowed.
    pub fn safe(max_unknown: usize) -> Expect {
        Expect {
            max_lost: 0,
            max_unknown,
            no_errors: false,
        }
    }
}

/// A fault under way: the loads started before it and the proxy's counters then.
pub struct Run {
    pub id: &'static str,
    pub fault: &'static str,
    pub keys: Vec<String>,
    via_proxy: Load,
    direct: Load,
    stats: [u64; 3],
    fds: usize,
    rss_kb: u64,
}

/// Panics on the proxy's own threads (`slotgate-*`), tasks included: tokio catches a task's
/// panic, but the hook sees it first.
static PROXY_PANICS: AtomicU64 = AtomicU64::new(0);

fn count_proxy_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            if name.starts_with("slotgate-") {
                PROXY_PANICS.fetch_add(1, Ordering::Relaxed);
            }
            previous(info);
        }));
    });
}

/// `{tag}:p<i>` for the proxy's clients and `{tag}:d<i>` for the direct ones, two per tag.
pub fn keys(tags: &[&str], side: char) -> Vec<String> {
    (tags.iter())
        .flat_map(|t| (0..2).map(move |i| format!("{{{t}}}:{side}{i}")))
        .collect()
}

impl Run {
    /// Starts both loads on keys of these hash tags and waits until they flow.
    pub fn start(h: &Harness, id: &'static str, fault: &'static str, tags: &[&str]) -> Run {
        let nodes: Vec<SocketAddr> = h.cluster.nodes().iter().map(|n| n.addr).collect();
        count_proxy_panics();
        let (fds, rss_kb) = (fd_count(), rss_kb());
        let run = Run {
            id,
            fault,
            keys: keys(tags, 'p'),
            via_proxy: Load::start(&keys(tags, 'p'), Some(h.addr()), &nodes),
            direct: Load::start(&keys(tags, 'd'), None, &nodes),
            stats: hold_stats(h.addr()),
            fds,
            rss_kb,
        };
        run.via_proxy.wait_acks(200);
        run.direct.wait_acks(200);
        run
    }

    /// Lets both loads make `n` more acknowledged writes (service is back).
    pub fn wait_acks(&self, n: u64) {
        self.via_proxy.wait_acks(n);
        self.direct.wait_acks(n);
    }

    /// Waits until a client of the proxy saw a failure (error reply or lost connection).
    pub fn wait_proxy_failure(&self) {
        self.via_proxy.wait_failure();
    }

    /// Stops the loads, waits for the cluster to settle, checks and reports.
    pub fn finish(self, h: &Harness, expect: Expect) {
        let seen_p = self.via_proxy.stop();
        let seen_d = self.direct.stop();
        let started = Instant::now();
        h.cluster
            .wait_healthy(Duration::from_secs(60))
            .expect("the topology converges");
        let converged = started.elapsed();
        let nodes: Vec<SocketAddr> = h.cluster.nodes().iter().map(|n| n.addr).collect();
        let vp = verdicts(&seen_p, &nodes);
        let vd = verdicts(&seen_d, &nodes);
        let extra = proxy_figures(h, (self.stats, self.fds, self.rss_kb), converged);
        report(self.id, self.fault, "proxy", &seen_p, &vp, &extra);
        report(self.id, self.fault, "direct", &seen_d, &vd, "");
        cluster_check(h.cluster.seed());
        let panics = PROXY_PANICS.load(Ordering::Relaxed);
        assert_eq!(panics, 0, "the proxy panicked (see above)");
        check(&seen_p, &vp, &expect);
        let direct = Expect {
            max_unknown: usize::MAX,
            no_errors: false,
            max_lost: usize::MAX,
        };
        check(&seen_d, &vd, &direct);
    }
}

/// Held/released/expired over the run, convergence time, fds and RSS before and after.
fn proxy_figures(h: &Harness, before: ([u64; 3], usize, u64), converged: Duration) -> String {
    let (stats, fds, rss) = before;
    let after = hold_stats(h.addr());
    let held: Vec<u64> = (0..3).map(|i| after[i] - stats[i]).collect();
    format!(
        "{}/{}/{}; converged {:.1}s; fds {}→{}, RSS {}→{} MB",
        held[0],
        held[1],
        held[2],
        converged.as_secs_f64(),
        fds,
        fd_count(),
        rss / 1024,
        rss_kb() / 1024
    )
}

/// The list each client wrote, read from the cluster now, against what it saw.
fn verdicts(seen: &[Seen], nodes: &[SocketAddr]) -> Vec<Verdict> {
    let mut w = Wire::new(Target::Direct(nodes.to_vec()));
    (seen.iter().enumerate())
        .map(|(id, s)| {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            let stored = loop {
                match w.call(&[b"LRANGE", s.key.as_bytes(), b"0", b"-1"]) {
                    Outcome::Reply(Value::Array(items)) => break items,
                    _ => {
                        let now = std::time::Instant::now();
                        assert!(now < deadline, "LRANGE {} never answered", s.key);
                        std::thread::sleep(Duration::from_millis(50)) // a poll step
                    }
                }
            };
            let stored: Vec<Vec<u8>> = (stored.iter())
                .filter_map(|v| match v {
                    Value::BulkString(b) => Some(b.to_vec()),
                    _ => None,
                })
                .collect();
            verdict(s, id, &stored)
        })
        .collect()
}

fn check(seen: &[Seen], v: &[Verdict], expect: &Expect) {
    let unknown: usize = seen.iter().map(|s| s.unknown.len()).sum();
    for (s, v) in seen.iter().zip(v) {
        assert!(
            s.misrouted.is_empty(),
            "{}: misrouted {:?}",
            s.key,
            s.misrouted
        );
        assert!(v.phantom.is_empty(), "{}: phantom {:?}", s.key, v.phantom);
        assert!(
            v.duplicated.is_empty(),
            "{}: run twice {:?}",
            s.key,
            v.duplicated
        );
        if expect.no_errors {
            assert!(s.errors.is_empty(), "{}: errors {:?}", s.key, s.errors);
        }
    }
    let lost: usize = v.iter().map(|v| v.lost.len()).sum();
    assert!(
        lost <= expect.max_lost,
        "{lost} acknowledged writes lost (at most {})",
        expect.max_lost
    );
    assert!(
        unknown <= expect.max_unknown,
        "{unknown} unknown outcomes (at most {})",
        expect.max_unknown
    );
}

fn report(id: &str, fault: &str, via: &str, seen: &[Seen], v: &[Verdict], extra: &str) {
    let sum = |f: &dyn Fn(&Seen) -> usize| seen.iter().map(f).sum::<usize>();
    let mut errors = std::collections::BTreeMap::<String, u64>::new();
    for s in seen {
        for (k, n) in &s.errors {
            *errors.entry(k.clone()).or_default() += n;
        }
    }
    let errors = if errors.is_empty() {
        "0".to_string()
    } else {
        let parts: Vec<String> = errors.iter().map(|(k, n)| format!("{n} {k}")).collect();
        parts.join(", ")
    };
    let gap = seen.iter().map(|s| s.max_gap).max().unwrap_or_default();
    let row = format!(
        "| {id} | {fault} | {via} | {:.2}s | {} | {errors} | {} | {} | {} | {extra} |",
        gap.as_secs_f64(),
        sum(&|s| s.acked.len()),
        sum(&|s| s.unknown.len()),
        v.iter().map(|v| v.lost.len()).sum::<usize>(),
        sum(&|s| s.misrouted.len())
            + v.iter()
                .map(|v| v.phantom.len() + v.duplicated.len())
                .sum::<usize>(),
    );
    eprintln!("{row}");
    if let Ok(path) = std::env::var("FAULTS_REPORT") {
        use std::io::Write;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut f) = file {
            let _ = writeln!(f, "{row}");
        }
    }
}

/// `redis-cli --cluster check`: every slot covered, no open slot, all nodes agree.
pub fn cluster_check(seed: SocketAddr) {
    let out = std::process::Command::new("redis-cli")
        .args(["--cluster", "check", &seed.to_string()])
        .output()
        .expect("redis-cli runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("[OK] All 16384 slots covered"),
        "redis-cli --cluster check:\n{text}"
    );
}

/// INFO stats failover_held/released/expired_requests of the proxy.
pub fn hold_stats(proxy: SocketAddr) -> [u64; 3] {
    let info = text(&Client::connect(proxy).call(&["INFO", "stats"]));
    let stat = |name: &str| {
        (info.lines())
            .find_map(|l| l.strip_prefix(&format!("failover_{name}_requests:")))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    [stat("held"), stat("released"), stat("expired")]
}

/// Open file descriptors of this process (the proxy runs in it).
pub fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

pub fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `kill -<sig> <pid>`.
pub fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{sig} {pid}");
}

/// The node (index in `nodes()`) of the master serving `tag` now, and of its replica.
pub fn master_and_replica(h: &Harness, tag: &str) -> (usize, usize) {
    let owner = h.cluster.owner_of(format!("{{{tag}}}").as_bytes()).unwrap();
    let nodes = h.cluster.nodes();
    let m = nodes.iter().position(|n| n.addr == owner).unwrap();
    let r = (nodes.iter())
        .position(|n| n.master_of.as_deref() == Some(nodes[m].id.as_str()))
        .expect("the master has a replica");
    (m, r)
}
