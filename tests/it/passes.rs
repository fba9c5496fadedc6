//! The passes over `gpu_samples` against the same questions asked in plain SQL, on a simulated
//! lake with MIG instances and a time-sliced GPU, over a window that cuts days in half:
//! - the idle report's run detection (`src/lake/passes/idle_runs.rs` + `queries/idle_pods.sql`) vs
//!   `benches/sql/idle_pods_windowed.sql` (gaps and islands with window functions over every
//!   row; at this size it fits in memory, at a month of 1,024 GPUs it does not);
//! - the chargeback's per-bucket sums (`src/lake/passes/gpu_buckets.rs`, from the stored rollups or
//!   the samples), and per pod (`pod_buckets`), vs `benches/sql/gpu_buckets.sql` and
//!   `benches/sql/pod_buckets.sql` (a GROUP BY over every row), and the rule
//!   that a rollup is used only while it matches its day's samples.
//!
//! The SQL forms are independent formulations (DataFusion's operators, not the passes' loops).

use crate::common;

use arrow::array::RecordBatch;
use arrow::util::display::array_value_to_string;
use chrono::{TimeZone, Utc};
use datafusion::common::ScalarValue;
use gpuledger::config::Config;
use gpuledger::domain::window::Window;
use gpuledger::engine::{run_query, SessionBuilder};
use gpuledger::lake::passes::gpu_buckets;
use gpuledger::lake::passes::idle_runs::{scan, IdleRule};
use gpuledger::lake::{rollup, write_partition, Lake, Table};
use gpuledger::queries::Queries;
use gpuledger::report::columns::window_params;
use gpuledger::report::idle::pod_idle;

fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        for i in 0..b.num_rows() {
            let cells: Vec<String> = b.columns().iter().map(|c| array_value_to_string(c, i).unwrap()).collect();
            out.push(cells.join("|"));
        }
    }
    out.sort();
    out
}

fn params(window: &Window, rule: IdleRule) -> Vec<ScalarValue> {
    let mut p = window_params(window);
    p.push(ScalarValue::Float64(Some(rule.util_threshold_pct)));
    p.push(ScalarValue::Int64(Some(rule.min_secs)));
    p
}

#[test]
fn streaming_pass_equals_the_windowed_sql() {
    let tmp = tempfile::tempdir().unwrap();
    common::run_ok(tmp.path(), &["simulate", "--out", "s", "--gpus", "48", "--days", "4", "--seed", "9", "--start", "2026-10-01", "--time-sliced", "4"]);
    let lake = Lake::new(tmp.path().join("s/lake"));
    let window = Window::new(Utc.with_ymd_and_hms(2026, 10, 1, 13, 7, 30).unwrap(), Utc.with_ymd_and_hms(2026, 10, 4, 9, 0, 0).unwrap()).unwrap();
    let windowed = std::fs::read_to_string(common::repo_root().join("benches/sql/idle_pods_windowed.sql")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let config = Config::default();
    let queries = Queries::new(None);
    let mut compared = 0;
    let mut edges = (0, 0);
    // At the default threshold the whole days 2 and 3 come from their idle rollups (runs of at
    // least 30 minutes, and of at least a minute, the shortest they keep); at 30 % from the samples.
    for rule in [
        IdleRule { util_threshold_pct: 5.0, min_secs: 1800 },
        IdleRule { util_threshold_pct: 5.0, min_secs: 60 },
        IdleRule { util_threshold_pct: 30.0, min_secs: 60 },
    ] {
        let (want, got) = rt.block_on(async {
            let ctx = SessionBuilder::default().build(&lake, &config).await.unwrap();
            let want = run_query(&ctx, "windowed", &windowed, params(&window, rule)).await.unwrap();
            let got = pod_idle(&ctx, &queries, &window, rule, params(&window, rule)).await.unwrap();
            (rows(&want), rows(&got))
        });
        assert!(want.len() > 100, "the lake holds pods: {}", want.len());
        let runs: i64 = want.iter().map(|r| r.split('|').nth(8).unwrap().parse::<i64>().unwrap()).sum();
        assert!(runs > 10, "threshold {}: idle runs found: {runs}", rule.util_threshold_pct);
        // The band's two edges (runs within a step of the minimum, counted and not) are found too.
        let edge = |col: usize| want.iter().filter(|r| r.split('|').nth(col).unwrap() != "0").count();
        edges = (edges.0 + edge(10), edges.1 + edge(11));
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "threshold {} min {} s: windowed SQL vs streaming pass", rule.util_threshold_pct, rule.min_secs);
        }
        assert_eq!(want.len(), got.len());
        compared += want.len();
    }
    assert!(compared > 300);
    assert!(edges.0 > 0 && edges.1 > 0, "pods with counted runs within a step of the minimum, and with runs a step short: {edges:?}");
    // Pods on the time-sliced GPU (several at the same step) and on MIG instances are among them.
    let scan = scan(&lake, &window, IdleRule { util_threshold_pct: 5.0, min_secs: 1800 }, None).unwrap();
    let (counted, sliced, mig) = rt.block_on(async {
        let ctx = SessionBuilder::default().build(&lake, &config).await.unwrap();
        let one = |sql: &'static str| {
            let ctx = ctx.clone();
            let p = window_params(&window)[..2].to_vec();
            async move {
                let b = run_query(&ctx, "count", sql, p).await.unwrap();
                arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(b[0].column(0)).value(0)
            }
        };
        (
            one("SELECT count(*) FROM gpu_samples WHERE ts >= $1 AND ts < $2 AND pod IS NOT NULL").await,
            one("SELECT count(DISTINCT pod) FROM gpu_samples WHERE ts >= $1 AND ts < $2 AND pod IS NOT NULL AND share < 1 AND gpu_instance_id IS NULL").await,
            one("SELECT count(DISTINCT pod) FROM gpu_samples WHERE ts >= $1 AND ts < $2 AND pod IS NOT NULL AND gpu_instance_id IS NOT NULL").await,
        )
    });
    assert_eq!(scan.rows as i64, counted, "the pass reads every GPU row with a pod inside the window");
    assert_eq!(scan.rollup_days, 2, "the two whole days from their rollups");
    assert!(sliced >= 4 && mig >= 4, "time-sliced pods {sliced}, MIG pods {mig}");
}

/// A day file whose rows are not in gpuledger's order (written by something else) is named in
/// a clear error rather than read into wrong runs.
#[test]
fn a_file_out_of_time_order_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    common::run_ok(tmp.path(), &["simulate", "--out", "s", "--gpus", "4", "--days", "1", "--seed", "3", "--start", "2026-10-01"]);
    let lake = Lake::new(tmp.path().join("s/lake"));
    let day = chrono::NaiveDate::from_ymd_opt(2026, 10, 1).unwrap();
    let batch = gpuledger::lake::reader::read_partition(&lake, Table::GpuSamples, day).unwrap().unwrap();
    // Reverse the rows and write them without the writer's sort.
    let idx = arrow::array::UInt32Array::from_iter_values((0..batch.num_rows() as u32).rev());
    let reversed = arrow::compute::take_record_batch(&batch, &idx).unwrap();
    let path = lake.partition_file(Table::GpuSamples, day);
    let file = std::fs::File::create(&path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, reversed.schema(), None).unwrap();
    w.write(&reversed).unwrap();
    w.close().unwrap();
    let window = Window::month("2026-10", Utc::now()).unwrap();
    let err = scan(&lake, &window, IdleRule { util_threshold_pct: 5.0, min_secs: 1800 }, None).err().expect("refused").to_string();
    assert!(err.contains("gpu_samples-2026-10-01.parquet") && err.contains("not in time order"), "{err}");
    // Written through the lake's writer the same rows are sorted again and read.
    write_partition(&lake, Table::GpuSamples, day, &reversed).unwrap();
    assert!(scan(&lake, &window, IdleRule { util_threshold_pct: 5.0, min_secs: 1800 }, None).unwrap().rows > 0);
}

/// `benches/sql/gpu_buckets.sql` over `window`: the rows as text, sorted.
fn sql_buckets(rt: &tokio::runtime::Runtime, lake: &Lake, window: &Window) -> Vec<String> {
    sql_sums(rt, lake, window, "gpu_buckets.sql", "namespace")
}

/// `benches/sql/<file>` over `window`, its labels `labels` after the cluster: the rows as text, sorted.
fn sql_sums(rt: &tokio::runtime::Runtime, lake: &Lake, window: &Window, file: &str, labels: &str) -> Vec<String> {
    let sql = std::fs::read_to_string(common::repo_root().join("benches/sql").join(file)).unwrap();
    let want = rt.block_on(async {
        let ctx = SessionBuilder::default().build(lake, &Config::default()).await.unwrap();
        // The SQL's bucket is date_bin's (nanoseconds): compare at the pass's millisecond type.
        let wrapped = format!(
            "SELECT cluster, {labels}, node, gpu_model, mig_profile, CAST(bucket AS TIMESTAMP(3)) AS bucket, day, share, step_s, n, energy_mj, util_gpu_us, util_n FROM ({sql})"
        );
        run_query(&ctx, file, &wrapped, window_params(window)).await.unwrap()
    });
    rows(&want).into_iter().map(|r| r.replace("T", " ")).collect()
}

fn pass_rows(got: &gpu_buckets::GpuBuckets) -> Vec<String> {
    rows(&got.batches).into_iter().map(|r| r.replace("T", " ").replace("Z", "")).collect()
}

fn assert_same(want: &[String], got: &[String], what: &str) {
    assert!(want.len() > 500, "{what}: only {} buckets", want.len());
    assert_eq!(want.len(), got.len(), "{what}: groups");
    for (w, g) in want.iter().zip(got) {
        assert_eq!(w, g, "{what}: SQL vs pass");
    }
}

fn day(d: u32) -> chrono::NaiveDate {
    chrono::NaiveDate::from_ymd_opt(2026, 10, d).unwrap()
}

/// A window cutting the first day inside a bucket (samples read) and ending on a bucket edge
/// inside the last (that day's rollup, cut): equal to the GROUP BY over every row, whatever the
/// threads, and again with the rollups gone (every day from its samples).
#[test]
fn bucket_pass_equals_the_group_by() {
    let tmp = tempfile::tempdir().unwrap();
    common::run_ok(tmp.path(), &["simulate", "--out", "s", "--gpus", "48", "--days", "3", "--seed", "4", "--start", "2026-10-01", "--time-sliced", "4"]);
    let lake = Lake::new(tmp.path().join("s/lake"));
    let window = Window::new(Utc.with_ymd_and_hms(2026, 10, 1, 5, 7, 30).unwrap(), Utc.with_ymd_and_hms(2026, 10, 3, 20, 0, 0).unwrap()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let want = sql_buckets(&rt, &lake, &window);
    for threads in [1, 3] {
        let got = gpu_buckets::scan(&lake, &window, threads).unwrap();
        assert_eq!((got.rollup_days, got.scanned_days.clone()), (2, vec![day(1)]), "days 2 and 3 from rollups");
        assert_same(&want, &pass_rows(&got), &format!("{threads} threads"));
    }
    // The same per pod (the `pod_buckets` rollup): one level finer, rows no pod held kept.
    let want_pods = sql_sums(&rt, &lake, &window, "pod_buckets.sql", "namespace, pod");
    assert!(want_pods.len() > want.len(), "per pod, more groups: {} vs {}", want_pods.len(), want.len());
    let got = gpu_buckets::scan_pods(&lake, &window, 3).unwrap();
    assert_eq!((got.rollup_days, got.scanned_days.clone()), (2, vec![day(1)]), "pods: days 2 and 3 from rollups");
    assert_same(&want_pods, &pass_rows(&got), "pods");
    std::fs::remove_dir_all(lake.root().join(rollup::DIR)).unwrap();
    std::fs::remove_dir_all(rollup::kind_dir(&lake, rollup::POD_BUCKETS)).unwrap();
    let got = gpu_buckets::scan(&lake, &window, 2).unwrap();
    assert_eq!((got.rollup_days, got.scanned_days.len()), (0, 3));
    assert_same(&want, &pass_rows(&got), "without rollups");
    let got = gpu_buckets::scan_pods(&lake, &window, 2).unwrap();
    assert_eq!((got.rollup_days, got.scanned_days.len()), (0, 3));
    assert_same(&want_pods, &pass_rows(&got), "pods without rollups");
}

/// A rollup is used only while it matches the day's samples: one copied from another day, or
/// left beside samples rewritten by something other than the writer, is passed over (and the
/// day's samples read); the writer replaces a day's rollup with its samples; `gpuledger rollup`
/// brings missing and stale ones back, and leaves current ones alone.
#[test]
fn a_rollup_is_used_only_while_it_matches_its_samples() {
    let tmp = tempfile::tempdir().unwrap();
    common::run_ok(tmp.path(), &["simulate", "--out", "s", "--gpus", "24", "--days", "3", "--seed", "5", "--start", "2026-10-01", "--time-sliced", "2"]);
    let lake = Lake::new(tmp.path().join("s/lake"));
    let window = Window::new(Utc.with_ymd_and_hms(2026, 10, 1, 0, 0, 0).unwrap(), Utc.with_ymd_and_hms(2026, 10, 4, 0, 0, 0).unwrap()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scan_all = || gpu_buckets::scan(&lake, &window, 2).unwrap();
    assert_eq!((scan_all().rollup_days, scan_all().scanned_days.len()), (3, 0), "simulate writes every day's rollup");

    // Day 1's rollup copied over day 2's: same format, another source.
    std::fs::copy(rollup::file(&lake, day(1)), rollup::file(&lake, day(2))).unwrap();
    let got = scan_all();
    assert_eq!((got.rollup_days, got.scanned_days.clone()), (2, vec![day(2)]));
    assert_same(&sql_buckets(&rt, &lake, &window), &pass_rows(&got), "a copied rollup");

    // Day 3's samples cut to their first half by a plain Parquet writer, not the lake's.
    let batch = gpuledger::lake::reader::read_partition(&lake, Table::GpuSamples, day(3)).unwrap().unwrap();
    let half = batch.slice(0, batch.num_rows() / 2);
    let file = std::fs::File::create(lake.partition_file(Table::GpuSamples, day(3))).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, half.schema(), None).unwrap();
    w.write(&half).unwrap();
    w.close().unwrap();
    // Accepted as published (`collect --accept`): sessions read the lake as it now is.
    gpuledger::lake::published::Published::record(&lake, [day(3)]).unwrap();
    let got = scan_all();
    assert_eq!((got.rollup_days, got.scanned_days.clone()), (1, vec![day(2), day(3)]));
    let want = sql_buckets(&rt, &lake, &window);
    assert_same(&want, &pass_rows(&got), "samples rewritten behind the writer's back");
    let day_rows = |d| gpuledger::lake::reader::read_partition(&lake, Table::GpuSamples, day(d)).unwrap().unwrap().num_rows();
    assert_eq!(got.rows as usize, day_rows(1) + day_rows(2) + half.num_rows(), "rows summed: two whole days and half of one");

    // `gpuledger rollup` rewrites the two, then finds all three current.
    let lake_arg = lake.root().to_str().unwrap();
    let out = common::stdout(&common::run_ok(tmp.path(), &["--lake", lake_arg, "rollup"]));
    assert!(out.contains("gpu_samples 2 written, 1 already current"), "{out}");
    let got = scan_all();
    assert_eq!((got.rollup_days, got.scanned_days.len()), (3, 0));
    assert_same(&want, &pass_rows(&got), "after gpuledger rollup");
    let out = common::stdout(&common::run_ok(tmp.path(), &["--lake", lake_arg, "rollup"]));
    assert!(out.contains("0 written, 3 already current"), "{out}");

    // Through the writer, a day's samples and rollup change together.
    let first = gpuledger::lake::reader::read_partition(&lake, Table::GpuSamples, day(1)).unwrap().unwrap();
    let quarter = first.slice(0, first.num_rows() / 4);
    write_partition(&lake, Table::GpuSamples, day(1), &quarter).unwrap();
    gpuledger::lake::published::Published::record(&lake, [day(1)]).unwrap();
    let got = scan_all();
    assert_eq!((got.rollup_days, got.scanned_days.len()), (3, 0));
    assert_same(&sql_buckets(&rt, &lake, &window), &pass_rows(&got), "a day rewritten by the writer");
}

/// Every report read from rollups (chargeback, queue, quota, completeness, idle) writes the same
/// bytes from the rollups and from the samples, over a window cut inside buckets and a whole one.
#[test]
fn reports_are_the_same_from_rollups_and_from_samples() {
    let tmp = tempfile::tempdir().unwrap();
    common::run_ok(tmp.path(), &["simulate", "--out", "s", "--gpus", "32", "--days", "3", "--seed", "6", "--start", "2026-10-01", "--time-sliced", "2"]);
    let lake = tmp.path().join("s/lake");
    let lake_arg = lake.to_str().unwrap();
    let reports = |tag: &str| {
        let mut out = Vec::new();
        for (from, to) in [("2026-10-01T00:00:00Z", "2026-10-03T18:00:00Z"), ("2026-10-01T07:03:10Z", "2026-10-04T00:00:00Z")] {
            for report in ["chargeback", "queue", "quota", "completeness", "idle"] {
                let file = format!("{tag}-{report}-{}.json", &from[11..13]);
                let o = common::bin()
                    .current_dir(tmp.path())
                    .args(["--lake", lake_arg, "report", report, "--from", from, "--to", to, "--format", "json", "-o", &file])
                    .output()
                    .unwrap();
                assert!(matches!(o.status.code(), Some(0) | Some(3)), "{report}: {}", String::from_utf8_lossy(&o.stderr));
                // A report of several sections writes a folder of files.
                let path = tmp.path().join(&file);
                let text = if path.is_dir() {
                    common::tree(&path).into_iter().map(|(n, b)| format!("== {n}\n{}", String::from_utf8_lossy(&b))).collect::<String>()
                } else {
                    String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()
                };
                out.push((file.clone(), text));
            }
        }
        out
    };
    let from_rollups = reports("rollups");
    std::fs::remove_dir_all(lake.join(rollup::ROOT)).unwrap();
    let from_samples = reports("samples");
    // (A conservation mismatch fails the chargeback, so both runs also conserved.)
    assert!(from_samples[0].1.contains("gpu_hours_conserved"), "{}", from_samples[0].1);
    assert!(from_samples[1].1.contains("p95_wait_min") && from_samples[2].1.contains("recommendation"), "{}", from_samples[2].1);
    for ((name, a), (_, b)) in from_rollups.iter().zip(&from_samples) {
        assert_eq!(a, b, "{name}");
    }
}

/// The heatmap and the page's daily pool, read from the 15-minute sums, against the same sums
/// over every row of `gpu_time` (the per-row SQL they ran before the sums), from the rollups and
/// from the samples, over a window that starts and ends inside buckets.
#[test]
fn heatmap_and_daily_pool_from_the_sums_equal_the_per_row_sql() {
    let tmp = tempfile::tempdir().unwrap();
    common::run_ok(tmp.path(), &["simulate", "--out", "s", "--gpus", "32", "--days", "3", "--seed", "6", "--start", "2026-10-01", "--time-sliced", "2"]);
    let lake = Lake::new(tmp.path().join("s/lake"));
    let window = Window::new(Utc.with_ymd_and_hms(2026, 10, 1, 5, 7, 30).unwrap(), Utc.with_ymd_and_hms(2026, 10, 3, 18, 52, 0).unwrap()).unwrap();
    let per_row_heatmap = "SELECT CAST(date_part('dow', s.ts) AS BIGINT) AS dow, CAST(date_part('hour', s.ts) AS BIGINT) AS hour, \
        SUM(s.gpu_us), SUM(s.allocated_gpu_us), SUM(s.util_gpu_us), SUM(s.util_known_gpu_us), \
        SUM(CASE WHEN s.allocated THEN s.util_gpu_us ELSE 0 END), SUM(CASE WHEN s.allocated THEN s.util_known_gpu_us ELSE 0 END) \
        FROM gpu_time s WHERE s.date >= $3 AND s.date <= $4 AND s.ts >= $1 AND s.ts < $2 GROUP BY 1, 2";
    let per_row_days = "SELECT s.date, SUM(s.gpu_us), SUM(s.allocated_gpu_us), SUM(s.util_gpu_us), SUM(s.util_known_gpu_us) \
        FROM gpu_time s WHERE s.date >= $3 AND s.date <= $4 AND s.ts >= $1 AND s.ts < $2 GROUP BY 1 ORDER BY 1";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let config = Config::default();
    let queries = Queries::new(None);
    let run = || {
        rt.block_on(async {
            let ctx = SessionBuilder::default().build(&lake, &config).await.unwrap();
            let cells = gpuledger::report::heatmap::cells(&ctx, &queries, &window).await.unwrap();
            let days = gpuledger::report::pool_days::pool_days(&ctx, &queries, &window).await.unwrap();
            let want_cells = run_query(&ctx, "per-row heatmap", per_row_heatmap, window_params(&window)).await.unwrap();
            let want_days = run_query(&ctx, "per-row days", per_row_days, window_params(&window)).await.unwrap();
            (cells, days, rows(&want_cells), rows(&want_days))
        })
    };
    let (cells, days, want_cells, want_days) = run();
    // Every (weekday, hour) of the per-row SQL, field by field (SQL dow 0 = Sunday, cells Monday first).
    assert!(want_cells.len() >= 60, "the window spans more than two days of hours: {}", want_cells.len());
    let mut allocated = 0;
    for w in &want_cells {
        let v: Vec<i64> = w.split('|').map(|x| x.parse().unwrap()).collect();
        let c = cells[((v[0] + 6) % 7) as usize][v[1] as usize];
        assert_eq!(
            [c.gpu_us, c.allocated_us, c.util_us, c.util_known_us, c.allocated_util_us, c.allocated_util_known_us],
            [v[2], v[3], v[4], v[5], v[6], v[7]],
            "weekday {} hour {}",
            v[0],
            v[1]
        );
        allocated += v[3];
    }
    assert!(allocated > 0);
    let filled = cells.iter().flatten().filter(|c| c.gpu_us > 0).count();
    assert_eq!(filled, want_cells.len(), "no cell the rows do not have");
    // Each day of the window: GPU-hours, allocated hours and utilisation from the same integers.
    assert_eq!(days.len(), want_days.len());
    assert_eq!(days.len(), 3);
    for (d, w) in days.iter().zip(&want_days) {
        let v: Vec<&str> = w.split('|').collect();
        let n = |i: usize| v[i].parse::<i64>().unwrap();
        assert_eq!(d.date, v[0]);
        assert_eq!(d.gpu_hours, n(1) as f64 / 3.6e9, "{}", d.date);
        assert_eq!(d.allocated_hours, n(2) as f64 / 3.6e9, "{}", d.date);
        assert_eq!(d.util_pct, if n(4) > 0 { n(3) as f64 / n(4) as f64 } else { 0.0 }, "{}", d.date);
    }
    // The same from the samples alone, without the rollups.
    std::fs::remove_dir_all(tmp.path().join("s/lake").join(rollup::DIR)).unwrap();
    let (cells_again, days_again, _, _) = run();
    assert_eq!(cells_again, cells);
    assert_eq!(
        days_again.iter().map(|d| (d.date.clone(), d.gpu_hours, d.allocated_hours, d.util_pct)).collect::<Vec<_>>(),
        days.iter().map(|d| (d.date.clone(), d.gpu_hours, d.allocated_hours, d.util_pct)).collect::<Vec<_>>()
    );
}

/// The queue's hourly pending demand (per namespace and per pod), the quota review's histogram and
/// pending GPU-seconds and the idle report's unallocated GPUs and zombie memory, read from the
/// rollups (`queries/queue_pending.sql`, `queue_pending_pods.sql`, `quota_use.sql`,
/// `quota_limits.sql`, `idle_unallocated.sql`, `idle_zombie.sql` over `pending_buckets` /
/// `pending_pod_buckets` / `namespace_gpus` / `unallocated_units`), against the per-row SQL they
/// replaced (`benches/sql/`, every sample), over a window that starts and ends inside buckets
/// (those days read from their samples) and over whole days (rollups only); again with the
/// rollups gone, and for one cluster (`--cluster`). And the completeness counts kept in each
/// day's GPU rollup against `queries/completeness.sql` over the day's samples.
#[test]
fn queue_quota_and_completeness_from_rollups_equal_the_per_row_sql() {
    use gpuledger::lake::rollup::{NamespaceGpus, PendingSums, UnallocatedUnits};
    use gpuledger::report::rolled;
    let tmp = tempfile::tempdir().unwrap();
    common::run_ok(
        tmp.path(),
        &["simulate", "--out", "s", "--gpus", "40", "--days", "3", "--seed", "11", "--start", "2026-10-01", "--time-sliced", "3", "--cluster", "east"],
    );
    let lake = Lake::new(tmp.path().join("s/lake"));
    let cut = Window::new(Utc.with_ymd_and_hms(2026, 10, 1, 5, 7, 30).unwrap(), Utc.with_ymd_and_hms(2026, 10, 3, 18, 52, 0).unwrap()).unwrap();
    let whole = Window::new(Utc.with_ymd_and_hms(2026, 10, 1, 0, 0, 0).unwrap(), Utc.with_ymd_and_hms(2026, 10, 4, 0, 0, 0).unwrap()).unwrap();
    let per_row = |name: &str| std::fs::read_to_string(common::repo_root().join(format!("benches/sql/{name}.sql"))).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let config = Config::default();
    let queries = Queries::new(None);
    let compare = |cluster: Option<&str>, window: &Window, rollup_days: usize| {
        rt.block_on(async {
            let ctx = SessionBuilder::default().cluster(cluster.map(String::from)).build(&lake, &config).await.unwrap();
            let threads = ctx.state().config().target_partitions();
            let pending = gpuledger::lake::passes::rolled::scan::<PendingSums>(&lake, rollup::PENDING_BUCKETS, window, threads).unwrap();
            assert_eq!(pending.rollup_days, rollup_days, "pending days from rollups in {window:?}");
            let held = gpuledger::lake::passes::rolled::scan::<NamespaceGpus>(&lake, rollup::NAMESPACE_GPUS, window, threads).unwrap();
            assert_eq!(held.rollup_days, rollup_days, "histogram days from rollups in {window:?}");
            let mut sizes = Vec::new();
            for (name, kind) in [("queue_pending", rollup::PENDING_BUCKETS), ("quota_use", rollup::NAMESPACE_GPUS), ("quota_limits", rollup::PENDING_BUCKETS)] {
                let got = if kind == rollup::NAMESPACE_GPUS {
                    rolled::query::<NamespaceGpus>(&ctx, &queries, name, kind, window).await.unwrap()
                } else {
                    rolled::query::<PendingSums>(&ctx, &queries, name, kind, window).await.unwrap()
                };
                let want = run_query(&ctx, name, &per_row(name), window_params(window)).await.unwrap();
                let (got, want) = (rows(&got), rows(&want));
                assert_eq!(got, want, "{name} over {window:?} (cluster {cluster:?}): rollups vs every row");
                sizes.push(got.len());
            }
            // The same demand per pod (`pending_pod_buckets`, the queue by a key of each pod).
            let name = "queue_pending_pods";
            let got = rows(&rolled::query::<PendingSums<true>>(&ctx, &queries, name, rollup::PENDING_POD_BUCKETS, window).await.unwrap());
            let want = rows(&run_query(&ctx, name, &per_row(name), window_params(window)).await.unwrap());
            assert_eq!(got, want, "{name} over {window:?} (cluster {cluster:?}): rollups vs every row");
            assert!(got.len() > sizes[0] || got.len() + sizes[0] == 0, "per pod, finer than per namespace: {} rows vs {}", got.len(), sizes[0]);
            // The idle report's unallocated GPUs and zombie memory (`$7`, at two thresholds).
            for mem in [0.0, 1024.0] {
                let mut params = window_params(window);
                params.extend([ScalarValue::Float64(Some(5.0)), ScalarValue::Int64(Some(1800)), ScalarValue::Float64(Some(mem))]);
                rolled::register::<UnallocatedUnits>(&ctx, "idle", rollup::UNALLOCATED_UNITS, window).await.unwrap();
                for name in ["idle_unallocated", "idle_zombie"] {
                    let got = rows(&run_query(&ctx, name, &queries.get(name).unwrap(), params.clone()).await.unwrap());
                    let want = rows(&run_query(&ctx, name, &per_row(name), params.clone()).await.unwrap());
                    assert_eq!(got, want, "{name} over {window:?} (cluster {cluster:?}, zombie over {mem} MiB): rollups vs every row");
                    sizes.push(got.len());
                }
                rolled::deregister(&ctx, rollup::UNALLOCATED_UNITS);
            }
            sizes
        })
    };
    // 3 days: the cut window's first and last days are read from their samples.
    let sizes = compare(None, &cut, 1);
    assert!(sizes[0] > 40 && sizes[1] > 10 && sizes[2] > 3, "pending hours, histogram rows, namespaces: {sizes:?}");
    assert!(sizes[3] > 3 && sizes[4] > 0, "unallocated node/model rows and zombie GPUs at 0 MiB: {sizes:?}");
    assert_eq!(compare(None, &whole, 3), compare(Some("east"), &whole, 3));
    // The idle pass over whole days reads the days' idle rollups; one cluster's view of them.
    let idle = |cluster: Option<&str>| {
        let found = scan(&lake, &whole, IdleRule { util_threshold_pct: 5.0, min_secs: 1800 }, cluster).unwrap();
        (found.rollup_days, rows(std::slice::from_ref(&found.holding)), rows(std::slice::from_ref(&found.runs)))
    };
    let (days, holdings, runs) = idle(None);
    assert_eq!(days, 3);
    assert!(holdings.len() > 20 && !runs.is_empty(), "{} holdings, {} runs", holdings.len(), runs.len());
    assert_eq!(idle(Some("east")), (3, holdings, runs));
    assert_eq!(idle(Some("west")).1.len(), 0);
    assert_eq!(compare(Some("west"), &whole, 3), vec![0; 7], "another cluster's view is empty");

    // Completeness: each day's counts from its rollup equal the SQL over its samples.
    let sql = std::fs::read_to_string(common::repo_root().join("queries/completeness.sql")).unwrap();
    let by_sql = rt.block_on(async {
        let ctx = SessionBuilder::default().build(&lake, &config).await.unwrap();
        let mut out = Vec::new();
        for piece in whole.pieces(1) {
            out.extend(rows(&run_query(&ctx, "completeness", &sql, window_params(&piece)).await.unwrap()));
        }
        out
    });
    let stored: Vec<String> = (1..=3)
        .map(|d| {
            let counts = rollup::day_counts(&lake, day(d), &lake.partition_file(Table::GpuSamples, day(d))).expect("a current rollup with counts");
            assert_eq!(counts.of(Some("east")), counts.all);
            let c = counts.all;
            // The edges as the SQL's timestamps print.
            let ts = |ms: i64| array_value_to_string(&arrow::array::TimestampMillisecondArray::from(vec![ms]).with_timezone("UTC"), 0).unwrap();
            assert!(c.unit_steps >= c.gpu_rows && c.units_at_first > 0 && c.units_at_last > 0, "{c:?}");
            format!(
                "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
                day(d),
                c.gpu_rows,
                c.util_rows,
                c.energy_rows,
                c.units,
                c.step_s,
                c.unit_steps,
                ts(c.first_ms),
                ts(c.last_ms),
                c.units_at_first,
                c.units_at_last
            )
        })
        .collect();
    assert_eq!(stored, by_sql);
    // The report over the whole window (rollups) and the cut one (SQL on its edges), then the
    // same with no rollups at all: the same days.
    let days = |queries: &Queries| {
        rt.block_on(async {
            let ctx = SessionBuilder::default().build(&lake, &config).await.unwrap();
            let mut out = Vec::new();
            for w in [&whole, &cut] {
                let c = gpuledger::report::completeness::compute(&ctx, queries, w, 30, &["DCGM_FI_DEV_GPU_UTIL"], i64::MAX).await.unwrap();
                out.push(format!("{:?}", c.days));
            }
            out
        })
    };
    let from_rollups = days(&queries);
    // An override of completeness.sql (here the built-in SQL itself) runs the SQL on every day,
    // the cut window's edge days included: the same days as the rollups' counts and the fold.
    let sql_dir = tmp.path().join("sql");
    std::fs::create_dir_all(&sql_dir).unwrap();
    std::fs::write(sql_dir.join("completeness.sql"), &sql).unwrap();
    assert_eq!(days(&Queries::new(Some(&sql_dir))), from_rollups, "SQL on every day vs rollups and the fold");
    std::fs::remove_dir_all(lake.root().join(rollup::ROOT)).unwrap();
    assert_eq!(days(&queries), from_rollups, "every day folded from its samples");
    assert_eq!(compare(None, &cut, 0), sizes, "from the samples alone");
}
