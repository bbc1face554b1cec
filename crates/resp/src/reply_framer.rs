//! Resumable scanner that finds where each server reply ends.
//!
//! The proxy forwards replies untouched, so all it needs is each frame's
//! length. Replies can be huge (a 10 MB array of small elements, a 500 MB
//! bulk) and arrive in many reads, so the framer keeps its position and an
//! explicit stack of open aggregates between calls: each call only looks at
//! new bytes, and no input can make it recurse or overflow the call stack.
//!
//! Any depth a server can send is framed: a Lua script returning a self-referencing table
//! gets thousands of levels from Redis, and refusing it would drop a backend connection
//! other clients share for a reply the server legitimately sent. The stack of open
//! aggregates is run-length encoded, so a chain of one-element arrays (the deep case
//! servers produce) costs one entry however deep it goes.

use crate::error::FrameError;
use crate::header::{check_blob, line_cap, parse_header, too_long_error, Header};
use crate::scan::{find_term, Line};

/// Largest bulk a reply may announce by default (4 GiB): far above Redis's
/// 512 MiB `proto-max-bulk-len`, but low enough that a corrupt length cannot
/// make a caller reserve absurd amounts of memory from [`ReplyFramer::hint`].
const DEFAULT_MAX_REPLY_BULK: u64 = 4 << 30;

/// Where the framer is inside the current frame. Offsets are from the start
/// of the caller's buffer, which holds the whole unconsumed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the header at `pos`; `[pos + 1, scan)` holds no `\r`.
    Header { scan: usize },
    /// Waiting for the payload `[start, end)` of a `kind` blob plus its CRLF.
    Payload { kind: u8, start: usize, end: usize },
}

/// What reading one header achieved.
enum Step {
    Pending,
    /// A whole value ended (scalar, null, empty aggregate).
    Value,
    /// An aggregate was opened or a blob payload is now expected.
    Opened,
}

/// Finds the length of RESP2/RESP3 reply frames; keep one per backend connection.
#[derive(Debug, Clone)]
pub struct ReplyFramer {
    /// Start of the next unread value.
    pos: usize,
    phase: Phase,
    /// Open aggregates, outermost first.
    stack: Levels,
    max_bulk_len: u64,
}

impl Default for ReplyFramer {
    fn default() -> Self {
        ReplyFramer::new()
    }
}

/// Whether a complete frame is an error reply: `-` simple error or RESP3 `!`
/// blob error.
pub fn is_error_frame(frame: &[u8]) -> bool {
    matches!(frame.first(), Some(b'-' | b'!'))
}

impl ReplyFramer {
    /// A framer accepting bulks up to 4 GiB, nested to any depth.
    pub fn new() -> Self {
        ReplyFramer {
            pos: 0,
            phase: Phase::Header { scan: 0 },
            stack: Levels::default(),
            max_bulk_len: DEFAULT_MAX_REPLY_BULK,
        }
    }

    /// A framer that rejects (`BadLength`) bulks longer than `max`.
    pub fn with_max_bulk_len(max: usize) -> Self {
        ReplyFramer {
            max_bulk_len: max as u64,
            ..ReplyFramer::new()
        }
    }

    /// Length of the complete frame at the start of `buf`, or `Ok(None)` if
    /// it is incomplete.
    ///
    /// After `Ok(None)`, call again with the same bytes plus more appended; the
    /// scan resumes where it stopped (amortised O(new bytes)). After `Ok(Some(n))`
    /// or an error the framer is reset for a new frame at the start of the next
    /// `buf` (the caller splits the `n` bytes off). Errors are final for the
    /// connection: the byte stream cannot be resynchronised.
    pub fn next_frame(&mut self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        if self.pos == 0 && self.phase == (Phase::Header { scan: 0 }) && self.stack.is_empty() {
            if let Some(len) = self.whole_simple(buf) {
                return Ok(Some(len));
            }
        }
        if buf.len() < self.resume_point() {
            // The caller broke the append-only contract; rescan from scratch
            // rather than index past the end.
            self.reset();
        }
        let result = self.advance(buf);
        if !matches!(result, Ok(None)) {
            self.reset();
        }
        result
    }

    /// Most replies in one pass: a fresh frame that is a bulk string with a length of at
    /// most 9 plain digits, a null bulk, or a status line, wholly buffered (a GET's, a
    /// SET's). `None`
    /// for anything else; the resumable scan then decides, so both frame alike.
    fn whole_simple(&self, buf: &[u8]) -> Option<usize> {
        match *buf.first()? {
            b'$' if buf.starts_with(b"$-1\r\n") => Some(5),
            b'$' => {
                let mut len = 0usize;
                let mut i = 1;
                while let Some(&d) = buf.get(i) {
                    if !d.is_ascii_digit() {
                        break;
                    }
                    if i > 9 {
                        return None;
                    }
                    len = len * 10 + usize::from(d - b'0');
                    i += 1;
                }
                if i == 1 || buf.get(i..i + 2)? != b"\r\n" || len as u64 > self.max_bulk_len {
                    return None;
                }
                let end = i + 2 + len;
                (buf.get(end..end + 2)? == b"\r\n").then_some(end + 2)
            }
            b'+' => {
                let cr = buf.iter().position(|&b| b == b'\r')?;
                (buf.get(cr + 1) == Some(&b'\n')).then_some(cr + 2)
            }
            _ => None,
        }
    }

    /// Total bytes the buffer must hold before the pending bulk payload is
    /// complete, once its header has been read; `None` otherwise. It is the
    /// whole frame's length when the frame is a single bulk, and a lower bound
    /// when the bulk is inside an aggregate. Use it to reserve once.
    pub fn hint(&self) -> Option<usize> {
        match self.phase {
            Phase::Payload { end, .. } => end.checked_add(2),
            Phase::Header { .. } => None,
        }
    }

    /// When the frame being read is a top-level bulk string (`$N`) whose payload has not
    /// all arrived: the whole frame's length. A caller that passes the frame on in pieces
    /// calls [`ReplyFramer::take_over`] and consumes that many bytes itself.
    pub fn pending_top_bulk(&self) -> Option<usize> {
        match self.phase {
            Phase::Payload {
                kind: b'$', end, ..
            } if self.stack.is_empty() => end.checked_add(2),
            _ => None,
        }
    }

    /// Forget the frame in progress: its bytes are the caller's to consume.
    pub fn take_over(&mut self) {
        self.reset();
    }

    fn reset(&mut self) {
        self.pos = 0;
        self.phase = Phase::Header { scan: 0 };
        self.stack.clear();
    }

    fn resume_point(&self) -> usize {
        match self.phase {
            Phase::Header { scan } => scan.max(self.pos),
            Phase::Payload { start, .. } => start,
        }
    }

    fn advance(&mut self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        loop {
            let value_done = match self.phase {
                Phase::Header { scan } => match self.header(buf, scan)? {
                    Step::Pending => return Ok(None),
                    Step::Value => true,
                    Step::Opened => false,
                },
                Phase::Payload { kind, start, end } => {
                    let need = end.checked_add(2).ok_or(FrameError::BadLength)?;
                    let (Some(payload), Some(crlf)) = (buf.get(start..end), buf.get(end..need))
                    else {
                        return Ok(None);
                    };
                    if crlf != b"\r\n" {
                        return Err(FrameError::BadLine);
                    }
                    check_blob(kind, payload)?;
                    self.pos = need;
                    self.phase = Phase::Header { scan: need };
                    true
                }
            };
            if value_done && self.close_value() {
                return Ok(Some(self.pos));
            }
        }
    }

    /// Reads the header at `self.pos`, scanning for its `\r` from `scan`.
    fn header(&mut self, buf: &[u8], scan: usize) -> Result<Step, FrameError> {
        let Some((kind, cr)) = self.find_line(buf, scan)? else {
            return Ok(Step::Pending);
        };
        let line = buf.get(self.pos + 1..cr).ok_or(FrameError::BadLine)?;
        let next = cr + 2;
        self.phase = Phase::Header { scan: next };
        match parse_header(kind, line, self.max_bulk_len)? {
            Header::Line | Header::NullBulk | Header::NullArray => {}
            Header::Blob { len } => {
                let end = next.checked_add(len).ok_or(FrameError::BadLength)?;
                self.phase = Phase::Payload {
                    kind,
                    start: next,
                    end,
                };
                return Ok(Step::Opened);
            }
            Header::Aggregate { elements } if elements > 0 => {
                self.stack.open(elements);
                self.pos = next;
                return Ok(Step::Opened);
            }
            Header::Aggregate { .. } => {}
        }
        self.pos = next;
        Ok(Step::Value)
    }

    /// Finds the complete CRLF-terminated header line at `self.pos`: its type
    /// byte and the index of its `\r`, or `None` (state saved) if incomplete.
    fn find_line(&mut self, buf: &[u8], scan: usize) -> Result<Option<(u8, usize)>, FrameError> {
        let Some(&kind) = buf.get(self.pos) else {
            return Ok(None);
        };
        // Reject a bad type byte at once, before waiting for a line.
        let cap = line_cap(kind)?.unwrap_or(usize::MAX);
        let cr = match find_term(buf, self.pos + 1, scan, cap, b'\r') {
            Line::Found(cr) => cr,
            Line::Pending(scan) => {
                self.phase = Phase::Header { scan };
                return Ok(None);
            }
            Line::TooLong => return Err(too_long_error(kind)),
        };
        match buf.get(cr + 1) {
            None => {
                self.phase = Phase::Header { scan: cr };
                Ok(None)
            }
            Some(b'\n') => Ok(Some((kind, cr))),
            Some(_) => Err(FrameError::BadLine),
        }
    }

    /// Records that a value ended at `self.pos`, closing every aggregate it
    /// completes. Returns true when the outermost value (the frame) is done.
    fn close_value(&mut self) -> bool {
        while !self.stack.is_empty() {
            if !self.stack.child_done() {
                return false;
            }
        }
        true
    }
}

/// The open aggregates as runs: `(children still expected, levels)`, outermost first.
/// Consecutive levels expecting the same count share one entry, so memory grows with the
/// number of distinct runs, never with depth alone.
#[derive(Debug, Clone, Default)]
struct Levels {
    runs: Vec<(u64, u64)>,
}

impl Levels {
    fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    fn clear(&mut self) {
        self.runs.clear();
    }

    /// A new innermost aggregate expecting `children` (> 0) values.
    fn open(&mut self, children: u64) {
        match self.runs.last_mut() {
            Some((expected, levels)) if *expected == children => *levels += 1,
            _ => self.runs.push((children, 1)),
        }
    }

    /// The innermost aggregate got one more child; true when that closed it.
    fn child_done(&mut self) -> bool {
        let Some((expected, levels)) = self.runs.last_mut() else {
            return false;
        };
        if *levels == 1 {
            // The common case (an array of scalars): count down in place.
            *expected -= 1;
            if *expected == 0 {
                self.runs.pop();
                return true;
            }
            return false;
        }
        let left = *expected - 1;
        // Only the innermost level of the run changes: it leaves the run.
        *levels -= 1;
        if *levels == 0 {
            self.runs.pop();
        }
        if left == 0 {
            return true;
        }
        self.open(left);
        false
    }
}
