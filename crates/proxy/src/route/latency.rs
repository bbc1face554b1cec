//! LATENCY through the proxy: every master keeps its own latency monitor and command
//! histograms, so each is asked and their replies are merged into what one server holding
//! all their work would answer.
//!
//! - HISTOGRAM: per command, calls summed; for a command the proxy answers itself (PING,
//!   ECHO, INFO…), the proxy's own entry instead (`admin/latency.rs`); `histogram_usec` is a cumulative distribution
//!   (each bucket counts the calls at or under it), so a master without a bucket counts
//!   there what it counts at its nearest bucket below (0 below its first): the merged
//!   counts are exact for every bucket any master reports.
//! - LATEST: per event, the most recent sample (its time and latency) and the largest
//!   maximum.
//! - HISTORY: every master's samples, by time; a time two masters share keeps the larger.
//! - DOCTOR and GRAPH: the masters' texts, one after the other.
//!
//! A reply that cannot be read is left out rather than failing the command; an error reply
//! from a master is that command's answer (`merge.rs`), as for every merge.

use bytes::{Bytes, BytesMut};
use resp::Value;

/// Which LATENCY subcommand's reply is merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Latency {
    Histogram,
    Latest,
    History,
    Text,
}

impl Latency {
    /// The merge for a LATENCY subcommand whose reply policy is special, if any.
    pub(crate) fn of(name: &str) -> Option<Latency> {
        Some(match name {
            "latency|histogram" => Latency::Histogram,
            "latency|latest" => Latency::Latest,
            "latency|history" => Latency::History,
            "latency|doctor" | "latency|graph" => Latency::Text,
            _ => return None,
        })
    }
}

/// `own`: for HISTOGRAM, the proxy's entries for the commands it answers itself
/// (`admin/latency.rs`), which replace the masters' of the same names; empty otherwise.
pub(crate) fn merge(kind: Latency, replies: &[&Bytes], own: &Bytes) -> Bytes {
    if replies.len() == 1 && own.is_empty() {
        return replies[0].clone();
    }
    let decode = |r: &Bytes| resp::decode(r).ok().flatten().map(|(v, _)| v);
    let mut values: Vec<Value> = replies.iter().filter_map(|r| decode(r)).collect();
    if let Some(own) = decode(own).filter(|_| kind == Latency::Histogram) {
        let names: Vec<&Bytes> = pairs(&own).iter().filter_map(|(k, _)| name(k)).collect();
        for v in &mut values {
            *v = without(v, &names);
        }
        values.push(own);
    }
    let merged = match kind {
        Latency::Histogram => histogram(&values),
        Latency::Latest => latest(&values),
        Latency::History => history(&values),
        Latency::Text => text(&values),
    };
    let mut out = BytesMut::new();
    merged.encode(&mut out);
    out.freeze()
}

/// `[key, value]` pairs of a RESP3 map or a RESP2 flat array.
fn pairs(v: &Value) -> Vec<(&Value, &Value)> {
    match v {
        Value::Map(p) => p.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(flat) => flat.chunks_exact(2).map(|kv| (&kv[0], &kv[1])).collect(),
        _ => Vec::new(),
    }
}

/// `v` (a RESP3 map or RESP2 flat array of pairs) without the pairs keyed by `names`.
fn without(v: &Value, names: &[&Bytes]) -> Value {
    let resp3 = matches!(v, Value::Map(_));
    let kept = pairs(v)
        .into_iter()
        .filter(|(k, _)| name(k).is_none_or(|n| !names.contains(&n)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    shaped(resp3, kept)
}

/// Pairs back in the shape the masters used (a map under RESP3).
fn shaped(resp3: bool, pairs: Vec<(Value, Value)>) -> Value {
    match resp3 {
        true => Value::Map(pairs),
        false => Value::Array(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect()),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(n) => *n,
        _ => 0,
    }
}

fn name(v: &Value) -> Option<&Bytes> {
    match v {
        Value::BulkString(b) | Value::SimpleString(b) => Some(b),
        _ => None,
    }
}

/// One command's merged figures: calls and the per-master cumulative buckets.
struct Command {
    name: Value,
    calls: i64,
    /// Each master's `(bucket, cumulative count)`, ascending.
    cdfs: Vec<Vec<(i64, i64)>>,
}

fn histogram(values: &[Value]) -> Value {
    let resp3 = values.iter().any(|v| matches!(v, Value::Map(_)));
    let mut commands: Vec<Command> = Vec::new();
    for v in values {
        for (cmd, stats) in pairs(v) {
            let Some(key) = name(cmd) else { continue };
            let at = match commands.iter().position(|c| name(&c.name) == Some(key)) {
                Some(at) => at,
                None => {
                    commands.push(Command {
                        name: cmd.clone(),
                        calls: 0,
                        cdfs: Vec::new(),
                    });
                    commands.len() - 1
                }
            };
            let c = &mut commands[at];
            for (field, value) in pairs(stats) {
                match name(field).map(|b| b.as_ref()) {
                    Some(b"calls") => c.calls += int(value),
                    Some(b"histogram_usec") => {
                        let mut cdf: Vec<(i64, i64)> =
                            pairs(value).iter().map(|(b, n)| (int(b), int(n))).collect();
                        cdf.sort_unstable();
                        c.cdfs.push(cdf);
                    }
                    _ => {}
                }
            }
        }
    }
    let out = commands
        .into_iter()
        .map(|c| {
            let mut buckets: Vec<i64> = c.cdfs.iter().flatten().map(|(b, _)| *b).collect();
            buckets.sort_unstable();
            buckets.dedup();
            let merged = buckets
                .into_iter()
                .map(|b| {
                    let total = c.cdfs.iter().map(|cdf| at_or_below(cdf, b)).sum();
                    (Value::Integer(b), Value::Integer(total))
                })
                .collect();
            let stats = vec![
                (bulk("calls"), Value::Integer(c.calls)),
                (bulk("histogram_usec"), shaped(resp3, merged)),
            ];
            (c.name, shaped(resp3, stats))
        })
        .collect();
    shaped(resp3, out)
}

/// A cumulative distribution's count at `bucket`: its value at the nearest bucket at or
/// below, 0 below its first.
fn at_or_below(cdf: &[(i64, i64)], bucket: i64) -> i64 {
    let i = cdf.partition_point(|(b, _)| *b <= bucket);
    i.checked_sub(1).map_or(0, |i| cdf[i].1)
}

fn bulk(s: &str) -> Value {
    Value::BulkString(Bytes::copy_from_slice(s.as_bytes()))
}

/// `[event, time, latest, max]` per event: the newest sample and the largest maximum.
fn latest(values: &[Value]) -> Value {
    let mut events: Vec<Vec<Value>> = Vec::new();
    for v in values {
        let Value::Array(rows) = v else { continue };
        for row in rows {
            let Value::Array(fields) = row else { continue };
            let [event, time, last, max] = fields.as_slice() else {
                continue;
            };
            match events.iter_mut().find(|e| name(&e[0]) == name(event)) {
                None => events.push(fields.clone()),
                Some(e) => {
                    if int(time) > int(&e[1]) {
                        e[1] = time.clone();
                        e[2] = last.clone();
                    }
                    if int(max) > int(&e[3]) {
                        e[3] = max.clone();
                    }
                }
            }
        }
    }
    Value::Array(events.into_iter().map(Value::Array).collect())
}

/// `[time, latency]` samples of every master, by time.
fn history(values: &[Value]) -> Value {
    let mut samples: Vec<(i64, i64)> = Vec::new();
    for v in values {
        let Value::Array(rows) = v else { continue };
        for row in rows {
            if let Value::Array(pair) = row {
                if let [time, latency] = pair.as_slice() {
                    samples.push((int(time), int(latency)));
                }
            }
        }
    }
    // By time, the larger latency first, so `dedup` keeps it.
    samples.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    samples.dedup_by_key(|s| s.0);
    Value::Array(
        samples
            .into_iter()
            .map(|(t, l)| Value::Array(vec![Value::Integer(t), Value::Integer(l)]))
            .collect(),
    )
}

/// The masters' texts, one after the other (a verbatim string under RESP3, as each is).
fn text(values: &[Value]) -> Value {
    let mut all = BytesMut::new();
    let mut verbatim = None;
    for v in values {
        let t = match v {
            Value::Verbatim { format, text } => {
                verbatim = Some(format.clone());
                text
            }
            Value::BulkString(t) => t,
            _ => continue,
        };
        if !all.is_empty() && !all.ends_with(b"\n") {
            all.extend_from_slice(b"\n");
        }
        all.extend_from_slice(t);
    }
    match verbatim {
        Some(format) => Value::Verbatim {
            format,
            text: all.freeze(),
        },
        None => Value::BulkString(all.freeze()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: &Value) -> Bytes {
        let mut out = BytesMut::new();
        v.encode(&mut out);
        out.freeze()
    }

    /// A command's name, calls and cumulative buckets.
    type Row<'a> = (&'a str, i64, &'a [(i64, i64)]);

    fn hist(resp3: bool, cmds: &[Row<'_>]) -> Value {
        shaped(
            resp3,
            cmds.iter()
                .map(|(n, calls, cdf)| {
                    let buckets = cdf
                        .iter()
                        .map(|(b, c)| (Value::Integer(*b), Value::Integer(*c)))
                        .collect();
                    let stats = vec![
                        (bulk("calls"), Value::Integer(*calls)),
                        (bulk("histogram_usec"), shaped(resp3, buckets)),
                    ];
                    (bulk(n), shaped(resp3, stats))
                })
                .collect(),
        )
    }

    #[test]
    fn histograms_sum_as_cumulative_distributions() {
        for resp3 in [false, true] {
            let a = enc(&hist(resp3, &[("set", 3, &[(1, 1), (4, 3)])]));
            let b = enc(&hist(
                resp3,
                &[("get", 1, &[(2, 1)]), ("set", 2, &[(2, 2)])],
            ));
            let want = hist(
                resp3,
                &[("set", 5, &[(1, 1), (2, 3), (4, 5)]), ("get", 1, &[(2, 1)])],
            );
            assert_eq!(
                merge(Latency::Histogram, &[&a, &b], &Bytes::new()),
                enc(&want),
                "resp3 {resp3}"
            );
        }
    }

    /// The proxy's own entries (commands it answers itself) replace the masters' of the
    /// same name, even behind one master; the others merge as before.
    #[test]
    fn own_entries_replace_the_masters_for_their_commands() {
        for resp3 in [false, true] {
            let a = enc(&hist(
                resp3,
                &[("set", 2, &[(2, 2)]), ("ping", 9, &[(1, 9)])],
            ));
            let own = enc(&hist(resp3, &[("ping", 1, &[(8, 1)])]));
            let want = hist(resp3, &[("set", 2, &[(2, 2)]), ("ping", 1, &[(8, 1)])]);
            assert_eq!(
                merge(Latency::Histogram, &[&a], &own),
                enc(&want),
                "resp3 {resp3}"
            );
        }
    }

    #[test]
    fn latest_keeps_the_newest_sample_and_the_largest_maximum() {
        let row = |e: &str, t, l, m| {
            Value::Array(vec![
                bulk(e),
                Value::Integer(t),
                Value::Integer(l),
                Value::Integer(m),
            ])
        };
        let a = enc(&Value::Array(vec![row("command", 10, 5, 50)]));
        let b = enc(&Value::Array(vec![
            row("command", 20, 7, 9),
            row("expire-cycle", 3, 1, 1),
        ]));
        let want = Value::Array(vec![
            row("command", 20, 7, 50),
            row("expire-cycle", 3, 1, 1),
        ]);
        assert_eq!(merge(Latency::Latest, &[&a, &b], &Bytes::new()), enc(&want));
    }

    #[test]
    fn history_is_ordered_by_time() {
        let s = |t, l| Value::Array(vec![Value::Integer(t), Value::Integer(l)]);
        let a = enc(&Value::Array(vec![s(5, 1), s(9, 2)]));
        let b = enc(&Value::Array(vec![s(7, 3), s(9, 4)]));
        let want = Value::Array(vec![s(5, 1), s(7, 3), s(9, 4)]);
        assert_eq!(
            merge(Latency::History, &[&a, &b], &Bytes::new()),
            enc(&want)
        );
    }
}
