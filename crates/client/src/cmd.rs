//! Commands: the `Cmd` builder and the frozen, routable form the engine sends.
//!
//! Each argument is RESP-encoded into the command's own buffer as it is added,
//! so a command costs one copy of its payload, ever: building a batch only
//! prepends the small `*<argc>` header and either copies small bodies into one
//! contiguous write or hands big bodies to the socket as shared `Bytes`
//! segments (field report 004: no buffer that is re-grown and re-copied per
//! appended command).

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

/// Bodies at least this large travel as their own `writev` segment instead of
/// being copied into the batch buffer.
const SEGMENT_MIN: usize = 16 * 1024;

/// Initial body capacity beyond the first argument's own bytes.
const FIRST_ALLOC: usize = 64;

/// Something usable as one command argument.
///
/// # Examples
///
/// ```
/// use slotgate_client::{Cmd, ToArg};
/// let cmd = Cmd::new("SET").arg("k").arg(42_i64).arg(b"raw".as_slice());
/// assert_eq!(cmd.argc(), 4);
/// assert_eq!(7_u32.to_arg().as_ref(), b"7");
/// ```
pub trait ToArg {
    /// The argument's bytes.
    fn to_arg(&self) -> Cow<'_, [u8]>;

    /// The argument as shared `Bytes` when it already is one: large ones are
    /// then sent straight from the caller's buffer, never copied.
    fn shared(&self) -> Option<Bytes> {
        None
    }
}

impl ToArg for [u8] {
    fn to_arg(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }
}
impl ToArg for str {
    fn to_arg(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.as_bytes())
    }
}
impl<const N: usize> ToArg for [u8; N] {
    fn to_arg(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }
}
impl<T: ToArg + ?Sized> ToArg for &T {
    fn to_arg(&self) -> Cow<'_, [u8]> {
        (**self).to_arg()
    }
    fn shared(&self) -> Option<Bytes> {
        (**self).shared()
    }
}
impl ToArg for Bytes {
    fn to_arg(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }
    fn shared(&self) -> Option<Bytes> {
        Some(self.clone())
    }
}
macro_rules! owned_bytes_arg {
    ($($t:ty),*) => {$(
        impl ToArg for $t {
            fn to_arg(&self) -> Cow<'_, [u8]> {
                Cow::Borrowed(self.as_ref())
            }
        }
    )*};
}
owned_bytes_arg!(String, Vec<u8>);
macro_rules! number_arg {
    ($($t:ty),*) => {$(
        impl ToArg for $t {
            fn to_arg(&self) -> Cow<'_, [u8]> {
                Cow::Owned(self.to_string().into_bytes())
            }
        }
    )*};
}
number_arg!(i32, i64, u32, u64, usize, f64);

/// A command under construction: name first, then arguments.
///
/// # Examples
///
/// ```no_run
/// # async fn f(client: slotgate_client::Client) -> slotgate_client::Result<()> {
/// use slotgate_client::Cmd;
/// let reply = client.cmd(Cmd::new("HSET").arg("h").arg("field").arg("v")).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Cmd {
    /// The encoded arguments, except the payloads of shared ones.
    body: BytesMut,
    spans: SmallVec<[Span; 4]>,
    /// Shared payloads and the body offset they belong at.
    shared: Vec<(usize, Bytes)>,
}

/// Where argument i's payload is.
#[derive(Debug, Clone, Copy)]
enum Span {
    Inline { start: usize, len: usize },
    Shared(usize),
}

impl Cmd {
    /// A command whose first argument is `name`.
    pub fn new(name: impl ToArg) -> Cmd {
        Cmd::default().arg(name)
    }

    /// Builds a command from a full argument list (`["GET", "k"]`).
    ///
    /// # Examples
    ///
    /// ```
    /// let cmd = slotgate_client::Cmd::from_args(["GET", "k"]);
    /// assert_eq!(cmd.argc(), 2);
    /// ```
    pub fn from_args<A: ToArg>(args: impl IntoIterator<Item = A>) -> Cmd {
        let mut cmd = Cmd::default();
        for a in args {
            cmd.push_arg(a);
        }
        cmd
    }

    /// Appends an argument (builder style).
    pub fn arg(mut self, a: impl ToArg) -> Cmd {
        self.push_arg(a);
        self
    }

    /// Appends an argument in place.
    pub fn push_arg(&mut self, a: impl ToArg) {
        if let Some(big) = a.shared().filter(|b| b.len() >= SEGMENT_MIN) {
            self.body
                .extend_from_slice(format!("${}\r\n", big.len()).as_bytes());
            self.shared.push((self.body.len(), big));
            self.spans.push(Span::Shared(self.shared.len() - 1));
            self.body.extend_from_slice(b"\r\n");
            return;
        }
        let bytes = a.to_arg();
        if self.body.capacity() == 0 {
            // Sized for a typical name plus a key or two, so a short command
            // takes one allocation instead of growing once per argument.
            self.body.reserve(FIRST_ALLOC + bytes.len());
        }
        resp::write_bulk(&mut self.body, &bytes);
        // The payload sits just before the trailing CRLF.
        let len = bytes.len();
        let start = self.body.len() - 2 - len;
        self.spans.push(Span::Inline { start, len });
    }

    /// Number of arguments, command name included.
    pub fn argc(&self) -> usize {
        self.spans.len()
    }

    /// Argument `i` (0 is the command name).
    pub fn arg_at(&self, i: usize) -> Option<&[u8]> {
        match *self.spans.get(i)? {
            Span::Inline { start, len } => self.body.get(start..start + len),
            Span::Shared(j) => self.shared.get(j).map(|(_, b)| &b[..]),
        }
    }

    pub(crate) fn freeze(self) -> Frozen {
        let route = Route::of(&self);
        Frozen {
            body: self.body.freeze(),
            shared: self.shared,
            argc: self.spans.len(),
            route,
        }
    }
}

/// Where a command goes and whether resending it is harmless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Route {
    /// Slot of the first key; `None` for keyless commands (any node).
    pub slot: Option<u16>,
    /// Read-only per the command table: safe to resend after a lost connection.
    pub idempotent: bool,
    /// Whether the command needs a connection of its own.
    pub kind: Kind,
}

/// Commands that cannot share the multiplexed connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Ordinary request/reply: the shared connection.
    Plain,
    /// May block for up to `Wait`: a dedicated connection.
    Blocking(Wait),
    /// Turns the connection into a push stream (SUBSCRIBE, MONITOR): only
    /// through `Client::subscribe` and friends.
    Stream,
}

/// How long a blocking command may legitimately block, by its own argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Timeout argument 0: blocks until served.
    Forever,
    For(std::time::Duration),
    /// No timeout argument found (or unparsable).
    Unknown,
}

impl Route {
    fn of(cmd: &Cmd) -> Route {
        let argc = cmd.argc();
        let arg = |i: usize| cmd.arg_at(i).unwrap_or_default();
        let Some(spec) = cmd.arg_at(0).and_then(cluster::lookup) else {
            return Route {
                slot: None,
                idempotent: false,
                kind: Kind::Plain,
            };
        };
        let spec = spec.resolve(argc, arg);
        let kind = crate::blockcmd::kind_of(spec, argc, arg);
        let slot = spec
            .key_positions(argc, arg)
            .ok()
            .and_then(|keys| keys.first())
            .map(|i| cluster::key_slot(arg(i)))
            .or_else(|| channel_slot(spec, argc, arg));
        Route {
            slot,
            idempotent: spec.has(cluster::flags::READONLY),
            kind,
        }
    }
}

/// PUBLISH has no key, but a cluster delivers a message published on one
/// node to other nodes' subscribers over the bus: publishing on a random
/// node each time could reorder one channel's messages. Routing by the
/// channel's slot keeps them on one node, hence in order.
fn channel_slot<'a>(
    spec: &cluster::CommandSpec,
    argc: usize,
    arg: impl Fn(usize) -> &'a [u8],
) -> Option<u16> {
    (spec.name == "publish" && argc > 1).then(|| cluster::key_slot(arg(1)))
}

/// An immutable, encoded command (arguments only; the header is added per batch).
#[derive(Debug, Clone)]
pub(crate) struct Frozen {
    body: Bytes,
    shared: Vec<(usize, Bytes)>,
    argc: usize,
    pub route: Route,
}

impl Frozen {
    /// A command without even a name: Redis would never answer it.
    pub fn is_empty(&self) -> bool {
        self.argc == 0
    }
}

/// One write's worth of commands for one node: segments in order, plus how many
/// replies they will produce.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub segments: Vec<Bytes>,
    pub replies: usize,
    small: BytesMut,
}

impl Batch {
    /// Appends `cmd`, preceded by `ASKING` when it follows an ASK redirect
    /// (ASKING is one-shot, so every redirected command gets its own).
    pub fn push(&mut self, cmd: &Frozen, asking: bool) {
        if asking {
            resp::encode_command(&mut self.small, &[b"ASKING"]);
            self.replies += 1;
        }
        resp::write_array_header(&mut self.small, cmd.argc);
        let mut at = 0;
        for (offset, payload) in &cmd.shared {
            self.piece(cmd.body.slice(at..*offset));
            self.segment(payload.clone());
            at = *offset;
        }
        self.piece(cmd.body.slice(at..));
        self.replies += 1;
    }

    /// Small pieces are copied into the contiguous buffer, big ones shared.
    fn piece(&mut self, piece: Bytes) {
        if piece.len() >= SEGMENT_MIN {
            self.segment(piece);
        } else {
            self.small.extend_from_slice(&piece);
        }
    }

    fn segment(&mut self, seg: Bytes) {
        if !self.small.is_empty() {
            self.segments.push(self.small.split().freeze());
        }
        self.segments.push(seg);
    }

    /// The segments to write, in order.
    pub fn finish(mut self) -> (Vec<Bytes>, usize) {
        if !self.small.is_empty() {
            self.segments.push(self.small.split().freeze());
        }
        (self.segments, self.replies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(segments: &[Bytes]) -> Vec<u8> {
        segments.iter().flat_map(|s| s.iter().copied()).collect()
    }

    #[test]
    fn batch_matches_resp_encoding_and_counts_asking() {
        let mut b = Batch::default();
        b.push(&Cmd::from_args(["GET", "k"]).freeze(), false);
        b.push(&Cmd::from_args(["SET", "k", "v"]).freeze(), true);
        let (segs, n) = b.finish();
        let mut want = BytesMut::new();
        resp::encode_command(&mut want, &[b"GET", b"k"]);
        resp::encode_command(&mut want, &[b"ASKING"]);
        resp::encode_command(&mut want, &[b"SET", b"k", b"v"]);
        assert_eq!(flat(&segs), want.to_vec());
        assert_eq!(n, 3);
    }

    #[test]
    fn big_bodies_are_shared_segments() {
        let big = vec![b'x'; SEGMENT_MIN];
        let mut b = Batch::default();
        b.push(
            &Cmd::new("SET").arg("k").arg(big.as_slice()).freeze(),
            false,
        );
        b.push(&Cmd::from_args(["GET", "k"]).freeze(), false);
        let shared = Bytes::from(big.clone());
        b.push(&Cmd::new("SET").arg("k").arg(&shared).freeze(), false);
        let (segs, n) = b.finish();
        assert_eq!((segs.len(), n), (5, 3));
        assert_eq!(
            segs[3].as_ptr(),
            shared.as_ptr(),
            "a shared payload is not copied"
        );
        let mut want = BytesMut::new();
        resp::encode_command(&mut want, &[b"SET", b"k", &big]);
        resp::encode_command(&mut want, &[b"GET", b"k"]);
        resp::encode_command(&mut want, &[b"SET", b"k", &big]);
        assert_eq!(flat(&segs), want.to_vec());
    }

    #[test]
    fn routes_by_first_key_and_flags_reads() {
        let get = Cmd::from_args(["get", "{a}x"]).freeze().route;
        assert_eq!(get.slot, Some(cluster::key_slot(b"a")));
        assert!(get.idempotent);
        let set = Cmd::from_args(["SET", "k", "v"]).freeze().route;
        assert!(!set.idempotent);
        assert_eq!(Cmd::from_args(["PING"]).freeze().route.slot, None);
        assert_eq!(Cmd::from_args(["NOSUCH", "k"]).freeze().route.slot, None);
        let publish = Cmd::from_args(["PUBLISH", "ch", "m"]).freeze().route;
        assert_eq!(publish.slot, Some(cluster::key_slot(b"ch")));
    }
}
