//! CPU time from the scheduler's own accounting (`/proc/.../schedstat`, nanoseconds), the
//! method of performance.md §5: /proc/PID/stat ticks are 10 ms and too coarse for µs/request.

use std::path::Path;

use anyhow::{Context, Result};

/// On-CPU nanoseconds summed over the live threads of `/proc/<pid>` (`"self"` for this process).
pub fn process_cpu_ns(pid: &str) -> Result<u64> {
    let dir = format!("/proc/{pid}/task");
    let mut total = 0;
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        let path = entry?.path().join("schedstat");
        // A thread may exit between listing and reading; it no longer counts then.
        if let Ok(text) = std::fs::read_to_string(&path) {
            total += parse_schedstat(&text).with_context(|| path.display().to_string())?;
        }
    }
    Ok(total)
}

/// First field of a schedstat line: time spent on the CPU, in ns.
pub fn parse_schedstat(text: &str) -> Result<u64> {
    let first = text.split_whitespace().next().context("empty schedstat")?;
    Ok(first.parse()?)
}

/// (user, system) CPU of `pid` in clock ticks (`/proc/<pid>/stat` utime, stime): too coarse
/// for one request, but their ratio over thousands splits schedstat's total into the
/// process's own code and the kernel working for it.
pub fn user_sys_ticks(pid: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(Path::new("/proc").join(pid).join("stat")).ok()?;
    // Fields after the command name, which may contain spaces: state is the first, utime
    // and stime the 12th and 13th.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// Resident set size of `pid` in bytes (VmRSS), if the process still exists.
pub fn rss_bytes(pid: &str) -> Option<u64> {
    let text = std::fs::read_to_string(Path::new("/proc").join(pid).join("status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The 1-minute load average, to print next to every measurement.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_schedstat_and_reads_self() {
        assert_eq!(parse_schedstat("123456 789 10\n").unwrap(), 123456);
        assert!(parse_schedstat("").is_err());
        let a = process_cpu_ns("self").unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(process_cpu_ns("self").unwrap() > a);
        assert!(rss_bytes("self").unwrap() > 0);
        let (user, sys) = user_sys_ticks("self").unwrap();
        assert!(user + sys > 0);
    }
}
