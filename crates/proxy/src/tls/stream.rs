//! A connection that is either plain TCP or TLS over TCP, for clients and for nodes alike.
//!
//! An enum, not a trait object: the plain arm costs one predictable branch per read and
//! write, and the TLS state is boxed once per connection (it is large), never per call.
//! Callers must call `poll_flush` when they have nothing more to write: TLS may hold a
//! record back in its own buffer when the socket was full, and only a flush pushes it out.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A client's or a node's socket.
pub(crate) enum Stream {
    Plain(TcpStream),
    /// The proxy is the TLS client (towards a node).
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// The proxy is the TLS server (a client connected to `tls.listen`).
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket underneath, for addresses, descriptors and socket options.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Client(s) => s.get_ref().0,
            Stream::Server(s) => s.get_ref().0,
        }
    }

    /// Whether the bytes travel encrypted.
    pub(crate) fn is_tls(&self) -> bool {
        !matches!(self, Stream::Plain(_))
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Server(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Server(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            Stream::Server(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            // Nothing is buffered above a TCP socket.
            Stream::Plain(_) => Poll::Ready(Ok(())),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Server(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Server(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
