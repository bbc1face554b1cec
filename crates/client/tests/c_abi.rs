//! The C ABI end to end: compiles examples/c/example.c with `cc` against the
//! cdylib cargo built for this test run and runs it against a real cluster.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The cdylib cargo built next to this test binary (target/<profile>/deps).
fn cdylib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    for dir in [deps.clone(), deps.join("..")] {
        if dir.join("libslotgate_client.so").exists() {
            return dir;
        }
    }
    panic!("libslotgate_client.so not found near {}", deps.display());
}

fn have_cc() -> bool {
    Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn c_example_runs_against_a_cluster() {
    if !have_cc() {
        assert!(
            std::env::var_os("SLOTGATE_SKIP_CC").is_some(),
            "`cc` is missing: install a C compiler, or set SLOTGATE_SKIP_CC=1 to skip this test"
        );
        eprintln!("SKIPPED: no `cc` (SLOTGATE_SKIP_CC set)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lib = cdylib_dir();
    let out = std::env::temp_dir().join(format!("slotgate-c-example-{}", std::process::id()));
    let status = Command::new("cc")
        .args(["-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(root.join("crates/client/include"))
        .arg(root.join("examples/c/example.c"))
        .arg("-L")
        .arg(&lib)
        .arg("-lslotgate_client")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed to build examples/c/example.c");

    let cluster = common::cluster();
    let seeds = format!("{},{}", cluster.masters()[1], common::seed(&cluster));
    let run = Command::new(&out)
        .arg(&seeds)
        .output()
        .expect("run example");
    let _ = std::fs::remove_file(&out);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.trim() == "ok",
        "example failed: {stdout} {}",
        String::from_utf8_lossy(&run.stderr)
    );
}
