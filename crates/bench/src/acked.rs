//! `slotgate bench acked`: a paced write load that remembers every acknowledged write, for
//! Jepsen-style checks after a migration, a failover or a reshard (scripts/bench_migration.py).
//!
//! It exists because the checker must know exactly which writes a client saw succeed (an
//! INCR acknowledged is one increment that must be in the final value; a SET acknowledged
//! last is the value a later read must return), at a rate a Python client cannot offer on
//! a shared 2-core machine (issue 26 asks for 20,000 requests/s from 50 clients).
//!
//! Each client is one connection with one request in flight (an outcome is never left
//! unknown: the load stops between requests), paced by its own timetable so the clients
//! together offer `--rate`. Requests go INCR, SET, HSET, LPUSH in turn:
//!
//! ```text
//!   INCR  c:<random counter>            shared by all clients: acks counted per counter
//!   SET   s:<i>  w<client>-<n>          i owned by the client (i % clients == client):
//!   HSET  h:<i>  f<client> h<client>-<n>  "last acknowledged" is one client's
//!   LPUSH l:<i>  p<n>                   acks counted per list
//! ```
//!
//! The report (JSON) holds the acks, error replies, and latency from the send (service)
//! and from the timetable's due time (what a client waiting on a late reply sees).

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use tokio::sync::Notify;

use crate::args::{parse_duration, resolve};
use crate::conn::Conn;
use crate::pacing::{Pacer, PreciseSleep};
use crate::stats::summarize;

/// Error replies kept verbatim in the report (the rest are only counted).
const KEEP_ERRORS: usize = 100;

/// Flags of `slotgate bench acked`.
#[derive(Args, Debug, Clone)]
pub struct AckedArgs {
    /// The RESP endpoint (a proxy or a server).
    #[arg(long)]
    pub endpoint: String,
    /// Connections, each with one request in flight.
    #[arg(long, default_value_t = 50)]
    pub clients: u64,
    /// Total requests/s of all clients.
    #[arg(long, default_value_t = 20_000.0)]
    pub rate: f64,
    /// Stop after this long (e.g. 20s, 30m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Duration,
    /// Stop early once this file exists (checked every 100 ms).
    #[arg(long)]
    pub stop_file: Option<PathBuf>,
    /// Counters `c:0..N` the INCRs pick from.
    #[arg(long, default_value_t = 10_000)]
    pub counters: u64,
    /// Strings `s:`, hashes `h:` and lists `l:` `0..N` shared out among the clients.
    #[arg(long, default_value_t = 10_000)]
    pub family: u64,
    /// The pacing clock's period in µs: due requests leave at its ticks.
    #[arg(long, default_value_t = 200)]
    pub tick_us: u64,
    /// Where the JSON report goes.
    #[arg(long)]
    pub out: PathBuf,
}

/// What one client saw acknowledged.
#[derive(Default)]
struct Acks {
    incr: BTreeMap<u64, u64>,
    set: BTreeMap<u64, String>,
    hset: BTreeMap<String, String>,
    lpush: BTreeMap<u64, u64>,
    errors: Vec<String>,
    error_count: u64,
    requests: u64,
    /// Per second of the run (by due time): requests, and the worst service and due latency.
    seconds: Vec<Second>,
}

/// One second of one client's load.
#[derive(Default, Clone, Copy)]
struct Second {
    requests: u64,
    service_max: Duration,
    due_max: Duration,
}

/// Runs the load and writes the report.
pub fn run(a: &AckedArgs) -> Result<()> {
    check(a)?;
    let addr = resolve(&a.endpoint)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(load(a, addr))?;
    std::fs::write(&a.out, serde_json::to_vec(&report)?)
        .with_context(|| format!("writing {}", a.out.display()))?;
    Ok(())
}

/// Flags that would leave a client without keys of its own or a timetable.
fn check(a: &AckedArgs) -> Result<()> {
    if a.clients == 0 {
        bail!("--clients must be at least 1");
    }
    if a.family < a.clients {
        bail!(
            "--family {} gives some of the {} clients no keys of their own: use at least --family {}",
            a.family,
            a.clients,
            a.clients
        );
    }
    if a.counters == 0 {
        bail!("--counters must be at least 1");
    }
    if !(a.rate.is_finite() && a.rate > 0.0) {
        bail!("--rate must be a positive number of requests/s");
    }
    Ok(())
}

/// What the clients of one run share: its clock and its end.
struct Shared {
    start: Instant,
    stop_at: Instant,
    stop: Cell<bool>,
    ticker: Ticker,
}

async fn load(a: &AckedArgs, addr: SocketAddr) -> Result<Value> {
    let start = Instant::now();
    let run = Rc::new(Shared {
        start,
        stop_at: start + a.duration,
        stop: Cell::new(false),
        ticker: Ticker::new(a.clients),
    });
    let local = tokio::task::LocalSet::new();
    let results = local
        .run_until(async {
            let clock = tokio::task::spawn_local({
                let run = run.clone();
                let tick = Duration::from_micros(a.tick_us.max(1));
                async move { run.ticker.run(tick).await }
            });
            let mut tasks = Vec::new();
            for cid in 0..a.clients {
                let pacer = Pacer::new(start, a.rate, cid, a.clients);
                let run = run.clone();
                let a = a.clone();
                tasks.push(tokio::task::spawn_local(async move {
                    client(&a, addr, cid, pacer, &run).await
                }));
            }
            let watch = {
                let run = run.clone();
                let file = a.stop_file.clone();
                tokio::task::spawn_local(async move {
                    while !run.stop.get() && Instant::now() < run.stop_at {
                        if file.as_ref().is_some_and(|f| f.exists()) {
                            run.stop.set(true);
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                })
            };
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await?);
            }
            run.stop.set(true);
            watch.await?;
            clock.abort();
            Ok::<_, anyhow::Error>(out)
        })
        .await?;
    let elapsed = start.elapsed().as_secs_f64();
    let mut service = hist()?;
    let mut from_due = hist()?;
    let mut all = Acks::default();
    for r in results {
        let (acks, s, d) = r?;
        service.add(&s)?;
        from_due.add(&d)?;
        merge(&mut all, acks);
    }
    let ms = |us: f64| us / 1000.0;
    let (s, d) = (summarize(&service), summarize(&from_due));
    Ok(json!({
        "requests": all.requests,
        "elapsed": elapsed,
        "rate": all.requests as f64 / elapsed,
        "p50_ms": ms(s.p50), "p99_ms": ms(s.p99), "p999_ms": ms(s.p999), "max_ms": ms(s.max),
        "due_p50_ms": ms(d.p50), "due_p99_ms": ms(d.p99), "due_max_ms": ms(d.max),
        "error_count": all.error_count,
        "errors": all.errors,
        "incr": keyed(all.incr),
        "set": keyed(all.set),
        "hset": Value::Object(all.hset.into_iter().map(|(k, v)| (k, v.into())).collect()),
        "lpush": keyed(all.lpush),
        "seconds": all.seconds.iter().map(|s| json!({
            "requests": s.requests,
            "service_max_ms": s.service_max.as_secs_f64() * 1000.0,
            "due_max_ms": s.due_max.as_secs_f64() * 1000.0,
        })).collect::<Vec<_>>(),
    }))
}

fn hist() -> Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1_000, 60_000_000_000, 3)?)
}

fn keyed<V: Into<Value>>(m: BTreeMap<u64, V>) -> Value {
    let obj: Map<String, Value> = m
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    Value::Object(obj)
}

fn merge(all: &mut Acks, one: Acks) {
    for (k, v) in one.incr {
        *all.incr.entry(k).or_default() += v;
    }
    for (k, v) in one.lpush {
        *all.lpush.entry(k).or_default() += v;
    }
    all.set.extend(one.set);
    all.hset.extend(one.hset);
    let room = KEEP_ERRORS.saturating_sub(all.errors.len());
    all.errors.extend(one.errors.into_iter().take(room));
    all.error_count += one.error_count;
    all.requests += one.requests;
    if all.seconds.len() < one.seconds.len() {
        all.seconds.resize(one.seconds.len(), Second::default());
    }
    for (a, o) in all.seconds.iter_mut().zip(one.seconds) {
        a.requests += o.requests;
        a.service_max = a.service_max.max(o.service_max);
        a.due_max = a.due_max.max(o.due_max);
    }
}

type ClientResult = Result<(Acks, Histogram<u64>, Histogram<u64>)>;

/// One connection until `stop_at` or `stop`; it ends between requests.
async fn client(
    a: &AckedArgs,
    addr: SocketAddr,
    cid: u64,
    mut pacer: Pacer,
    run: &Shared,
) -> ClientResult {
    let Shared {
        start,
        stop_at,
        ref stop,
        ref ticker,
    } = *run;
    let mut conn = Conn::connect(addr).await?;
    let (mut service, mut from_due) = (hist()?, hist()?);
    let mut acks = Acks::default();
    let mine: Vec<u64> = (cid..a.family).step_by(a.clients.max(1) as usize).collect();
    // A small xorshift: reproducible per client, no dependency.
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (cid + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n.max(1)
    };
    let mut n = 0u64;
    loop {
        let due = pacer.take();
        if due >= stop_at {
            break;
        }
        ticker.until(cid, due).await;
        if stop.get() {
            break;
        }
        n += 1;
        let kind = n % 4;
        let (pick, value);
        let cmd: Vec<String> = match kind {
            0 => {
                pick = next(a.counters);
                value = String::new();
                vec!["INCR".into(), format!("c:{pick}")]
            }
            1 => {
                pick = mine[next(mine.len() as u64) as usize];
                value = format!("w{cid}-{n}");
                vec!["SET".into(), format!("s:{pick}"), value.clone()]
            }
            2 => {
                pick = mine[next(mine.len() as u64) as usize];
                value = format!("h{cid}-{n}");
                vec![
                    "HSET".into(),
                    format!("h:{pick}"),
                    format!("f{cid}"),
                    value.clone(),
                ]
            }
            _ => {
                pick = mine[next(mine.len() as u64) as usize];
                value = String::new();
                vec!["LPUSH".into(), format!("l:{pick}"), format!("p{n}")]
            }
        };
        encode(&mut conn.wbuf, &cmd);
        let sent = Instant::now();
        conn.flush().await?;
        let mut reply = Vec::new();
        let mut arrived = sent;
        conn.read_replies(1, |_, frame, at| {
            reply.extend_from_slice(frame);
            arrived = at;
        })
        .await
        .with_context(|| format!("client {cid}: {} {}", cmd[0], cmd[1]))?;
        service.saturating_record(arrived.duration_since(sent).as_nanos() as u64);
        from_due.saturating_record(arrived.duration_since(due).as_nanos() as u64);
        acks.requests += 1;
        let at = due.duration_since(start).as_secs() as usize;
        if acks.seconds.len() <= at {
            acks.seconds.resize(at + 1, Second::default());
        }
        let sec = &mut acks.seconds[at];
        sec.requests += 1;
        sec.service_max = sec.service_max.max(arrived.duration_since(sent));
        sec.due_max = sec.due_max.max(arrived.duration_since(due));
        if reply.first() == Some(&b'-') {
            acks.error_count += 1;
            if acks.errors.len() < KEEP_ERRORS {
                let text = String::from_utf8_lossy(&reply[1..]).trim_end().to_string();
                acks.errors.push(format!("{} {}: {text}", cmd[0], cmd[1]));
            }
            continue;
        }
        match kind {
            0 => *acks.incr.entry(pick).or_default() += 1,
            1 => {
                acks.set.insert(pick, value);
            }
            2 => {
                acks.hset.insert(format!("{pick}:{cid}"), value);
            }
            _ => *acks.lpush.entry(pick).or_default() += 1,
        }
    }
    Ok((acks, service, from_due))
}

/// One clock for all clients: each waits for its due time on its own `Notify`, and one
/// µs timer wakes the due ones at each tick. A timer per client would cost a timerfd
/// syscall and a wake-up per request (27 µs of CPU per request here, more than the
/// servers under test); tokio's 1 ms wheel would send the requests in bursts.
struct Ticker {
    due: RefCell<BinaryHeap<Reverse<(Instant, u64)>>>,
    wake: Vec<Notify>,
}

impl Ticker {
    fn new(clients: u64) -> Ticker {
        Ticker {
            due: RefCell::new(BinaryHeap::new()),
            wake: (0..clients).map(|_| Notify::new()).collect(),
        }
    }

    /// Returns at the first tick at or after `due`.
    async fn until(&self, cid: u64, due: Instant) {
        if due <= Instant::now() {
            return;
        }
        self.due.borrow_mut().push(Reverse((due, cid)));
        self.wake[cid as usize].notified().await;
    }

    async fn run(&self, tick: Duration) -> std::io::Result<()> {
        let mut sleep = PreciseSleep::new()?;
        let mut at = Instant::now();
        loop {
            at = (at + tick).max(Instant::now());
            sleep.until(at).await?;
            let now = Instant::now();
            let mut due = self.due.borrow_mut();
            while let Some(Reverse((when, cid))) = due.peek().copied() {
                if when > now {
                    break;
                }
                due.pop();
                self.wake[cid as usize].notify_one();
            }
        }
    }
}

/// RESP array of bulk strings.
fn encode(buf: &mut Vec<u8>, args: &[String]) {
    use std::io::Write;
    let _ = write!(buf, "*{}\r\n", args.len());
    for a in args {
        let _ = write!(buf, "${}\r\n{a}\r\n", a.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        acked: AckedArgs,
    }

    fn args(extra: &[&str]) -> AckedArgs {
        let base = ["acked", "--endpoint", "127.0.0.1:1", "--duration", "1s"];
        let base = base.iter().chain(["--out", "/dev/null"].iter());
        Cli::parse_from(base.chain(extra.iter())).acked
    }

    #[test]
    fn flags_that_leave_a_client_without_keys_are_refused() {
        assert!(check(&args(&[])).is_ok());
        let err = check(&args(&["--clients", "50", "--family", "10"])).unwrap_err();
        assert!(
            err.to_string().contains("use at least --family 50"),
            "{err}"
        );
        assert!(check(&args(&["--clients", "0"])).is_err());
        assert!(check(&args(&["--rate", "0"])).is_err());
    }
}
