//! Resumable client-request parser that answers malformed input like Redis 7.0.
//!
//! The proxy must reject exactly what Redis rejects, with the same error text,
//! and must not be slower than Redis on a request that trickles in: after
//! [`Progress::Incomplete`] the parser keeps its position and the arguments
//! found so far, so each call costs O(new bytes). Nothing is consumed until a
//! whole request is available; then its bytes are split off the caller's buffer
//! (zero copy) and the arguments are offsets into them.
//!
//! Deliberate differences from Redis (all stricter or split-independent):
//! * a bulk payload must be followed by `\r\n` (Redis skips two bytes unchecked
//!   and would run `*1\r\n$4\r\nPINGX\r\n` as `PING`);
//! * a `\r` ending a `*N`/`$N` line must be followed by `\n` (Redis skips it);
//! * a length line whose `\r` comes more than `max_inline_len` bytes after its
//!   start is always "too big ... count string" and an inline line longer than
//!   that is always "too big inline request", even when it arrived in one read
//!   (Redis only checks when the terminator is not yet buffered, so its answer
//!   depends on how the input was split; ours never does);
//! * a NUL byte is ordinary data (Redis's `strchr` stops at it and waits).

use bytes::{Buf, Bytes, BytesMut};
use smallvec::SmallVec;

use crate::error::ProtocolError;
use crate::inline::{parse_inline_line, InlineQuotes};
use crate::limits::Limits;
use crate::num::string2ll;
use crate::request::{ArgRanges, Request};
use crate::scan::{find_term, Line};

/// Redis's pre-authentication limits (`networking.c`).
const UNAUTH_MAX_MULTIBULK: i64 = 10;
const UNAUTH_MAX_BULK: i64 = 16384;
/// Never trust a declared count for allocation: reserve at most this many slots.
const MAX_ARG_RESERVE: usize = 1024;
/// Requests of at most this many arguments are tried in one pass first (`whole`).
const WHOLE_MAX_ARGS: usize = 64;

/// The outcome of one complete request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// A command to execute or forward.
    Request(Request),
    /// Input that Redis silently ignores (an empty or blank inline line, `*0`,
    /// `*-1`, any `*N` with N <= 0). Its bytes were consumed; reply nothing.
    Noop,
    /// The first argument is `POST` or `Host:` (case-insensitive): an HTTP
    /// request aimed at Redis, a known cross-protocol attack. Its bytes were
    /// consumed; close the connection without replying, as Redis does.
    Close,
}

/// What [`RequestParser::parse`] achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// One request was consumed from the front of the buffer.
    Done(Parsed),
    /// More bytes are needed; nothing was consumed. `frame_len_hint`, when
    /// known, is the buffer length needed before the parser can progress: set
    /// while waiting for a bulk payload, and equal to the whole frame's length
    /// when that bulk is the last argument. Use it to reserve once for big values.
    Incomplete {
        /// Total bytes the buffer must hold for the pending bulk to complete.
        frame_len_hint: Option<usize>,
    },
}

/// A request whose last argument's payload is still arriving, as
/// [`RequestParser::pending_tail`] describes it.
#[derive(Debug)]
pub struct PendingTail {
    /// The arguments received so far plus an empty last one: for routing and checks only,
    /// never to be sent.
    pub probe: Request,
    /// Bytes from the start of the buffer to the first byte of the payload.
    pub head_len: usize,
    /// The payload's declared length (its CRLF follows it).
    pub payload_len: usize,
}

/// Where a partially received request stands. Positions are offsets from the
/// start of the caller's buffer, which holds the whole unconsumed request.
#[derive(Debug)]
enum State {
    Start,
    /// Inline line; `[0, scan)` holds no `\n`.
    Inline {
        scan: usize,
    },
    /// `*N` line; `[0, scan)` holds no `\r`.
    Count {
        scan: usize,
    },
    Args(Multibulk),
}

#[derive(Debug)]
struct Multibulk {
    /// Arguments still to read.
    remaining: usize,
    /// Start of the current `$N` line, or of the current payload.
    pos: usize,
    stage: Stage,
    args: ArgRanges,
}

#[derive(Debug)]
enum Stage {
    /// Reading a `$N` line; `[pos, scan)` holds no `\r`.
    Header { scan: usize },
    /// Waiting for `len` payload bytes plus CRLF at `pos`.
    Payload { len: usize },
}

fn incomplete(frame_len_hint: Option<usize>) -> Result<Progress, ProtocolError> {
    Ok(Progress::Incomplete { frame_len_hint })
}

/// Redis registers `post` and `host:` as commands that close the connection.
fn is_http_probe(first_arg: &[u8]) -> bool {
    first_arg.eq_ignore_ascii_case(b"post") || first_arg.eq_ignore_ascii_case(b"host:")
}

fn classify(req: Request) -> Parsed {
    if req.argc() > 0 && is_http_probe(req.arg(0)) {
        Parsed::Close
    } else {
        Parsed::Request(req)
    }
}

/// Parses requests from one client connection; keep one per connection.
#[derive(Debug)]
pub struct RequestParser {
    limits: Limits,
    unauthenticated: bool,
    inline_quotes: InlineQuotes,
    state: State,
}

impl Default for RequestParser {
    /// A parser with [`Limits::default`], authenticated.
    fn default() -> Self {
        RequestParser::new(Limits::default())
    }
}

impl RequestParser {
    /// A parser for a fresh connection (authenticated until told otherwise).
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            unauthenticated: false,
            inline_quotes: InlineQuotes::Strict,
            state: State::Start,
        }
    }

    /// `true` until the client authenticates: enables Redis's pre-auth limits
    /// (at most 10 arguments, bulks of at most 16384 bytes). Takes effect for
    /// lines not yet parsed.
    pub fn set_unauthenticated(&mut self, on: bool) {
        self.unauthenticated = on;
    }

    /// Which server's quoting rule inline lines follow (Redis's by default).
    pub fn set_inline_quotes(&mut self, quotes: InlineQuotes) {
        self.inline_quotes = quotes;
    }

    /// Parses one request from the front of `buf`.
    ///
    /// On `Done` the request's bytes are split off `buf` (zero copy). On
    /// `Incomplete` nothing is consumed; call again once more bytes have been
    /// appended to `buf` (the caller must only append, never drop or modify
    /// the unconsumed prefix). On `Err` nothing is consumed and the parser is
    /// reset: reply with [`ProtocolError::to_resp`] and close the connection.
    pub fn parse(&mut self, buf: &mut BytesMut) -> Result<Progress, ProtocolError> {
        if buf.len() < self.resume_point() {
            // The caller broke the append-only contract; start over rather than
            // index past the end.
            self.state = State::Start;
        }
        let result = match std::mem::replace(&mut self.state, State::Start) {
            State::Start => match buf.first() {
                None => incomplete(None),
                Some(b'*') => match self.whole(buf) {
                    Some((len, args)) => {
                        let raw = buf.split_to(len).freeze();
                        Ok(Progress::Done(classify(Request::from_parts(
                            raw, args, false,
                        ))))
                    }
                    None => self.count(buf, 1),
                },
                Some(_) => self.inline(buf, 0),
            },
            State::Inline { scan } => self.inline(buf, scan),
            State::Count { scan } => self.count(buf, scan),
            State::Args(mb) => self.args(buf, mb),
        };
        if result.is_err() {
            self.state = State::Start;
        }
        result
    }

    /// When the parser waits for the payload of a request's last argument and that payload
    /// is at least `min_len` bytes, what came before it. Nothing is consumed: a caller that
    /// streams the payload itself calls [`RequestParser::take_head`] next.
    pub fn pending_tail(&self, buf: &[u8], min_len: usize) -> Option<PendingTail> {
        let State::Args(mb) = &self.state else {
            return None;
        };
        let Stage::Payload { len } = mb.stage else {
            return None;
        };
        if mb.remaining != 1 || len < min_len {
            return None;
        }
        let mut args: SmallVec<[&[u8]; 8]> = SmallVec::new();
        for &(start, end) in &mb.args {
            args.push(buf.get(start as usize..end as usize)?);
        }
        args.push(b"");
        Some(PendingTail {
            probe: Request::from_args(&args),
            head_len: mb.pos,
            payload_len: len,
        })
    }

    /// Split off the head [`RequestParser::pending_tail`] described and start over: the
    /// payload and its CRLF are the caller's to consume and must never reach `parse`.
    pub fn take_head(&mut self, buf: &mut BytesMut, head_len: usize) -> Bytes {
        self.state = State::Start;
        buf.split_to(head_len.min(buf.len())).freeze()
    }

    /// The furthest offset the saved state relies on.
    fn resume_point(&self) -> usize {
        match &self.state {
            State::Start => 0,
            State::Inline { scan } | State::Count { scan } => *scan,
            State::Args(mb) => match mb.stage {
                Stage::Header { scan } => scan.max(mb.pos),
                Stage::Payload { .. } => mb.pos,
            },
        }
    }

    /// The common case in one pass: a request of at most [`WHOLE_MAX_ARGS`] arguments,
    /// wholly buffered, every length line short and valid and within the limits. `None`
    /// for anything else (not all here, malformed, a limit in play): the resumable path
    /// below then reads it from the start and decides, so both accept exactly the same
    /// requests with the same arguments. Returns the frame's length and its arguments.
    fn whole(&self, buf: &[u8]) -> Option<(usize, ArgRanges)> {
        let (n, mut pos) = self.short_length(buf, 0)?;
        if n == 0 || n > WHOLE_MAX_ARGS || n > self.limits.max_multibulk_len {
            return None;
        }
        if self.unauthenticated && n as i64 > UNAUTH_MAX_MULTIBULK {
            return None;
        }
        let mut args = ArgRanges::new();
        for _ in 0..n {
            if *buf.get(pos)? != b'$' {
                return None;
            }
            let (len, payload) = self.short_length(buf, pos)?;
            if len > self.limits.max_bulk_len
                || (self.unauthenticated && len as i64 > UNAUTH_MAX_BULK)
            {
                return None;
            }
            let end = payload.checked_add(len)?;
            if buf.get(end..end.checked_add(2)?)? != b"\r\n" {
                return None;
            }
            args.push((u32::try_from(payload).ok()?, u32::try_from(end).ok()?));
            pos = end + 2;
        }
        u32::try_from(pos).ok()?;
        Some((pos, args))
    }

    /// The length line starting at `start` (`*N` or `$N`) when it is what
    /// [`string2ll`] accepts as a non-negative number of at most 9 digits, ends in CRLF
    /// and is within `max_inline_len`: the number and the offset after the CRLF.
    fn short_length(&self, buf: &[u8], start: usize) -> Option<(usize, usize)> {
        let digits = buf.get(start + 1..)?;
        let mut n = 0usize;
        let mut i = 0;
        while let Some(&d) = digits.get(i) {
            if !d.is_ascii_digit() {
                break;
            }
            if i == 9 || (i == 1 && n == 0) {
                // Ten digits or more, or a leading zero: the general path decides.
                return None;
            }
            n = n * 10 + usize::from(d - b'0');
            i += 1;
        }
        let cr = start + 1 + i;
        if i == 0 || cr - start > self.limits.max_inline_len {
            return None;
        }
        (buf.get(cr..cr + 2)? == b"\r\n").then_some((n, cr + 2))
    }

    fn inline(&mut self, buf: &mut BytesMut, scan: usize) -> Result<Progress, ProtocolError> {
        let nl = match find_term(buf, 0, scan, self.limits.max_inline_len, b'\n') {
            Line::TooLong => return Err(ProtocolError::TooBigInline),
            Line::Pending(scan) => {
                self.state = State::Inline { scan };
                return incomplete(None);
            }
            Line::Found(nl) => nl,
        };
        let line = buf.get(..nl).unwrap_or_default();
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let parsed = parse_inline_line(line, self.inline_quotes)?;
        buf.advance(nl + 1);
        Ok(Progress::Done(parsed.map_or(Parsed::Noop, classify)))
    }

    fn count(&mut self, buf: &mut BytesMut, scan: usize) -> Result<Progress, ProtocolError> {
        let cr = match find_term(buf, 0, scan, self.limits.max_inline_len, b'\r') {
            Line::TooLong => return Err(ProtocolError::TooBigMbulkCount),
            Line::Pending(scan) => {
                self.state = State::Count { scan };
                return incomplete(None);
            }
            Line::Found(cr) => cr,
        };
        let Some(&after_cr) = buf.get(cr + 1) else {
            self.state = State::Count { scan: cr };
            return incomplete(None);
        };
        let n = buf
            .get(1..cr)
            .and_then(string2ll)
            .filter(|&n| n <= 0 || n as u64 <= self.limits.max_multibulk_len as u64)
            .ok_or(ProtocolError::InvalidMultibulkLength)?;
        if n > UNAUTH_MAX_MULTIBULK && self.unauthenticated {
            return Err(ProtocolError::UnauthenticatedMultibulkLength);
        }
        if after_cr != b'\n' {
            return Err(ProtocolError::MissingCrlfAfterLength);
        }
        let pos = cr + 2;
        let Ok(remaining @ 1..) = usize::try_from(n) else {
            buf.advance(pos);
            return Ok(Progress::Done(Parsed::Noop));
        };
        let mb = Multibulk {
            remaining,
            pos,
            stage: Stage::Header { scan: pos },
            args: ArgRanges::with_capacity(remaining.min(MAX_ARG_RESERVE)),
        };
        self.args(buf, mb)
    }

    fn args(&mut self, buf: &mut BytesMut, mut mb: Multibulk) -> Result<Progress, ProtocolError> {
        loop {
            match mb.stage {
                Stage::Header { scan } => match self.bulk_header(buf, mb.pos, scan)? {
                    BulkHeader::Ready { len, payload } => {
                        mb.stage = Stage::Payload { len };
                        mb.pos = payload;
                    }
                    BulkHeader::Pending(scan) => {
                        mb.stage = Stage::Header { scan };
                        self.state = State::Args(mb);
                        return incomplete(None);
                    }
                },
                Stage::Payload { len } => {
                    if let Some(need) = take_payload(buf, &mut mb, len)? {
                        self.state = State::Args(mb);
                        return incomplete(Some(need));
                    }
                    if mb.remaining == 0 {
                        let raw = buf.split_to(mb.pos).freeze();
                        let req = Request::from_parts(raw, mb.args, false);
                        return Ok(Progress::Done(classify(req)));
                    }
                }
            }
        }
    }

    /// Reads the `$N` line at `pos`, checking in Redis's order: a complete
    /// line first, then the `$`, then the number and the limits.
    fn bulk_header(
        &self,
        buf: &[u8],
        pos: usize,
        scan: usize,
    ) -> Result<BulkHeader, ProtocolError> {
        let cr = match find_term(buf, pos, scan, self.limits.max_inline_len, b'\r') {
            Line::TooLong => return Err(ProtocolError::TooBigBulkCount),
            Line::Pending(scan) => return Ok(BulkHeader::Pending(scan)),
            Line::Found(cr) => cr,
        };
        let (Some(&after_cr), Some(&first)) = (buf.get(cr + 1), buf.get(pos)) else {
            return Ok(BulkHeader::Pending(cr));
        };
        if first != b'$' {
            return Err(ProtocolError::ExpectedDollar(first));
        }
        let n = buf
            .get(pos + 1..cr)
            .and_then(string2ll)
            .filter(|&n| n >= 0 && n as u64 <= self.limits.max_bulk_len as u64)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        if n > UNAUTH_MAX_BULK && self.unauthenticated {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        if after_cr != b'\n' {
            return Err(ProtocolError::MissingCrlfAfterLength);
        }
        let len = usize::try_from(n).map_err(|_| ProtocolError::InvalidBulkLength)?;
        Ok(BulkHeader::Ready {
            len,
            payload: cr + 2,
        })
    }
}

/// Records the `len`-byte payload at `mb.pos` as an argument if it and its
/// CRLF are buffered; otherwise returns the buffer length needed.
fn take_payload(
    buf: &[u8],
    mb: &mut Multibulk,
    len: usize,
) -> Result<Option<usize>, ProtocolError> {
    let end = mb
        .pos
        .checked_add(len)
        .ok_or(ProtocolError::InvalidBulkLength)?;
    let need = end.checked_add(2).ok_or(ProtocolError::InvalidBulkLength)?;
    // Offsets are stored as u32 (`request.rs`): a frame past 4 GiB is refused as
    // Redis refuses a bulk past its limit (no query-buffer limit lets one through).
    let (Ok(start), Ok(stop)) = (u32::try_from(mb.pos), u32::try_from(end)) else {
        return Err(ProtocolError::InvalidBulkLength);
    };
    let Some(crlf) = buf.get(end..need) else {
        return Ok(Some(need));
    };
    if crlf != b"\r\n" {
        return Err(ProtocolError::MissingCrlfAfterBulk);
    }
    mb.args.push((start, stop));
    mb.pos = need;
    mb.remaining -= 1;
    mb.stage = Stage::Header { scan: need };
    Ok(None)
}

/// Outcome of reading one `$N` line.
enum BulkHeader {
    Ready {
        len: usize,
        payload: usize,
    },
    /// Resume the `\r` search at this index.
    Pending(usize),
}
