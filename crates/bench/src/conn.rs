//! One pipelined connection: write a batch in one syscall, then frame exactly the expected
//! number of replies with `ReplyFramer` (no decoding). The read buffer is reused, and after the
//! last expected reply the socket's readiness is cleared without a syscall, so the next batch
//! costs one write + one read + a share of one epoll_wait, with no EAGAIN probe and no
//! epoll_ctl (tokio registers each socket once, edge-triggered).

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use resp::ReplyFramer;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Initial read buffer; it grows for big replies and is then kept.
const READ_BUF: usize = 64 * 1024;

/// A connection with its reusable buffers.
pub struct Conn {
    stream: TcpStream,
    /// Bytes to send on the next `flush`.
    pub wbuf: Vec<u8>,
    rbuf: Vec<u8>,
    /// Unconsumed bytes are `rbuf[start..end]`.
    start: usize,
    end: usize,
    framer: ReplyFramer,
}

impl Conn {
    /// Connects with TCP_NODELAY (requests must leave at once).
    pub async fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            wbuf: Vec::with_capacity(4096),
            rbuf: vec![0; READ_BUF],
            start: 0,
            end: 0,
            framer: ReplyFramer::new(),
        })
    }

    /// Writes all of `wbuf` (one syscall unless the socket buffer is full), then clears it.
    pub async fn flush(&mut self) -> io::Result<()> {
        let mut off = 0;
        while off < self.wbuf.len() {
            match self.stream.try_write(&self.wbuf[off..]) {
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.stream.writable().await?,
                Err(e) => return Err(e),
            }
        }
        self.wbuf.clear();
        Ok(())
    }

    /// Writes `parts` in order straight from the caller's buffers (vectored, no copy into
    /// `wbuf`): big values must not charge the generator's own copies to the server.
    pub async fn write_parts(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        let (mut i, mut off) = (0, 0);
        while i < parts.len() {
            let iov: Vec<io::IoSlice> = std::iter::once(&parts[i][off..])
                .chain(parts[i + 1..].iter().copied())
                .map(io::IoSlice::new)
                .collect();
            match self.stream.try_write_vectored(&iov) {
                Ok(mut n) => {
                    while i < parts.len() && n >= parts[i].len() - off {
                        n -= parts[i].len() - off;
                        (i, off) = (i + 1, 0);
                    }
                    off += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.stream.writable().await?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Frames `n` replies, calling `f(i, frame, arrival)` for each. On error the replies not
    /// yet delivered are lost with the connection (the caller counts them).
    pub async fn read_replies<F>(&mut self, n: usize, mut f: F) -> io::Result<()>
    where
        F: FnMut(usize, &[u8], Instant),
    {
        let mut got = 0;
        let mut now = Instant::now();
        loop {
            while got < n {
                let pending = &self.rbuf[self.start..self.end];
                let Some(len) = self.framer.next_frame(pending).map_err(bad_reply)? else {
                    break;
                };
                f(got, &pending[..len], now);
                self.start += len;
                got += 1;
            }
            if got == n {
                self.done_reading();
                return Ok(());
            }
            self.make_room();
            self.fill().await?;
            now = Instant::now();
        }
    }

    /// After the last expected reply: rewind the buffer and, when nothing is left over, mark
    /// the socket not-readable so the next wait goes straight to epoll.
    fn done_reading(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            // No I/O happens here: returning WouldBlock only clears tokio's cached readiness.
            // A reply arriving later raises a fresh edge that the driver records.
            let _ = self.stream.try_io(Interest::READABLE, || {
                Err::<(), _>(io::ErrorKind::WouldBlock.into())
            });
        }
    }

    /// Moves unconsumed bytes to the front and grows the buffer when a frame needs more.
    fn make_room(&mut self) {
        if self.start > 0 {
            self.rbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let want = self.framer.hint().unwrap_or(0).max(self.end + 1);
        if want > self.rbuf.len() {
            self.rbuf.resize(want.max(self.rbuf.len() * 2), 0);
        }
    }

    /// One successful read of at least one byte.
    async fn fill(&mut self) -> io::Result<()> {
        loop {
            match self.stream.try_read(&mut self.rbuf[self.end..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(k) => {
                    self.end += k;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.stream.readable().await?,
                Err(e) => return Err(e),
            }
        }
    }
}

fn bad_reply(e: resp::FrameError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("bad reply: {e}"))
}

/// Sends one command and returns its raw reply frame (control path: topology, prepare).
pub async fn call(addr: SocketAddr, args: &[&[u8]]) -> io::Result<Vec<u8>> {
    let mut conn = Conn::connect(addr).await?;
    let mut buf = bytes::BytesMut::new();
    resp::encode_command(&mut buf, args);
    conn.wbuf.extend_from_slice(&buf);
    conn.flush().await?;
    let mut out = Vec::new();
    conn.read_replies(1, |_, frame, _| out = frame.to_vec())
        .await?;
    Ok(out)
}
