//! The passes over `gpu_samples` against the same questions asked in plain SQL, on a simulated
//! lake with MIG instances and a time-sliced GPU, over a window that cuts days in half:
//! - the idle report's run detection (`src/report/idle_runs.rs` + `queries/idle_pods.sql`) vs
//!   `benches/sql/idle_pods_windowed.sql` (gaps and islands with window functions over every
//!   row; at this size it fits in memory, at a month of 1,024 GPUs it does not);
//! - the chargeback's per-bucket sums (`src/report/gpu_buckets.rs`) vs
//!   `benches/sql/gpu_buckets.sql` (a GROUP BY over every row).
//! The SQL forms are independent formulations (DataFusion's operators, not the passes' loops).

mod common;

use arrow::array::RecordBatch;
use arrow::util::display::array_value_to_string;
use chrono::{TimeZone, Utc};
use datafusion::common::ScalarValue;
use gpuledger::config::Config;
use gpuledger::engine::{run_query, SessionBuilder};
use gpuledger::lake::{write_partition, Lake, Table};
use gpuledger::queries::Queries;
use gpuledger::report::columns::window_params;
use gpuledger::report::idle::pod_idle;
use gpuledger::report::gpu_buckets;
use gpuledger::report::idle_runs::{scan, IdleRule};
use gpuledger::timewin::Window;

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
    common::run_ok(
        tmp.path(),
        &["simulate", "--out", "s", "--gpus", "48", "--days", "4", "--seed", "9", "--start", "2026-10-01", "--time-sliced", "4"],
    );
    let lake = Lake::new(tmp.path().join("s/lake"));
    let window = Window::new(Utc.with_ymd_and_hms(2026, 10, 1, 13, 7, 30).unwrap(), Utc.with_ymd_and_hms(2026, 10, 4, 9, 0, 0).unwrap()).unwrap();
    let windowed = std::fs::read_to_string(common::repo_root().join("benches/sql/idle_pods_windowed.sql")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let config = Config::default();
    let queries = Queries::new(None);
    let mut compared = 0;
    for rule in [IdleRule { util_threshold_pct: 5.0, min_secs: 1800 }, IdleRule { util_threshold_pct: 30.0, min_secs: 60 }] {
        let (want, got) = rt.block_on(async {
            let ctx = SessionBuilder::default().build(&lake, &config).await.unwrap();
            let want = run_query(&ctx, "windowed", &windowed, params(&window, rule)).await.unwrap();
            let got = pod_idle(&ctx, &queries, &window, rule, params(&window, rule)).await.unwrap();
            (rows(&want), rows(&got))
        });
        assert!(want.len() > 100, "the lake holds pods: {}", want.len());
        let runs: i64 = want.iter().map(|r| r.split('|').nth(8).unwrap().parse::<i64>().unwrap()).sum();
        assert!(runs > 10, "threshold {}: idle runs found: {runs}", rule.util_threshold_pct);
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "threshold {} min {} s: windowed SQL vs streaming pass", rule.util_threshold_pct, rule.min_secs);
        }
        assert_eq!(want.len(), got.len());
        compared += want.len();
    }
    assert!(compared > 200);
    // Pods on the time-sliced GPU (several at the same step) and on MIG instances are among them.
    let scan = scan(&lake, &window, IdleRule { util_threshold_pct: 5.0, min_secs: 1800 }).unwrap();
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
    let err = scan(&lake, &window, IdleRule { util_threshold_pct: 5.0, min_secs: 1800 }).err().expect("refused").to_string();
    assert!(err.contains("gpu_samples-2026-10-01.parquet") && err.contains("not in time order"), "{err}");
    // Written through the lake's writer the same rows are sorted again and read.
    write_partition(&lake, Table::GpuSamples, day, &reversed).unwrap();
    assert!(scan(&lake, &window, IdleRule { util_threshold_pct: 5.0, min_secs: 1800 }).unwrap().rows > 0);
}

#[test]
fn bucket_pass_equals_the_group_by() {
    let tmp = tempfile::tempdir().unwrap();
    common::run_ok(
        tmp.path(),
        &["simulate", "--out", "s", "--gpus", "48", "--days", "3", "--seed", "4", "--start", "2026-10-01", "--time-sliced", "4"],
    );
    let lake = Lake::new(tmp.path().join("s/lake"));
    let window = Window::new(Utc.with_ymd_and_hms(2026, 10, 1, 5, 7, 30).unwrap(), Utc.with_ymd_and_hms(2026, 10, 3, 20, 0, 0).unwrap()).unwrap();
    let sql = std::fs::read_to_string(common::repo_root().join("benches/sql/gpu_buckets.sql")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let want = rt.block_on(async {
        let ctx = SessionBuilder::default().build(&lake, &Config::default()).await.unwrap();
        // The SQL's bucket is date_bin's (nanoseconds): compare at the pass's millisecond type.
        let wrapped = format!("SELECT namespace, node, gpu_model, mig_profile, CAST(bucket AS TIMESTAMP(3)) AS bucket, share, step_s, n, energy_mj, util_gpu_us FROM ({sql})");
        run_query(&ctx, "gpu_buckets.sql", &wrapped, window_params(&window)).await.unwrap()
    });
    let want = rows(&want).into_iter().map(|r| r.replace("T", " ")).collect::<Vec<_>>();
    for threads in [1, 3] {
        let got = gpu_buckets::scan(&lake, &window, threads).unwrap();
        let got = rows(&[got.batch]).into_iter().map(|r| r.replace("T", " ").replace("Z", "")).collect::<Vec<_>>();
        assert!(want.len() > 1000, "buckets: {}", want.len());
        assert_eq!(want.len(), got.len(), "{threads} threads: groups");
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "{threads} threads: SQL vs pass");
        }
    }
}
