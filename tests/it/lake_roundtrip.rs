//! The lake writer and reader: schema, sort order, Parquet layout, idempotent rewrite of a
//! day, orphaned temp files, and an empty lake.

use crate::common;

use std::fs::File;
use std::sync::Arc;

use arrow::array::{Array, AsArray, Float32Array, Float64Array, Int16Array, Int32Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow::compute::cast;
use arrow::datatypes::TimestampMillisecondType;
use chrono::NaiveDate;
use gpuledger::config::Config;
use gpuledger::engine::{run_query, SessionBuilder};
use gpuledger::lake::{write_partition, Lake, Table};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding};

const DAY_MS: i64 = 1_790_812_800_000; // 2026-10-01T00:00:00Z

fn day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 10, 1).unwrap()
}

/// `n` GPU rows per GPU for `gpus` GPUs, deliberately in reverse order.
fn gpu_batch(gpus: usize, n: usize, util: f32) -> RecordBatch {
    let schema = Table::GpuSamples.schema();
    let mut rows: Vec<(i64, String, String)> = Vec::new();
    for g in 0..gpus {
        for k in 0..n {
            rows.push((DAY_MS + k as i64 * 30_000, format!("node-{}", g % 2), format!("GPU-{g:03}")));
        }
    }
    rows.reverse();
    let len = rows.len();
    let dict = |v: Vec<Option<&str>>| cast(&StringArray::from(v), &gpuledger::lake::schema::label_type()).unwrap();
    let columns: Vec<Arc<dyn Array>> = vec![
        Arc::new(TimestampMillisecondArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>()).with_timezone("UTC")),
        Arc::new(Int32Array::from(vec![30; len])),
        dict(rows.iter().map(|r| Some(r.1.as_str())).collect()),
        dict(rows.iter().map(|r| Some(r.2.as_str())).collect()),
        Arc::new(Int16Array::from(vec![0i16; len])),
        dict(vec![Some("NVIDIA L4"); len]),
        dict(vec![None; len]),
        Arc::new(Int16Array::from(vec![None; len])),
        dict(vec![Some("team-a"); len]),
        dict(vec![Some("pod-1"); len]),
        dict(vec![Some("main"); len]),
        Arc::new(Float64Array::from(vec![1.0; len])),
        Arc::new(Float32Array::from(vec![util; len])),
        Arc::new(Float32Array::from(vec![100.0; len])),
        Arc::new(Float32Array::from(vec![23034.0; len])),
        Arc::new(Float32Array::from(vec![50.0; len])),
        Arc::new(Float64Array::from(vec![1500.0; len])),
        Arc::new(Float32Array::from(vec![40.0; len])),
        Arc::new(Int32Array::from(vec![0; len])),
        Arc::new(Float64Array::from(vec![Some(1500.0); len])),
        dict(vec![Some("default"); len]),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

#[test]
fn written_file_is_sorted_compressed_and_self_describing() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::new(dir.path());
    let path = write_partition(&lake, Table::GpuSamples, day(), &gpu_batch(3, 100, 50.0)).unwrap();
    assert_eq!(path, dir.path().join("gpu_samples/date=2026-10-01/gpu_samples-2026-10-01.parquet"));

    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
    assert_eq!(builder.schema().fields(), Table::GpuSamples.schema().fields(), "schema round-trips");
    let meta = builder.metadata().clone();
    let file_meta = meta.file_metadata();
    let kv = file_meta.key_value_metadata().unwrap();
    let get = |k: &str| kv.iter().find(|e| e.key == k).and_then(|e| e.value.clone());
    assert_eq!(get("gpuledger.schema_version").as_deref(), Some("1"));
    assert_eq!(get("gpuledger.table").as_deref(), Some("gpu_samples"));
    let rg = meta.row_group(0);
    let sorting = rg.sorting_columns().expect("sorting_columns declared");
    let names: Vec<String> = sorting.iter().map(|s| file_meta.schema_descr().column(s.column_idx as usize).name().to_string()).collect();
    assert_eq!(names, ["cluster", "node", "gpu_uuid", "gpu_instance_id", "ts"]);
    for col in rg.columns() {
        assert!(matches!(col.compression(), Compression::ZSTD(_)), "{} is {:?}", col.column_path(), col.compression());
    }
    let ts_col = rg.columns().iter().find(|c| c.column_path().string() == "ts").unwrap();
    assert!(ts_col.encodings().any(|e| e == Encoding::DELTA_BINARY_PACKED), "ts encodings {:?}", ts_col.encodings().collect::<Vec<_>>());
    let node_col = rg.columns().iter().find(|c| c.column_path().string() == "node").unwrap();
    assert!(node_col.encodings().any(|e| e == Encoding::RLE_DICTIONARY), "labels are dictionary-encoded");
    let encodings = |name: &str| rg.columns().iter().find(|c| c.column_path().string() == name).unwrap().encodings().collect::<Vec<_>>();
    for name in ["energy_j", "temp_c", "util_pct"] {
        assert!(encodings(name).contains(&Encoding::BYTE_STREAM_SPLIT), "{name} encodings {:?}", encodings(name));
        assert!(!encodings(name).contains(&Encoding::RLE_DICTIONARY), "{name} encodings {:?}", encodings(name));
    }
    assert!(encodings("mem_used_mib").contains(&Encoding::PLAIN), "mem_used_mib encodings {:?}", encodings("mem_used_mib"));
    assert!(!encodings("mem_used_mib").contains(&Encoding::RLE_DICTIONARY), "mem_used_mib encodings {:?}", encodings("mem_used_mib"));

    // Rows really are in the declared order.
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
    let b = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(b.num_rows(), 300);
    let node = cast(b.column_by_name("node").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
    let uuid = cast(b.column_by_name("gpu_uuid").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
    let ts = b.column_by_name("ts").unwrap().as_primitive::<TimestampMillisecondType>().clone();
    let key = |i: usize| (node.as_string::<i32>().value(i).to_string(), uuid.as_string::<i32>().value(i).to_string(), ts.value(i));
    for i in 1..b.num_rows() {
        assert!(key(i - 1) <= key(i), "row {i} out of order: {:?} > {:?}", key(i - 1), key(i));
    }
}

#[test]
fn rewriting_a_day_replaces_it_and_orphans_are_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::new(dir.path());
    write_partition(&lake, Table::GpuSamples, day(), &gpu_batch(2, 50, 10.0)).unwrap();
    write_partition(&lake, Table::GpuSamples, day(), &gpu_batch(1, 20, 90.0)).unwrap();
    let files = lake.files(Table::GpuSamples).unwrap();
    assert_eq!(files.len(), 1, "one file per day: {files:?}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rows = rt.block_on(async {
        let ctx = SessionBuilder::default().build(&lake, &Config::default()).await.unwrap();
        run_query(&ctx, "t", "SELECT count(*) AS n, min(util_pct) AS u FROM gpu_samples", vec![]).await.unwrap()
    });
    let b = &rows[0];
    assert_eq!(b.column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0), 20, "only the second write's rows");
    assert_eq!(b.column(1).as_primitive::<arrow::datatypes::Float32Type>().value(0), 90.0);

    // A writer killed mid-file leaves a temp file: never read, removed by the next writer.
    let orphan = lake.partition_dir(Table::GpuSamples, day()).join("gpu_samples-2026-10-01.parquet.tmp");
    std::fs::write(&orphan, b"half a file").unwrap();
    assert_eq!(lake.files(Table::GpuSamples).unwrap().len(), 1);
    let count = rt.block_on(async {
        let ctx = SessionBuilder::default().build(&lake, &Config::default()).await.unwrap();
        run_query(&ctx, "t", "SELECT count(*) FROM gpu_samples", vec![]).await.unwrap()
    });
    assert_eq!(count[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0), 20, "temp file ignored by readers");
    assert_eq!(lake.clean_orphans().unwrap(), 1);
    assert!(!orphan.exists());
}

#[test]
fn empty_lake_queries_and_reports_fine() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::new(dir.path().join("does-not-exist-yet"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rows = rt.block_on(async {
        let ctx = SessionBuilder::default().build(&lake, &Config::default()).await.unwrap();
        let mut out = Vec::new();
        for t in Table::ALL {
            let r = run_query(&ctx, "t", &format!("SELECT count(*) FROM {}", t.name()), vec![]).await.unwrap();
            out.push(r[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0));
        }
        out
    });
    assert_eq!(rows, vec![0; Table::ALL.len()]);
    // A lake path with nothing at it is a usage error naming it (a typo, a missing mount), not
    // an empty month.
    for args in
        [&["report", "chargeback", "--month", "2026-10"][..], &["query", "SELECT count(*) FROM gpu_samples"], &["run", "--no-collect", "--month", "2026-10"]]
    {
        let out = common::bin().current_dir(dir.path()).args(["--lake", "nothing-here"]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("nothing-here") && err.contains("does not exist"), "{args:?}: {err}");
    }
    // An empty lake (made, nothing collected yet, as between a collect killed before it
    // published and its rerun): the header, marked DATA INCOMPLETE, exit 3.
    std::fs::create_dir_all(dir.path().join("empty")).unwrap();
    let out = common::run_incomplete(dir.path(), &["--lake", "empty", "report", "chargeback", "--month", "2026-10", "--format", "csv"]);
    let text = common::stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "header and the mark: {text}");
    assert!(lines[0].starts_with("namespace,team,cost_centre,gpu_hours,"), "{text}");
    assert!(lines[1].starts_with("\"DATA INCOMPLETE: dcgm 0.00% (0 of 0), util 0.00% (0 of 0), energy 0.00% (0 of 0; the other GPU-steps have no energy reading and bill no energy or power cost), kube 0.00% (0 of 89280) for 2026-10"), "{text}");
}

#[test]
fn mismatched_batch_is_refused_with_the_table_and_day() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::new(dir.path());
    let err = write_partition(&lake, Table::Pods, day(), &gpu_batch(1, 1, 1.0)).unwrap_err().to_string();
    assert!(err.contains("pods") && err.contains("2026-10-01"), "{err}");
    assert!(lake.files(Table::Pods).unwrap().is_empty());
}

/// A day file from before the `cluster` column: read back for a merge with the column null,
/// queried as cluster `default` (`--cluster default` keeps its rows, another cluster none), and
/// a file differing otherwise still refused.
#[test]
fn a_file_from_before_the_cluster_column_reads_as_cluster_default() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::new(dir.path());
    let full = gpu_batch(2, 10, 50.0);
    // A file from before `counter_j` and `cluster`, the two last columns.
    let old = full.project(&(0..full.num_columns() - 2).collect::<Vec<_>>()).unwrap();
    assert!(old.schema().column_with_name("cluster").is_none() && old.schema().column_with_name("counter_j").is_none());
    let path = lake.partition_file(Table::GpuSamples, day());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(File::create(&path).unwrap(), old.schema(), None).unwrap();
    w.write(&old).unwrap();
    w.close().unwrap();
    let back = gpuledger::lake::reader::read_partition(&lake, Table::GpuSamples, day()).unwrap().expect("the day");
    assert_eq!(back.schema(), Table::GpuSamples.schema());
    assert_eq!(back.column_by_name("cluster").unwrap().null_count(), 20, "cluster null on every old row");
    assert_eq!(back.column_by_name("counter_j").unwrap().null_count(), 20, "no counter reading on an old row");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let count = |cluster: Option<&str>| -> i64 {
        rt.block_on(async {
            let ctx = SessionBuilder::default().cluster(cluster.map(str::to_string)).build(&lake, &Config::default()).await.unwrap();
            let b = run_query(&ctx, "t", "SELECT count(*) FROM gpu_samples", vec![]).await.unwrap();
            b[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0)
        })
    };
    assert_eq!((count(None), count(Some("default")), count(Some("east"))), (20, 20, 0));
    // Another column missing is a foreign file, not an older one.
    let foreign = full.project(&(1..full.num_columns()).collect::<Vec<_>>()).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(File::create(&path).unwrap(), foreign.schema(), None).unwrap();
    w.write(&foreign).unwrap();
    w.close().unwrap();
    let err = gpuledger::lake::reader::read_partition(&lake, Table::GpuSamples, day()).expect_err("refused").to_string();
    assert!(err.contains("older or foreign schema"), "{err}");
}

/// A lake whose files are not what gpuledger wrote: a report or query never reads it as a
/// smaller month. A Parquet file of another table copied into a day folder, a day file cut off
/// (a full disk, a bad copy), a published day file deleted, a day file or folder that is a link
/// to nothing: exit 1 naming the file, for `report`, `query` and `run`. A deleted day accepted
/// as it is (`collect --accept`): the report is written, marked DATA INCOMPLETE for the missing
/// day, exit 3.
#[test]
fn damaged_lake_files_are_named_never_read_as_less() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "s", "--gpus", "8", "--days", "2", "--seed", "3", "--start", "2026-10-01"]);
    let window = ["--from", "2026-10-01", "--to", "2026-10-03"];
    let report =
        |extra: &[&str]| common::bin().current_dir(dir).args([&["--lake", "s/lake", "report", "chargeback"][..], &window, extra].concat()).output().unwrap();
    let query = |sql: &str| common::bin().current_dir(dir).args(["--lake", "s/lake", "query", sql]).output().unwrap();
    let fails_naming = |out: std::process::Output, file: &str, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(err.contains(file), "{what}: names {file}: {err}");
    };
    let day1 = "s/lake/gpu_samples/date=2026-10-01/gpu_samples-2026-10-01.parquet";
    let day2 = "s/lake/gpu_samples/date=2026-10-02/gpu_samples-2026-10-02.parquet";
    let whole = std::fs::read(dir.join(day2)).unwrap();

    let stray = "s/lake/gpu_samples/date=2026-10-01/extra.parquet";
    std::fs::copy(dir.join("s/lake/pods/date=2026-10-01/pods-2026-10-01.parquet"), dir.join(stray)).unwrap();
    fails_naming(query("SELECT count(*) FROM gpu_samples"), stray, "a stray file, query");
    fails_naming(report(&[]), stray, "a stray file, report");
    std::fs::remove_file(dir.join(stray)).unwrap();

    // Another table's file under a day file's own name.
    std::fs::copy(dir.join("s/lake/pods/date=2026-10-02/pods-2026-10-02.parquet"), dir.join(day2)).unwrap();
    fails_naming(query("SELECT count(*), sum(share) FROM gpu_samples"), day2, "another table's file, query");
    fails_naming(report(&[]), day2, "another table's file, report");
    std::fs::write(dir.join(day2), &whole[..whole.len() / 2]).unwrap();
    fails_naming(query("SELECT count(*) FROM gpu_samples"), day2, "a cut-off file, query");
    fails_naming(report(&[]), day2, "a cut-off file, report");
    std::fs::write(dir.join(day2), &whole).unwrap();

    std::fs::remove_file(dir.join(day2)).unwrap();
    assert!(dir.join("s/lake/_rollups/gpu_buckets/date=2026-10-02").exists(), "the day's rollup is kept");
    // A published day file deleted is named, never read as a day with fewer rows.
    fails_naming(report(&[]), &format!("{day2}: missing (published with "), "a deleted day file, report");
    fails_naming(query("SELECT count(*) FROM pods"), day2, "a deleted day file, query");
    // Accepted as it is now (what an operator does when Prometheus no longer holds the day),
    // the day reads as a day without DCGM samples.
    let out = common::run_ok(dir, &["--lake", "s/lake", "collect", "--accept", "2026-10-02"]);
    assert!(common::stdout(&out).contains("recorded 2026-10-02 as published (1 files differed"), "{}", common::stdout(&out));
    let out = common::run_incomplete(dir, &[&["--lake", "s/lake", "report", "chargeback"][..], &window, &["--format", "json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["data_incomplete"].as_str().unwrap().starts_with("dcgm 50.00% "), "{}", v["data_incomplete"]);
    // What the report charges is the day that is there, not the deleted day's rollup.
    assert_eq!(v["conservation"]["cluster_gpu_us"], serde_json::json!(8i64 * 86_400 * 1_000_000), "one day of 8 GPUs");
    assert!(dir.join(day1).exists());

    // A day's pods deleted: the cron job's reports are not written from a lake without them.
    let pods = "s/lake/pods/date=2026-10-01/pods-2026-10-01.parquet";
    let kept = std::fs::read(dir.join(pods)).unwrap();
    std::fs::remove_file(dir.join(pods)).unwrap();
    let run = common::bin().current_dir(dir).args(["--lake", "s/lake", "run", "--month", "2026-10", "--no-collect", "--reports-dir", "r"]).output().unwrap();
    fails_naming(run, pods, "a deleted pods file, run");
    assert!(!dir.join("r/2026-10").exists(), "no report written");
    // A day file that is a link to nothing, and a day folder that is.
    std::os::unix::fs::symlink(dir.join("gone.parquet"), dir.join(pods)).unwrap();
    fails_naming(report(&[]), &format!("{pods}: a link to nothing"), "a dangling day file");
    std::fs::remove_file(dir.join(pods)).unwrap();
    let folder = dir.join("s/lake/pods/date=2026-10-01");
    std::fs::remove_dir(&folder).unwrap();
    std::os::unix::fs::symlink(dir.join("gone"), &folder).unwrap();
    fails_naming(report(&[]), "s/lake/pods/date=2026-10-01: a link to nothing", "a dangling day folder");
    std::fs::remove_file(&folder).unwrap();
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(dir.join(pods), &kept).unwrap();
    common::run_incomplete(dir, &[&["--lake", "s/lake", "report", "chargeback"][..], &window].concat());
}
