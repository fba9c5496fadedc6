//! Golden output of every report (17 sections) on a small fixture lake: 16 simulated GPUs over two days
//! (seed 5). The numbers themselves are checked against the simulator in `ops_reports.rs`;
//! this pins the exact output (columns, order, rounding, formats) so any change to it is a
//! deliberate one. Regenerate with `GOLDEN_REGENERATE=1 cargo test --release --test golden_reports`
//! and review the diff.

mod common;

#[test]
fn every_report_matches_its_golden_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "s", "--gpus", "16", "--days", "2", "--seed", "5", "--start", "2026-10-01"]);
    std::fs::write(dir.join("g.toml"), "[lake]\npath = \"s/lake\"\n[run]\nmin_completeness_pct = 0\nreports_dir = \"r\"\n[teams]\nteam-llm = \"foundation-models\"\n").unwrap();
    common::run_ok(dir, &["--config", "g.toml", "run", "--month", "2026-10", "--no-collect"]);
    let golden = common::repo_root().join("tests/golden/reports");
    let regenerate = std::env::var_os("GOLDEN_REGENERATE").is_some();
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir.join("r/2026-10")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".csv") {
            names.push(name);
        }
    }
    names.sort();
    assert_eq!(names.len(), 17, "{names:?}");
    let mut differ = Vec::new();
    for name in &names {
        let got = std::fs::read_to_string(dir.join("r/2026-10").join(name)).unwrap();
        if regenerate {
            std::fs::create_dir_all(&golden).unwrap();
            std::fs::write(golden.join(name), &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(golden.join(name)).unwrap_or_else(|_| panic!("no golden {name} (GOLDEN_REGENERATE=1 writes it)"));
        if got != want {
            differ.push(format!("{name}:\n--- golden\n{want}\n--- got\n{got}"));
        }
    }
    assert!(differ.is_empty(), "reports differ from their golden output:\n{}", differ.join("\n"));
}
