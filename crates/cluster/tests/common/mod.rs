//! Test harness for the live checks: starts a private (optionally
//! cluster-enabled) redis-server on a free port, killed on drop, and speaks
//! just enough RESP2 over a blocking socket to compare the crate against it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    pub fn text(&self) -> String {
        match self {
            Reply::Simple(s) | Reply::Error(s) => s.clone(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("not text: {other:?}"),
        }
    }

    pub fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }

    pub fn items(&self) -> &[Reply] {
        match self {
            Reply::Array(Some(items)) => items,
            other => panic!("not an array: {other:?}"),
        }
    }
}

/// A blocking RESP2 connection.
pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    pub fn connect(port: u16) -> std::io::Result<Conn> {
        let writer = TcpStream::connect(("127.0.0.1", port))?;
        writer.set_read_timeout(Some(Duration::from_secs(10)))?;
        let reader = BufReader::new(writer.try_clone()?);
        Ok(Conn { reader, writer })
    }

    /// Queues one command without reading its reply (for pipelining).
    pub fn send(&mut self, args: &[&[u8]]) {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a);
            buf.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&buf).expect("write to redis");
    }

    pub fn call(&mut self, args: &[&[u8]]) -> Reply {
        self.send(args);
        self.read()
    }

    /// `call` for a space-separated command line.
    pub fn line(&mut self, line: &str) -> Reply {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.call(&args)
    }

    pub fn read(&mut self) -> Reply {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read from redis");
        let body = line.trim_end_matches("\r\n");
        let (kind, rest) = body.split_at(1);
        match kind {
            "+" => Reply::Simple(rest.to_owned()),
            "-" => Reply::Error(rest.to_owned()),
            ":" => Reply::Int(rest.parse().expect("integer reply")),
            "$" => Reply::Bulk(self.read_bulk(rest.parse().expect("bulk length"))),
            "*" => {
                let n: i64 = rest.parse().expect("array length");
                Reply::Array((n >= 0).then(|| (0..n).map(|_| self.read()).collect()))
            }
            _ => panic!("unexpected reply line {line:?}"),
        }
    }

    fn read_bulk(&mut self, len: i64) -> Option<Vec<u8>> {
        let len = usize::try_from(len).ok()?;
        let mut buf = vec![0; len + 2];
        self.reader.read_exact(&mut buf).expect("read bulk");
        buf.truncate(len);
        Some(buf)
    }
}

/// A private redis-server, killed and cleaned up on drop.
pub struct Server {
    child: Child,
    dir: PathBuf,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port `p` free now with its cluster bus port `p + 10000`, both below the kernel's
/// ephemeral range (from 32768), never handed out twice by this process: parallel tests
/// must not start two servers on one port, and a port dropped and then bound again can
/// meanwhile be taken by a connection's local end in the ephemeral range.
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    let mut n = u64::from(std::process::id()) ^ (call << 40) ^ nanos;
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // 10000..22768: the bus port stays below 32768 too.
        let port = 10000 + ((n >> 33) % 12768) as u16;
        let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
        if !given.contains(&port) && free(port) && free(port + 10000) {
            given.push(port);
            return port;
        }
    }
}

impl Server {
    /// Starts a server, cluster-enabled (for CLUSTER KEYSLOT) or not (a
    /// slotless cluster node refuses keyed commands, and claiming slots
    /// takes seconds). Panics, so the test FAILS, if redis-server is
    /// missing: set REDIS_SERVER or put redis-server on PATH.
    pub fn start(cluster: bool) -> Server {
        for _ in 0..5 {
            if let Some(server) = Server::try_start(cluster) {
                return server;
            }
        }
        panic!("redis-server did not come up on a free port");
    }

    fn try_start(cluster: bool) -> Option<Server> {
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("slotgate-cluster-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--cluster-enabled", if cluster { "yes" } else { "no" }])
            .args(["--cluster-config-file", "nodes.conf"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                let _ = std::fs::remove_dir_all(&dir);
                panic!("cannot run {binary:?} (set REDIS_SERVER): {e}")
            });
        let server = Server { child, dir, port };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(mut conn) = Conn::connect(port) {
                if conn.line("PING") == Reply::Simple("PONG".into()) {
                    return Some(server);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(self.port).expect("connect to test server")
    }
}
