//! INFO `# CPU`: the proxy process's own CPU time, in Redis's fields and format
//! (`used_cpu_sys:0.005352`). Redis reads `getrusage`; the proxy forbids `unsafe`, so it
//! reads `/proc/self/stat` (and its main thread's), whose times are in clock ticks of
//! 1/100 s (`USER_HZ`, fixed by the Linux ABI): the figures step by 10 ms. Where `/proc`
//! cannot be read (not Linux), every field is 0. Behind Valkey, its
//! `used_active_time_main_thread` (the time its one command thread spent not waiting) is the
//! proxy's CPU time, user and system, over all its threads: the nearest thing a
//! thread-per-core proxy has.

use std::fmt::Write;

use crate::context::Shared;

/// `/proc`'s clock ticks per second.
const USER_HZ: f64 = 100.0;

pub(crate) fn info(shared: &Shared, out: &mut String) {
    let process = times("/proc/self/stat").unwrap_or_default();
    let main = times(&format!("/proc/self/task/{}/stat", std::process::id())).unwrap_or_default();
    let fields = [
        ("used_cpu_sys", process[1]),
        ("used_cpu_user", process[0]),
        ("used_cpu_sys_children", process[3]),
        ("used_cpu_user_children", process[2]),
        ("used_cpu_sys_main_thread", main[1]),
        ("used_cpu_user_main_thread", main[0]),
    ];
    for (name, ticks) in fields {
        let _ = write!(out, "{name}:{:.6}\r\n", ticks as f64 / USER_HZ);
    }
    if shared.identity.current().valkey_version.is_some() {
        let active = (process[0] + process[1]) as f64 / USER_HZ;
        let _ = write!(out, "used_active_time_main_thread:{active:.6}\r\n");
    }
}

/// The process's user and system CPU time so far, in milliseconds (HOTKEYS GET).
pub(crate) fn process_ms() -> [u64; 2] {
    let t = times("/proc/self/stat").unwrap_or_default();
    let ms = |ticks: u64| ticks * 1000 / USER_HZ as u64;
    [ms(t[0]), ms(t[1])]
}

/// utime, stime, cutime, cstime (clock ticks) from a `/proc/.../stat` file.
fn times(path: &str) -> Option<[u64; 4]> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// Fields 14 to 17 of a stat line; the command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`.
fn parse_stat(stat: &str) -> Option<[u64; 4]> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state is field 3, so utime (14) is the 12th field of `rest`.
    let mut fields = rest.split_whitespace().skip(11);
    let mut out = [0u64; 4];
    for slot in out.iter_mut() {
        *slot = fields.next()?.parse().ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_times_of_a_stat_line() {
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 3 1 20 0 1 0";
        assert_eq!(parse_stat(line), Some([250, 75, 3, 1]));
        assert_eq!(parse_stat("garbage"), None);
    }
}
