//! `cargo xtask`: the repository's chores in Rust, as rust-analyzer keeps them, so they are
//! typed, tested and need nothing but cargo. `make lint` runs `cargo xtask cycles`.
//!
//!     cargo xtask cycles [--bless] [SRC ...]   # import cycles (default: crates/proxy/src)

mod graph;
mod modtree;
mod refs;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("cycles") => cycles(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask cycles [--bless] [SRC ...]");
            ExitCode::from(2)
        }
    }
}

/// Import cycles between the files of each crate, and between the modules of each folder.
/// The cycles not yet taken apart are listed in `xtask/cycles-allowed.txt`, one import per
/// line: a cycle that is not listed, or an import that joins one, fails; so does a listed
/// line that no longer holds, so the list only shrinks (`--bless` rewrites it).
fn cycles(args: &[String]) -> ExitCode {
    let root = workspace_root();
    let bless = args.iter().any(|a| a == "--bless");
    let srcs: Vec<PathBuf> = match args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .collect::<Vec<_>>()
    {
        v if v.is_empty() => vec![root.join("crates/proxy/src")],
        v => v.into_iter().map(PathBuf::from).collect(),
    };
    let mut found = Vec::new();
    for src in &srcs {
        match check(&root, src) {
            Ok(lines) => found.extend(lines),
            Err(e) => {
                eprintln!("xtask cycles: {}: {e}", src.display());
                return ExitCode::from(2);
            }
        }
    }
    let allowed_path = root.join("xtask/cycles-allowed.txt");
    if bless {
        let mut text = String::from(ALLOWED_HEADER);
        for line in &found {
            text.push_str(line);
            text.push('\n');
        }
        if let Err(e) = std::fs::write(&allowed_path, text) {
            eprintln!("xtask cycles: {}: {e}", allowed_path.display());
            return ExitCode::from(2);
        }
        println!(
            "{} lines written to {}",
            found.len(),
            allowed_path.display()
        );
        return ExitCode::SUCCESS;
    }
    let allowed_text = std::fs::read_to_string(&allowed_path).unwrap_or_default();
    let allowed: BTreeSet<&str> = allowed_text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let found_set: BTreeSet<&str> = found.iter().map(String::as_str).collect();
    let new: Vec<&&str> = found_set.difference(&allowed).collect();
    let gone: Vec<&&str> = allowed.difference(&found_set).collect();
    for line in &new {
        println!("new cycle import: {line}");
    }
    for line in &gone {
        println!("no longer a cycle import (take it out of xtask/cycles-allowed.txt): {line}");
    }
    println!(
        "cycle imports: {} found, {} allowed, {} new, {} gone",
        found_set.len(),
        allowed.len(),
        new.len(),
        gone.len()
    );
    if new.is_empty() && gone.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

const ALLOWED_HEADER: &str = "\
# Import cycles not yet taken apart (issue 23), checked by `cargo xtask cycles` in `make lint`.
# One import inside a cycle per line. The list may only shrink: a new cycle import fails, and
# so does a line that no longer holds. `cargo xtask cycles --bless` rewrites it.
";

/// The imports inside cycles of one crate, as lines of the allowed list; the cycles printed.
fn check(root: &Path, src: &Path) -> Result<Vec<String>, String> {
    let tree = modtree::ModTree::load(src)?;
    let edges = refs::file_edges(&tree);
    let files = graph::cycles(&edges);
    let folders = graph::folder_cycles(&tree, &edges);
    let crate_name = src.strip_prefix(root).unwrap_or(src).display().to_string();
    let mut lines = Vec::new();
    for cycle in &files {
        println!("cycle between files of {crate_name}:");
        for &from in cycle {
            for (to, via) in &edges[from] {
                if cycle.contains(to) {
                    let (a, b) = (&tree.files[from].rel, &tree.files[*to].rel);
                    println!("  {a} -> {b}   ({via})");
                    lines.push(format!("{crate_name}: {a} -> {b}"));
                }
            }
        }
    }
    for (folder, cycle) in &folders {
        let members = cycle.join(", ");
        println!("cycle between the modules of {folder}/: {members}");
        lines.push(format!("{crate_name}: folder {folder}/: {members}"));
    }
    println!(
        "{crate_name}: {} files, {} imports between them, {} file cycle(s), {} folder cycle(s)",
        tree.files.len(),
        edges.iter().map(|e| e.len()).sum::<usize>(),
        files.len(),
        folders.len()
    );
    lines.sort();
    Ok(lines)
}

fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(Path::to_path_buf).unwrap_or(here)
}
