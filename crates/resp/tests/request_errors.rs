//! Table-driven checks that the request parser rejects what redis-server 7.0
//! rejects with byte-identical error text (cases verified against a real
//! server), plus the documented stricter checks.

mod common;

use common::{check, small, Exp, Row, INV_BULK, INV_MB};
use resp::{Limits, ProtocolError as E};

#[test]
fn rejected_inputs_with_redis_text() {
    let d = Limits::default();
    let mut long_count = b"*".to_vec();
    long_count.extend(std::iter::repeat_n(b'1', 64 * 1024 + 1));
    let mut long_bulk = b"*1\r\n$".to_vec();
    long_bulk.extend(std::iter::repeat_n(b'1', 64 * 1024 + 1));
    let long_inline = vec![b'a'; 64 * 1024 + 1];
    let rows: Vec<Row<&str>> = vec![
        ("*3000000000", d, false, b"*3000000000\r\n", INV_MB),
        ("*abc", d, false, b"*abc\r\n", INV_MB),
        ("*", d, false, b"*\r\n", INV_MB),
        ("*+1", d, false, b"*+1\r\n", INV_MB),
        ("*01", d, false, b"*01\r\n", INV_MB),
        ("*-0", d, false, b"*-0\r\n", INV_MB),
        ("*1 space", d, false, b"*1 \r\n", INV_MB),
        ("count over limit", small(), false, b"*6\r\n", INV_MB),
        ("bare lf count", d, false, b"*1\n$4\r\nPING\r\n", INV_MB),
        (
            "expected $ fooz",
            d,
            false,
            b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n",
            "Protocol error: expected '$', got 'f'",
        ),
        (
            "expected $ foo",
            d,
            false,
            b"*1\r\nfoo\r\n",
            "Protocol error: expected '$', got 'f'",
        ),
        (
            "expected $ cr",
            d,
            false,
            b"*1\r\n\r\n",
            "Protocol error: expected '$', got ' '",
        ),
        (
            "expected $ star",
            d,
            false,
            b"*2\r\n$1\r\na\r\n*1\r\n",
            "Protocol error: expected '$', got '*'",
        ),
        ("$-10", d, false, b"*1\r\n$-10\r\n", INV_BULK),
        ("$-1", d, false, b"*1\r\n$-1\r\n", INV_BULK),
        ("$-0", d, false, b"*1\r\n$-0\r\n", INV_BULK),
        ("$2000000000", d, false, b"*1\r\n$2000000000\r\n", INV_BULK),
        ("$blabla", d, false, b"*1\r\n$blabla\r\n", INV_BULK),
        ("$", d, false, b"*1\r\n$\r\n", INV_BULK),
        ("$01", d, false, b"*1\r\n$01\r\nx\r\n", INV_BULK),
        ("bulk over limit", small(), false, b"*1\r\n$5\r\n", INV_BULK),
        (
            "PINGX",
            d,
            false,
            b"*1\r\n$4\r\nPINGX\r\n",
            "Protocol error: invalid CRLF in request",
        ),
        (
            "cr x after count",
            d,
            false,
            b"*1\rX$4\r\nPING\r\n",
            "Protocol error: invalid CRLF in request",
        ),
        (
            "cr x after bulk len",
            d,
            false,
            b"*1\r\n$4\rXPING\r\n",
            "Protocol error: invalid CRLF in request",
        ),
        (
            "too big mbulk",
            d,
            false,
            &long_count,
            "Protocol error: too big mbulk count string",
        ),
        (
            "too big mbulk small",
            small(),
            false,
            b"*12345678901234567",
            "Protocol error: too big mbulk count string",
        ),
        (
            "too big mbulk with cr",
            small(),
            false,
            b"*12345678901234567\r\n",
            "Protocol error: too big mbulk count string",
        ),
        (
            "too big bulk count",
            d,
            false,
            &long_bulk,
            "Protocol error: too big bulk count string",
        ),
        (
            "too big bulk count small",
            small(),
            false,
            b"*1\r\n$1234567890123456",
            "Protocol error: too big bulk count string",
        ),
        (
            "too big inline",
            d,
            false,
            &long_inline,
            "Protocol error: too big inline request",
        ),
        (
            "too big inline with lf",
            small(),
            false,
            b"0123456789abcdefg\n",
            "Protocol error: too big inline request",
        ),
        (
            "unbalanced after quote",
            d,
            false,
            b"ECHO \"a\"b\r\n",
            "Protocol error: unbalanced quotes in request",
        ),
        (
            "unterminated quote",
            d,
            false,
            b"ECHO \"abc\r\n",
            "Protocol error: unbalanced quotes in request",
        ),
        (
            "unterminated single",
            d,
            false,
            b"ECHO 'abc\n",
            "Protocol error: unbalanced quotes in request",
        ),
        (
            "trailing backslash in quote",
            d,
            false,
            b"ECHO \"\\\r\n",
            "Protocol error: unbalanced quotes in request",
        ),
        (
            "unauth count",
            d,
            true,
            b"*11\r\n",
            "Protocol error: unauthenticated multibulk length",
        ),
        (
            "unauth bulk",
            d,
            true,
            b"*1\r\n$16385\r\n",
            "Protocol error: unauthenticated bulk length",
        ),
        (
            "unauth still invalid first",
            d,
            true,
            b"*3000000000\r\n",
            INV_MB,
        ),
        (
            "unauth invalid bulk first",
            d,
            true,
            b"*1\r\n$2000000000\r\n",
            INV_BULK,
        ),
    ];
    for (name, limits, unauth, input, text) in rows {
        check(name, limits, unauth, input, &[Exp::Err(text)]);
    }
}

#[test]
fn error_replies_are_byte_exact() {
    assert_eq!(
        &E::InvalidMultibulkLength.to_resp()[..],
        b"-ERR Protocol error: invalid multibulk length\r\n"
    );
    assert_eq!(
        &E::ExpectedDollar(b'\r').to_resp()[..],
        b"-ERR Protocol error: expected '$', got ' '\r\n"
    );
    assert_eq!(
        &E::ExpectedDollar(0x81).to_resp()[..],
        b"-ERR Protocol error: expected '$', got '\x81'\r\n"
    );
    assert_eq!(
        E::ExpectedDollar(0x81).to_string(),
        "Protocol error: expected '$', got '\\x81'"
    );
    assert_eq!(
        &E::MissingCrlfAfterBulk.to_resp()[..],
        b"-ERR Protocol error: invalid CRLF in request\r\n"
    );
}
