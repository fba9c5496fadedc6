//! Trace mode on the real Alibaba GPU v2025 DLRM trace: the lake's chargeback against
//! GPU-hours computed here, straight from the trace's CSV.

mod common;
use common::JsonNumber;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};

/// GPU-hours per app over the first `days` of the trace, by the trace README's rule.
fn reference(dir: &std::path::Path, days: f64) -> BTreeMap<String, f64> {
    let f = std::fs::File::open(dir.join("disaggregated_DLRM_trace.csv.gz")).unwrap();
    let r = BufReader::new(flate2::read::GzDecoder::new(f));
    let mut lines = r.lines();
    let header: Vec<String> = lines.next().unwrap().unwrap().split(',').map(String::from).collect();
    let idx = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (app, gpu, sched, del) = (idx("app_name"), idx("gpu_request"), idx("scheduled_time"), idx("deletion_time"));
    let end = days * 86400.0;
    let mut out = BTreeMap::new();
    for line in lines {
        let line = line.unwrap();
        let f: Vec<&str> = line.split(',').collect();
        let g: f64 = f[gpu].parse().unwrap_or(0.0);
        if g <= 0.0 {
            continue;
        }
        let s: f64 = f[sched].parse().unwrap_or(0.0);
        let e: f64 = f[del].parse().unwrap_or(f64::INFINITY);
        let overlap = (e.min(end) - s.max(0.0)).max(0.0);
        if overlap > 0.0 {
            *out.entry(f[app].to_string()).or_insert(0.0) += g * overlap / 3600.0;
        }
    }
    out
}

#[test]
fn trace_chargeback_matches_the_trace_csv() {
    let Some(trace) = common::traces_dir("alibaba-gpu-v2025-dlrm") else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace_arg = trace.display().to_string();
    common::run_ok(dir.path(), &["simulate", "--trace", &trace_arg, "--out", "t", "--days", "1", "--step", "30", "--start", "2026-10-01"]);
    let out = common::run_ok(dir.path(), &["--lake", "t/lake", "report", "chargeback", "--from", "2026-10-01", "--to", "2026-10-02", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let want = reference(&trace, 1.0);
    let total_want: f64 = want.values().sum();
    let total_got: f64 = rows.iter().filter(|r| r["namespace"] != "__unallocated__").map(|r| r["gpu_hours"].number().unwrap()).sum();
    eprintln!("trace day 1: {} apps, {total_got:.1} GPU-h from the lake vs {total_want:.1} from the CSV", want.len());
    assert!((total_got - total_want).abs() / total_want < 0.001, "total {total_got} vs {total_want}");
    let (mut checked, mut worst) = (0, (0.0f64, String::new()));
    for (app, hours) in &want {
        let got = rows.iter().find(|r| r["namespace"] == app.as_str()).map(|r| r["gpu_hours"].number().unwrap()).unwrap_or(0.0);
        if *hours >= 24.0 {
            let err = (got - hours).abs() / hours;
            if err > worst.0 {
                worst = (err, format!("{app}: {got} vs {hours}"));
            }
            assert!(err < 0.001, "{app}: {got} GPU-h vs {hours} in the trace");
            checked += 1;
        } else {
            assert!((got - hours).abs() <= 0.2 + hours * 0.05, "{app}: {got} GPU-h vs {hours} in the trace");
        }
    }
    eprintln!("{checked} apps with at least a GPU-day; worst relative error {:.4}% ({})", worst.0 * 100.0, worst.1);
    assert!(checked >= 20, "enough apps with a full GPU-day to compare: {checked}");

    // `plan` on the trace's day: the baseline replay delivers each app's GPU-hours of the CSV
    // (every pod runs its recorded time), and binds pods within a tick or two: the pool, sized
    // to the trace's peak, always has room, and the trace does not record why its pods waited.
    let out = common::run_ok(dir.path(), &["--lake", "t/lake", "plan", "--from", "2026-10-01", "--to", "2026-10-02", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cal = doc.as_array().unwrap().iter().find(|s| s["report"] == "plan_calibration").unwrap();
    eprintln!("trace day 1, plan: {}", cal["notes"][0].as_str().unwrap());
    let cal_rows = cal["rows"].as_array().unwrap();
    let (mut replayed_checked, mut rec_p95_max, mut rep_p95_max) = (0, 0.0f64, 0.0f64);
    for (app, hours) in &want {
        let Some(r) = cal_rows.iter().find(|r| r["namespace"] == app.as_str()) else { continue };
        let got = r["gpu_hours_replayed"].number().unwrap();
        if *hours >= 24.0 {
            // The report states GPU-hours to 0.1.
            assert!((got - hours).abs() <= 0.05 + hours * 0.001, "{app}: replayed {got} GPU-h vs {hours} in the trace");
            replayed_checked += 1;
        }
        rec_p95_max = rec_p95_max.max(r["wait_p95_min_recorded"].number().unwrap());
        rep_p95_max = rep_p95_max.max(r["wait_p95_min_replayed"].number().unwrap());
    }
    eprintln!("trace day 1, plan: p95 waits at most {rec_p95_max} min in the trace, {rep_p95_max} min replayed");
    assert_eq!(replayed_checked, checked);
    assert!(rep_p95_max <= 1.0, "the replay binds within two ticks on a pool with room: {rep_p95_max} min");
}
