//! The Prometheus text exposition format, as every metrics producer of `admin/` writes it:
//! a sample line, with its metric's HELP and TYPE lines before the first one. A leaf: the
//! catalogue of metrics comes in with `Described`, so the producers and the scrape that
//! calls them (`metrics.rs`) all depend on this file and it on none of them.

use std::fmt::Write;

/// One metric: name, type, help.
pub(crate) type Metric = (&'static str, &'static str, &'static str);

/// The catalogue of metrics of one scrape, and those whose HELP and TYPE lines are written.
pub(crate) struct Described {
    catalogue: &'static [&'static [Metric]],
    written: Vec<&'static str>,
}

impl Described {
    pub(crate) fn new(catalogue: &'static [&'static [Metric]]) -> Described {
        Described {
            catalogue,
            written: Vec::new(),
        }
    }

    /// HELP and TYPE lines, once per metric.
    pub(crate) fn describe(&mut self, out: &mut String, name: &'static str) {
        if self.written.contains(&name) {
            return;
        }
        let all = self.catalogue.iter().flat_map(|list| list.iter());
        if let Some((_, kind, help)) = all.clone().find(|(n, _, _)| *n == name) {
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
        }
        self.written.push(name);
    }
}

/// One sample line, described first if it is the metric's first.
pub(crate) fn sample(
    out: &mut String,
    described: &mut Described,
    name: &'static str,
    labels: &str,
    value: impl std::fmt::Display,
) {
    described.describe(out, name);
    match labels.is_empty() {
        true => {
            let _ = writeln!(out, "{name} {value}");
        }
        false => {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}
