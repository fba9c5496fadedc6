//! Golden output of every report (25 sections, the plan's four, the summary's two and the quota review's two included) on a small fixture lake: 16 simulated GPUs over two days
//! (seed 5). The numbers themselves are checked against the simulator in `ops_reports.rs`;
//! this pins the exact output (columns, order, rounding, formats) so any change to it is a
//! deliberate one. The goldens are insta snapshots (`tests/golden/reports/<report>.snap`): a
//! change is written beside them as `.snap.new` for `cargo insta review`, or accepted with
//! `INSTA_UPDATE=always cargo test --release --features ballista --test it -- golden_reports::`; review the diff.

use crate::common;

#[test]
fn every_report_matches_its_golden_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "s", "--gpus", "16", "--days", "2", "--seed", "5", "--start", "2026-10-01"]);
    std::fs::write(
        dir.join("g.toml"),
        "[lake]\npath = \"s/lake\"\n[run]\nmin_completeness_pct = 0\nreports_dir = \"r\"\n[teams]\nteam-llm = \"foundation-models\"\n",
    )
    .unwrap();
    common::run_ok(dir, &["--config", "g.toml", "run", "--month", "2026-10", "--no-collect"]);
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir.join("r/2026-10")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".csv") {
            names.push(name);
        }
    }
    names.sort();
    assert_eq!(names.len(), 25, "{names:?}");
    for name in &names {
        let got = std::fs::read_to_string(dir.join("r/2026-10").join(name)).unwrap();
        insta::with_settings!({ snapshot_path => "../golden/reports", prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(name.trim_end_matches(".csv"), got);
        });
    }
}
