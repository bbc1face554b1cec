//! Shrinking a failing case: its size (a count, a length) is halved while the case still
//! fails, for a bounded number of runs, so the reproduction line names the smallest size seen
//! failing. Each run costs a live case (seconds), hence halving and a small bound rather than
//! a bisection to the exact threshold: flaky thresholds (a latency bound) do not deserve one.

/// The smallest size in `start, start/2, start/4, …` (not below `min`) for which `fails`
/// answered true, trying at most `tries` smaller sizes and stopping at the first that passed.
/// `fails` returns None when the run itself could not be made; shrinking stops there too.
pub fn shrink(
    start: u64,
    min: u64,
    tries: usize,
    mut fails: impl FnMut(u64) -> Option<bool>,
) -> u64 {
    let mut smallest = start;
    for _ in 0..tries {
        let next = smallest / 2;
        if next < min.max(1) {
            break;
        }
        match fails(next) {
            Some(true) => smallest = next,
            _ => break,
        }
    }
    smallest
}

#[cfg(test)]
mod tests {
    use super::shrink;

    #[test]
    fn halves_while_it_fails() {
        let mut tried = Vec::new();
        let got = shrink(1000, 1, 10, |n| {
            tried.push(n);
            Some(n >= 200)
        });
        assert_eq!(got, 250);
        assert_eq!(tried, vec![500, 250, 125]);
    }

    #[test]
    fn bounded_by_tries_and_min() {
        assert_eq!(shrink(1 << 20, 1, 3, |_| Some(true)), 1 << 17);
        assert_eq!(shrink(100, 40, 10, |_| Some(true)), 50);
        assert_eq!(shrink(100, 1, 10, |_| None), 100);
    }
}
