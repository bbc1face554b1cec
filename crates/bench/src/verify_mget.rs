//! `--verify` for MGET: each element of the reply array is nil or a value carrying its own
//! key's digits (values are written as tokens by `--prepopulate`), in the request's key order.
//! That is what proves a proxy that splits an MGET across slots reassembles it right.

use crate::workload::{KEY_DIGITS, TOKEN_LEN};

/// Some(ok) when `request` is an MGET; None for other commands (checked elsewhere).
pub fn mget_matches(request: &[u8], reply: &[u8]) -> Option<bool> {
    let rest = request.strip_prefix(b"*")?;
    let (argc, rest) = line(rest)?;
    let rest = rest.strip_prefix(b"$4\r\nMGET\r\n".as_slice())?;
    let keys = bulks(rest, argc.checked_sub(1)?)?;
    let (count, mut r) = match reply.strip_prefix(b"*").and_then(line) {
        Some(x) => x,
        None => return Some(false),
    };
    if count != keys.len() {
        return Some(false);
    }
    for key in keys {
        let digits = &key[key.len().saturating_sub(KEY_DIGITS)..];
        match element(r) {
            Some((None, next)) => r = next,
            Some((Some(v), next)) if v.len() >= TOKEN_LEN && &v[..KEY_DIGITS] == digits => r = next,
            _ => return Some(false),
        }
    }
    Some(r.is_empty())
}

/// A decimal up to CRLF, and what follows it.
fn line(b: &[u8]) -> Option<(usize, &[u8])> {
    let nl = b.windows(2).position(|w| w == b"\r\n")?;
    let n = std::str::from_utf8(&b[..nl]).ok()?.parse().ok()?;
    Some((n, &b[nl + 2..]))
}

/// `n` bulk strings' payloads.
fn bulks(mut b: &[u8], n: usize) -> Option<Vec<&[u8]>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let (Some(v), next) = element(b)? else {
            return None;
        };
        out.push(v);
        b = next;
    }
    Some(out)
}

/// One bulk string (None for nil) and what follows it.
fn element(b: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    let b = b.strip_prefix(b"$")?;
    if let Some(rest) = b.strip_prefix(b"-1\r\n") {
        return Some((None, rest));
    }
    let (len, rest) = line(b)?;
    let v = rest.get(..len)?;
    let next = rest.get(len..)?.strip_prefix(b"\r\n")?;
    Some((Some(v), next))
}

#[cfg(test)]
mod tests {
    use super::mget_matches;

    #[test]
    fn mget_elements_belong_to_their_keys() {
        let req = b"*3\r\n$4\r\nMGET\r\n$16\r\nkey:000000000001\r\n$16\r\nkey:000000000002\r\n";
        let v1 = "000000000001:000000000009xx";
        let ok = format!("*2\r\n${}\r\n{v1}\r\n$-1\r\n", v1.len());
        assert_eq!(mget_matches(req, ok.as_bytes()), Some(true));
        let swapped = format!("*2\r\n$-1\r\n${}\r\n{v1}\r\n", v1.len());
        assert_eq!(mget_matches(req, swapped.as_bytes()), Some(false));
        assert_eq!(mget_matches(req, b"*1\r\n$-1\r\n"), Some(false));
        assert_eq!(mget_matches(req, b"+OK\r\n"), Some(false));
        assert_eq!(
            mget_matches(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", b"$-1\r\n"),
            None
        );
    }
}
