//! Golden SQL test: a hand-built fixture lake, the real binary, and expected output worked
//! out by hand (fixtures/golden/README.md); the expected file is edited by hand, never
//! regenerated from the code's output.

use crate::common;

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
    let out = common::run_ok(dir.path(), &["report", "chargeback", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-01T00:02:00Z", "--format", "csv"]);
    let got = common::stdout(&out);
    let golden_path = common::repo_root().join("tests/golden/chargeback.csv");
    // Worked out by hand: edited by hand, never regenerated from the code's output.
    let want = std::fs::read_to_string(&golden_path).unwrap();
    assert_eq!(got, want, "chargeback CSV differs from {}", golden_path.display());
}

#[test]
fn chargeback_states_exact_conservation() {
    let dir = fixture_lake();
    let out = common::run_ok(dir.path(), &["report", "chargeback", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-01T00:02:00Z", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let c = &v["conservation"];
    // 3 GPUs x 120 s, and 61,500 J, independent of any grouping.
    assert_eq!(c["cluster_gpu_us"], 360_000_000i64);
    assert_eq!(c["rows_gpu_us"], 360_000_000i64);
    assert_eq!(c["cluster_energy_mj"], 61_500_000i64);
    assert_eq!(c["rows_energy_mj"], 61_500_000i64);
    assert_eq!(v["total"]["gpu_hours"], "0.1000", "exact decimals are JSON strings at their scale");
    assert_eq!(v["total"]["cloud_cost"], "0.38");
    assert_eq!(v["total"]["power_cost"], "2.22");
    let text = common::stdout(&common::run_ok(dir.path(), &["report", "chargeback", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-01T00:02:00Z"]));
    assert!(text.contains("conservation: GPU-hours rows 0.1000 = cluster 0.1000"), "{text}");
}

/// A price change inside the window: the H100's 6.88 until 2026-09-30, 1.00 from 2026-10-01
/// (a date: the new price starts at 00:00 UTC). The window starts half a minute before, so the
/// fixture's row of pod a-0 at 23:59:30 pays the old price and every later H100 row the new one.
#[test]
fn power_basis_and_piecewise_prices() {
    let dir = fixture_lake();
    let mut cfg = std::fs::read_to_string(dir.path().join("gpuledger.toml")).unwrap();
    cfg = cfg.replace("basis = \"cloud\"", "basis = \"power\"");
    cfg.push_str("\n[[pricing.gpu]]\nmodel = \"NVIDIA H100 80GB HBM3\"\nprice_per_hour = 1.00\neffective_from = \"2026-10-01\"\n");
    // Only the H100 has a row at 23:59:30: the window is not complete, and need not be here.
    cfg.push_str("\n[run]\nmin_completeness_pct = 0\n");
    std::fs::write(dir.path().join("gpuledger.toml"), cfg).unwrap();
    let out = common::run_ok(dir.path(), &["report", "chargeback", "--from", "2026-09-30T23:59:30Z", "--to", "2026-10-01T00:02:00Z", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let row = |ns: &str| rows.iter().find(|r| r["namespace"] == ns).unwrap_or_else(|| panic!("no row {ns}: {v}"));
    // GPU cost in USD x 3.6e9 (price per hour x GPU-microseconds):
    //   a: H100 30e6 us x 6.88 (a-0, 23:59:30) + 60e6 x 1.00 + MIG 4 x 12,857,143 us x 3.67
    //      = 206,400,000 + 60,000,000 + 188,742,859.24 = 455,142,859.24 -> 0.126429
    //      (every H100 row at 6.88 would give 0.2244, every one at 1.00 0.0774)
    //   b: H100 30e6 x 1.00 + L4 4 x 30e6 x 0.80 = 126,000,000 -> 0.035
    //   unallocated: H100 30e6 x 1.00 + MIG 4 x 17,142,857 x 3.67 = 281,657,140.76 -> 0.078238
    //   total 862,800,000 -> 0.239667 -> 0.24; largest remainders: a 0.13, b 0.03, unallocated 0.08.
    assert_eq!(row("a")["cloud_cost"], "0.13", "{v}");
    assert_eq!(row("b")["cloud_cost"], "0.03", "{v}");
    assert_eq!(row("__unallocated__")["cloud_cost"], "0.08", "{v}");
    assert_eq!(v["total"]["cloud_cost"], "0.24", "{v}");
    // basis = power: total_cost is the power cost. Energy 15,000 + 2 x 9,000 + 4 x 2,700 J (a),
    // 9,000 + 4 x 1,800 (b), 2,100 + 4 x 3,600 (unallocated) = 76,500 J = 0.02125 kWh x 100 x 1.3
    // = 2.7625 -> 2.76.
    assert_eq!(row("a")["total_cost"], row("a")["power_cost"]);
    assert_eq!(v["total"]["total_cost"], "2.76", "{v}");
}

/// A utilisation that was missing (stored as null: none scraped, NaN, Inf) is measured GPU time
/// but no utilisation: the average leaves it out instead of counting it as 0%, and completeness
/// counts it as missing, so the report is marked and exits 3.
#[test]
fn a_null_utilisation_is_left_out_of_the_average_and_counted_missing() {
    let dir = tempfile::tempdir().unwrap();
    let golden = common::repo_root().join("fixtures/golden");
    std::fs::copy(golden.join("gpuledger.toml"), dir.path().join("gpuledger.toml")).unwrap();
    let csv = std::fs::read_to_string(golden.join("gpu_samples.csv")).unwrap();
    let row = "2026-10-01T00:00:30Z,30,node-1,GPU-h100,0,NVIDIA H100 80GB HBM3,,,a,a-1,main,1,60,";
    assert!(csv.contains(row));
    std::fs::write(dir.path().join("s.csv"), csv.replace(row, &row.replace(",1,60,", ",1,,"))).unwrap();
    import_csv(&Lake::new(dir.path().join("lake")), Table::GpuSamples, &dir.path().join("s.csv")).unwrap();
    let window = ["--from", "2026-10-01T00:00:00Z", "--to", "2026-10-01T00:02:00Z"];
    let out = common::run_incomplete(dir.path(), &[&["report", "chargeback"][..], &window, &["--format", "json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = v["rows"].as_array().unwrap().iter().find(|r| r["namespace"] == "a").unwrap().clone();
    // a: H100 80% for 30 s (its other 30 s has no value) and a 3/7 MIG instance at 70% for
    // 4 x 30 s: (80 x 30e6 + 4 x 70 x 12,857,143) / (30e6 + 4 x 12,857,143) = 73.68%; counting the
    // missing value as 0% would give 53.85%.
    assert_eq!(a["avg_util_pct"], "73.68", "{a}");
    assert_eq!(a["gpu_hours"], "0.0309", "the GPU time itself is all there");
    let mark = v["data_incomplete"].as_str().unwrap();
    // 4 units (the H100, the L4, the MIG instance and its GPU's unpartitioned rest) x 4 steps.
    assert!(mark.starts_with("util 93.75% (15 of 16) for "), "{mark}");
    let out = common::run_incomplete(dir.path(), &[&["report", "completeness"][..], &window, &["--format", "csv"]].concat());
    let (_, rows) = common::parse_csv(&common::stdout(&out));
    let util = rows.iter().find(|r| r[1] == "util").unwrap();
    assert_eq!(&util[3..6], ["16", "15", "93.75"], "{rows:?}");
    let dcgm = rows.iter().find(|r| r[1] == "dcgm").unwrap();
    assert_eq!(&dcgm[3..6], ["16", "16", "100.00"], "{rows:?}");
}

/// A MIG profile's own price that starts inside the window (`gpu_rates`): the A100's 3g.40gb
/// instance pays its share of the GPU price (3.67 per GPU-hour) until 2026-09-30 and 20.00 per
/// instance-hour from 2026-10-01; its 4g.40gb neighbour, with no price of its own, pays its
/// share of the GPU price throughout. Hand-worked, in USD x 3.6e9 (price x microseconds):
///   a (3g.40gb): 23:59:30 share 3/7 x 30 s = 12,857,143 us x 3.67 = 47,185,714.81;
///                00:00:00 one instance x 30 s = 30,000,000 us x 20.00 = 600,000,000;
///                647,185,714.81 -> 0.179774 USD
///   unallocated (4g.40gb): 2 x 17,142,857 us x 3.67 = 125,828,570.38 -> 0.034952 USD
///   total 773,014,285.19 -> 0.214726 -> 0.21; largest remainders: a 0.18, unallocated 0.03.
/// (The profile price on both rows would give a 0.33; the GPU share on both, 0.03.)
#[test]
fn a_mig_profile_price_that_starts_inside_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let header = std::fs::read_to_string(common::repo_root().join("fixtures/golden/gpu_samples.csv")).unwrap().lines().next().unwrap().to_string();
    let row = |ts: &str, profile: &str, id: u8, ns: &str, pod: &str, share: &str| {
        format!(
            "{ts},30,node-2,GPU-mig,0,NVIDIA A100-SXM4-80GB,{profile},{id},{ns},{pod},{},{share},50,1,40192,100,3000,40,0",
            if pod.is_empty() { "" } else { "main" }
        )
    };
    let rows = [
        row("2026-09-30T23:59:30Z", "3g.40gb", 1, "a", "a-2", "0.42857142857142855"),
        row("2026-09-30T23:59:30Z", "4g.40gb", 2, "", "", "0.5714285714285714"),
        row("2026-10-01T00:00:00Z", "3g.40gb", 1, "a", "a-2", "0.42857142857142855"),
        row("2026-10-01T00:00:00Z", "4g.40gb", 2, "", "", "0.5714285714285714"),
    ];
    std::fs::write(dir.path().join("s.csv"), format!("{header}\n{}\n", rows.join("\n"))).unwrap();
    import_csv(&Lake::new(dir.path().join("lake")), Table::GpuSamples, &dir.path().join("s.csv")).unwrap();
    std::fs::write(
        dir.path().join("gpuledger.toml"),
        "[lake]\npath = \"lake\"\n[run]\nmin_completeness_pct = 0\n[pricing]\ncurrency = \"USD\"\n\
         [[pricing.gpu]]\nmodel = \"NVIDIA A100-SXM4-80GB\"\nprice_per_hour = 3.67\n\
         [[pricing.gpu]]\nmodel = \"NVIDIA A100-SXM4-80GB\"\nmig_profile = \"3g.40gb\"\nprice_per_hour = 20.00\neffective_from = \"2026-10-01\"\n",
    )
    .unwrap();
    let window = ["--from", "2026-09-30T23:59:30Z", "--to", "2026-10-01T00:00:30Z"];
    let out = common::run_ok(dir.path(), &[&["report", "chargeback"][..], &window, &["--format", "json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cost =
        |ns: &str| v["rows"].as_array().unwrap().iter().find(|r| r["namespace"] == ns).unwrap_or_else(|| panic!("no row {ns}: {v}"))["cloud_cost"].clone();
    assert_eq!(cost("a"), "0.18", "{v}");
    assert_eq!(cost("__unallocated__"), "0.03", "{v}");
    assert_eq!(v["total"]["cloud_cost"], "0.21", "{v}");
    // The `usage` view prices every row through the same rate table (each row's cost to 1e-10
    // USD: DataFusion's decimal division keeps 10 digits before the cast to 12).
    let sql = "SELECT namespace, CAST(SUM(cloud_cost) AS VARCHAR) AS c FROM usage GROUP BY namespace ORDER BY namespace";
    let (_, got) = common::parse_csv(&common::stdout(&common::run_ok(dir.path(), &["query", sql, "--format", "csv"])));
    let usd = |ns: &str| got.iter().find(|r| r[0] == ns).unwrap_or_else(|| panic!("no {ns}: {got:?}"))[1].parse::<f64>().unwrap();
    assert!((usd("a") - 647_185_714.81 / 3.6e9).abs() < 3e-10, "{got:?}");
    assert!((usd("__unallocated__") - 125_828_570.38 / 3.6e9).abs() < 3e-10, "{got:?}");
}
