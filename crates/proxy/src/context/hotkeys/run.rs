//! HOTKEYS START/STOP/GET/RESET (Redis 8.6): the collection a client started, proxy-wide.
//! The board itself never stops while `[hotkeys]` is on; a run only frames what GET shows:
//! its start, its slots, its metrics and `COUNT`, and, once stopped, the keys as they were.
//!
//! START's arguments are checked in Redis 8.6's order with its error texts, so a client
//! written against Redis gets the same refusals; what the proxy cannot honour (a sample
//! ratio other than its own one in 16) is accepted and shown as it really is.

use super::Hot;

/// START's request, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Start {
    pub cpu: bool,
    pub net: bool,
    /// Keys GET lists per metric (`COUNT`, 1 to 64; 10 by default).
    pub count: usize,
    /// `DURATION` in milliseconds; 0: until STOP.
    pub duration_ms: u64,
    /// `SLOTS`, sorted; empty: every slot.
    pub slots: Vec<u16>,
}

/// A run: started at `started_unix_ms` (and `cpu_ms_at_start`, the proxy's user and system
/// CPU then); `stopped` holds the time it stopped and every key as it was then.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub start: Start,
    pub started_unix_ms: u64,
    pub cpu_ms_at_start: [u64; 2],
    pub sampled_ns_at_start: u64,
    pub stopped: Option<Stopped>,
}

/// What GET answers once a run stopped.
#[derive(Debug, Clone, Default)]
pub struct Stopped {
    pub unix_ms: u64,
    pub keys: Vec<Hot>,
    pub cpu_ms: [u64; 2],
    pub sampled_ns: u64,
}

impl Run {
    /// Whether the run still collects at `now_unix_ms` (not stopped, `DURATION` not over).
    pub fn active(&self, now_unix_ms: u64) -> bool {
        self.stopped.is_none() && !self.expired(now_unix_ms)
    }

    /// Its `DURATION` ran out (it still needs its `Stopped` taken).
    pub fn expired(&self, now_unix_ms: u64) -> bool {
        self.start.duration_ms > 0 && now_unix_ms >= self.started_unix_ms + self.start.duration_ms
    }
}

/// START's arguments after `HOTKEYS START`, in Redis 8.6's order of checks.
pub fn parse_start(args: &[&[u8]]) -> Result<Start, String> {
    let is = |a: &[u8], word: &str| a.eq_ignore_ascii_case(word.as_bytes());
    if args.len() < 2 || !is(args[0], "METRICS") {
        return Err("METRICS parameter is required".into());
    }
    let n_metrics = int_in(args[1], 1, 2).ok_or("METRICS count must be > 0 and <= 2")?;
    let mut start = Start {
        count: 10,
        ..Start::default()
    };
    let mut j = 2;
    let mut parsed = 0;
    while j < args.len() && parsed < n_metrics {
        if is(args[j], "CPU") {
            if start.cpu {
                return Err("METRICS CPU defined more than once!".into());
            }
            start.cpu = true;
        } else if is(args[j], "NET") {
            if start.net {
                return Err("METRICS NET defined more than once!".into());
            }
            start.net = true;
        }
        parsed += 1;
        j += 1;
    }
    if parsed != n_metrics {
        return Err("METRICS count does not match number of metric types provided".into());
    }
    if !start.cpu && !start.net {
        return Err("METRICS no valid metrics passed. Supported: CPU|NET".into());
    }
    let mut slots_given = false;
    while j < args.len() {
        let more = j + 1 < args.len();
        let word = args[j];
        if more && is(word, "COUNT") {
            start.count = int_in(args[j + 1], 1, 64).ok_or("COUNT must be between 1 and 64")?;
            j += 2;
        } else if more && is(word, "DURATION") {
            let s = int_in(args[j + 1], 1, 1_000_000)
                .ok_or("DURATION must be between 1 and 1000000")?;
            start.duration_ms = s as u64 * 1000;
            j += 2;
        } else if more && is(word, "SAMPLE") {
            int_in(args[j + 1], 1, i32::MAX as usize).ok_or("SAMPLE ratio must be positive")?;
            j += 2;
        } else if more && is(word, "SLOTS") {
            if slots_given {
                return Err("SLOTS parameter already specified".into());
            }
            slots_given = true;
            start.slots = parse_slots(&args[j + 1..])?;
            j += 2 + start.slots.len();
        } else {
            return Err("syntax error".into());
        }
    }
    Ok(start)
}

/// `count slot…`: the slots, sorted, each once.
fn parse_slots(args: &[&[u8]]) -> Result<Vec<u16>, String> {
    let n = int_in(args[0], 1, cluster::SLOT_COUNT).ok_or(format!(
        "SLOTS count must be between 1 and {}",
        cluster::SLOT_COUNT
    ))?;
    if n >= args.len() {
        return Err("not enough slot numbers provided".into());
    }
    let mut slots: Vec<u16> = Vec::with_capacity(n);
    // Seen slots as a bitmap: up to 16,384 of them, never a scan per slot.
    let mut seen = vec![false; cluster::SLOT_COUNT];
    for a in &args[1..=n] {
        let slot = int_in(a, 0, cluster::SLOT_COUNT - 1).ok_or("Invalid or out of range slot")?;
        if std::mem::replace(&mut seen[slot], true) {
            return Err("duplicate slot number".into());
        }
        slots.push(slot as u16);
    }
    slots.sort_unstable();
    Ok(slots)
}

/// `a` as a decimal integer in `lo..=hi`.
fn int_in(a: &[u8], lo: usize, hi: usize) -> Option<usize> {
    let n: i64 = std::str::from_utf8(a).ok()?.parse().ok()?;
    let n = usize::try_from(n).ok()?;
    (lo..=hi).contains(&n).then_some(n)
}

/// Sorted slots as runs of consecutive ones, `(first, last)`.
pub fn slot_ranges(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for &s in slots {
        match out.last_mut() {
            Some(last) if last.1 + 1 == s => last.1 = s,
            _ => out.push((s, s)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(line: &str) -> Result<Start, String> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        parse_start(&args)
    }

    #[test]
    fn start_is_checked_as_redis_checks_it() {
        let cases = [
            ("METRICS 1 CPU", Ok((true, false, 10))),
            ("METRICS 2 CPU NET COUNT 20", Ok((true, true, 20))),
            ("METRICS 2 GPU CPU", Ok((true, false, 10))),
            (
                "METRICS 1",
                Err("METRICS count does not match number of metric types provided"),
            ),
            ("COUNT 1 CPU", Err("METRICS parameter is required")),
            ("METRICS 0 CPU", Err("METRICS count must be > 0 and <= 2")),
            (
                "METRICS 2 CPU",
                Err("METRICS count does not match number of metric types provided"),
            ),
            (
                "METRICS 1 GPU",
                Err("METRICS no valid metrics passed. Supported: CPU|NET"),
            ),
            (
                "METRICS 2 CPU CPU",
                Err("METRICS CPU defined more than once!"),
            ),
            (
                "METRICS 1 CPU COUNT 100",
                Err("COUNT must be between 1 and 64"),
            ),
            (
                "METRICS 1 CPU DURATION -1",
                Err("DURATION must be between 1 and 1000000"),
            ),
            (
                "METRICS 1 CPU SAMPLE 0",
                Err("SAMPLE ratio must be positive"),
            ),
            ("METRICS 1 CPU bogus", Err("syntax error")),
            ("METRICS 1 CPU COUNT", Err("syntax error")),
            (
                "METRICS 1 CPU SLOTS 3 1 2",
                Err("not enough slot numbers provided"),
            ),
            ("METRICS 1 CPU SLOTS 2 1 1", Err("duplicate slot number")),
            (
                "METRICS 1 CPU SLOTS 1 16384",
                Err("Invalid or out of range slot"),
            ),
        ];
        for (line, want) in cases {
            let got = start(line).map(|s| (s.cpu, s.net, s.count));
            assert_eq!(got, want.map_err(String::from), "{line}");
        }
        let s = start("METRICS 1 CPU SLOTS 6 10 5 1 0 6 2 DURATION 3").unwrap();
        assert_eq!(slot_ranges(&s.slots), [(0, 2), (5, 6), (10, 10)]);
        assert_eq!(s.duration_ms, 3000);
    }
}
