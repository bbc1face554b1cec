//! Bounded, resumable search for a line terminator.
//!
//! Both parsers must (a) resume a search where the previous call stopped, so a
//! slowly arriving line costs O(new bytes), and (b) decide "line too long" from
//! where the terminator is, never from how many bytes happen to be buffered,
//! so that the outcome cannot depend on how the input was split into reads.

/// Result of looking for a terminator within the allowed window.
pub(crate) enum Line {
    /// Index of the terminator.
    Found(usize),
    /// Not found yet; resume the search at this index.
    Pending(usize),
    /// The terminator is not within `max` bytes of the line start.
    TooLong,
}

/// Finds `term` in the line starting at `start`, scanning only from `scan`.
/// The terminator may sit at most `max` bytes after `start`.
pub(crate) fn find_term(buf: &[u8], start: usize, scan: usize, max: usize, term: u8) -> Line {
    let limit = start.saturating_add(max).saturating_add(1);
    let end = buf.len().min(limit);
    let from = scan.max(start);
    if let Some(window) = buf.get(from..end) {
        if let Some(off) = window.iter().position(|&b| b == term) {
            return Line::Found(from + off);
        }
    }
    if buf.len() >= limit {
        Line::TooLong
    } else {
        Line::Pending(end.max(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_is_decided_by_terminator_index() {
        // Terminator exactly `max` bytes after the start is accepted...
        assert!(matches!(
            find_term(b"abc\r", 0, 0, 3, b'\r'),
            Line::Found(3)
        ));
        // ...one further is too long, whether or not it is buffered.
        assert!(matches!(
            find_term(b"abcd\r", 0, 0, 3, b'\r'),
            Line::TooLong
        ));
        assert!(matches!(find_term(b"abcd", 0, 0, 3, b'\r'), Line::TooLong));
        assert!(matches!(
            find_term(b"abc", 0, 0, 3, b'\r'),
            Line::Pending(3)
        ));
        assert!(matches!(
            find_term(b"xxabc\r", 2, 4, 3, b'\r'),
            Line::Found(5)
        ));
        assert!(matches!(find_term(b"", 0, 7, 3, b'\r'), Line::Pending(7)));
    }
}
