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
    assert!(out.status.success(), "gpuledger {args:?} failed: {}\nstdout: {}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
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

/// Decodes an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's screenshots are) into
/// (width, height, channels, pixels), with flate2 and the five PNG row filters. (Not the `png`
/// crate: its `miniz_oxide` "simd" feature changes flate2's build, and with it parquet's and
/// all of DataFusion's, so the test build would compile them all a second time.)
pub fn decode_png(bytes: &[u8]) -> (usize, usize, usize, Vec<u8>) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let (mut pos, mut idat) = (8, Vec::new());
    let (mut width, mut height, mut channels) = (0, 0, 0);
    while pos + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        let kind = &bytes[pos + 4..pos + 8];
        let data = &bytes[pos + 8..pos + 8 + len];
        match kind {
            b"IHDR" => {
                width = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
                height = u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize;
                assert_eq!(data[8], 8, "8-bit samples");
                channels = match data[9] {
                    2 => 3,
                    6 => 4,
                    other => panic!("PNG colour type {other} not handled"),
                };
                assert_eq!(data[12], 0, "non-interlaced");
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        pos += 12 + len;
    }
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(&idat[..]), &mut raw).unwrap();
    let stride = width * channels;
    let mut out = vec![0u8; stride * height];
    for y in 0..height {
        let filter = raw[y * (stride + 1)];
        let line = &raw[y * (stride + 1) + 1..(y + 1) * (stride + 1)];
        for x in 0..stride {
            let a = if x >= channels { out[y * stride + x - channels] as i32 } else { 0 };
            let b = if y > 0 { out[(y - 1) * stride + x] as i32 } else { 0 };
            let c = if x >= channels && y > 0 { out[(y - 1) * stride + x - channels] as i32 } else { 0 };
            let predictor = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => (a + b) / 2,
                4 => {
                    let p = a + b - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("PNG filter {f}"),
            };
            out[y * stride + x] = (line[x] as i32 + predictor) as u8;
        }
    }
    (width, height, channels, out)
}

#[cfg(feature = "s3")]
pub mod moto;

pub mod browser;

/// Reads a number from gpuledger's JSON: integers and floats are JSON numbers, exact decimals
/// (money, hours, kWh) are JSON strings; the simulator's ledger has plain numbers.
pub trait JsonNumber {
    fn number(&self) -> Option<f64>;
}

impl JsonNumber for serde_json::Value {
    fn number(&self) -> Option<f64> {
        self.as_f64().or_else(|| self.as_str().and_then(|s| s.parse().ok()))
    }
}

/// Polls `ready` every 50 ms until it holds, failing the test with `what` after `limit`: a test
/// waits for the thing it needs, never for a fixed time that a loaded machine can outrun.
pub fn wait_until(what: &str, limit: std::time::Duration, mut ready: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !ready() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Every report kind's command-line name, for the tests that compare a report across engines
/// or stores byte for byte; a new kind is compared without a test edit. Left out: `focus`
/// (CSV and Parquet only, no JSON) and `summary` (made of the chargeback, idle and queue
/// reports, which are compared themselves).
pub fn report_kinds_compared() -> Vec<String> {
    use gpuledger::report::ReportKind;
    ReportKind::all().iter().filter(|k| !matches!(k, ReportKind::Focus | ReportKind::Summary)).map(|k| k.cli_name()).collect()
}
