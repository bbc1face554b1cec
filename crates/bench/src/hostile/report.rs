//! The hostile run's output: one row per case run (name, size, worst bystander PING, peak
//! RSS, fds before and after, verdict), the reasons under a failing row, the reproduction
//! line of a shrunk failure and the closing count. Plain text, so CI logs and a terminal read
//! the same, and the closing line can be grepped.

use super::oracle::{mib, Observed};

/// One case run and how it was judged.
#[derive(Debug, Clone)]
pub struct Row {
    pub case: &'static str,
    pub seed: u64,
    pub size: u64,
    pub observed: Observed,
    /// The worst PING to an idle redis-server on the attackers' CPU meanwhile: the floor.
    pub floor_ms: f64,
    /// The oracles' reasons; empty when it passed.
    pub why: Vec<String>,
    /// What happened to the case's own connections.
    pub note: String,
}

impl Row {
    /// Whether every oracle held.
    pub fn passed(&self) -> bool {
        self.why.is_empty()
    }
}

/// The column titles.
pub fn header() -> String {
    format!(
        "{:<22} {:>10} {:>12} {:>9} {:>10} {:>10} {:>11}  {:<7} note",
        "case",
        "size",
        "worst PING",
        "(floor)",
        "peak RSS",
        "nodes +",
        "fds before→after",
        "verdict"
    )
}

/// A row, with the failing oracles' reasons on indented lines below it.
pub fn line(r: &Row) -> String {
    let o = &r.observed;
    let after = o.fds_after.map_or("gone".to_string(), |n| n.to_string());
    let mut s = format!(
        "{:<22} {:>10} {:>9.1} ms {:>6.1} ms {:>6} MiB {:>6} MiB {:>7}→{:<8}  {:<7} {}",
        r.case,
        r.size,
        o.pings.max,
        r.floor_ms,
        mib(o.peak_rss),
        mib(o.nodes_peak.saturating_sub(o.nodes_before)),
        o.fds_before,
        after,
        if r.passed() { "ok" } else { "FAIL" },
        r.note
    );
    for why in &r.why {
        s += &format!("\n    {why}");
    }
    s
}

/// The command that runs one case again as it failed.
pub fn repro(case: &str, seed: u64, size: u64, case_seconds: f64) -> String {
    format!("slotgate bench hostile --case {case} --seed {seed} --size {size} --case-seconds {case_seconds}")
}

/// The last line of a run.
pub fn closing(passed: usize, failed: usize) -> String {
    format!("hostile: {passed} passed, {failed} failed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bystander::Pings;

    #[test]
    fn rows_and_lines_read_plainly() {
        let row = Row {
            case: "wide-mget",
            seed: 7,
            size: 200_000,
            observed: Observed {
                pings: Pings {
                    n: 10,
                    p99: 1.0,
                    max: 12.5,
                    failed: false,
                },
                peak_rss: 48 << 20,
                nodes_before: 0,
                nodes_peak: 0,
                fds_before: 21,
                fds_after: Some(22),
                dead: None,
                alarms: Vec::new(),
            },
            floor_ms: 2.0,
            why: vec!["bystander: worst PING 300.0 ms > 250 ms".into()],
            note: "3 writes".into(),
        };
        let l = line(&row);
        assert!(l.starts_with("wide-mget"), "{l}");
        assert!(
            l.contains("12.5 ms") && l.contains("48 MiB") && l.contains("21→22"),
            "{l}"
        );
        assert!(l.contains("FAIL") && l.contains("\n    bystander:"), "{l}");
        assert_eq!(closing(3, 1), "hostile: 3 passed, 1 failed");
        assert_eq!(
            repro("garbage", 5, 1024, 3.0),
            "slotgate bench hostile --case garbage --seed 5 --size 1024 --case-seconds 3"
        );
    }
}
