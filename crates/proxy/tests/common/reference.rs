//! A standalone redis-server beside the proxy, as the oracle: the same bytes are sent to
//! both and the raw replies compared. "A client sees one Redis" is checked against one.

use std::net::SocketAddr;
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
        let (child, addr) = spawn_serving(|port| {
            let mut cmd = Command::new("redis-server");
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"]);
            cmd
        });
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

/// A port nobody listens on, below the kernel's ephemeral range. devcluster's picker
/// remembers every port (and cluster bus port) it handed out in this process, so a
/// reference server never races a cluster node of a test running beside it.
pub fn free_port() -> u16 {
    devcluster::free_port_pair().expect("a free port")
}

/// A server process `command(port)` starts, once it serves on its port: its own process,
/// not whatever else took the port between the pick and the bind (then the process exits
/// and another port is tried). Waits at most 20 s.
pub fn spawn_serving(command: impl Fn(u16) -> Command) -> (Child, SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    'port: loop {
        let port = free_port();
        let mut child = command(port)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        loop {
            assert!(Instant::now() < deadline, "redis-server did not start");
            if child.try_wait().expect("child status").is_some() {
                continue 'port; // lost the port to someone else
            }
            if serves(addr, child.id()) {
                return (child, addr);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether the server on `addr` is process `pid` (INFO's `process_id`); raw bytes, as
/// whatever holds the port may not speak RESP.
fn serves(addr: SocketAddr, pid: u32) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"INFO server\r\n").is_err() {
        return false;
    }
    let want = format!("process_id:{pid}\r\n");
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while got.len() < 64 * 1024 {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
        if String::from_utf8_lossy(&got).contains(&want) {
            return true;
        }
    }
    false
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
