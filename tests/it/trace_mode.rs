//! Trace mode on the real Alibaba GPU v2025 DLRM trace: the lake's chargeback against
//! GPU-hours computed here, straight from the trace's CSV.

use crate::common;
use crate::common::JsonNumber;

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

/// Per container of the GenAI memory trace, consecutive readings 50-70 s apart, both non-zero:
/// the share equal to the one before, and the median relative move of the others.
fn trace_memory_shape(path: &std::path::Path) -> (f64, f64) {
    let r = BufReader::new(flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap()));
    let mut lines = r.lines();
    let header: Vec<String> = lines.next().unwrap().unwrap().split(',').map(String::from).collect();
    let idx = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (ts, value, container) = (idx("timestamp_anon"), idx("value"), idx("container_ip"));
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for line in lines {
        let line = line.unwrap();
        let f: Vec<&str> = line.split(',').collect();
        series.entry(f[container].to_string()).or_default().push((f[ts].parse().unwrap(), f[value].parse().unwrap()));
    }
    let mut pairs = Vec::new();
    for points in series.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in points.windows(2) {
            let ((t0, v0), (t1, v1)) = (w[0], w[1]);
            if (50.0..=70.0).contains(&(t1 - t0)) && v0 > 0.0 && v1 > 0.0 {
                pairs.push((v0, v1));
            }
        }
    }
    shape(&pairs)
}

/// The share of `(before, after)` pairs that are equal, and the median relative move of the rest.
fn shape(pairs: &[(f64, f64)]) -> (f64, f64) {
    let unchanged = pairs.iter().filter(|(a, b)| a == b).count() as f64 / pairs.len() as f64;
    let mut moves: Vec<f64> = pairs.iter().filter(|(a, b)| a != b).map(|(a, b)| (b - a).abs() / a).collect();
    moves.sort_by(f64::total_cmp);
    (unchanged, moves[moves.len() / 2])
}

/// The simulator's framebuffer readings hold levels and move the way a real cluster's do: the
/// share of 1-minute readings equal to the one before and the size of a move, against the same
/// figures computed here from the GenAI trace's CSV. (Fresh noise on every reading, as the
/// simulator once drew, gives 0% unchanged and made the lake's storage look worse than it is.)
/// Temperature, which no trace here records, changes by at most 1 C between most readings.
#[test]
fn simulated_framebuffer_holds_levels_like_the_genai_trace() {
    let Some(trace) = common::traces_dir("alibaba-genai-v2026-gpu-util") else { return };
    let (real_unchanged, real_move) = trace_memory_shape(&trace.join("pod_gpu_memory_used_bytes_anon.csv.gz"));
    let dir = tempfile::tempdir().unwrap();
    common::run_ok(dir.path(), &["simulate", "--out", "s", "--gpus", "16", "--days", "1", "--step", "60", "--start", "2026-10-01", "--warmup-days", "1"]);
    let sql = "SELECT mem_used_mib, lag(mem_used_mib) OVER w, temp_c, lag(temp_c) OVER w FROM gpu_samples \
               WHERE pod IS NOT NULL WINDOW w AS (PARTITION BY gpu_uuid, gpu_instance_id, pod ORDER BY ts)";
    let out = common::run_ok(dir.path(), &["--lake", "s/lake", "query", sql, "--format", "csv"]);
    let rows = common::parse_csv(&common::stdout(&out)).1;
    let value = |s: &String| s.parse::<f64>().ok();
    let mem: Vec<(f64, f64)> = rows.iter().filter_map(|r| Some((value(&r[1])?, value(&r[0])?))).filter(|(a, b)| *a > 0.0 && *b > 0.0).collect();
    let temps: Vec<f64> = rows.iter().filter_map(|r| Some((value(&r[2])? - value(&r[3])?).abs())).collect();
    assert!(mem.len() > 5_000 && temps.len() > 5_000, "{} framebuffer and {} temperature pairs", mem.len(), temps.len());
    let (sim_unchanged, sim_move) = shape(&mem);
    let temp_steady = temps.iter().filter(|d| **d <= 1.0).count() as f64 / temps.len() as f64;
    eprintln!(
        "framebuffer unchanged after a minute: simulated {:.1}% vs trace {:.1}%; median move {:.1}% vs {:.1}%; temperature within 1 C: {:.1}%",
        sim_unchanged * 100.0,
        real_unchanged * 100.0,
        sim_move * 100.0,
        real_move * 100.0,
        temp_steady * 100.0
    );
    assert!((sim_unchanged - real_unchanged).abs() < 0.06, "unchanged: simulated {sim_unchanged} vs trace {real_unchanged}");
    assert!((sim_move / real_move - 1.0).abs() < 0.35, "median move: simulated {sim_move} vs trace {real_move}");
    assert!(temp_steady > 0.9, "temperature within 1 C of the reading before: {temp_steady}");
}
