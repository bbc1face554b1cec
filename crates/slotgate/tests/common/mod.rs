//! What the binary's tests share: a one-line RESP exchange, a connect with a read
//! deadline, a wait with a ceiling, and signals sent with kill(1).

#![allow(dead_code)] // each test file uses its own part

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

/// Send one command, read one line of reply (enough for the simple replies used here).
pub fn call(stream: &mut TcpStream, args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(out.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\r\n") {
        match stream.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => reply.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("read: {e}"),
        }
    }
    String::from_utf8_lossy(&reply).trim_end().to_string()
}

pub fn connect(addr: SocketAddr) -> Option<TcpStream> {
    let s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    Some(s)
}

pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: not within 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kill -<name> <pid>` (the crate forbids unsafe code, so no libc call).
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} {pid}");
}
