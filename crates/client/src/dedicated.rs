//! Dedicated connections: one socket used by one caller at a time, for the
//! commands that must stay off the shared multiplexed connection (blocking
//! commands, pub/sub) because they hold the connection or change its state.
//!
//! A dedicated connection is a plain request/reply socket with no actor: its
//! owner writes, then reads, in its own task. The [`Idle`] pool keeps a few
//! per node for blocking commands; a connection is only returned to it after
//! a complete reply, so one whose state is unknown (timeout mid-command, I/O
//! error) is dropped, which closes it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use resp::{ReplyFramer, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// Idle dedicated connections kept per node; more are closed when returned.
const MAX_IDLE_PER_NODE: usize = 4;
/// Read buffer refill size.
const READ_CHUNK: usize = 16 * 1024;

/// One dedicated connection to one node.
#[derive(Debug)]
pub(crate) struct Dedicated {
    pub addr: String,
    stream: TcpStream,
    rbuf: BytesMut,
    framer: ReplyFramer,
}

impl Dedicated {
    /// Connects to `addr`, switching to RESP3 first when `resp3` is set.
    pub async fn open(addr: &str, connect_timeout: Duration, resp3: bool) -> Result<Dedicated> {
        let connected = tokio::time::timeout(connect_timeout, TcpStream::connect(addr)).await;
        let stream = match connected {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Error::Io(format!("connect {addr}: {e}"))),
            Err(_) => return Err(Error::Io(format!("connect {addr}: timed out"))),
        };
        let _ = stream.set_nodelay(true);
        let mut conn = Dedicated {
            addr: addr.to_string(),
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            framer: ReplyFramer::new(),
        };
        if resp3 {
            conn.hello3(connect_timeout).await?;
        }
        Ok(conn)
    }

    /// Switches a fresh `stream` (nothing sent yet) to RESP3 and hands it
    /// back, for the shared connection's actor.
    pub async fn upgrade(stream: TcpStream, addr: &str, limit: Duration) -> Result<TcpStream> {
        let mut conn = Dedicated {
            addr: addr.to_string(),
            stream,
            rbuf: BytesMut::new(),
            framer: ReplyFramer::new(),
        };
        conn.hello3(limit).await?;
        // Nothing but HELLO's reply can have arrived: no other request was sent.
        Ok(conn.stream)
    }

    async fn hello3(&mut self, limit: Duration) -> Result<()> {
        let mut req = BytesMut::new();
        resp::encode_command(&mut req, &[b"HELLO", b"3"]);
        let exchange = async {
            self.send(&[req.freeze()]).await?;
            check_hello(self.read().await?)
        };
        let done = tokio::time::timeout(limit, exchange).await;
        done.map_err(|_| Error::Io(format!("HELLO 3 to {}: timed out", self.addr)))?
    }

    /// Writes `segments` whole.
    pub async fn send(&mut self, segments: &[Bytes]) -> Result<()> {
        for s in segments {
            self.stream
                .write_all(s)
                .await
                .map_err(|e| Error::Io(format!("{}: {e}", self.addr)))?;
        }
        Ok(())
    }

    /// Reads the next complete frame (a reply or a push).
    pub async fn read(&mut self) -> Result<Value> {
        loop {
            let framed = self
                .framer
                .next_frame(&self.rbuf)
                .map_err(|e| Error::Protocol(e.to_string()))?;
            if let Some(len) = framed {
                return crate::reply::value_of(self.rbuf.split_to(len).freeze());
            }
            if let Some(total) = self.framer.hint() {
                self.rbuf.reserve(total.saturating_sub(self.rbuf.len()));
            }
            self.rbuf.reserve(READ_CHUNK);
            match self.stream.read_buf(&mut self.rbuf).await {
                Ok(0) => return Err(self.lost("connection closed by server")),
                Ok(_) => {}
                Err(e) => return Err(self.lost(&e.to_string())),
            }
        }
    }

    /// An idle connection must have nothing to read: EOF means the server
    /// closed it (a command sent there would end as `OutcomeUnknown`), and
    /// unexpected bytes mean its state is unknown.
    fn is_quiet(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    fn lost(&self, why: &str) -> Error {
        Error::OutcomeUnknown(format!("{}: {why}", self.addr))
    }
}

/// `HELLO 3` answers a map; an error reply means the server refuses RESP3.
fn check_hello(reply: Value) -> Result<()> {
    match reply {
        Value::Error(text) => Err(Error::Server(format!(
            "HELLO 3 refused: {}",
            String::from_utf8_lossy(&text)
        ))),
        _ => Ok(()),
    }
}

/// Idle dedicated connections, per node address.
#[derive(Debug, Default)]
pub(crate) struct Idle {
    conns: Mutex<HashMap<String, Vec<Dedicated>>>,
}

impl Idle {
    /// An idle connection to `addr` that is still usable, if one is kept;
    /// the ones the server closed meanwhile are dropped.
    pub fn take(&self, addr: &str) -> Option<Dedicated> {
        // The lock only guards a map lookup; it is never held across an await.
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        let list = conns.get_mut(addr)?;
        while let Some(conn) = list.pop() {
            if conn.is_quiet() {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps `conn` for reuse; only for a connection whose last reply was
    /// read whole (its state is known). Beyond the bound it is closed.
    pub fn put(&self, conn: Dedicated) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        let list = conns.entry(conn.addr.clone()).or_default();
        if list.len() < MAX_IDLE_PER_NODE && conn.rbuf.is_empty() {
            list.push(conn);
        }
    }
}
