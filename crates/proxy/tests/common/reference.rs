//! A standalone redis-server beside the proxy, as the oracle: the same bytes are sent to
//! both and the raw replies compared. "A client sees one Redis" is checked against one.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::Client;

/// A standalone redis-server on a free port below 32768; killed when dropped.
pub struct Reference {
    child: Child,
    pub addr: SocketAddr,
}

impl Reference {
    pub fn start() -> Reference {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "reference redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Reference { child, addr }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on, chosen below the kernel's ephemeral range. Each call starts
/// from its own point (a counter and the clock), so concurrent tests rarely try the same one.
pub fn free_port() -> u16 {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    let seed = std::process::id() as u64 ^ (call << 40) ^ nanos;
    let mut n = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    loop {
        n = n.wrapping_mul(6364136223846793005).wrapping_add(1);
        let port = 20000 + (n >> 33) as u16 % 12000;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Commands written as one pipeline: each string is split on spaces into a multibulk.
pub fn pipeline(cmds: &[&str]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for cmd in cmds {
        let args: Vec<&[u8]> = cmd.split(' ').map(str::as_bytes).collect();
        resp::encode_command(&mut out, &args);
    }
    out.to_vec()
}

/// Write `cmds` in one write and read `frames` raw frames back (None: the connection
/// closed first). Frames are returned as text for readable assertion failures.
pub fn exchange(client: &mut Client, cmds: &[&str], frames: usize) -> Vec<String> {
    client.send_raw(&pipeline(cmds));
    read_frames(client, frames)
}

/// Read `n` raw frames; stops early at EOF (the last element is then `<closed>`).
pub fn read_frames(client: &mut Client, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    for _ in 0..n {
        match client.read_frame() {
            Some(f) => got.push(String::from_utf8_lossy(&f).into_owned()),
            None => {
                got.push("<closed>".into());
                break;
            }
        }
    }
    got
}
