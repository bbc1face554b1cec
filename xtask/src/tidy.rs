//! `cargo xtask tidy`: what a reader relies on in every source file. Each file opens with a
//! `//!` doc saying why it exists, and a file a comment names in backticks (`queue.rs`,
//! `session/send/mod.rs`) exists: renames leave stale pointers otherwise, which the review
//! of 8f77e2d found five of.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The problems found under `roots`, one line each (`path:line: what`).
pub(crate) fn check(repo: &Path, roots: &[PathBuf]) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    for root in roots {
        collect(root, &mut files)?;
    }
    let known = known_paths(&files, repo);
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let rel = file
            .strip_prefix(repo)
            .unwrap_or(file)
            .display()
            .to_string();
        if text
            .lines()
            .next()
            .is_some_and(|l| l.contains("@generated"))
        {
            continue; // its generator's header says where it comes from
        }
        if !text.trim_start().starts_with("//!") {
            problems.push(format!(
                "{rel}:1: no `//!` doc at the top saying why the file exists"
            ));
        }
        for (n, line) in text.lines().enumerate() {
            let Some(comment) = comment_of(line) else {
                continue;
            };
            for name in named_files(comment) {
                if !known.iter().any(|k| k.ends_with(&name)) {
                    problems.push(format!(
                        "{rel}:{}: names `{name}`, which does not exist",
                        n + 1
                    ));
                }
            }
        }
    }
    Ok(problems)
}

/// Every `.rs` file under `dir`, in a stable order; `target` folders skipped.
fn collect(dir: &Path, into: &mut Vec<PathBuf>) -> Result<(), String> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            collect(&path, into)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
    Ok(())
}

/// The paths a comment may name: each file relative to the repository, so `send/mod.rs`
/// matches by its end and `queue.rs` by its name.
fn known_paths(files: &[PathBuf], repo: &Path) -> BTreeSet<String> {
    let mut known: BTreeSet<String> = files
        .iter()
        .map(|f| format!("/{}", f.strip_prefix(repo).unwrap_or(f).display()))
        .collect();
    // Files outside the checked roots that comments point at (tests, scripts' Rust).
    for extra in ["crates", "compat", "xtask", "scripts", "fuzz"] {
        let mut more = Vec::new();
        if collect(&repo.join(extra), &mut more).is_ok() {
            known.extend(
                more.iter()
                    .map(|f| format!("/{}", f.strip_prefix(repo).unwrap_or(f).display())),
            );
        }
    }
    known
}

/// The comment part of a line: `//`, `///` or `//!` to the end (not inside a string: a line
/// whose `//` follows a quote is taken as code).
fn comment_of(line: &str) -> Option<&str> {
    let at = line.find("//")?;
    let before = &line[..at];
    before
        .matches('"')
        .count()
        .is_multiple_of(2)
        .then(|| &line[at..])
}

/// The `.rs` paths a comment names in backticks, each with a leading slash so that it
/// matches the end of a known path at a folder boundary.
fn named_files(comment: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut parts = comment.split('`');
    parts.next();
    while let Some(inside) = parts.next() {
        let is_path = inside.ends_with(".rs")
            && inside.len() > 3
            && inside
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.' | '-'));
        if is_path && !inside.contains("..") {
            out.push(format!("/{}", inside.trim_start_matches("./")));
        }
        parts.next();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backticked_rs_paths_are_found_and_code_is_not() {
        assert_eq!(
            named_files("// see `queue.rs` and `session/send/mod.rs`, not `x`"),
            ["/queue.rs", "/session/send/mod.rs"]
        );
        assert_eq!(comment_of(r#"let s = "a // b";"#), None);
        assert_eq!(comment_of("x(); // `a.rs`"), Some("// `a.rs`"));
    }
}
