//! `cargo xtask`: the repository's chores in Rust, as rust-analyzer keeps them, so they are
//! typed, tested and need nothing but cargo (and, for codegen, a redis-server). `make lint`
//! runs all three checks.
//!
//!     cargo xtask cycles [--bless] [SRC ...]   # import cycles (default: crates/proxy/src)
//!     cargo xtask tidy                         # `//!` docs, file names in comments
//!     cargo xtask codegen [--check]            # the command table from redis-server

mod graph;
mod modtree;
mod refs;
mod tidy;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("cycles") => cycles(&args[1..]),
        Some("tidy") => tidy(),
        Some("codegen") => codegen(args.iter().any(|a| a == "--check")),
        _ => {
            eprintln!("usage: cargo xtask cycles [--bless] [SRC ...] | tidy | codegen [--check]");
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

/// Every crate's and xtask's sources: a `//!` doc on top, and no comment naming a file that
/// is gone.
fn tidy() -> ExitCode {
    let root = workspace_root();
    let mut roots = vec![root.join("xtask/src")];
    if let Ok(entries) = std::fs::read_dir(root.join("crates")) {
        let mut crates: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        crates.sort();
        roots.extend(
            crates
                .into_iter()
                .map(|c| c.join("src"))
                .filter(|s| s.is_dir()),
        );
    }
    match tidy::check(&root, &roots) {
        Ok(problems) if problems.is_empty() => {
            println!("tidy: {} source folders, no problem", roots.len());
            ExitCode::SUCCESS
        }
        Ok(problems) => {
            problems.iter().for_each(|p| println!("{p}"));
            println!("tidy: {} problem(s)", problems.len());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("xtask tidy: {e}");
            ExitCode::from(2)
        }
    }
}

/// The command table (`crates/cluster/src/command/table.rs`) generated from a live
/// redis-server's `COMMAND DOCS` by `scripts/gen_command_table.py`; `--check` fails when the
/// committed table differs from what the server gives.
fn codegen(check: bool) -> ExitCode {
    let root = workspace_root();
    let table = root.join("crates/cluster/src/command/table.rs");
    let out = std::env::temp_dir().join(format!("xtask-table-{}.rs", std::process::id()));
    let status = std::process::Command::new("python3")
        .arg(root.join("scripts/gen_command_table.py"))
        .arg("--out")
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("xtask codegen: scripts/gen_command_table.py failed: {s}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("xtask codegen: python3: {e}");
            return ExitCode::from(2);
        }
    }
    let fresh = std::fs::read(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    let committed = std::fs::read(&table).unwrap_or_default();
    if fresh == committed {
        println!("codegen: {} is up to date", table.display());
        return ExitCode::SUCCESS;
    }
    if check {
        println!(
            "codegen: {} differs from what redis-server gives: run `cargo xtask codegen`",
            table.display()
        );
        return ExitCode::FAILURE;
    }
    match std::fs::write(&table, fresh) {
        Ok(()) => {
            println!("codegen: {} rewritten", table.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask codegen: {}: {e}", table.display());
            ExitCode::from(2)
        }
    }
}

fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(Path::to_path_buf).unwrap_or(here)
}
