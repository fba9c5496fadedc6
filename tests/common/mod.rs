//! Shared helpers for the integration tests: the real binary in a temp dir.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuledger"));
    c.env_remove("RUST_LOG").env_remove("GPULEDGER_CONFIG").env_remove("GPULEDGER_LAKE").arg("--progress").arg("never");
    c
}

/// Runs the binary in `dir` and insists on success.
pub fn run_ok(dir: &Path, args: &[&str]) -> Output {
    let out = bin().current_dir(dir).args(args).output().expect("spawn gpuledger");
    assert!(
        out.status.success(),
        "gpuledger {args:?} failed: {}\nstdout: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

pub fn run_fail(dir: &Path, args: &[&str]) -> String {
    let out = bin().current_dir(dir).args(args).output().expect("spawn gpuledger");
    assert!(!out.status.success(), "gpuledger {args:?} should have failed; stdout: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("utf-8 stdout")
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shared traces folder, or None (with a note) in a fresh clone without it.
pub fn traces_dir(name: &str) -> Option<PathBuf> {
    let p = repo_root().join("..").join("shared").join("traces").join(name);
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIPPED: {} is absent (a fresh clone without ../shared/traces)", p.display());
        None
    }
}

/// Parses CSV text (no quoted commas) into header + rows.
pub fn parse_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("").split(',').map(String::from).collect();
    let rows = lines.map(|l| l.split(',').map(String::from).collect()).collect();
    (header, rows)
}

/// Every file under `dir` (relative path, bytes), sorted.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push((p.strip_prefix(base).unwrap().display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
