//! Shared helpers for the request-parser integration tests: a driver that
//! feeds input to a [`RequestParser`] and records every outcome, so tables and
//! properties can compare whole sequences.
//!
//! Each test crate uses a different subset of the helpers.
#![allow(dead_code)]

use bytes::BytesMut;
use resp::{Limits, Parsed, Progress, ProtocolError, RequestParser};

/// One observable result of a `parse` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done(Parsed),
    Incomplete(Option<usize>),
    Err(ProtocolError),
}

/// Parses until the parser needs more input or fails; appends what it saw.
/// Returns false once an error ended the stream.
pub fn drain(parser: &mut RequestParser, buf: &mut BytesMut, out: &mut Vec<Outcome>) -> bool {
    loop {
        let before = buf.len();
        match parser.parse(buf) {
            Ok(Progress::Done(p)) => {
                assert!(buf.len() < before, "Done must consume bytes");
                out.push(Outcome::Done(p));
            }
            Ok(Progress::Incomplete { frame_len_hint }) => {
                assert_eq!(buf.len(), before, "Incomplete must not consume");
                out.push(Outcome::Incomplete(frame_len_hint));
                return true;
            }
            Err(e) => {
                assert_eq!(buf.len(), before, "errors must not consume");
                out.push(Outcome::Err(e));
                return false;
            }
        }
    }
}

/// Feeds `input` in the given chunk sizes (the rest in one chunk); returns
/// every Done, then the final Incomplete or Err.
pub fn feed(limits: Limits, unauth: bool, input: &[u8], chunks: &[usize]) -> Vec<Outcome> {
    let mut parser = RequestParser::new(limits);
    parser.set_unauthenticated(unauth);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = input;
    let sizes = chunks.iter().copied().chain(std::iter::once(usize::MAX));
    for size in sizes {
        let take = size.min(rest.len());
        buf.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if !drain(&mut parser, &mut buf, &mut out) || rest.is_empty() {
            break;
        }
    }
    // Keep only the final Incomplete: intermediate ones depend on the split.
    let last = out.pop();
    out.retain(|o| !matches!(o, Outcome::Incomplete(_)));
    out.extend(last);
    out
}

/// The arguments of every request in `outcomes`, for readable assertions.
pub fn request_args(outcomes: &[Outcome]) -> Vec<Vec<Vec<u8>>> {
    outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Done(Parsed::Request(r)) => Some(r.args().map(<[u8]>::to_vec).collect()),
            _ => None,
        })
        .collect()
}

/// Proptest settings: `cases` by default, overridable with RESP_PROPTEST_CASES
/// for long local runs; no failure-persistence files in the source tree.
pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("RESP_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..Default::default()
    }
}

/// What a row expects: the requests / noops / closes, then how it ends.
#[derive(Debug)]
pub enum Exp {
    Req(&'static [&'static [u8]]),
    Noop,
    Close,
    Inc(Option<usize>),
    Err(&'static str),
}

/// Tiny limits so boundary rows stay short.
pub fn small() -> Limits {
    Limits {
        max_bulk_len: 4,
        max_inline_len: 16,
        max_multibulk_len: 5,
    }
}

/// Feeds `input` at once and compares every outcome with `want`.
pub fn check(name: &str, limits: Limits, unauth: bool, input: &[u8], want: &[Exp]) {
    let got = feed(limits, unauth, input, &[]);
    assert_eq!(got.len(), want.len(), "{name}: got {got:?}");
    for (g, w) in got.iter().zip(want) {
        let ok = match (g, w) {
            (Outcome::Done(Parsed::Request(r)), Exp::Req(args)) => {
                r.args().eq(args.iter().copied())
            }
            (Outcome::Done(Parsed::Noop), Exp::Noop) => true,
            (Outcome::Done(Parsed::Close), Exp::Close) => true,
            (Outcome::Incomplete(h), Exp::Inc(w)) => h == w,
            (Outcome::Err(e), Exp::Err(text)) => e.to_string() == *text,
            _ => false,
        };
        assert!(ok, "{name}: got {g:?}, want {w:?}");
    }
}

pub const INV_MB: &str = "Protocol error: invalid multibulk length";
pub const INV_BULK: &str = "Protocol error: invalid bulk length";
pub const INC: Exp = Exp::Inc(None);

/// A table row: name, limits, unauthenticated?, input, expectation.
pub type Row<'a, W> = (&'a str, Limits, bool, &'a [u8], W);
