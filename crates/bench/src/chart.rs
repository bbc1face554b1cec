//! Renders a `compare` result as a markdown table and a dependency-free SVG bar chart of CPU
//! µs per request (median bar, min–max whisker) — enough to paste into BENCHMARKS.md.

use std::fmt::Write;

use serde_json::Value;

fn med(v: &Value, k: &str) -> String {
    match v[k]["median"].as_f64() {
        Some(x) => format!("{x:.2}"),
        None => "n/a".into(),
    }
}

fn range(v: &Value, k: &str) -> String {
    match (v[k]["min"].as_f64(), v[k]["max"].as_f64()) {
        (Some(a), Some(b)) => format!("{a:.2}–{b:.2}"),
        _ => "n/a".into(),
    }
}

/// The table: one row per system, medians with the CPU range, then CPU ratios.
pub fn markdown(doc: &Value) -> String {
    let flags: Vec<&str> = doc["flags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut s = format!(
        "## {} ({} reps, loadavg {})\n\n`bench run {}`\n\n",
        doc["preset"].as_str().unwrap_or("?"),
        doc["reps"],
        doc["loadavg"].as_str().unwrap_or("?"),
        flags.join(" "),
    );
    s += "| system | CPU µs/req (median) | CPU range | syscalls/req | RSS MB | req/s | p50 µs | p99 µs | p99.9 µs | errors | generator µs/req |\n";
    s += "|---|---|---|---|---|---|---|---|---|---|---|\n";
    let systems = doc["systems"].as_array().cloned().unwrap_or_default();
    for v in &systems {
        let cells: Vec<String> = [
            "syscalls_per_req",
            "rss_mb",
            "rps",
            "p50_us",
            "p99_us",
            "p999_us",
            "errors",
            "generator_cpu_us_per_req",
        ]
        .iter()
        .map(|k| med(v, k))
        .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            v["system"].as_str().unwrap_or("?"),
            med(v, "cpu_us_per_req"),
            range(v, "cpu_us_per_req"),
            cells.join(" | "),
        );
    }
    if doc["preset"].as_str() == Some("S6") {
        s += "\nS6 sends one GET per connection: CPU per request is CPU per connection.\n";
    }
    ratio_lines(&mut s, &systems);
    // A system that was skipped (e.g. "camellia: not installed") says so in the table's text.
    for note in doc["notes"].as_array().into_iter().flatten() {
        let _ = writeln!(s, "\nNot measured: {}", note.as_str().unwrap_or("?"));
    }
    s
}

/// One line per system: its CPU ratio against each other system.
fn ratio_lines(s: &mut String, systems: &[Value]) {
    *s += "\nCPU ratios (row ÷ column, medians):\n\n";
    for v in systems {
        let me = v["system"].as_str().unwrap_or("?");
        let parts: Vec<String> = v["cpu_ratio_vs"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != me)
            .map(|(k, x)| format!("vs {k} {:.2}", x.as_f64().unwrap_or(f64::NAN)))
            .collect();
        let _ = writeln!(s, "- {me}: {}", parts.join(", "));
    }
}

/// Bars of median CPU µs/request per system with min–max whiskers.
pub fn svg(doc: &Value) -> String {
    let systems = doc["systems"].as_array().cloned().unwrap_or_default();
    let get = |v: &Value, k: &str| v["cpu_us_per_req"][k].as_f64().unwrap_or(0.0);
    let top = systems.iter().map(|v| get(v, "max")).fold(1e-9, f64::max) * 1.15;
    let (w, h, left, base) = (120 * systems.len() + 80, 320, 60.0, 270.0);
    let y = |x: f64| base - x / top * 220.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <text x=\"10\" y=\"20\">{} — system CPU µs per request (median, min–max)</text>\n\
         <line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>\n",
        doc["preset"].as_str().unwrap_or("?"),
        w - 10
    );
    for (i, v) in systems.iter().enumerate() {
        let x = left + 20.0 + 120.0 * i as f64;
        let (m, lo, hi) = (get(v, "median"), get(v, "min"), get(v, "max"));
        let _ = write!(
            s,
            "<rect x=\"{x}\" y=\"{:.1}\" width=\"70\" height=\"{:.1}\" fill=\"#4a7ab5\"/>\n\
             <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n\
             <text x=\"{x}\" y=\"{:.1}\">{m:.2}</text>\n<text x=\"{x}\" y=\"{}\">{}</text>\n",
            y(m),
            base - y(m),
            x + 35.0,
            y(lo),
            x + 35.0,
            y(hi),
            y(hi) - 5.0,
            base + 18.0,
            v["system"].as_str().unwrap_or("?"),
        );
    }
    s + "</svg>\n"
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn renders_table_and_svg() {
        let doc = json!({"preset": "S1", "reps": 5, "loadavg": "1 1 1", "flags": ["--pipeline", "1"],
            "systems": [{"system": "redis", "cpu_us_per_req": {"median": 8.0, "min": 7.5, "max": 9.0},
                         "cpu_ratio_vs": {"redis": 1.0}}],
            "notes": ["camellia: not installed (run scripts/install-camellia)"]});
        let md = super::markdown(&doc);
        assert!(md.contains("| redis | 8.00 | 7.50–9.00 |"), "{md}");
        assert!(md.contains("Not measured: camellia: not installed"), "{md}");
        let svg = super::svg(&doc);
        assert!(svg.starts_with("<svg") && svg.contains("redis") && svg.ends_with("</svg>\n"));
    }
}
