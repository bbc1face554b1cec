//! A minimal request/response connection to a node, for the proxy's own queries off the
//! request path: the topology refresher's CLUSTER SLOTS, WAIT's replication probes
//! (`session/wait.rs`), the proxy group's health checks (`group.rs`) and a migration's
//! moves (`migration/mover.rs`, pipelined). Each step is bounded by `QUERY_TIMEOUT`, so a
//! node that accepts and never answers cannot hold its caller.

use std::time::Duration;

use bytes::BytesMut;
use resp::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::tls::{Connector, Stream};

/// How long one connect (with its AUTH) or one round trip may take before the node is
/// skipped.
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// A minimal request/response connection to a node.
pub(crate) struct NodeConn {
    stream: Stream,
    buf: BytesMut,
}

impl NodeConn {
    /// Dial and authenticate, all within one `QUERY_TIMEOUT`: a node that accepts and then
    /// never answers AUTH would otherwise hold the refresher (and bootstrap, and shutdown,
    /// which waits for the refresher) for ever.
    pub(crate) async fn connect(
        addr: &str,
        auth: Option<&bytes::Bytes>,
        tls: Option<&Connector>,
    ) -> Result<NodeConn, String> {
        tokio::time::timeout(QUERY_TIMEOUT, Self::connect_inner(addr, auth, tls))
            .await
            .map_err(|_| "connect or AUTH timed out".to_string())?
    }

    async fn connect_inner(
        addr: &str,
        auth: Option<&bytes::Bytes>,
        tls: Option<&Connector>,
    ) -> Result<NodeConn, String> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        crate::keepalive::enable(&tcp);
        let stream = match tls {
            None => Stream::Plain(tcp),
            Some(tls) => tls
                .connect(tcp, addr)
                .await
                .map_err(|e| format!("TLS: {e}"))?,
        };
        let mut conn = NodeConn {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
        };
        if let Some(auth) = auth {
            conn.write(auth).await?;
            if let Value::Error(e) = conn.read_reply().await? {
                // Redis's error text never contains the password.
                return Err(format!("AUTH refused: {}", String::from_utf8_lossy(&e)));
            }
        }
        Ok(conn)
    }

    /// Over a plain TCP connection already made, with nothing to authenticate (the proxy
    /// group's health checks, `group.rs`, which tell a refused connect from other failures).
    pub(crate) fn plain(tcp: TcpStream) -> NodeConn {
        let _ = tcp.set_nodelay(true);
        crate::keepalive::enable(&tcp);
        NodeConn {
            stream: Stream::Plain(tcp),
            buf: BytesMut::with_capacity(1024),
        }
    }

    /// Resolves when the other side closes the connection (or sends what nobody asked for)
    /// while no call is under way. Cancel safe: nothing owed is read.
    pub(crate) async fn closed(&mut self) {
        let _ = self.stream.read_buf(&mut self.buf).await;
    }

    pub(crate) async fn call(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        tokio::time::timeout(QUERY_TIMEOUT, self.call_inner(args))
            .await
            .map_err(|_| "query timed out".to_string())?
    }

    /// `call` without its own `QUERY_TIMEOUT`, for a caller that bounds the whole exchange
    /// itself (the group's checks, by `check_timeout_ms`), so an error here is always the
    /// connection's or the reply's, never the clock's.
    pub(crate) async fn call_unbounded(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        self.call_inner(args).await
    }

    /// `replies` replies to the commands already encoded in `encoded` (a pipeline), all
    /// within one `QUERY_TIMEOUT`.
    pub(crate) async fn call_many(
        &mut self,
        encoded: &[u8],
        replies: usize,
    ) -> Result<Vec<Value>, String> {
        let exchange = async {
            self.write(encoded).await?;
            self.buf.clear();
            let mut out = Vec::with_capacity(replies);
            for _ in 0..replies {
                out.push(self.next_reply().await?);
            }
            Ok(out)
        };
        tokio::time::timeout(QUERY_TIMEOUT, exchange)
            .await
            .map_err(|_| "query timed out".to_string())?
    }

    async fn call_inner(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        let mut out = BytesMut::new();
        resp::encode_command(&mut out, args);
        self.write(&out).await?;
        self.read_reply().await
    }

    /// Write and flush (TLS holds records until flushed).
    async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream
            .write_all(bytes)
            .await
            .map_err(|e| e.to_string())?;
        self.stream.flush().await.map_err(|e| e.to_string())
    }

    async fn read_reply(&mut self) -> Result<Value, String> {
        self.buf.clear();
        self.next_reply().await
    }

    /// The next reply of a stream the node sends unasked (MONITOR's lines): what a read
    /// brought beyond one reply is kept for the next call.
    pub(crate) async fn next_reply(&mut self) -> Result<Value, String> {
        let mut framer = resp::ReplyFramer::new();
        loop {
            if let Some(len) = framer.next_frame(&self.buf).map_err(|e| e.to_string())? {
                let frame = self.buf.split_to(len).freeze();
                return match resp::decode(&frame).map_err(|e| e.to_string())? {
                    Some((value, _)) => Ok(value),
                    None => Err("framer and decoder disagree".into()),
                };
            }
            if self
                .stream
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| e.to_string())?
                == 0
            {
                return Err("connection closed".into());
            }
        }
    }
}
