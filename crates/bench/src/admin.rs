//! A tiny blocking RESP client for the control path of scenarios (INFO, CLUSTER SETSLOT,
//! MIGRATE): one persistent connection, replies decoded into `resp::Value`. Never used on the
//! measured path.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use resp::{ReplyFramer, Value};

/// One control connection.
pub struct Admin {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The node it talks to.
    pub addr: SocketAddr,
}

impl Admin {
    /// Connects with a 10 s I/O timeout.
    pub fn connect(addr: SocketAddr) -> Result<Admin> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        Ok(Admin {
            stream,
            buf: Vec::new(),
            addr,
        })
    }

    /// Sends one command and decodes its reply (errors come back as `Value::Error`).
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Value> {
        let mut out = BytesMut::new();
        resp::encode_command(&mut out, args);
        self.stream.write_all(&out)?;
        let mut framer = ReplyFramer::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if let Some(n) = framer.next_frame(&self.buf)? {
                let frame = Bytes::from(self.buf.drain(..n).collect::<Vec<u8>>());
                let (v, _) = resp::decode(&frame)?.context("framed reply did not decode")?;
                return Ok(v);
            }
            let k = self.stream.read(&mut chunk)?;
            if k == 0 {
                bail!("{} closed the connection", self.addr);
            }
            self.buf.extend_from_slice(&chunk[..k]);
        }
    }

    /// Like `call` with string arguments, failing on an error reply.
    pub fn ok(&mut self, args: &[&str]) -> Result<Value> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        match self.call(&a)? {
            Value::Error(e) => bail!("{} {:?}: {}", self.addr, args, String::from_utf8_lossy(&e)),
            v => Ok(v),
        }
    }

    /// `CLUSTER INFO` as text.
    pub fn info_cluster(&mut self) -> Result<String> {
        let v = self.ok(&["CLUSTER", "INFO"])?;
        Ok(v.as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default())
    }

    /// `INFO section` as text.
    pub fn info(&mut self, section: &str) -> Result<String> {
        let v = self.ok(&["INFO", section])?;
        Ok(v.as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default())
    }
}

/// `calls=` of one `cmdstat_NAME` line of INFO commandstats (0 when absent).
pub fn cmdstat_calls(info: &str, name: &str) -> u64 {
    let prefix = format!("cmdstat_{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').find_map(|kv| kv.strip_prefix("calls=")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Any numeric field of one `cmdstat_<name>` line (e.g. `usec_per_call`).
pub fn cmdstat_field(info: &str, name: &str, field: &str) -> Option<f64> {
    let prefix = format!("cmdstat_{name}:");
    let eq = format!("{field}=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').find_map(|kv| kv.strip_prefix(eq.as_str())))
        .and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_commandstats() {
        let info = "# Commandstats\r\ncmdstat_cluster|slots:calls=12,usec=30,usec_per_call=2.5\r\n";
        assert_eq!(super::cmdstat_calls(info, "cluster|slots"), 12);
        assert_eq!(super::cmdstat_calls(info, "cluster|nodes"), 0);
    }
}
