//! Property tests for the request parser: random valid pipelines parse to what
//! was sent, and no input (valid or not) gives a result that depends on how it
//! was split into reads, or makes the parser panic.

mod common;

use common::{feed, request_args, Outcome};
use proptest::prelude::*;
use resp::{Limits, Parsed};

/// One generated request and the arguments it should parse to.
#[derive(Debug, Clone)]
enum Gen {
    Multibulk(Vec<Vec<u8>>),
    /// Plain inline words (no quoting needed).
    Inline(Vec<Vec<u8>>),
    /// Inline with every argument double-quoted and escaped.
    Quoted(Vec<Vec<u8>>),
    Blank,
    ZeroCount,
}

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..12),
        1 => proptest::collection::vec(any::<u8>(), 100..3000),
    ]
}

fn word() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop::sample::select(b"abcXYZ019_-:.".to_vec()), 1..8)
        // Avoid the HTTP guard so the expectation stays a request.
        .prop_filter("not a probe", |w| !w.eq_ignore_ascii_case(b"post"))
}

fn gen() -> impl Strategy<Value = Gen> {
    prop_oneof![
        5 => proptest::collection::vec(arg(), 1..6).prop_map(Gen::Multibulk),
        2 => proptest::collection::vec(word(), 1..5).prop_map(Gen::Inline),
        2 => proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..10), 1..4)
            .prop_map(Gen::Quoted),
        1 => Just(Gen::Blank),
        1 => Just(Gen::ZeroCount),
    ]
}

/// Appends the wire form of `g`; returns the arguments it should yield.
fn encode(g: &Gen, out: &mut Vec<u8>) -> Option<Vec<Vec<u8>>> {
    match g {
        Gen::Multibulk(args) => {
            let mut buf = bytes::BytesMut::new();
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            resp::encode_command(&mut buf, &refs);
            out.extend_from_slice(&buf);
        }
        Gen::Inline(words) => {
            out.extend_from_slice(&words.join(&b' '));
            out.extend_from_slice(b"\r\n");
        }
        Gen::Quoted(args) => {
            for a in args {
                out.extend_from_slice(b" \"");
                for &b in a {
                    out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                }
                out.push(b'"');
            }
            out.push(b'\n');
            // Quoted args never look like POST/Host: (they are escaped bytes,
            // but the decoded value could be); keep the expectation honest.
            if args[0].eq_ignore_ascii_case(b"post") || args[0].eq_ignore_ascii_case(b"host:") {
                return None;
            }
        }
        Gen::Blank => out.extend_from_slice(b"  \t\r\n"),
        Gen::ZeroCount => out.extend_from_slice(b"*0\r\n"),
    }
    match g {
        Gen::Multibulk(a) | Gen::Inline(a) | Gen::Quoted(a) => Some(a.clone()),
        Gen::Blank | Gen::ZeroCount => None,
    }
}

/// Chunk sizes that cover `len` bytes, derived from random cut points.
fn chunks_from(cuts: &[usize], len: usize) -> Vec<usize> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (len + 1)).collect();
    points.sort_unstable();
    let mut prev = 0;
    points
        .iter()
        .map(|&p| std::mem::replace(&mut prev, p))
        .zip(points.iter())
        .map(|(a, b)| b - a)
        .collect()
}

fn garbage() -> impl Strategy<Value = Vec<u8>> {
    let alphabet = b"*$\r\n\r\n0123456789-+ abcPOST\"'\\x".to_vec();
    prop_oneof![
        proptest::collection::vec(prop::sample::select(alphabet), 0..64),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

/// Multibulk requests with their length lines bent at the edges the one-pass path
/// (`RequestParser::whole`) must hand to the general one: leading zeros, counts and
/// lengths off by one, at and past the limits, many arguments, a missing CR or LF.
fn near_valid() -> impl Strategy<Value = Vec<u8>> {
    /// How the one bent line (if any) is bent.
    fn bent(n: usize, how: u8) -> String {
        match how {
            0 => format!("0{n}"),
            1 => n.saturating_sub(1).to_string(),
            2 => (n + 1).to_string(),
            3 => "-1".to_string(),
            _ => "1234567890".to_string(),
        }
    }
    let arg = proptest::collection::vec(prop::sample::select(b"ab\r\n$*0".to_vec()), 0..20);
    let args = prop_oneof![
        4 => proptest::collection::vec(arg.clone(), 1..4),
        2 => proptest::collection::vec(arg.clone(), 9..13),
        1 => proptest::collection::vec(arg, 13..70),
    ];
    // At most one line bent (0 is the count line), so the rest of the request is valid and
    // the bent line decides; the count line's CRLF may lose a byte instead.
    let bend = proptest::option::of((any::<prop::sample::Index>(), 0u8..5));
    let end = prop_oneof![8 => Just("\r\n"), 1 => Just("\n"), 1 => Just("\r")];
    (args, bend, end).prop_map(|(args, bend, end)| {
        let bend = bend.map(|(at, how)| (at.index(args.len() + 1), how));
        let length = |line: usize, n: usize| match bend {
            Some((at, how)) if at == line => bent(n, how),
            _ => n.to_string(),
        };
        let mut out = format!("*{}{end}", length(0, args.len())).into_bytes();
        for (i, a) in args.iter().enumerate() {
            out.extend_from_slice(format!("${}\r\n", length(i + 1, a.len())).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    })
}

/// `input` parses the same whole (the one-pass path where it applies), in the pieces `cuts`
/// gives and byte by byte (the resumable path), under either limits and either auth state.
fn split_independent(
    input: &[u8],
    cuts: &[usize],
    unauth: bool,
    small: bool,
) -> Result<(), TestCaseError> {
    let limits = if small {
        small_limits()
    } else {
        Limits::default()
    };
    let whole = feed(limits, unauth, input, &[]);
    let split = feed(limits, unauth, input, &chunks_from(cuts, input.len()));
    prop_assert_eq!(&split, &whole);
    let bytewise = feed(limits, unauth, input, &vec![1; input.len()]);
    prop_assert_eq!(&bytewise, &whole);
    Ok(())
}

fn small_limits() -> Limits {
    Limits {
        max_bulk_len: 8,
        max_inline_len: 12,
        max_multibulk_len: 4,
    }
}

proptest! {
    #![proptest_config(common::proptest_config(128))]

    #[test]
    fn pipelines_parse_the_same_however_split(
        gens in proptest::collection::vec(gen(), 1..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut input = Vec::new();
        let expected: Vec<Vec<Vec<u8>>> = gens.iter().filter_map(|g| encode(g, &mut input)).collect();
        let whole = feed(Limits::default(), false, &input, &[]);
        prop_assert_eq!(whole.last(), Some(&Outcome::Incomplete(None)));
        let probes = whole.iter().filter(|o| matches!(o, Outcome::Done(Parsed::Close))).count();
        if probes == 0 {
            prop_assert_eq!(request_args(&whole), expected);
        }
        let split = feed(Limits::default(), false, &input, &chunks_from(&cuts, input.len()));
        prop_assert_eq!(&split, &whole);
        if input.len() < 4096 {
            let bytewise = feed(Limits::default(), false, &input, &vec![1; input.len()]);
            prop_assert_eq!(&bytewise, &whole);
        }
    }

    #[test]
    fn bent_length_lines_parse_the_same_however_split(
        input in near_valid(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        unauth in any::<bool>(),
        small in any::<bool>(),
    ) {
        split_independent(&input, &cuts, unauth, small)?;
    }

    #[test]
    fn garbage_never_panics_and_is_split_independent(
        input in garbage(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        unauth in any::<bool>(),
        small in any::<bool>(),
    ) {
        split_independent(&input, &cuts, unauth, small)?;
    }
}
