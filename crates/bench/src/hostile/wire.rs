//! One hostile connection: bytes queued and pushed out without ever blocking past a deadline
//! or a stall limit, and replies either drained by a thread of their own or never read at
//! all. A hostile client must not hang the fuzzer: the proxy is free to stop reading it,
//! close it or evict it, and each of those is an outcome to note, not an error.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most bytes offered to one `write`, so a stall is noticed within one slice.
const SLICE: usize = 1 << 20;

/// What became of the bytes a `pump` had queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// All of them went out.
    Drained,
    /// The proxy took nothing for the stall limit (it stopped reading us: backpressure).
    Stalled,
    /// The connection is closed or reset (the proxy closed it or evicted us).
    Closed,
    /// The case's time is up.
    Late,
}

/// A connection to the proxy under test.
pub struct Wire {
    stream: TcpStream,
    pending: Vec<u8>,
    off: usize,
    deadline: Instant,
    reader: Option<JoinHandle<u64>>,
    /// Reply bytes the reader has seen so far.
    replies: Arc<AtomicU64>,
    closed: bool,
}

impl Wire {
    /// A client that never reads its replies.
    pub fn mute(addr: SocketAddr, deadline: Instant) -> std::io::Result<Wire> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_nodelay(true)?;
        Ok(Wire {
            stream,
            pending: Vec::new(),
            off: 0,
            deadline,
            reader: None,
            replies: Arc::new(AtomicU64::new(0)),
            closed: false,
        })
    }

    /// A client whose replies a thread reads and discards as fast as they come.
    pub fn reading(addr: SocketAddr, deadline: Instant) -> std::io::Result<Wire> {
        let mut w = Wire::mute(addr, deadline)?;
        let mut rx = w.stream.try_clone()?;
        let seen = w.replies.clone();
        w.reader = Some(std::thread::spawn(move || {
            let mut buf = vec![0u8; 256 * 1024];
            let mut total = 0u64;
            // Ends at EOF or reset, which `finish` causes with a shutdown.
            while let Ok(n) = rx.read(&mut buf) {
                if n == 0 {
                    break;
                }
                total += n as u64;
                seen.store(total, Ordering::Relaxed);
            }
            total
        }));
        Ok(w)
    }

    /// Appends bytes to send; nothing is written until `pump`.
    pub fn queue(&mut self, bytes: &[u8]) {
        if self.off == self.pending.len() {
            self.pending.clear();
            self.off = 0;
        }
        self.pending.extend_from_slice(bytes);
    }

    /// Whether everything queued went out.
    pub fn idle(&self) -> bool {
        self.off == self.pending.len()
    }

    /// Whether the proxy closed the connection.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Writes what is queued until it is out, the proxy takes nothing for `stall`, the
    /// connection closes, or the deadline passes.
    pub fn pump(&mut self, stall: Duration) -> Pushed {
        while self.off < self.pending.len() {
            if self.closed {
                return Pushed::Closed;
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Pushed::Late;
            }
            let wait = stall.min(left).max(Duration::from_millis(1));
            if self.stream.set_write_timeout(Some(wait)).is_err() {
                self.closed = true;
                return Pushed::Closed;
            }
            let end = (self.off + SLICE).min(self.pending.len());
            match self.stream.write(&self.pending[self.off..end]) {
                Ok(0) => self.closed = true,
                Ok(n) => self.off += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return if Instant::now() >= self.deadline {
                        Pushed::Late
                    } else {
                        Pushed::Stalled
                    };
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => self.closed = true,
            }
        }
        Pushed::Drained
    }

    /// Waits until no reply byte arrived for `quiet` (or the deadline): a client that waits
    /// for its answers before it sends more, without parsing them.
    pub fn settle(&self, quiet: Duration) {
        let mut last = self.replies.load(Ordering::Relaxed);
        let mut since = Instant::now();
        while since.elapsed() < quiet && Instant::now() < self.deadline && !self.closed {
            std::thread::sleep(Duration::from_millis(5));
            let now = self.replies.load(Ordering::Relaxed);
            if now != last {
                (last, since) = (now, Instant::now());
            }
        }
    }

    /// Closes the connection; the reply bytes the reader saw (0 for a mute client).
    pub fn finish(self) -> u64 {
        let _ = self.stream.shutdown(Shutdown::Both);
        self.reader.and_then(|r| r.join().ok()).unwrap_or(0)
    }
}
