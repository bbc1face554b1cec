//! Runs a load: one OS thread per `--threads`, each a current-thread tokio runtime driving its
//! share of the clients. Threads connect first, then start together; the process's own CPU
//! time is read from schedstat between the start and end barriers, so set-up is excluded.

use std::cell::RefCell;
use std::io::IsTerminal;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::client::{Client, ClientSetup, Plan, Route};
use crate::stats::Stats;

/// How much and how long.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Clients (connections to each node).
    pub clients: u64,
    /// Generator threads.
    pub threads: usize,
    /// Total requests, split evenly over the clients.
    pub requests: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Print a progress line on stderr when it is a terminal.
    pub progress: bool,
}

/// What a run produced.
pub struct Outcome {
    /// Merged statistics of all threads.
    pub stats: Stats,
    /// Time between the start and the end barriers.
    pub elapsed: Duration,
    /// This process's CPU time over that interval (all threads), in ns.
    pub own_cpu_ns: u64,
    /// Requests sent (successful or not).
    pub requests: u64,
}

struct Shared {
    ready: Barrier,
    done: Barrier,
    start: Mutex<Option<Instant>>,
    finished: AtomicUsize,
    progress: Arc<AtomicU64>,
}

/// Runs the load and returns the merged outcome.
pub fn run(plan: Arc<Plan>, route: Route, lim: Limits) -> Result<Outcome> {
    let threads = lim.threads.clamp(1, lim.clients.max(1) as usize);
    let shared = Arc::new(Shared {
        ready: Barrier::new(threads + 1),
        done: Barrier::new(threads + 1),
        start: Mutex::new(None),
        finished: AtomicUsize::new(0),
        progress: Arc::new(AtomicU64::new(0)),
    });
    let handles = spawn_threads(&plan, &route, &shared, threads, lim)?;
    // From here to the `done` barrier nothing may return early: the threads wait on us.
    shared.ready.wait();
    let cpu0 = crate::cpu::process_cpu_ns("self");
    let t0 = Instant::now();
    if let Ok(mut start) = shared.start.lock() {
        *start = Some(t0);
    }
    shared.ready.wait();
    watch(&shared, threads, t0, lim.progress);
    let cpu1 = crate::cpu::process_cpu_ns("self");
    let elapsed = t0.elapsed();
    shared.done.wait();
    let mut stats = Stats::new();
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("a generator thread panicked"))?;
        stats.merge(&s?)?;
    }
    if let Some(e) = &stats.setup_error {
        bail!("set-up failed: {e}");
    }
    Ok(Outcome {
        stats,
        elapsed,
        own_cpu_ns: cpu1?.saturating_sub(cpu0?),
        requests: shared.progress.load(Ordering::Relaxed),
    })
}

type Handle = std::thread::JoinHandle<Result<Stats>>;

/// One thread per `threads`, each with every `threads`-th client.
fn spawn_threads(
    plan: &Arc<Plan>,
    route: &Route,
    shared: &Arc<Shared>,
    threads: usize,
    lim: Limits,
) -> Result<Vec<Handle>> {
    let mut handles = Vec::new();
    for t in 0..threads {
        let (plan, route, shared) = (plan.clone(), route.clone(), shared.clone());
        let ids: Vec<u64> = (0..lim.clients)
            .filter(|c| *c as usize % threads == t)
            .collect();
        let h = std::thread::Builder::new()
            .name(format!("bench-{t}"))
            .spawn(move || thread_main(&plan, route, &shared, ids, lim))?;
        handles.push(h);
    }
    Ok(handles)
}

/// Waits for all threads to finish, printing a progress line once a second on a terminal.
fn watch(shared: &Shared, threads: usize, t0: Instant, progress: bool) {
    let tty = progress && std::io::stderr().is_terminal();
    let mut last = (t0, 0u64);
    let mut next_print = t0 + Duration::from_secs(1);
    while shared.finished.load(Ordering::Acquire) < threads {
        std::thread::sleep(Duration::from_millis(10));
        let now = Instant::now();
        if tty && now >= next_print {
            let n = shared.progress.load(Ordering::Relaxed);
            let rate = (n - last.1) as f64 / (now - last.0).as_secs_f64();
            eprint!(
                "\r[{:>4.0}s] {n:>12} requests {rate:>10.0} req/s   ",
                (now - t0).as_secs_f64()
            );
            last = (now, n);
            next_print += Duration::from_secs(1);
        }
    }
    if tty {
        eprintln!();
    }
}

fn thread_main(
    plan: &Arc<Plan>,
    route: Route,
    shared: &Shared,
    ids: Vec<u64>,
    lim: Limits,
) -> Result<Stats> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let local = tokio::task::LocalSet::new();
    let stats = Rc::new(RefCell::new(Stats::new()));
    let clients = local.block_on(&rt, connect_all(plan, &route, &ids, &stats, shared, lim));
    shared.ready.wait();
    shared.ready.wait();
    let t0 = shared
        .start
        .lock()
        .ok()
        .and_then(|g| *g)
        .unwrap_or_else(Instant::now);
    let deadline = lim.duration.map(|d| t0 + d);
    local.block_on(&rt, async {
        let mut tasks = Vec::new();
        for mut c in clients {
            c.start(t0, deadline);
            tasks.push(tokio::task::spawn_local(c.run()));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    shared.finished.fetch_add(1, Ordering::Release);
    shared.done.wait();
    drop(local);
    Rc::try_unwrap(stats)
        .map(RefCell::into_inner)
        .map_err(|_| anyhow::anyhow!("stats still shared"))
}

async fn connect_all(
    plan: &Arc<Plan>,
    route: &Route,
    ids: &[u64],
    stats: &Rc<RefCell<Stats>>,
    shared: &Shared,
    lim: Limits,
) -> Vec<Client> {
    let mut out = Vec::new();
    for &id in ids {
        let setup = ClientSetup {
            id,
            quota: lim.requests.map(|r| share(r, lim.clients, id)),
            t0: Instant::now(),
            deadline: None,
            stats: stats.clone(),
            progress: shared.progress.clone(),
        };
        let mut c = Client::new(plan.clone(), route.clone(), setup);
        if let Err(e) = c.connect().await {
            stats.borrow_mut().setup_error = Some(format!("client {id}: {e}"));
            return Vec::new();
        }
        out.push(c);
    }
    out
}

/// Client `id`'s share of `total` requests (the first `total % clients` get one more).
pub fn share(total: u64, clients: u64, id: u64) -> u64 {
    let clients = clients.max(1);
    total / clients + u64::from(id < total % clients)
}

#[cfg(test)]
mod tests {
    #[test]
    fn shares_add_up() {
        let total: u64 = (0..7).map(|i| super::share(100, 7, i)).sum();
        assert_eq!(total, 100);
        assert_eq!(super::share(5, 10, 9), 0);
    }
}
