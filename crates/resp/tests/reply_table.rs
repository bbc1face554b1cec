//! Table-driven checks for reply framing, decoding and encoding.

use bytes::{Bytes, BytesMut};
use resp::{decode, is_error_frame, FrameError as F, ReplyFramer, Value};

type Framed = Result<Option<usize>, F>;

fn frame(input: &[u8]) -> Framed {
    ReplyFramer::new().next_frame(input)
}

#[test]
fn framer_table() {
    let rows: &[(&[u8], Framed)] = &[
        (b"", Ok(None)),
        (b"+OK\r\n+next", Ok(Some(5))),
        (b"+OK\r", Ok(None)),
        // Tolerated although Redis never sends it; `encode` would sanitise it.
        (b"+a\nb\r\n", Ok(Some(6))),
        (b"-ERR x\r\n", Ok(Some(8))),
        (b":-5\r\n", Ok(Some(5))),
        (b"$-1\r\n", Ok(Some(5))),
        (b"$0\r\n\r\n", Ok(Some(6))),
        (b"$3\r\nfoo\r\n", Ok(Some(9))),
        (b"$3\r\nfo", Ok(None)),
        (b"*-1\r\n", Ok(Some(5))),
        (b"*0\r\n", Ok(Some(4))),
        (b"*2\r\n:1\r\n*1\r\n$1\r\nx\r\n", Ok(Some(19))),
        (b"*2\r\n:1\r\n", Ok(None)),
        (b"%1\r\n+k\r\n:1\r\n", Ok(Some(12))),
        (b"|1\r\n+a\r\n+b\r\n:7\r\n", Ok(Some(16))),
        (b"_\r\n", Ok(Some(3))),
        (b",1.5\r\n", Ok(Some(6))),
        (b"#t\r\n", Ok(Some(4))),
        (b"(123\r\n", Ok(Some(6))),
        (b"=7\r\ntxt:abc\r\n", Ok(Some(13))),
        (b"!3\r\nERR\r\n", Ok(Some(9))),
        (b">2\r\n+a\r\n+b\r\n", Ok(Some(12))),
        (b"~1\r\n+a\r\n", Ok(Some(8))),
        (b"?\r\n", Err(F::BadType(b'?'))),
        (b"\r\n", Err(F::BadType(b'\r'))),
        (b"$abc\r\n", Err(F::BadLength)),
        (b"$-2\r\n", Err(F::BadLength)),
        (b"$?\r\n", Err(F::BadLength)),
        (b"*?\r\n", Err(F::BadLength)),
        (b"%-1\r\n", Err(F::BadLength)),
        (b"$3\r\nfooX\r\n", Err(F::BadLine)),
        (b"+OK\rX", Err(F::BadLine)),
        (b":x\r\n", Err(F::BadScalar(b':'))),
        (b"#x\r\n", Err(F::BadScalar(b'#'))),
        (b"_x\r\n", Err(F::BadScalar(b'_'))),
        (b"=7\r\ntxtXabc\r\n", Err(F::BadScalar(b'='))),
        (b"=2\r\nab\r\n", Err(F::BadScalar(b'='))),
        (b"$111111111111111111111111111111111", Err(F::BadLength)),
        (
            b":111111111111111111111111111111111",
            Err(F::BadScalar(b':')),
        ),
    ];
    for (input, want) in rows {
        assert_eq!(
            &frame(input),
            want,
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn any_depth_is_framed_without_recursion() {
    // A Lua script returning a self-referencing table gets thousands of levels from Redis:
    // the framer frames them (and keeps one run for the whole chain); a `Value` tree stays
    // capped at 1024 levels, since dropping it recurses.
    let ok = [b"*1\r\n".repeat(1024), b":1\r\n".to_vec()].concat();
    assert_eq!(frame(&ok), Ok(Some(ok.len())));
    assert!(matches!(decode(&Bytes::from(ok)), Ok(Some(_))));
    let deep = [b"*1\r\n".repeat(1_000_000), b"-ERR end\r\n".to_vec()].concat();
    assert_eq!(frame(&deep), Ok(Some(deep.len())));
    assert_eq!(decode(&Bytes::from(deep)), Err(F::TooDeep));
    // Mixed counts at every level, fed one byte at a time.
    let mut mixed = Vec::new();
    for _ in 0..3000 {
        mixed.extend_from_slice(b"*2\r\n+a\r\n*3\r\n:1\r\n:2\r\n");
    }
    mixed.extend_from_slice(b"_\r\n");
    let mut framer = ReplyFramer::new();
    for end in 1..mixed.len() {
        assert_eq!(framer.next_frame(&mixed[..end]), Ok(None), "at {end}");
    }
    assert_eq!(framer.next_frame(&mixed), Ok(Some(mixed.len())));
    // Incomplete at any depth is pending, not an error.
    assert_eq!(frame(&b"*1\r\n".repeat(5000)), Ok(None));
    // A huge declared count allocates nothing.
    assert_eq!(frame(b"*9223372036854775807\r\n:1\r\n"), Ok(None));
}

#[test]
fn hint_reports_pending_bulk() {
    let mut framer = ReplyFramer::new();
    assert_eq!(framer.next_frame(b"$1000\r\nab"), Ok(None));
    assert_eq!(framer.hint(), Some(1009));
    let mut full = b"$1000\r\n".to_vec();
    full.extend(std::iter::repeat_n(b'z', 1000));
    full.extend_from_slice(b"\r\n");
    assert_eq!(framer.next_frame(&full), Ok(Some(1009)));
    assert_eq!(framer.hint(), None);
    assert_eq!(
        ReplyFramer::with_max_bulk_len(10).next_frame(b"$11\r\n"),
        Err(F::BadLength)
    );
}

#[test]
fn big_arrays_resume_incrementally() {
    // 200k small elements fed in 1 KB reads: rescanning from the start on
    // every read would be quadratic and take minutes.
    let n = 200_000;
    let mut wire = format!("*{n}\r\n").into_bytes();
    for _ in 0..n {
        wire.extend_from_slice(b":12345\r\n");
    }
    let mut framer = ReplyFramer::new();
    let mut result = Ok(None);
    for end in (1024..wire.len()).step_by(1024).chain([wire.len()]) {
        result = framer.next_frame(&wire[..end]);
    }
    assert_eq!(result, Ok(Some(wire.len())));
}

#[test]
fn error_frames() {
    assert!(is_error_frame(b"-ERR x\r\n"));
    assert!(is_error_frame(b"!3\r\nERR\r\n"));
    assert!(!is_error_frame(b"+OK\r\n"));
    assert!(!is_error_frame(b""));
}

#[test]
fn decode_reads_cluster_slots_and_resp3() {
    let wire = Bytes::from_static(
        b"*1\r\n*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\nrest",
    );
    let Ok(Some((v, used))) = decode(&wire) else {
        panic!("decode failed")
    };
    assert_eq!(used, wire.len() - 4);
    let slots = v.as_array().unwrap_or_default();
    let range = slots[0].as_array().unwrap_or_default();
    assert_eq!(range[1].as_int(), Some(5460));
    assert_eq!(
        range[2].as_array().unwrap_or_default()[0].as_bytes(),
        Some(&b"127.0.0.1"[..])
    );
    // Payloads are slices of the input, not copies.
    let Value::BulkString(host) = &range[2].as_array().unwrap_or_default()[0] else {
        panic!()
    };
    assert!(wire.as_ptr_range().contains(&host.as_ptr()));

    let wire = Bytes::from_static(b"|1\r\n+ttl\r\n:3\r\n%1\r\n+k\r\n=7\r\ntxt:abc\r\n");
    let want = Value::Attribute {
        attrs: vec![(Value::SimpleString("ttl".into()), Value::Integer(3))],
        value: Box::new(Value::Map(vec![(
            Value::SimpleString("k".into()),
            Value::Verbatim {
                format: "txt".into(),
                text: "abc".into(),
            },
        )])),
    };
    assert_eq!(decode(&wire), Ok(Some((want, wire.len()))));
    assert_eq!(decode(&Bytes::from_static(b"*2\r\n:1\r\n")), Ok(None));
    assert_eq!(
        decode(&Bytes::from_static(b"_\r\n")),
        Ok(Some((Value::Null, 3)))
    );
    assert_eq!(
        decode(&Bytes::from_static(b"!2\r\nE\n\r\n")),
        Ok(Some((Value::Error("E\n".into()), 8)))
    );
}

#[test]
fn encode_table() {
    let map = Value::Map(vec![(Value::BulkString("a".into()), Value::Double(1.5))]);
    let rows: Vec<(Value, &[u8], &[u8])> = vec![
        (Value::Null, b"_\r\n", b"$-1\r\n"),
        (Value::NullArray, b"*-1\r\n", b"*-1\r\n"),
        (Value::Boolean(true), b"#t\r\n", b":1\r\n"),
        (Value::Double(2.0), b",2\r\n", b"$1\r\n2\r\n"),
        (
            Value::Double(f64::NEG_INFINITY),
            b",-inf\r\n",
            b"$4\r\n-inf\r\n",
        ),
        (
            map,
            b"%1\r\n$1\r\na\r\n,1.5\r\n",
            b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n",
        ),
        (
            Value::Set(vec![Value::Integer(1)]),
            b"~1\r\n:1\r\n",
            b"*1\r\n:1\r\n",
        ),
        (Value::Push(vec![]), b">0\r\n", b"*0\r\n"),
        (
            Value::BigNumber("-12".into()),
            b"(-12\r\n",
            b"$3\r\n-12\r\n",
        ),
        (
            Value::Verbatim {
                format: "txt".into(),
                text: "hi".into(),
            },
            b"=6\r\ntxt:hi\r\n",
            b"$2\r\nhi\r\n",
        ),
        (
            Value::Verbatim {
                format: "toolong".into(),
                text: "".into(),
            },
            b"=4\r\ntxt:\r\n",
            b"$0\r\n\r\n",
        ),
        (
            Value::Error("ERR a\r\nb".into()),
            b"!8\r\nERR a\r\nb\r\n",
            b"-ERR a  b\r\n",
        ),
        (Value::SimpleString("a\nb".into()), b"+a b\r\n", b"+a b\r\n"),
        (
            Value::Attribute {
                attrs: vec![(Value::Integer(1), Value::Integer(2))],
                value: Box::new(Value::Integer(3)),
            },
            b"|1\r\n:1\r\n:2\r\n:3\r\n",
            b":3\r\n",
        ),
    ];
    for (value, resp3, resp2) in rows {
        let mut out = BytesMut::new();
        value.encode(&mut out);
        assert_eq!(&out[..], resp3, "RESP3 of {value:?}");
        out.clear();
        value.encode_resp2(&mut out);
        assert_eq!(&out[..], resp2, "RESP2 of {value:?}");
    }
}

#[test]
fn random_nestings_frame_as_decode_reads_them() {
    // Aggregates of 1-3 children, nested at random, some levels in runs of equal counts:
    // the run-length stack must agree with `decode`'s plain one on every frame's length.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _ in 0..500 {
        let mut out = Vec::new();
        // (children still to write) per open aggregate
        let mut open: Vec<u64> = Vec::new();
        let mut written = 0;
        loop {
            let deep_enough = open.len() > 40 || written > 400;
            if !deep_enough && next(3) > 0 {
                let n = 1 + next(3);
                out.extend_from_slice(format!("*{n}\r\n").as_bytes());
                open.push(n);
                continue;
            }
            out.extend_from_slice(b":7\r\n");
            written += 1;
            while let Some(top) = open.last_mut() {
                *top -= 1;
                if *top > 0 {
                    break;
                }
                open.pop();
            }
            if open.is_empty() {
                break;
            }
        }
        out.extend_from_slice(b"+next\r\n");
        let whole = Bytes::from(out.clone());
        let (_, len) = decode(&whole).unwrap().unwrap();
        assert_eq!(frame(&out), Ok(Some(len)));
        assert_eq!(len, out.len() - b"+next\r\n".len());
    }
}
