//! A parsed client request: the wire bytes plus where each argument lives.
//!
//! The proxy forwards `raw` to a backend untouched, so a request keeps the
//! exact multibulk bytes it arrived as and argument access is just offsets
//! into them (no per-argument allocation, no payload copies).

use bytes::{BufMut, Bytes, BytesMut};
use smallvec::SmallVec;

use crate::encode::{command_len, write_array_header};
use crate::num::put_u64;

/// Byte ranges `(start, end)` of each argument inside `raw`. Eight inline
/// slots cover nearly every real command without a heap allocation. Offsets are
/// `u32`: a request (the parser refuses a frame past 4 GiB, far above any
/// query-buffer limit) is then small enough to move without a `memcpy` call,
/// and every request is moved a few times between the parser and its entry.
pub(crate) type ArgRanges = SmallVec<[(u32, u32); 8]>;

/// `(start, end)` as stored: saturated past 4 GiB, where only [`Request::from_args`]
/// could go, and then an empty argument at the end of `raw`, never a panic.
pub(crate) fn span(start: usize, end: usize) -> (u32, u32) {
    let at = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
    (at(start), at(end))
}

/// One client command.
///
/// Invariant: every range in `args` lies inside `raw`, and `raw` is a complete
/// RESP multibulk whose bulks are exactly those ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    raw: Bytes,
    args: ArgRanges,
    inline: bool,
}

impl Request {
    /// Builds a request from parts the parser has already validated.
    pub(crate) fn from_parts(raw: Bytes, args: ArgRanges, inline: bool) -> Self {
        Request { raw, args, inline }
    }

    /// Number of arguments, command name included. Always at least 1 for a
    /// request produced by the parser; 0 only for `from_args(&[])`.
    pub fn argc(&self) -> usize {
        self.args.len()
    }

    /// Argument `i` (0 is the command name).
    ///
    /// # Panics
    /// If `i >= argc()`: that is a bug in the caller, not bad input.
    pub fn arg(&self, i: usize) -> &[u8] {
        let (start, end) = self.args[i];
        &self.raw[start as usize..end as usize]
    }

    /// Argument `i` as a zero-copy slice of [`Request::raw`].
    ///
    /// # Panics
    /// If `i >= argc()`.
    pub fn arg_bytes(&self, i: usize) -> Bytes {
        let (start, end) = self.args[i];
        self.raw.slice(start as usize..end as usize)
    }

    /// Iterates over all arguments in order.
    pub fn args(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.args
            .iter()
            .map(|&(start, end)| &self.raw[start as usize..end as usize])
    }

    /// The exact RESP multibulk encoding of the request, ready to forward to a
    /// Redis server. For multibulk input these are the bytes the client sent;
    /// inline requests are re-encoded as a multibulk.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// Encodes `args` as a multibulk request (`from_args(&[])` gives `*0\r\n`).
    pub fn from_args(args: &[&[u8]]) -> Request {
        let (raw, ranges) = encode_recording(args);
        Request::from_parts(raw, ranges, false)
    }

    /// Whether the client sent this as an inline (telnet-style) command.
    pub fn is_inline(&self) -> bool {
        self.inline
    }
}

/// Encodes a multibulk and records where each payload landed.
pub(crate) fn encode_recording(args: &[&[u8]]) -> (Bytes, ArgRanges) {
    let mut out = BytesMut::with_capacity(command_len(args));
    let mut ranges = ArgRanges::with_capacity(args.len());
    write_array_header(&mut out, args.len());
    for arg in args {
        out.put_u8(b'$');
        put_u64(&mut out, arg.len() as u64);
        out.put_slice(b"\r\n");
        let start = out.len();
        out.put_slice(arg);
        ranges.push(span(start, out.len()));
        out.put_slice(b"\r\n");
    }
    (out.freeze(), ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_args_round_trips_arguments() {
        let req = Request::from_args(&[b"SET", b"k", b""]);
        assert_eq!(req.argc(), 3);
        assert_eq!(req.arg(0), b"SET");
        assert_eq!(req.arg(1), b"k");
        assert_eq!(req.arg(2), b"");
        assert_eq!(&req.arg_bytes(1)[..], b"k");
        assert_eq!(&req.raw()[..], b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
        assert!(!req.is_inline());
        assert_eq!(req.args().collect::<Vec<_>>(), vec![&b"SET"[..], b"k", b""]);
    }

    #[test]
    fn empty_from_args() {
        let req = Request::from_args(&[]);
        assert_eq!(req.argc(), 0);
        assert_eq!(&req.raw()[..], b"*0\r\n");
    }
}
