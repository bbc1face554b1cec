//! Table-driven checks that the request parser accepts what redis-server 7.0
//! accepts (cases verified against a real server), with zero-copy framing.

mod common;

use bytes::BytesMut;
use common::{check, feed, request_args, small, Exp, Row, INC};
use resp::{Limits, Parsed, Progress, RequestParser};

#[test]
fn accepted_inputs() {
    let d = Limits::default();
    let rows: Vec<Row<Vec<Exp>>> = vec![
        ("empty buffer", d, false, b"", vec![INC]),
        ("empty inline", d, false, b"\r\n", vec![Exp::Noop, INC]),
        ("bare lf", d, false, b"\n", vec![Exp::Noop, INC]),
        ("blank inline", d, false, b"  \t \r\n", vec![Exp::Noop, INC]),
        ("*0", d, false, b"*0\r\n", vec![Exp::Noop, INC]),
        ("*-1", d, false, b"*-1\r\n", vec![Exp::Noop, INC]),
        ("*-10", d, false, b"*-10\r\n", vec![Exp::Noop, INC]),
        (
            "empty arg",
            d,
            false,
            b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n",
            vec![Exp::Req(&[b"GET", b""]), INC],
        ),
        (
            "one empty arg",
            d,
            false,
            b"*1\r\n$0\r\n\r\n",
            vec![Exp::Req(&[b""]), INC],
        ),
        (
            "inline crlf",
            d,
            false,
            b"PING\r\n",
            vec![Exp::Req(&[b"PING"]), INC],
        ),
        (
            "inline lf",
            d,
            false,
            b"PING\n",
            vec![Exp::Req(&[b"PING"]), INC],
        ),
        (
            "inline hex",
            d,
            false,
            b"ECHO \"a\\x41b\"\r\n",
            vec![Exp::Req(&[b"ECHO", b"aAb"]), INC],
        ),
        (
            "inline inner cr",
            d,
            false,
            b"A\rB\r\n",
            vec![Exp::Req(&[b"A", b"B"]), INC],
        ),
        (
            "bulk at limit",
            small(),
            false,
            b"*1\r\n$4\r\nabcd\r\n",
            vec![Exp::Req(&[b"abcd"]), INC],
        ),
        ("count at limit", small(), false, b"*5\r\n", vec![INC]),
        (
            "inline at limit",
            small(),
            false,
            b"0123456789abcdef\n",
            vec![Exp::Req(&[b"0123456789abcdef"]), INC],
        ),
        ("unauth 10 args", d, true, b"*10\r\n", vec![INC]),
        (
            "unauth 16384",
            d,
            true,
            b"*1\r\n$16384\r\n",
            vec![Exp::Inc(Some(12 + 16386))],
        ),
        ("unauth noop", d, true, b"*-5\r\n", vec![Exp::Noop, INC]),
        (
            "POST inline",
            d,
            false,
            b"POST / HTTP/1.1\r\n",
            vec![Exp::Close, INC],
        ),
        (
            "Host inline",
            d,
            false,
            b"host: example.com\r\n",
            vec![Exp::Close, INC],
        ),
        (
            "post multibulk",
            d,
            false,
            b"*1\r\n$4\r\npost\r\n",
            vec![Exp::Close, INC],
        ),
        (
            "Host multibulk",
            d,
            false,
            b"*2\r\n$5\r\nhOsT:\r\n$1\r\nx\r\n",
            vec![Exp::Close, INC],
        ),
        (
            "POSTX is a command",
            d,
            false,
            b"POSTX\r\n",
            vec![Exp::Req(&[b"POSTX"]), INC],
        ),
        ("partial count", d, false, b"*2\r", vec![INC]),
        ("partial bulk header", d, false, b"*2\r\n$3", vec![INC]),
        (
            "partial payload",
            d,
            false,
            b"*2\r\n$3\r\nGET\r\n$10\r\nab",
            vec![Exp::Inc(Some(30))],
        ),
        (
            "partial crlf",
            d,
            false,
            b"*1\r\n$1\r\nx\r",
            vec![Exp::Inc(Some(11))],
        ),
        ("partial inline", d, false, b"GET k", vec![INC]),
        (
            "pipeline",
            d,
            false,
            b"PING\r\n*1\r\n$4\r\nPING\r\n\r\n*0\r\nGET a\n",
            vec![
                Exp::Req(&[b"PING"]),
                Exp::Req(&[b"PING"]),
                Exp::Noop,
                Exp::Noop,
                Exp::Req(&[b"GET", b"a"]),
                INC,
            ],
        ),
    ];
    for (name, limits, unauth, input, want) in rows {
        check(name, limits, unauth, input, &want);
    }
}

#[test]
fn requests_are_zero_copy_and_exact() {
    let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n";
    let mut buf = BytesMut::from(&input[..]);
    let base = buf.as_ptr();
    let mut parser = RequestParser::new(Limits::default());
    let Ok(Progress::Done(Parsed::Request(req))) = parser.parse(&mut buf) else {
        panic!("expected a request");
    };
    assert_eq!(
        req.raw().as_ptr(),
        base,
        "raw must share the input allocation"
    );
    assert_eq!(&req.raw()[..], &input[..20]);
    assert_eq!(req.arg_bytes(1).as_ptr(), base.wrapping_add(17));
    assert!(!req.is_inline());
    assert_eq!(&buf[..], b"PING\r\n");
    let Ok(Progress::Done(Parsed::Request(req))) = parser.parse(&mut buf) else {
        panic!("expected an inline request");
    };
    assert!(req.is_inline());
    assert_eq!(&req.raw()[..], b"*1\r\n$4\r\nPING\r\n");
    assert!(buf.is_empty());
}

#[test]
fn slow_lines_and_payloads_resume() {
    // A 60 KB inline line and a 1 MB bulk fed in tiny pieces: quadratic
    // rescanning would make this test take minutes.
    let mut input = vec![b'a'; 60_000];
    input.extend_from_slice(b"\r\n*2\r\n$1\r\nx\r\n$1000000\r\n");
    input.extend(std::iter::repeat_n(b'y', 1_000_000));
    input.extend_from_slice(b"\r\n");
    let mut chunks = vec![3; 20_000];
    chunks.extend(std::iter::repeat_n(4096, 300));
    let out = feed(Limits::default(), false, &input, &chunks);
    let args = request_args(&out);
    assert_eq!(args.len(), 2);
    assert_eq!(args[0][0].len(), 60_000);
    assert_eq!(args[1][1].len(), 1_000_000);
}

/// A streaming caller sees the head of a request whose last payload is still arriving,
/// takes it, and the parser then reads the next request as if nothing were pending.
#[test]
fn pending_tail_describes_and_hands_over_a_big_last_argument() {
    let mut p = RequestParser::new(Limits::default());
    let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123"[..]);
    assert!(matches!(p.parse(&mut buf), Ok(Progress::Incomplete { .. })));
    assert!(p.pending_tail(&buf, 11).is_none(), "below the threshold");
    let tail = p.pending_tail(&buf, 10).expect("a pending last argument");
    assert_eq!(tail.payload_len, 10);
    let probe: Vec<&[u8]> = tail.probe.args().collect();
    assert_eq!(probe, vec![&b"SET"[..], b"k", b""]);
    let head = p.take_head(&mut buf, tail.head_len);
    assert_eq!(&head[..], b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n");
    assert_eq!(&buf[..], b"0123");
    buf.clear();
    buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
    assert!(matches!(
        p.parse(&mut buf),
        Ok(Progress::Done(Parsed::Request(_)))
    ));
}

#[test]
fn pending_tail_is_only_for_the_last_argument() {
    let mut p = RequestParser::new(Limits::default());
    let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$10\r\n0123"[..]);
    assert!(matches!(p.parse(&mut buf), Ok(Progress::Incomplete { .. })));
    assert!(p.pending_tail(&buf, 1).is_none());
}
