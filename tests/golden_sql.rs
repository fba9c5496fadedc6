//! Golden SQL test: a hand-built fixture lake, the real binary, and expected output worked
//! out by hand (fixtures/golden/README.md). `GOLDEN_REGENERATE=1` rewrites the expected file.

mod common;

use gpuledger::lake::import::import_csv;
use gpuledger::lake::{Lake, Table};

fn fixture_lake() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let golden = common::repo_root().join("fixtures/golden");
    std::fs::copy(golden.join("gpuledger.toml"), dir.path().join("gpuledger.toml")).unwrap();
    let lake = Lake::new(dir.path().join("lake"));
    let days = import_csv(&lake, Table::GpuSamples, &golden.join("gpu_samples.csv")).unwrap();
    assert_eq!(days.len(), 2, "fixture spans 2026-09-30 and 2026-10-01");
    dir
}

#[test]
fn chargeback_matches_hand_computed_golden() {
    let dir = fixture_lake();
    let out = common::run_ok(
        dir.path(),
        &["report", "chargeback", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-01T00:02:00Z", "--format", "csv"],
    );
    let got = common::stdout(&out);
    let golden_path = common::repo_root().join("tests/golden/chargeback.csv");
    if std::env::var_os("GOLDEN_REGENERATE").is_some() {
        std::fs::write(&golden_path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&golden_path).unwrap();
    assert_eq!(got, want, "chargeback CSV differs from {}", golden_path.display());
}

#[test]
fn chargeback_states_exact_conservation() {
    let dir = fixture_lake();
    let out = common::run_ok(
        dir.path(),
        &["report", "chargeback", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-01T00:02:00Z", "--format", "json"],
    );
    let v: serde_json::Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let c = &v["conservation"];
    // 3 GPUs x 120 s, and 61,500 J, independent of any grouping.
    assert_eq!(c["cluster_gpu_us"], 360_000_000i64);
    assert_eq!(c["rows_gpu_us"], 360_000_000i64);
    assert_eq!(c["cluster_energy_mj"], 61_500_000i64);
    assert_eq!(c["rows_energy_mj"], 61_500_000i64);
    assert_eq!(v["total"]["gpu_hours"], serde_json::json!(0.1));
    assert_eq!(v["total"]["cloud_cost"], serde_json::json!(0.38));
    assert_eq!(v["total"]["power_cost"], serde_json::json!(2.22));
    let text = common::stdout(&common::run_ok(
        dir.path(),
        &["report", "chargeback", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-01T00:02:00Z"],
    ));
    assert!(text.contains("conservation: GPU-hours rows 0.1000 = cluster 0.1000"), "{text}");
}

#[test]
fn power_basis_and_piecewise_prices() {
    let dir = fixture_lake();
    // H100 price changes at 00:01:00: the first two H100 rows (namespace a) at 6.88, the
    // last two (unallocated, b) at 1.00.
    let mut cfg = std::fs::read_to_string(dir.path().join("gpuledger.toml")).unwrap();
    cfg = cfg.replace("basis = \"cloud\"", "basis = \"power\"");
    cfg.push_str("\n[[pricing.gpu]]\nmodel = \"NVIDIA H100 80GB HBM3\"\nprice_per_hour = 1.00\neffective_from = \"2026-10-01\"\n");
    // effective_from is a date: the new price starts at 2026-10-01T00:00, so every in-window
    // H100 row is priced at 1.00.
    std::fs::write(dir.path().join("gpuledger.toml"), cfg).unwrap();
    let out = common::run_ok(
        dir.path(),
        &["report", "chargeback", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-01T00:02:00Z", "--format", "json"],
    );
    let v: serde_json::Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let a = rows.iter().find(|r| r["namespace"] == "a").unwrap();
    // a: 60e6 us x 1.00 + 51,428,572 us x 3.67, / 3.6e9 = 0.016667 + 0.052429 = 0.069 -> 0.07
    assert_eq!(a["cloud_cost"], serde_json::json!(0.07));
    // basis = power: total_cost is the power cost
    assert_eq!(a["total_cost"], a["power_cost"]);
    assert_eq!(v["total"]["total_cost"], serde_json::json!(2.22));
}
