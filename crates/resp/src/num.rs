//! Number parsing and formatting shared by both directions.
//!
//! Requests must parse lengths exactly like Redis's `string2ll` (no sign `+`,
//! no leading zeros, no `-0`) or the proxy would accept lines Redis rejects.
//! Replies come from a trusted server, so their integers are parsed leniently.
//! Formatting avoids `format!` so writers never allocate a temporary `String`.

use bytes::{BufMut, BytesMut};

/// Redis's `string2ll`: optional `-`, then `0` alone or a non-zero digit
/// followed by digits; at most 20 bytes; must fit in an `i64`.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    // LONG_STR_SIZE is 21: Redis rejects 21+ bytes before looking at them.
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        // i64::MIN's magnitude is one more than i64::MAX.
        0i64.checked_sub_unsigned(v)
    } else {
        i64::try_from(v).ok()
    }
}

/// Lenient integer for reply lines: optional sign, at least one digit, fits `i64`: what
/// `str::parse::<i64>` accepts, read off the bytes (every reply's length passes here; the
/// UTF-8 check and parse cost a GET's reply ~50 instructions).
pub(crate) fn parse_reply_int(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        let d = d.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    if negative {
        0i64.checked_sub_unsigned(v)
    } else {
        i64::try_from(v).ok()
    }
}

/// Appends the decimal form of `n`.
pub(crate) fn put_u64(out: &mut BytesMut, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&buf[i..]);
}

/// Appends the decimal form of `n`, with a leading `-` when negative.
pub(crate) fn put_i64(out: &mut BytesMut, n: i64) {
    if n < 0 {
        out.put_u8(b'-');
    }
    put_u64(out, n.unsigned_abs());
}

/// Number of bytes `put_u64(n)` writes, for exact reservations.
pub(crate) fn decimal_len(n: u64) -> usize {
    let mut len = 1;
    let mut rest = n / 10;
    while rest > 0 {
        len += 1;
        rest /= 10;
    }
    len
}

/// Appends a double the way a reader can parse back exactly: shortest
/// round-trip digits, `inf`/`-inf`/`nan` for non-finite values (Redis's spelling).
pub(crate) fn put_f64(out: &mut BytesMut, d: f64) {
    if d.is_nan() {
        out.put_slice(b"nan");
    } else if d.is_infinite() {
        out.put_slice(if d > 0.0 { b"inf" } else { b"-inf" });
    } else if d == 0.0 || (1e-5..1e16).contains(&d.abs()) {
        // Plain notation: `1` rather than Debug's `1.0`, like Redis's %.17g.
        out.put_slice(d.to_string().as_bytes());
    } else {
        // Debug switches to exponent form (`1e300`), avoiding 300-digit output.
        out.put_slice(format!("{d:?}").as_bytes());
    }
}

/// Parses a RESP3 double line (`1.5`, `-2`, `1e10`, `inf`, `-inf`, `nan`).
pub(crate) fn parse_double(s: &[u8]) -> Option<f64> {
    std::str::from_utf8(s).ok()?.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reply_int_accepts_what_str_parse_accepts() {
        let cases: &[&[u8]] = &[
            b"0",
            b"3",
            b"-1",
            b"+7",
            b"007",
            b"-0",
            b"",
            b"-",
            b"+",
            b"1a",
            b" 1",
            b"1 ",
            b"9223372036854775807",
            b"9223372036854775808",
            b"-9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999999",
            b"--1",
            b"+-1",
            b"\xff",
        ];
        for case in cases {
            let expected = std::str::from_utf8(case)
                .ok()
                .and_then(|t| t.parse::<i64>().ok());
            assert_eq!(
                parse_reply_int(case),
                expected,
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
    }

    #[test]
    fn string2ll_matches_redis_rules() {
        let cases: &[(&[u8], Option<i64>)] = &[
            (b"0", Some(0)),
            (b"1", Some(1)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"", None),
            (b"-", None),
            (b"-0", None),
            (b"+1", None),
            (b"01", None),
            (b"1a", None),
            (b" 1", None),
            (b"000000000000000000001", None),
        ];
        for (input, want) in cases {
            assert_eq!(string2ll(input), *want, "input {:?}", input);
        }
    }

    #[test]
    fn decimal_helpers_agree() {
        for n in [0u64, 9, 10, 99, 100, 12345, u64::MAX] {
            let mut out = BytesMut::new();
            put_u64(&mut out, n);
            assert_eq!(&out[..], n.to_string().as_bytes());
            assert_eq!(decimal_len(n), out.len());
        }
        let mut out = BytesMut::new();
        put_i64(&mut out, i64::MIN);
        assert_eq!(&out[..], i64::MIN.to_string().as_bytes());
    }

    #[test]
    fn doubles_round_trip() {
        for d in [
            0.0,
            -0.0,
            1.0,
            1.5,
            -2.25,
            1e300,
            1e-300,
            123.456,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            let mut out = BytesMut::new();
            put_f64(&mut out, d);
            assert_eq!(parse_double(&out), Some(d), "{d}");
        }
        for (text, want) in [("inf", f64::INFINITY), ("-inf", f64::NEG_INFINITY)] {
            assert_eq!(parse_double(text.as_bytes()), Some(want));
        }
        assert!(parse_double(b"nan").is_some_and(f64::is_nan));
        let mut out = BytesMut::new();
        put_f64(&mut out, 1.0);
        assert_eq!(&out[..], b"1");
    }
}
