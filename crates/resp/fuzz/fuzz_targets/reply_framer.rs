//! Fuzzes `ReplyFramer` and `decode`: neither may panic; the framer's answer
//! must equal decode's (same frame length, same error); a frame must fit in
//! the input; framing a stream must not depend on how it is split; and a
//! decoded value must survive encode -> decode unchanged.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use resp::{decode, FrameError, ReplyFramer, Value};

/// Frames `stream` fed in chunks of the given sizes (cycled).
fn frames(stream: &[u8], sizes: &[usize]) -> (Vec<usize>, Option<FrameError>) {
    let mut framer = ReplyFramer::new();
    let (mut start, mut avail, mut lens) = (0usize, 0usize, Vec::new());
    for &size in sizes.iter().cycle() {
        avail = avail.saturating_add(size.max(1)).min(stream.len());
        loop {
            match framer.next_frame(&stream[start..avail]) {
                Ok(Some(n)) => {
                    assert!(n > 0 && start + n <= avail, "frame outside the buffer");
                    lens.push(n);
                    start += n;
                }
                Ok(None) => break,
                Err(e) => return (lens, Some(e)),
            }
        }
        if avail == stream.len() {
            return (lens, None);
        }
    }
    (lens, None)
}

/// Values that legitimately change in an encode round trip: NaN is not equal
/// to itself, and `encode` turns a LF inside a simple string into a space
/// (the framer tolerates a bare LF there; an encoder must not emit one).
fn is_lossy(v: &Value) -> bool {
    let pair = |(k, v): &(Value, Value)| is_lossy(k) || is_lossy(v);
    match v {
        Value::Double(d) => d.is_nan(),
        Value::SimpleString(s) => s.contains(&b'\n'),
        Value::Array(items) | Value::Set(items) | Value::Push(items) => items.iter().any(is_lossy),
        Value::Map(pairs) => pairs.iter().any(pair),
        Value::Attribute { attrs, value } => is_lossy(value) || attrs.iter().any(pair),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let bytes = Bytes::copy_from_slice(data);
    let framed = ReplyFramer::new().next_frame(data);
    let decoded = decode(&bytes);
    let decoded_len = decoded.as_ref().map(|o| o.as_ref().map(|(_, n)| *n));
    assert_eq!(
        framed,
        decoded_len.map_err(Clone::clone),
        "framer and decode disagree"
    );
    if let Ok(Some((value, n))) = decoded {
        assert!(n <= data.len());
        if !is_lossy(&value) {
            let mut out = BytesMut::new();
            value.encode(&mut out);
            let wire = out.freeze();
            assert_eq!(
                decode(&wire),
                Ok(Some((value, wire.len()))),
                "encode round trip"
            );
        }
    }
    let whole = frames(data, &[usize::MAX]);
    let split = 1 + data.first().copied().unwrap_or(0) as usize % 5;
    assert_eq!(
        frames(data, &[split, 1, 2]),
        whole,
        "split changed the framing"
    );
    assert_eq!(
        frames(data, &[1]),
        whole,
        "byte-wise feed changed the framing"
    );
});
