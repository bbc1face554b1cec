//! INFO's sections about the data, merged from every master's: `# Memory`, `# Persistence`,
//! `# Replication`, `# Keyspace` and Redis 8's `# Keysizes` (`merge_keysizes`), in Redis's
//! format and field order, one rule per field
//! (docs/commands.md, "INFO"):
//!
//! - integers are summed (used_memory, connected_slaves, rdb_changes_since_last_save…),
//!   except flags and durations, which take the highest (any master loading or saving, the
//!   longest save), the oldest `rdb_last_save_time` and `repl_backlog_first_byte_offset`,
//!   per-machine or per-master copies (`total_system_memory`, cached scripts and functions)
//!   whose highest stands for all, and `maxmemory`, 0 (no limit) if any master has none;
//! - decimals (ratios, percentages) take the highest: the worst master;
//! - `*_human` fields are recomputed from their merged byte count, as Redis prints them;
//! - text takes the masters' common value; a `*_status` that is not `ok` on any master wins;
//!   otherwise the first master's (in slot order);
//! - `role` is `master`, and the `slaveN` lines of every master are numbered in one list.
//!
//! The proxy renders its own sections with a marker line where a merged section goes
//! (`marker`), and this fills them in. No I/O: the session's fan-out calls it.

use bytes::{Bytes, BytesMut};

/// The marker line the proxy's INFO text carries where section `name` is merged in.
pub(crate) fn marker(name: &str) -> String {
    format!("\0{name}\r\n")
}

/// One master's INFO: (lowercase section name, its `field:value` lines in order).
type Sections = Vec<(String, Vec<(String, String)>)>;

/// The sections merged here, as `INFO` names them.
pub(crate) const MERGED: [&str; 7] = [
    "clients",
    "stats",
    "memory",
    "persistence",
    "replication",
    "keyspace",
    "keysizes",
];

/// `prefix` (the proxy's sections, with markers) with each marker replaced by the section
/// merged from the masters' `INFO` replies; a bulk string. A master whose reply is an error
/// is left out.
pub(crate) fn merge_info(prefix: &[u8], replies: &[&Bytes]) -> Bytes {
    let parsed: Vec<Sections> = replies
        .iter()
        .filter(|r| !resp::is_error_frame(r))
        .map(|r| sections(super::frames::bulk_body(r)))
        .collect();
    let mut text = String::from_utf8_lossy(prefix).into_owned();
    for name in MERGED {
        let mark = marker(name);
        if !text.contains(&mark) {
            continue;
        }
        let merged = match name {
            "keyspace" => super::scan::keyspace_lines(replies),
            "keysizes"
                if !parsed
                    .iter()
                    .any(|m| m.iter().any(|(n, _)| n == "keysizes")) =>
            {
                // Servers before Redis 8 have no such section: nor has the reply, header
                // and all, as when any unknown section is asked for.
                let header = format!("# Keysizes\r\n{mark}");
                text = text.replacen(&format!("\r\n{header}"), "", 1);
                text = text.replacen(&header, "", 1);
                continue;
            }
            "keysizes" => merge_keysizes(&parsed),
            // The proxy's own `# Stats`, then what only the nodes count: keys expired and
            // evicted, hits and misses, defragmentation.
            "stats" => merge_fields(name, &parsed, of_the_data),
            // The proxy's clients, then the keys they are blocked on, which the nodes count
            // (a blocked client waits on a node, on its own connection).
            "clients" => merge_fields(name, &parsed, |key| {
                matches!(key, "total_blocking_keys" | "total_blocking_keys_on_nokey")
            }),
            _ => merge_section(name, &parsed),
        };
        text = text.replacen(&mark, &merged, 1);
    }
    let mut out = BytesMut::new();
    resp::write_bulk(&mut out, text.as_bytes());
    out.freeze()
}

/// An INFO reply's sections.
fn sections(body: &[u8]) -> Sections {
    let mut out: Sections = Vec::new();
    for line in String::from_utf8_lossy(body).split("\r\n") {
        if let Some(name) = line.strip_prefix("# ") {
            out.push((name.to_lowercase(), Vec::new()));
        } else if let (Some((key, value)), Some(last)) = (line.split_once(':'), out.last_mut()) {
            last.1.push((key.to_string(), value.to_string()));
        }
    }
    out
}

/// Whether a `# Stats` field counts what happens to the data on the nodes (the proxy
/// cannot see it; every other field of that section is the proxy's own).
fn of_the_data(key: &str) -> bool {
    ["expired_", "expire_", "evicted_", "active_defrag_"]
        .iter()
        .any(|p| key.starts_with(p))
        || matches!(
            key,
            "keyspace_hits"
                | "keyspace_misses"
                | "total_eviction_exceeded_time"
                | "current_eviction_exceeded_time"
                | "total_active_defrag_time"
                | "current_active_defrag_time"
                | "migrate_cached_sockets"
                | "tracking_total_keys"
                | "tracking_total_items"
        )
}

/// One section's lines merged over the masters, in the first master's field order.
fn merge_section(name: &str, masters: &[Sections]) -> String {
    merge_fields(name, masters, |_| true)
}

/// `merge_section`, for the fields `keep` accepts.
fn merge_fields(name: &str, masters: &[Sections], keep: fn(&str) -> bool) -> String {
    let fields: Vec<&Vec<(String, String)>> = masters
        .iter()
        .filter_map(|m| m.iter().find(|(n, _)| n == name).map(|(_, f)| f))
        .collect();
    let mut order: Vec<&str> = Vec::new();
    for f in &fields {
        for (key, _) in f.iter() {
            if !order.contains(&key.as_str()) && !is_replica_line(key) && keep(key) {
                order.push(key);
            }
        }
    }
    let mut merged: Vec<(String, String)> = Vec::new();
    for key in order {
        let values: Vec<&str> = fields
            .iter()
            .filter_map(|f| f.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()))
            .collect();
        merged.push((key.to_string(), merge_values(key, &values)));
    }
    let mut out = String::new();
    for (key, value) in &merged {
        let value = match key.strip_suffix("_human") {
            Some(base) => human_of(&merged, base).unwrap_or_else(|| value.clone()),
            None => value.clone(),
        };
        out.push_str(&format!("{key}:{value}\r\n"));
        if key == "connected_slaves" {
            out.push_str(&replica_lines(&fields));
        }
    }
    out
}

/// Redis 8's `# Keysizes`: per database and type, a histogram of key sizes in powers of
/// two (`db0_distrib_strings_sizes:1=3,16=1,2K=5`). The masters' counts are summed bin by
/// bin, and the lines come in Redis's order: by database, the `_items` lines then the
/// `_sizes` ones, each in type order, the bins from the smallest.
fn merge_keysizes(masters: &[Sections]) -> String {
    /// A histogram's bins: the size a label stands for, the label, the count.
    type Bins = Vec<(u128, String, u64)>;
    let mut lines: Vec<(String, Bins)> = Vec::new();
    for (_, fields) in masters.iter().flatten().filter(|(n, _)| n == "keysizes") {
        for (key, value) in fields {
            let at = match lines.iter().position(|(k, _)| k == key) {
                Some(at) => at,
                None => {
                    lines.push((key.clone(), Vec::new()));
                    lines.len() - 1
                }
            };
            for bin in value.split(',') {
                let Some((label, count)) = bin.split_once('=') else {
                    continue;
                };
                let count: u64 = count.parse().unwrap_or(0);
                let bins = &mut lines[at].1;
                match bins.iter_mut().find(|(_, l, _)| l == label) {
                    Some(b) => b.2 += count,
                    None => bins.push((bin_size(label), label.to_string(), count)),
                }
            }
        }
    }
    lines.sort_by_key(|(key, _)| keysizes_rank(key));
    let mut out = String::new();
    for (key, mut bins) in lines {
        bins.sort_by_key(|(size, _, _)| *size);
        let bins: Vec<String> = bins.iter().map(|(_, l, c)| format!("{l}={c}")).collect();
        out.push_str(&format!("{key}:{}\r\n", bins.join(",")));
    }
    out
}

/// A keysizes bin label's size: `16`, `2K`, `512M`… (powers of 1024 by suffix).
fn bin_size(label: &str) -> u128 {
    let (digits, unit) = match label.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => label.split_at(at),
        None => (label, ""),
    };
    let power = ["", "K", "M", "G", "T", "P", "E"]
        .iter()
        .position(|u| *u == unit)
        .unwrap_or(7) as u32;
    digits.parse::<u128>().unwrap_or(0) * 1024u128.pow(power)
}

/// Where a keysizes line goes: its database, items before sizes, then its type.
fn keysizes_rank(key: &str) -> (u64, u8, u8, String) {
    let db = key
        .strip_prefix("db")
        .and_then(|rest| rest.split('_').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    let sizes = u8::from(key.ends_with("_sizes") && !key.contains("_strings_"));
    let kind = ["strings", "lists", "sets", "zsets", "hashes"]
        .iter()
        .position(|t| key.contains(&format!("_{t}_")))
        .unwrap_or(5) as u8;
    (db, sizes, kind, key.to_string())
}

/// `slave0`, `slave1`…: one line per replica of a master.
fn is_replica_line(key: &str) -> bool {
    key.strip_prefix("slave")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Every master's replica lines, numbered in one list.
fn replica_lines(fields: &[&Vec<(String, String)>]) -> String {
    let lines = fields
        .iter()
        .flat_map(|f| f.iter())
        .filter(|(k, _)| is_replica_line(k));
    lines
        .enumerate()
        .map(|(i, (_, v))| format!("slave{i}:{v}\r\n"))
        .collect()
}

/// The merged value of field `key` from each master's `values` (see the module doc).
fn merge_values(key: &str, values: &[&str]) -> String {
    let first = values.first().copied().unwrap_or_default();
    if key == "role" {
        return "master".into();
    }
    if let Some(ints) = values
        .iter()
        .map(|v| v.parse::<i64>().ok())
        .collect::<Option<Vec<_>>>()
    {
        return merge_ints(key, &ints).to_string();
    }
    let floats: Option<Vec<(f64, &str)>> = values
        .iter()
        .map(|v| Some((v.trim_end_matches('%').parse::<f64>().ok()?, *v)))
        .collect();
    if let Some(floats) = floats {
        let highest = floats.iter().max_by(|a, b| a.0.total_cmp(&b.0));
        return highest.map_or(first, |h| h.1).to_string();
    }
    if key.ends_with("_status") {
        return values
            .iter()
            .find(|v| **v != "ok")
            .unwrap_or(&first)
            .to_string();
    }
    first.to_string()
}

fn merge_ints(key: &str, ints: &[i64]) -> i64 {
    const HIGHEST: &[&str] = &[
        "in_progress",
        "loading",
        "_enabled",
        "_scheduled",
        "_running",
        "repl_backlog_active",
        "_time_sec",
        "_age",
        "total_system_memory",
        "number_of_",
        "failures",
    ];
    const LOWEST: &[&str] = &[
        "rdb_last_save_time",
        "first_byte_offset",
        "second_repl_offset",
    ];
    let highest = ints.iter().copied().max().unwrap_or(0);
    if key == "maxmemory" && ints.contains(&0) {
        return 0;
    }
    if HIGHEST.iter().any(|h| key.contains(h)) {
        return highest;
    }
    if LOWEST.iter().any(|l| key.contains(l)) {
        return ints.iter().copied().min().unwrap_or(0);
    }
    ints.iter().sum()
}

/// The `_human` form of field `base`'s merged byte count.
fn human_of(merged: &[(String, String)], base: &str) -> Option<String> {
    let (_, value) = merged.iter().find(|(k, _)| k == base)?;
    Some(bytes_to_human(value.parse().ok()?))
}

/// Redis's `bytesToHuman`: `893.10K`, `11.54M`, `200B`.
pub(crate) fn bytes_to_human(n: u64) -> String {
    const UNITS: [(u32, char); 5] = [(1, 'K'), (2, 'M'), (3, 'G'), (4, 'T'), (5, 'P')];
    if n < 1024 {
        return format!("{n}B");
    }
    for (power, unit) in UNITS {
        if (n as f64) < 1024f64.powi(power as i32 + 1) || unit == 'P' {
            return format!("{:.2}{unit}", n as f64 / 1024f64.powi(power as i32));
        }
    }
    format!("{n}B")
}

#[cfg(test)]
mod tests;
