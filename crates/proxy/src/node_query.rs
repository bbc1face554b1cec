//! A minimal request/response connection to a node, for the proxy's own queries off the
//! request path: the topology refresher's CLUSTER SLOTS and WAIT's replication probes
//! (`session/wait.rs`). Each step is bounded by `QUERY_TIMEOUT`, so a node that accepts and
//! never answers cannot hold its caller.

use std::time::Duration;

use bytes::BytesMut;
use resp::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one connect (with its AUTH) or one round trip may take before the node is
/// skipped.
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// A minimal request/response connection to a node.
pub(crate) struct NodeConn {
    stream: TcpStream,
    buf: BytesMut,
}

impl NodeConn {
    /// Dial and authenticate, all within one `QUERY_TIMEOUT`: a node that accepts and then
    /// never answers AUTH would otherwise hold the refresher (and bootstrap, and shutdown,
    /// which waits for the refresher) for ever.
    pub(crate) async fn connect(
        addr: &str,
        auth: Option<&bytes::Bytes>,
    ) -> Result<NodeConn, String> {
        tokio::time::timeout(QUERY_TIMEOUT, Self::connect_inner(addr, auth))
            .await
            .map_err(|_| "connect or AUTH timed out".to_string())?
    }

    async fn connect_inner(addr: &str, auth: Option<&bytes::Bytes>) -> Result<NodeConn, String> {
        let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        crate::keepalive::enable(&stream);
        let mut conn = NodeConn {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
        };
        if let Some(auth) = auth {
            conn.stream
                .write_all(auth)
                .await
                .map_err(|e| e.to_string())?;
            if let Value::Error(e) = conn.read_reply().await? {
                // Redis's error text never contains the password.
                return Err(format!("AUTH refused: {}", String::from_utf8_lossy(&e)));
            }
        }
        Ok(conn)
    }

    pub(crate) async fn call(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        tokio::time::timeout(QUERY_TIMEOUT, self.call_inner(args))
            .await
            .map_err(|_| "query timed out".to_string())?
    }

    async fn call_inner(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        let mut out = BytesMut::new();
        resp::encode_command(&mut out, args);
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| e.to_string())?;
        self.read_reply().await
    }

    async fn read_reply(&mut self) -> Result<Value, String> {
        self.buf.clear();
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
