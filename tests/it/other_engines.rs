//! Other engines read the lake. DuckDB (PyPI `duckdb`), given only the Hive-partitioned Parquet
//! files and SQL written for it here (`tests/duckdb/lake_totals.py`, not gpuledger's queries),
//! gets the chargeback's GPU-hours, energy and GPU cost per namespace, and the exact cluster
//! totals of its conservation line. Needs a Python with duckdb: `GPULEDGER_DUCKDB_PYTHON`, else
//! `python3`; says SKIPPED where there is none, unless `GPULEDGER_REQUIRE_DUCKDB` is set (CI).

use crate::common;
use crate::common::JsonNumber;

use std::process::Command;

use gpuledger::config::Config;
use serde_json::Value;

fn duckdb_python() -> Option<String> {
    let py = std::env::var("GPULEDGER_DUCKDB_PYTHON").unwrap_or_else(|_| "python3".into());
    if Command::new(&py).args(["-c", "import duckdb"]).output().is_ok_and(|o| o.status.success()) {
        return Some(py);
    }
    assert!(
        std::env::var_os("GPULEDGER_REQUIRE_DUCKDB").is_none(),
        "{py} cannot import duckdb and GPULEDGER_REQUIRE_DUCKDB is set (pip install duckdb, or point GPULEDGER_DUCKDB_PYTHON at a Python that has it)"
    );
    eprintln!("SKIPPED: {py} cannot import duckdb (pip install duckdb, or set GPULEDGER_DUCKDB_PYTHON; .ci/run installs it)");
    None
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].number().unwrap_or_else(|| panic!("{key} in {v}"))
}

#[test]
fn duckdb_reads_the_lake_and_gets_the_chargeback() {
    let Some(py) = duckdb_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    common::run_ok(tmp.path(), &["simulate", "--out", "s", "--gpus", "32", "--days", "3", "--seed", "8", "--start", "2026-10-01", "--time-sliced", "2"]);
    let lake = tmp.path().join("s/lake");
    let (from, to) = ("2026-10-01T00:00:00Z", "2026-10-03T12:00:00Z");
    common::run_ok(tmp.path(), &["--lake", lake.to_str().unwrap(), "report", "chargeback", "--from", from, "--to", to, "--format", "json", "-o", "cb.json"]);
    let cb: Value = serde_json::from_slice(&std::fs::read(tmp.path().join("cb.json")).unwrap()).unwrap();

    let mut cmd = Command::new(&py);
    cmd.arg(common::repo_root().join("tests/duckdb/lake_totals.py")).args(["--lake", lake.to_str().unwrap(), "--from", from, "--to", to]);
    for p in Config::default().pricing.gpu.iter().filter(|p| p.mig_profile.is_none()) {
        cmd.args(["--price", &format!("{}={}", p.model, p.price_per_hour)]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "lake_totals.py: {}", String::from_utf8_lossy(&out.stderr));
    let duck: Value = serde_json::from_slice(&out.stdout).unwrap();
    let duck = duck["namespaces"].as_object().unwrap();

    // The exact integers of the conservation line: every GPU-microsecond and millijoule.
    let sum = |k: &str| duck.values().map(|v| v[k].as_i64().unwrap()).sum::<i64>();
    assert_eq!(cb["conservation"]["cluster_gpu_us"].as_i64().unwrap(), sum("gpu_us"), "cluster GPU-us");
    assert_eq!(cb["conservation"]["cluster_energy_mj"].as_i64().unwrap(), sum("energy_mj"), "cluster mJ");

    // Per namespace, at the report's decimals (its rows are apportioned to sum to the rounded
    // total, so a row may differ from its own rounding by one unit of the last place).
    let rows = cb["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["namespace"].as_str().unwrap()).collect();
    let mut duck_names: Vec<&str> = duck.keys().map(String::as_str).collect();
    duck_names.sort();
    assert_eq!(names, duck_names, "the same namespaces");
    assert!(names.len() >= 4 && names.contains(&"__unallocated__"), "{names:?}");
    for r in rows {
        let ns = r["namespace"].as_str().unwrap();
        let d = &duck[ns];
        let hours = d["gpu_us"].as_i64().unwrap() as f64 / 3.6e9;
        let kwh = d["energy_mj"].as_i64().unwrap() as f64 / 3.6e9;
        let cost = d["gpu_cost_us"].as_str().unwrap().parse::<f64>().unwrap() / 3.6e9;
        assert!((num(r, "gpu_hours") - hours).abs() <= 0.000_11, "{ns}: gpu_hours {} vs DuckDB {hours}", num(r, "gpu_hours"));
        assert!((num(r, "energy_kwh") - kwh).abs() <= 0.000_11, "{ns}: energy_kwh {} vs DuckDB {kwh}", num(r, "energy_kwh"));
        assert!((num(r, "gpu_cost") - cost).abs() <= 0.011, "{ns}: gpu_cost {} vs DuckDB {cost}", num(r, "gpu_cost"));
        assert!(hours > 0.0 || ns == "__unallocated__", "{ns} used no GPU time");
    }
}
