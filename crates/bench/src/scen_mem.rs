//! Memory scenarios. `slow-readers`: clients that pipeline but never read force the server to
//! buffer replies; does its RSS grow without bound? (On slotgate, the full acceptance run of
//! the memory budget lives in `scen_slow.rs`; here, the RSS rows of the other systems.)
//! `big-values`: large pipelined SET/GET batches; how long, and how much memory does the
//! server need at peak?

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use resp::Value;

use crate::admin::Admin;
use crate::bystander::{Bystander, Measured};
use crate::knobs::Knobs;
use crate::systems::{self, System};

/// Flags of `scenario slow-readers`.
#[derive(Args, Debug, Clone)]
pub struct SlowArgs {
    /// Systems to measure, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "redis,slotgate,nutcracker"
    )]
    pub systems: Vec<String>,
    /// Clients that write and never read.
    #[arg(long, default_value_t = 1000)]
    pub clients: usize,
    /// Size of the value every GET returns.
    #[arg(long, default_value_t = 4096)]
    pub value_size: usize,
    /// How long the clients keep writing.
    #[arg(long, default_value = "60s", value_parser = crate::args::parse_duration)]
    pub duration: Duration,
    /// Safety cap (redis, nutcracker): stop early when the server RSS passes this many MB.
    #[arg(long, default_value_t = 1024)]
    pub max_rss_mb: u64,
    /// slotgate's `limits.memory_budget_bytes`, in MB.
    #[arg(long, default_value_t = 512)]
    pub budget_mb: u64,
    /// slotgate's `limits.client_socket_buffer_bytes`, in KB (0: kernel autotuning).
    #[arg(long, default_value_t = 64)]
    pub socket_buffer_kb: u64,
    /// Well-behaved clients measured alongside (slotgate).
    #[arg(long, default_value_t = 50)]
    pub good_clients: u64,
    /// Their total open-loop rate, requests/s.
    #[arg(long, default_value_t = 5000.0)]
    pub rate: f64,
    /// Length of their run without slow readers (the baseline p99).
    #[arg(long, default_value = "10s", value_parser = crate::args::parse_duration)]
    pub baseline: Duration,
    #[command(flatten)]
    pub knobs: Knobs,
}

/// Flags of `scenario big-values`.
#[derive(Args, Debug, Clone)]
pub struct BigArgs {
    /// Systems to measure, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "redis,slotgate,nutcracker"
    )]
    pub systems: Vec<String>,
    /// Largest value size in MB (sizes are 0.1, 1, 10, 100 MB up to this).
    #[arg(long, default_value_t = 100.0)]
    pub max_mb: f64,
    /// Rounds per size; times are the median, RSS the highest peak.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    #[command(flatten)]
    pub knobs: Knobs,
}

/// The named systems, slotgate with `knobs`.
fn start(names: &[String], knobs: &Knobs) -> Result<(Vec<System>, std::path::PathBuf)> {
    let dir = std::env::temp_dir().join(format!("slotgate-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let extra = knobs.slotgate_flags(&dir)?;
    Ok((systems::start_with(&names, &dir, &extra)?, dir))
}

/// Runs `slow-readers`: the acceptance run on slotgate, then the RSS rows of the others.
pub fn slow_readers(a: &SlowArgs) -> Result<()> {
    crate::scenario::raise_nofile(a.clients + a.good_clients as usize * 4 + 1024)?;
    let (with, others): (Vec<String>, Vec<String>) =
        a.systems.iter().cloned().partition(|s| s == "slotgate");
    if !with.is_empty() {
        let dir = std::env::temp_dir().join(format!("slotgate-slow-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let result = crate::scen_slow::run(a, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        result?;
    }
    if others.is_empty() {
        return Ok(());
    }
    let (systems, dir) = start(&others, &a.knobs)?;
    println!("system       base MB   peak MB   end MB   after close MB   MB accepted from clients");
    for sys in &systems {
        let mut admin = Admin::connect(sys.addr())?;
        let value = "v".repeat(a.value_size);
        admin.ok(&["SET", "slow:{v}", &value])?;
        let base = sys.sut.rss();
        let (peak, written, capped) = flood(sys, a)?;
        let end = sys.sut.rss();
        std::thread::sleep(Duration::from_secs(1));
        let mb = |b: u64| b as f64 / 1048576.0;
        println!(
            "{:<12} {:>7.1}   {:>7.1}   {:>6.1}   {:>14.1}   {:>10.1}{}",
            sys.name,
            mb(base),
            mb(peak),
            mb(end),
            mb(sys.sut.rss()),
            mb(written),
            if capped {
                "  (stopped at --max-rss-mb)"
            } else {
                ""
            }
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Writes pipelined GETs on every connection for the duration, never reading. Returns the
/// peak RSS seen, bytes the server accepted, and whether the RSS cap stopped it.
fn flood(sys: &System, a: &SlowArgs) -> Result<(u64, u64, bool)> {
    let batch = "*2\r\n$3\r\nGET\r\n$8\r\nslow:{v}\r\n"
        .repeat(100)
        .into_bytes();
    let mut conns = Vec::new();
    for _ in 0..a.clients {
        let buffer = a.socket_buffer_kb as usize * 1024;
        conns.push((crate::scen_slow::open(sys.addr(), buffer)?, 0usize));
    }
    let (t0, mut peak, mut written) = (Instant::now(), 0u64, 0u64);
    let cap = a.max_rss_mb * 1048576;
    while t0.elapsed() < a.duration {
        for (c, off) in &mut conns {
            match c.write(&batch[*off..]) {
                Ok(n) => {
                    written += n as u64;
                    *off = (*off + n) % batch.len();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => {}
            }
        }
        peak = peak.max(sys.sut.rss());
        if peak > cap {
            return Ok((peak, written, true));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok((peak, written, false))
}

/// Runs `big-values` on each system; returns each one's bystander beside the floor's.
pub fn big_values(a: &BigArgs) -> Result<Vec<Measured>> {
    let (systems, dir) = start(&a.systems, &a.knobs)?;
    // The floor: an idle redis-server, placed like the bystanders (anywhere), while the
    // load itself runs on the generator's CPU as the other scenarios' load does.
    let idle = crate::procs::redis(None)?;
    systems::pin_this_thread_to_generator()?;
    let mut bystanders = Vec::new();
    let sizes: Vec<usize> = [100 * 1024, 1 << 20, 10 << 20, 100 << 20]
        .into_iter()
        .filter(|&s| s as f64 <= a.max_mb * 1048576.0)
        .collect();
    println!(
        "system       value      10×SET ms   10×GET ms   peak server RSS MB (base)   Redis inside GET ms"
    );
    for sys in &systems {
        let bystander = Bystander::start(sys.addr())?;
        let floor = Bystander::start(idle.addr())?;
        let mut times = Vec::new();
        for &size in &sizes {
            let r = match big_rounds(sys, size, a.reps) {
                Ok(r) => r,
                Err(e) => {
                    println!(
                        "{:<12} {:>7.1} MB failed: {e:#}",
                        sys.name,
                        size as f64 / 1048576.0
                    );
                    continue;
                }
            };
            println!(
                "{:<12} {:>7.1} MB {:>10.0} {:>11.0}   {:>8.1} ({:.1}) {:>19.0}",
                sys.name,
                size as f64 / 1048576.0,
                r.set_ms,
                r.get_ms,
                r.peak as f64 / 1048576.0,
                r.base as f64 / 1048576.0,
                r.redis_get_ms
            );
            times.push((size, r.set_ms, r.get_ms, r.get_ms_outside));
        }
        print_linearity(sys.name, &times);
        let (through, floor) = (bystander.finish(), floor.finish());
        for (who, p) in [
            ("another client's", through),
            ("an idle redis-server's", floor),
        ] {
            println!(
                "{:<12} meanwhile, {who} PINGs (1 per ms): {} answered, p99 {:.2} ms, max {:.2} ms",
                sys.name, p.n, p.p99, p.max
            );
        }
        bystanders.push(Measured {
            system: sys.name,
            through,
            floor,
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(bystanders)
}

/// Microseconds Redis itself spent executing GET (`INFO commandstats`), over the system's
/// nodes. Redis copies each reply into its output buffers inside the command, so for big
/// pipelined GETs this is the part of the round that no proxy can change.
fn redis_get_usec(sys: &System) -> u64 {
    let usec = |addr: std::net::SocketAddr| -> Option<u64> {
        let mut admin = Admin::connect(addr).ok()?;
        let Value::BulkString(text) = admin.call(&[b"INFO", b"commandstats"]).ok()? else {
            return None;
        };
        let text = String::from_utf8_lossy(&text).into_owned();
        let line = text.lines().find(|l| l.starts_with("cmdstat_get:"))?;
        line.split(',')
            .find_map(|f| f.strip_prefix("usec="))?
            .parse()
            .ok()
    };
    sys.redis_nodes().into_iter().filter_map(usec).sum()
}

/// The acceptance ratio: the largest size's time over the time for a tenth of it, SET and
/// GET, so each system's own line shows whether its time grew linearly; and for GET, the
/// same ratio for the time outside Redis's own execution of the GETs.
fn print_linearity(name: &str, times: &[(usize, f64, f64, f64)]) {
    let Some(&(big, set_big, get_big, out_big)) = times.last() else {
        return;
    };
    let Some(&(_, set_small, get_small, out_small)) = times.iter().find(|t| t.0 * 10 == big) else {
        return;
    };
    let ratio = |a: f64, b: f64| a / b.max(0.001);
    println!(
        "{name:<12} {:.0} MB ÷ {:.0} MB time: SET {:.1}×, GET {:.1}×, GET outside Redis's own execution {:.1}× (linear = 10×)",
        big as f64 / 1048576.0,
        big as f64 / 10485760.0,
        ratio(set_big, set_small),
        ratio(get_big, get_small),
        ratio(out_big, out_small)
    );
}

/// One size's figures: median times over the rounds, the highest RSS peak, the first base.
struct Round {
    set_ms: f64,
    get_ms: f64,
    /// Time Redis itself spent executing the GETs (see [`redis_get_usec`]).
    redis_get_ms: f64,
    /// The GET round less that, round by round: what the path to Redis added.
    get_ms_outside: f64,
    peak: u64,
    base: u64,
}

/// `reps` rounds of [`big_round`].
fn big_rounds(sys: &System, size: usize, reps: usize) -> Result<Round> {
    let rounds = (0..reps.max(1))
        .map(|_| big_round(sys, size))
        .collect::<Result<Vec<_>>>()?;
    let median = |f: fn(&Round) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(Round {
        set_ms: median(|r| r.set_ms),
        get_ms: median(|r| r.get_ms),
        redis_get_ms: median(|r| r.redis_get_ms),
        get_ms_outside: median(|r| r.get_ms - r.redis_get_ms),
        peak: rounds.iter().map(|r| r.peak).max().unwrap_or(0),
        base: rounds[0].base,
    })
}

/// 10 pipelined SETs then 10 pipelined GETs of `size` bytes, sampling the server's RSS.
fn big_round(sys: &System, size: usize) -> Result<Round> {
    let base = sys.sut.rss();
    let peak = Arc::new(AtomicU64::new(base));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop, pid) = (peak.clone(), stop.clone(), sys.sut.pid());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let r = crate::cpu::rss_bytes(&pid).unwrap_or(0);
                peak.fetch_max(r, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let result = pipelined(sys, size);
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let (set_ms, get_ms, redis_get_ms) = result?;
    Ok(Round {
        set_ms,
        get_ms,
        redis_get_ms,
        get_ms_outside: get_ms - redis_get_ms,
        peak: peak.load(Ordering::Relaxed),
        base,
    })
}

/// (SET ms, GET ms, ms Redis spent executing the GETs).
fn pipelined(sys: &System, size: usize) -> Result<(f64, f64, f64)> {
    let keys: Vec<String> = (0..10).map(|i| format!("big:{{b}}{i}")).collect();
    let value = vec![b'b'; size];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut conn = crate::conn::Conn::connect(sys.addr()).await?;
        // Headers encoded before the clock starts; the value goes out from its one buffer.
        let heads: Vec<String> = keys
            .iter()
            .map(|k| format!("*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${size}\r\n", k.len()))
            .collect();
        let t0 = Instant::now();
        for h in &heads {
            conn.write_parts(&[h.as_bytes(), &value, b"\r\n"]).await?;
        }
        let mut bad = 0;
        conn.read_replies(10, |_, f, _| bad += usize::from(f != b"+OK\r\n"))
            .await?;
        let set_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let usec0 = redis_get_usec(sys);
        let t1 = Instant::now();
        for k in &keys {
            let mut b = bytes::BytesMut::new();
            resp::encode_command(&mut b, &[b"GET", k.as_bytes()]);
            conn.wbuf.extend_from_slice(&b);
        }
        conn.flush().await?;
        let want = size + format!("${size}\r\n\r\n").len();
        conn.read_replies(10, |_, f, _| bad += usize::from(f.len() != want))
            .await?;
        let get_ms = t1.elapsed().as_secs_f64() * 1000.0;
        let redis_ms = redis_get_usec(sys).saturating_sub(usec0) as f64 / 1000.0;
        if bad > 0 {
            bail!("{}: {bad} of 20 big-value replies were wrong", sys.name);
        }
        let mut admin = Admin::connect(sys.addr())?;
        for k in &keys {
            if let Value::Error(e) = admin.call(&[b"DEL", k.as_bytes()])? {
                bail!("DEL: {}", String::from_utf8_lossy(&e));
            }
        }
        Ok((set_ms, get_ms, redis_ms))
    })
}
