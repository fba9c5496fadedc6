//! `gpuledger demo` end to end: the month's chargeback against the simulator's independent
//! ground-truth ledger, exact conservation, byte-identical re-runs, and the scenarios the
//! simulator promises (MIG, preemption, OOM kills, zombies, quota queues, reused pod names).

use crate::common;
use crate::common::JsonNumber;

use std::path::Path;

use serde_json::Value;

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn query_csv(dir: &Path, sql: &str) -> Vec<Vec<String>> {
    let out = common::run_ok(dir, &["--lake", "demo/lake", "query", sql, "--format", "csv"]);
    common::parse_csv(&common::stdout(&out)).1
}

#[test]
fn demo_month_matches_ledger_and_is_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::run_ok(dir.path(), &["demo", "--out", "demo", "--month", "2026-10"]);
    let printed = common::stdout(&out);
    assert!(printed.contains("__unallocated__") && printed.contains("conservation:"), "demo prints the chargeback:\n{printed}");
    // It fits a terminal: the table's lines (not the notes under it) at most 160 characters, the
    // columns that matter, the ones left out named; `--wide` and the files have them all.
    let table: Vec<&str> = printed.lines().filter(|l| l.contains(" | ") || l.starts_with("---")).collect();
    let widest = table.iter().map(|l| l.chars().count()).max().unwrap();
    assert!(table.len() > 5 && widest <= 160, "the demo's table is {widest} characters wide:\n{printed}");
    let header = table[0];
    for c in ["namespace", "team", "gpu_hours", "avg_util_pct", "energy_kwh", "power_cost", "cloud_cost", "total_cost", "share_pct"] {
        assert!(header.contains(c), "{c} shown: {header}");
    }
    assert!(!header.contains("cpu_cost") && printed.contains("empty or zero in every row: cpu_cost"), "{printed}");
    let wide = common::stdout(&common::run_ok(dir.path(), &["--config", "demo/gpuledger.toml", "report", "chargeback", "--month", "2026-10", "--wide"]));
    let txt = std::fs::read_to_string(dir.path().join("demo/reports/2026-10/chargeback.txt")).unwrap();
    assert_eq!(wide, txt, "--wide is the month's file, every column");
    assert!(wide.lines().any(|l| l.contains("cpu_cost") && l.contains("request_based_gpu_hours")), "{wide}");

    let ledger = read_json(&dir.path().join("demo/ledger.json"));
    let report = read_json(&dir.path().join("demo/reports/2026-10/chargeback.json"));
    for f in ["chargeback.csv", "chargeback.md", "chargeback.parquet", "chargeback.txt"] {
        assert!(dir.path().join("demo/reports/2026-10").join(f).is_file(), "{f} written");
    }

    // 64 GPUs x 31 days, exactly, on both sides.
    let cluster_s = ledger["cluster_gpu_seconds"].number().unwrap();
    assert_eq!(cluster_s, 64.0 * 31.0 * 86400.0);
    let c = &report["conservation"];
    assert_eq!(c["rows_gpu_us"], c["cluster_gpu_us"], "rows sum to the cluster total");
    assert_eq!(c["rows_energy_mj"], c["cluster_energy_mj"]);
    assert_eq!(c["cluster_gpu_us"].as_i64().unwrap() as f64, cluster_s * 1e6, "no GPU-second lost or doubled");
    let cluster_j = ledger["cluster_energy_j"].number().unwrap();
    let lake_j = c["cluster_energy_mj"].number().unwrap() / 1000.0;
    assert!((lake_j - cluster_j).abs() / cluster_j < 1e-6, "cluster energy {lake_j} J vs ledger {cluster_j} J");

    // Each namespace within 0.5% of the ledger for GPU-hours and energy.
    let rows = report["rows"].as_array().unwrap();
    let ns = ledger["namespaces"].as_object().unwrap();
    assert_eq!(rows.len(), ns.len(), "one row per ledger namespace plus __unallocated__");
    let mut worst: f64 = 0.0;
    for (name, truth) in ns {
        let row = rows.iter().find(|r| r["namespace"] == name.as_str()).unwrap_or_else(|| panic!("no row for {name}"));
        let want_h = truth["gpu_hours"].number().unwrap();
        let got_h = row["gpu_hours"].number().unwrap();
        let want_e = truth["energy_kwh"].number().unwrap();
        let got_e = row["energy_kwh"].number().unwrap();
        assert!(want_h > 100.0, "{name} has a meaningful month ({want_h} GPU-h)");
        let eh = (got_h - want_h).abs() / want_h;
        let ee = (got_e - want_e).abs() / want_e;
        eprintln!("{name:>16}: GPU-h {got_h:.2} vs {want_h:.2} ({:.4}%), kWh {got_e:.2} vs {want_e:.2} ({:.4}%)", eh * 100.0, ee * 100.0);
        assert!(eh < 0.005, "{name}: GPU-hours {got_h} vs ledger {want_h}");
        assert!(ee < 0.005, "{name}: energy {got_e} kWh vs ledger {want_e}");
        worst = worst.max(eh).max(ee);
    }
    eprintln!("worst relative error: {:.4}%", worst * 100.0);

    // Re-running the month's report gives byte-identical output.
    let csv1 =
        common::stdout(&common::run_ok(dir.path(), &["--config", "demo/gpuledger.toml", "report", "chargeback", "--month", "2026-10", "--format", "csv"]));
    let csv2 =
        common::stdout(&common::run_ok(dir.path(), &["--config", "demo/gpuledger.toml", "report", "chargeback", "--month", "2026-10", "--format", "csv"]));
    assert_eq!(csv1, csv2);
    assert_eq!(csv1, std::fs::read_to_string(dir.path().join("demo/reports/2026-10/chargeback.csv")).unwrap());

    // The scenarios the later reports need are in the lake.
    let scalar = |sql: &str| -> i64 { query_csv(dir.path(), sql)[0][0].parse().unwrap() };
    assert!(scalar("SELECT count(*) FROM gpu_samples WHERE mig_profile IS NOT NULL AND namespace IS NOT NULL") > 0, "MIG instances in use");
    assert!(scalar("SELECT count(*) FROM pods WHERE termination_reason = 'Preempted'") > 0, "preemptions");
    assert!(scalar("SELECT count(*) FROM pods WHERE termination_reason = 'OOMKilled'") > 0, "OOM kills");
    assert!(scalar("SELECT count(*) FROM gpu_samples WHERE namespace IS NULL AND mem_used_mib > 0 AND util_pct = 0") > 0, "zombie framebuffer");
    assert!(scalar("SELECT count(*) FROM gpu_samples WHERE namespace IS NOT NULL AND util_pct < 1") > 0, "allocated but idle");
    assert!(scalar("SELECT count(*) FROM pending_samples WHERE reason = 'QuotaExceeded'") > 0, "quota queues");
    assert!(scalar("SELECT count(*) FROM pending_samples WHERE reason = 'Unschedulable'") > 0, "capacity queues");
    assert!(
        scalar("SELECT count(*) FROM (SELECT namespace, pod FROM pods GROUP BY namespace, pod HAVING count(DISTINCT uid) > 1)") > 0,
        "pod names reused with a new uid"
    );
    assert!(scalar("SELECT count(DISTINCT gpu_model) FROM gpu_samples") == 3, "three GPU models");
    // Daily rhythm: more pods are created in working hours than at night.
    let day = scalar("SELECT count(*) FROM pods WHERE date_part('hour', created) BETWEEN 9 AND 18 AND date_part('dow', created) BETWEEN 1 AND 5");
    let night = scalar("SELECT count(*) FROM pods WHERE date_part('hour', created) NOT BETWEEN 9 AND 18 AND date_part('dow', created) BETWEEN 1 AND 5");
    assert!(day * 14 > night * 10 * 2, "working hours busier per hour: {day} in 10 h vs {night} in 14 h");
}

#[test]
fn same_seed_same_lake_bytes() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let args = ["simulate", "--out", "sim", "--gpus", "24", "--days", "2", "--seed", "7", "--start", "2026-10-05"];
    common::run_ok(a.path(), &args);
    common::run_ok(b.path(), &args);
    let ta = common::tree(&a.path().join("sim"));
    let tb = common::tree(&b.path().join("sim"));
    assert!(ta.len() > 8, "lake files and ledger: {}", ta.len());
    assert_eq!(ta.iter().map(|t| &t.0).collect::<Vec<_>>(), tb.iter().map(|t| &t.0).collect::<Vec<_>>());
    for (x, y) in ta.iter().zip(&tb) {
        assert!(x.1 == y.1, "{} differs between runs", x.0);
    }
    // A different seed gives a different history.
    let c = tempfile::tempdir().unwrap();
    common::run_ok(c.path(), &["simulate", "--out", "sim", "--gpus", "24", "--days", "2", "--seed", "8", "--start", "2026-10-05"]);
    assert_ne!(std::fs::read(a.path().join("sim/ledger.json")).unwrap(), std::fs::read(c.path().join("sim/ledger.json")).unwrap());
}
