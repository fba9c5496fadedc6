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

/// Runs the binary in `dir` and insists on exit 3, data incomplete: the output is written and
/// marked, stderr says why.
pub fn run_incomplete(dir: &Path, args: &[&str]) -> Output {
    let out = bin().current_dir(dir).args(args).output().expect("spawn gpuledger");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "gpuledger {args:?}: want exit 3 (data incomplete): {err}\nstdout: {}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains("data incomplete: ") && err.contains("run.min_completeness_pct"), "{err}");
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
        // CI has the traces: a test that needs them may not skip there.
        assert!(std::env::var_os("GPULEDGER_REQUIRE_TRACES").is_none(), "{} is absent and GPULEDGER_REQUIRE_TRACES is set", p.display());
        eprintln!("SKIPPED: {} is absent (a fresh clone without ../shared/traces)", p.display());
        None
    }
}

/// Parses CSV text (RFC 4180) into header + rows, with the `csv` crate.
pub fn parse_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(text.as_bytes());
    let header = reader.headers().expect("a CSV header").iter().map(String::from).collect();
    let rows = reader.records().map(|r| r.expect("a CSV record").iter().map(String::from).collect()).collect();
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

/// Decodes an 8-bit RGB or RGBA PNG (what Chromium's screenshots are) into (width, height,
/// channels, pixels), with the `png` crate.
pub fn decode_png(bytes: &[u8]) -> (usize, usize, usize, Vec<u8>) {
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().expect("a PNG");
    let (width, height) = (reader.info().width as usize, reader.info().height as usize);
    assert_eq!(reader.info().bit_depth, png::BitDepth::Eight, "8-bit samples");
    let channels = match reader.info().color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("PNG colour type {other:?} not handled"),
    };
    let mut pixels = vec![0u8; width * height * channels];
    reader.next_frame(&mut pixels).expect("the PNG's pixels");
    (width, height, channels, pixels)
}

#[cfg(feature = "s3")]
pub mod moto;
