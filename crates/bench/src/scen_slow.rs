//! `slow-readers` on slotgate, as the acceptance test of the client memory budget: N clients
//! pipeline GETs and never read for the whole duration while well-behaved clients keep an
//! open-loop rate. It checks the three promises: proxy RSS ≤ base + budget, the well-behaved
//! p99 within 2× of the same load without slow readers, and backends whose memory does not
//! grow with the stalled replies (the proxy keeps reading them; the stall stays in the proxy).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::admin::Admin;
use crate::scen_mem::SlowArgs;
use crate::scenario::{finish_load, prepopulate_via, spawn_load};
use crate::systems::{self, System};

const MB: f64 = 1048576.0;

/// Connections that write pipelined GETs and never read; an evicted one is reopened, so the
/// pressure stays at N clients for the whole run. Only connections the kernel reported
/// writable are written to: once the proxy stops reading them, a pump costs one `epoll_wait`
/// instead of a thousand failed writes (about a fifth of a core that the proxy and the
/// well-behaved clients would otherwise share with the flood on two cores).
struct SlowReaders {
    addr: SocketAddr,
    /// SO_SNDBUF/SO_RCVBUF of each connection (0: the kernel's): both ends live on this
    /// host, and a thousand autotuned client buffers would exhaust its TCP memory by
    /// themselves; a real slow reader's buffers are on its own host.
    buffer: usize,
    batch: Vec<u8>,
    poll: mio::Poll,
    events: mio::Events,
    conns: Vec<Slow>,
    written: u64,
    reopened: u64,
}

/// One slow reader: where it is in the batch, and whether its socket can take more.
struct Slow {
    stream: mio::net::TcpStream,
    off: usize,
    writable: bool,
}

impl SlowReaders {
    fn connect(addr: SocketAddr, n: usize, buffer: usize) -> Result<SlowReaders> {
        let mut slow = SlowReaders {
            addr,
            buffer,
            batch: b"*2\r\n$3\r\nGET\r\n$8\r\nslow:{v}\r\n".repeat(100),
            poll: mio::Poll::new()?,
            events: mio::Events::with_capacity(n.max(1)),
            conns: Vec::with_capacity(n),
            written: 0,
            reopened: 0,
        };
        for i in 0..n {
            let conn = slow
                .open_registered(i)
                .with_context(|| format!("slow reader #{i}"))?;
            slow.conns.push(conn);
        }
        Ok(slow)
    }

    /// A new connection, registered for writability under token `i`.
    fn open_registered(&self, i: usize) -> Result<Slow> {
        let mut stream = mio::net::TcpStream::from_std(open(self.addr, self.buffer)?);
        self.poll
            .registry()
            .register(&mut stream, mio::Token(i), mio::Interest::WRITABLE)?;
        Ok(Slow {
            stream,
            off: 0,
            writable: true,
        })
    }

    /// One non-blocking write on every connection that can take it.
    fn pump(&mut self) {
        if self
            .poll
            .poll(&mut self.events, Some(Duration::ZERO))
            .is_ok()
        {
            for event in self.events.iter() {
                if let Some(c) = self.conns.get_mut(event.token().0) {
                    c.writable = true;
                }
            }
        }
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if !c.writable {
                continue;
            }
            match c.stream.write(&self.batch[c.off..]) {
                Ok(n) => {
                    self.written += n as u64;
                    c.off = (c.off + n) % self.batch.len();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => c.writable = false,
                Err(_) => {
                    let _ = self.poll.registry().deregister(&mut c.stream);
                    if let Ok(fresh) = self.open_registered(i) {
                        self.conns[i] = fresh;
                        self.reopened += 1;
                    }
                }
            }
        }
    }
}

/// A non-blocking connection with `buffer` bytes of kernel buffers each way (0: autotuned).
pub fn open(addr: SocketAddr, buffer: usize) -> Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    if buffer > 0 {
        // Before connecting, so the window is negotiated for it.
        socket.set_send_buffer_size(buffer)?;
        socket.set_recv_buffer_size(buffer)?;
    }
    socket.connect(&addr.into())?;
    let c: TcpStream = socket.into();
    c.set_nonblocking(true)?;
    Ok(c)
}

/// Memory of the cluster's masters: Redis's own `used_memory` and the processes' RSS.
struct Backends {
    masters: Vec<(SocketAddr, String)>,
}

impl Backends {
    fn of(sys: &System) -> Result<Backends> {
        let cluster = sys
            .cluster()
            .context("slotgate runs in front of a cluster")?;
        let masters = cluster.masters();
        let masters = cluster
            .nodes()
            .iter()
            .filter(|n| masters.contains(&n.addr))
            .map(|n| (n.addr, n.pid.to_string()))
            .collect();
        Ok(Backends { masters })
    }

    /// (sum of used_memory, sum of RSS), bytes.
    fn sample(&self) -> (u64, u64) {
        let mut used = 0;
        let mut rss = 0;
        for (addr, pid) in &self.masters {
            used += Admin::connect(*addr)
                .and_then(|mut a| a.info("memory"))
                .ok()
                .and_then(|info| field(&info, "used_memory"))
                .unwrap_or(0);
            rss += crate::cpu::rss_bytes(pid).unwrap_or(0);
        }
        (used, rss)
    }
}

/// An integer field of an INFO text.
fn field(info: &str, name: &str) -> Option<u64> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
}

/// A gauge or counter from slotgate's `/metrics`.
fn metric(admin: SocketAddr, name: &str) -> Option<u64> {
    let mut s = TcpStream::connect(admin).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Start/peak/end of a sampled quantity.
#[derive(Default, Clone, Copy)]
struct Span {
    start: u64,
    peak: u64,
    end: u64,
}

impl Span {
    fn new(start: u64) -> Span {
        Span {
            start,
            peak: start,
            end: start,
        }
    }

    fn see(&mut self, v: u64) {
        self.peak = self.peak.max(v);
        self.end = v;
    }

    fn mb(&self) -> String {
        let f = |b: u64| b as f64 / MB;
        format!(
            "{:.1} / {:.1} / {:.1}",
            f(self.start),
            f(self.peak),
            f(self.end)
        )
    }
}

/// What the run with slow readers measured.
#[derive(Default)]
struct Flood {
    proxy_rss: Span,
    counted: Span,
    used_memory: Span,
    backend_rss: Span,
    load: Value,
    written: u64,
    reopened: u64,
}

/// Runs the scenario on slotgate and prints its report. Returns the well-behaved clients'
/// p99 with the slow readers over their p99 alone.
pub fn run(a: &SlowArgs, dir: &std::path::Path) -> Result<f64> {
    let admin_port = crate::procs::free_port()?;
    let admin = SocketAddr::from(([127, 0, 0, 1], admin_port));
    let conf = dir.join("slotgate-slow-readers.toml");
    std::fs::write(
        &conf,
        format!(
            "[limits]\nmemory_budget_bytes = {}\nclient_socket_buffer_bytes = {}\n\
             [admin]\nlisten = \"{admin}\"\n{}",
            a.budget_mb * 1048576,
            a.socket_buffer_kb * 1024,
            a.knobs.proxy_toml()
        ),
    )?;
    let sys = systems::slotgate(&["--config".into(), conf.to_string_lossy().into()])?;
    Admin::connect(sys.addr())?.ok(&["SET", "slow:{v}", &"v".repeat(a.value_size)])?;
    let route = [
        "--target".to_string(),
        sys.addr().to_string(),
        "--keyspace=10000".into(),
        "--value-size=32".into(),
        "--timeout=2s".into(),
    ];
    prepopulate_via(&route)?;
    let baseline = finish_load(spawn_load(&route, &load_flags(a, a.baseline))?)?;
    let flood = flood(&sys, a, &route, admin)?;
    std::thread::sleep(Duration::from_secs(1));
    let after_close = sys.sut.rss();
    let evicted = metric(admin, "slotgate_clients_evicted_total").unwrap_or(0);
    Ok(report(a, &baseline, &flood, after_close, evicted))
}

fn load_flags(a: &SlowArgs, duration: Duration) -> Vec<String> {
    vec![
        "--mix=get:9,set:1".into(),
        format!("--clients={}", a.good_clients),
        format!("--rate={}", a.rate),
        format!("--duration={}ms", duration.as_millis()),
    ]
}

/// Slow readers for the whole duration; the well-behaved load joins once they have filled
/// their buffers (after a quarter of the run, at most 10 s) and runs until the end.
fn flood(sys: &System, a: &SlowArgs, route: &[String], admin: SocketAddr) -> Result<Flood> {
    let backends = Backends::of(sys)?;
    let (used, rss) = backends.sample();
    let mut f = Flood {
        proxy_rss: Span::new(sys.sut.rss()),
        used_memory: Span::new(used),
        backend_rss: Span::new(rss),
        ..Flood::default()
    };
    let buffer = a.socket_buffer_kb as usize * 1024;
    let mut slow = SlowReaders::connect(sys.addr(), a.clients, buffer)?;
    let warmup = (a.duration / 4).min(Duration::from_secs(10));
    let (t0, mut load, mut sampled) = (Instant::now(), None, Instant::now());
    while t0.elapsed() < a.duration {
        slow.pump();
        f.proxy_rss.see(sys.sut.rss());
        if load.is_none() && t0.elapsed() >= warmup {
            let rest = a.duration.saturating_sub(t0.elapsed());
            load = Some(spawn_load(route, &load_flags(a, rest))?);
        }
        if sampled.elapsed() >= Duration::from_millis(250) {
            let (used, rss) = backends.sample();
            f.used_memory.see(used);
            f.backend_rss.see(rss);
            f.counted
                .see(metric(admin, "slotgate_client_buffer_bytes").unwrap_or(0));
            sampled = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (f.written, f.reopened) = (slow.written, slow.reopened);
    if let Some(child) = load {
        f.load = finish_load(child)?;
    }
    drop(slow);
    std::thread::sleep(Duration::from_millis(500));
    let (used, rss) = backends.sample();
    f.used_memory.see(used);
    f.backend_rss.see(rss);
    Ok(f)
}

fn report(a: &SlowArgs, baseline: &Value, f: &Flood, after_close: u64, evicted: u64) -> f64 {
    println!("well-behaved clients, with the slow readers, per second:");
    crate::scenario::print_seconds(&f.load);
    let budget = a.budget_mb * 1048576;
    let limit = f.proxy_rss.start + budget;
    let verdict = |ok: bool| if ok { "ok" } else { "NOT MET" };
    println!(
        "slotgate slow-readers: {} clients pipeline GET of {} B and never read for {:?}; \
         budget {} MB (limits.memory_budget_bytes), client socket buffers {} KB",
        a.clients, a.value_size, a.duration, a.budget_mb, a.socket_buffer_kb
    );
    println!(
        "proxy RSS MB start / peak / end: {}; after the slow readers left {:.1}; \
         base + budget = {:.1} MB: {}",
        f.proxy_rss.mb(),
        after_close as f64 / MB,
        limit as f64 / MB,
        verdict(f.proxy_rss.peak <= limit)
    );
    println!(
        "counted client buffers MB (slotgate_client_buffer_bytes) start / peak / end: {}; \
         evicted {evicted}, reopened {}, {:.1} MB accepted from the slow readers",
        f.counted.mb(),
        f.reopened,
        f.written as f64 / MB
    );
    report_others(a, baseline, f)
}

/// The well-behaved clients' and the backends' lines; returns the well-behaved p99 ratio.
fn report_others(a: &SlowArgs, baseline: &Value, f: &Flood) -> f64 {
    let verdict = |ok: bool| if ok { "ok" } else { "NOT MET" };
    let p99 = |v: &Value| v["p99_us"].as_f64().unwrap_or(0.0);
    let ratio = p99(&f.load) / p99(baseline).max(1.0);
    println!(
        "well-behaved: {} clients at {}/s: p99 {:.0} µs alone, {:.0} µs with slow readers \
         (×{ratio:.2}: {}); errors {} alone, {} with",
        a.good_clients,
        a.rate,
        p99(baseline),
        p99(&f.load),
        verdict(ratio <= 2.0),
        baseline["errors"]["total"],
        f.load["errors"]["total"]
    );
    // The peak is the replies in flight (the proxy caps them at 16,384 per worker); what
    // must not happen is growth that stays, the stalled replies parked in the backends.
    let grew = f.used_memory.end.saturating_sub(f.used_memory.start);
    println!(
        "backend masters used_memory MB start / peak / end: {}; RSS MB: {}; \
         growth that stays (< 16 MB wanted): {:.1} MB: {}",
        f.used_memory.mb(),
        f.backend_rss.mb(),
        grew as f64 / MB,
        verdict(grew < 16 << 20)
    );
    ratio
}
