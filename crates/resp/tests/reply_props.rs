//! Property tests for replies: values survive encode → decode in RESP3 and as
//! their RESP2 downgrade, the framer's lengths match the encoder and `decode`,
//! framing does not depend on how the stream is split, and no bytes panic.

mod common;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use resp::{decode, FrameError, ReplyFramer, Value};

fn bytes_any(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

/// Text a simple string can carry (no CR/LF).
fn line_text() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(
        any::<u8>().prop_filter("no crlf", |b| *b != b'\r' && *b != b'\n'),
        0..16,
    )
    .prop_map(Bytes::from)
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        line_text().prop_map(Value::SimpleString),
        bytes_any(16).prop_map(Value::Error),
        any::<i64>().prop_map(Value::Integer),
        bytes_any(40).prop_map(Value::BulkString),
        Just(Value::Null),
        Just(Value::NullArray),
        any::<f64>()
            .prop_filter("NaN != NaN", |d| !d.is_nan())
            .prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        "-?[1-9][0-9]{0,40}".prop_map(|s| Value::BigNumber(Bytes::from(s))),
        ("[a-z]{3}", bytes_any(20)).prop_map(|(f, t)| Value::Verbatim {
            format: Bytes::from(f),
            text: t
        }),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        let pairs = proptest::collection::vec((inner.clone(), inner.clone()), 0..4);
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Set),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Push),
            pairs.clone().prop_map(Value::Map),
            (pairs, inner).prop_map(|(attrs, v)| Value::Attribute {
                attrs,
                value: Box::new(v)
            }),
        ]
    })
}

fn sanitized(b: &Bytes) -> Bytes {
    b.iter()
        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect::<Vec<u8>>()
        .into()
}

/// Whether `got` (decoded from `encode_resp2(orig)`) is `orig`'s RESP2 downgrade.
fn is_downgrade(got: &Value, orig: &Value) -> bool {
    let all = |g: &[Value], o: &[Value]| {
        g.len() == o.len() && g.iter().zip(o).all(|(g, o)| is_downgrade(g, o))
    };
    match (got, orig) {
        (_, Value::Attribute { value, .. }) => is_downgrade(got, value),
        (Value::Error(g), Value::Error(o)) => *g == sanitized(o),
        (Value::Null, Value::Null) | (Value::NullArray, Value::NullArray) => true,
        (Value::Array(g), Value::Array(o) | Value::Set(o) | Value::Push(o)) => all(g, o),
        (Value::Array(g), Value::Map(o)) => {
            let flat: Vec<Value> = o.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect();
            all(g, &flat)
        }
        (Value::BulkString(g), Value::Double(d)) => {
            std::str::from_utf8(g)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                == Some(*d)
        }
        (Value::Integer(g), Value::Boolean(b)) => *g == i64::from(*b),
        (Value::BulkString(g), Value::BigNumber(o) | Value::Verbatim { text: o, .. }) => g == o,
        (g, o) => g == o,
    }
}

fn encoded(v: &Value, resp2: bool) -> Bytes {
    let mut out = BytesMut::new();
    if resp2 {
        v.encode_resp2(&mut out);
    } else {
        v.encode(&mut out);
    }
    out.freeze()
}

/// Frames `stream` fed in the given chunk sizes; returns each frame length and
/// the final error, if any.
fn frame_stream(stream: &[u8], chunks: &[usize]) -> (Vec<usize>, Option<FrameError>) {
    let mut framer = ReplyFramer::new();
    let (mut start, mut avail, mut lens) = (0usize, 0usize, Vec::new());
    for size in chunks.iter().copied().chain(std::iter::once(usize::MAX)) {
        avail = avail.saturating_add(size).min(stream.len());
        loop {
            match framer.next_frame(&stream[start..avail]) {
                Ok(Some(n)) => {
                    assert!(n > 0 && start + n <= avail, "frame within buffer");
                    lens.push(n);
                    start += n;
                }
                Ok(None) => break,
                Err(e) => return (lens, Some(e)),
            }
        }
        if avail == stream.len() {
            break;
        }
    }
    (lens, None)
}

fn garbage() -> impl Strategy<Value = Vec<u8>> {
    let alphabet = b"*$%~>|!=:#_,(+-\r\n\r\n0123456789-?tf.:".to_vec();
    prop_oneof![
        proptest::collection::vec(prop::sample::select(alphabet), 0..64),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

proptest! {
    #![proptest_config(common::proptest_config(256))]

    #[test]
    fn resp3_round_trip_and_framer_length(v in value(), tail in bytes_any(8)) {
        let wire = encoded(&v, false);
        let mut with_tail = BytesMut::from(&wire[..]);
        with_tail.extend_from_slice(&tail);
        let with_tail = with_tail.freeze();
        let decoded = decode(&with_tail);
        prop_assert_eq!(decoded, Ok(Some((v, wire.len()))));
        prop_assert_eq!(ReplyFramer::new().next_frame(&with_tail), Ok(Some(wire.len())));
        // Every strict prefix is incomplete, never an error.
        for cut in 0..wire.len() {
            prop_assert_eq!(ReplyFramer::new().next_frame(&wire[..cut]), Ok(None));
        }
    }

    #[test]
    fn resp2_downgrade_round_trip(v in value()) {
        let wire = encoded(&v, true);
        let decoded = decode(&wire);
        let Ok(Some((got, len))) = decoded else {
            return Err(TestCaseError::fail(format!("decode failed: {decoded:?}")));
        };
        prop_assert_eq!(len, wire.len());
        prop_assert!(is_downgrade(&got, &v), "{:?} is not the RESP2 form of {:?}", got, v);
        prop_assert!(is_resp2_only(&got), "RESP3 type in RESP2 output: {:?}", got);
    }

    #[test]
    fn framing_is_split_independent(
        vals in proptest::collection::vec(value(), 1..6),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let parts: Vec<Bytes> = vals.iter().map(|v| encoded(v, false)).collect();
        let stream: Vec<u8> = parts.concat();
        let want: Vec<usize> = parts.iter().map(Bytes::len).collect();
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        points.sort_unstable();
        let chunks: Vec<usize> = points.windows(2).map(|w| w[1] - w[0]).chain(points.first().copied()).collect();
        prop_assert_eq!(frame_stream(&stream, &chunks), (want.clone(), None));
        prop_assert_eq!(frame_stream(&stream, &vec![1; stream.len()]), (want, None));
    }

    #[test]
    fn garbage_never_panics_and_agrees_with_decode(
        input in garbage(),
        cuts in proptest::collection::vec(1usize..8, 0..16),
    ) {
        let bytes = Bytes::from(input.clone());
        let framed = ReplyFramer::new().next_frame(&input);
        let decoded = decode(&bytes).map(|o| o.map(|(_, n)| n));
        prop_assert_eq!(&framed, &decoded);
        let whole = frame_stream(&input, &[]);
        prop_assert_eq!(frame_stream(&input, &cuts), whole.clone());
        prop_assert_eq!(frame_stream(&input, &vec![1; input.len()]), whole);
    }
}

/// Whether `v` uses only RESP2 types.
fn is_resp2_only(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().all(is_resp2_only),
        Value::SimpleString(_)
        | Value::Error(_)
        | Value::Integer(_)
        | Value::BulkString(_)
        | Value::Null
        | Value::NullArray => true,
        _ => false,
    }
}
