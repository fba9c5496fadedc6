//! The stored rollups: derived sums written with each day file, so a month's reports read days,
//! not samples. One file per kind and day: `<lake>/_rollups/<kind>/date=YYYY-MM-DD/<kind>-YYYY-MM-DD.parquet`:
//! - `gpu_buckets` of `gpu_samples`: the day's rows summed per namespace, node, GPU model, MIG
//!   profile, bucket, share and step (about a hundredth of the rows), and in its key/value
//!   metadata the day's completeness counts (`day_counts`);
//! - `namespace_gpus` of `gpu_samples`: per namespace and bucket, the seconds it held each number
//!   of whole GPUs (the quota review);
//! - `unallocated_units` of `gpu_samples`: GPU time no pod held per GPU unit and bucket (the idle
//!   report's unallocated GPUs and zombie memory);
//! - `idle_holdings` and `idle_stretches` of `gpu_samples`: per GPU unit and pod, the day's
//!   allocated-but-idle counters and the idle runs cut by its edges, and the runs inside it
//!   (`idle`, at the default threshold; merged across days by the idle report);
//! - `pod_buckets` of `gpu_samples`: `gpu_buckets` per pod too (the chargeback by a key of each
//!   pod: workload, queue, label);
//! - `pending_buckets` of `pending_samples`: pending pod- and GPU-time per namespace, priority
//!   class, GPU resource and bucket (the queue and quota reviews);
//! - `pending_pod_buckets` of `pending_samples`: `pending_buckets` per pod too (the queue's
//!   pending demand by a key of each pod).
//!
//! Each kind is a file here (its sums or fold, its schema, name and version: a `RollupKind` and
//! a `DayRollup`, `kind.rs`), listed once in `ROLLUPS`; a new kind is its file and a line there.
//! The writer (`lake::writer`) knows nothing of them: `lake::day::write_partition` publishes a
//! day's file, then its rollups (`write`).
//!
//! A rollup is derived data and never the only copy of anything: a day without a current one is
//! read from its samples, with the same result. "Current" means the rollup names its version and
//! its source (row count and byte size of the day's source file, in its key/value metadata) and
//! the source on disk still matches. The writer removes a day's rollups before it replaces the
//! day's samples and writes the new ones after, so a crash between the two leaves a day with no
//! rollup, never one paired with other samples. The leading underscore keeps the folder out of
//! Hive-style readers (Spark, Trino, DuckDB globs over `*/date=*`) that scan the lake's tables.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use arrow::array::RecordBatch;
use chrono::NaiveDate;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

pub mod day_counts;
pub mod gpu_buckets;
pub mod idle;
mod kind;
pub mod namespace_gpus;
pub mod pending_buckets;
pub mod pending_pod_buckets;
pub mod pod_buckets;
pub mod sums;
pub mod unallocated_units;

pub use day_counts::{Counts, DayCounts, StoredCounts};
pub use gpu_buckets::BucketSums;
pub use kind::{DayFold, DayRollup, FoldError, Kind, RollupKind, Summed};
pub use namespace_gpus::NamespaceGpus;
pub use pending_buckets::PendingSums;
pub use sums::{BucketError, DaySums, BUCKET_MS};
pub use unallocated_units::UnallocatedUnits;

use crate::lake::intern::Interner;
use crate::lake::layout::Lake;
use crate::lake::schema::Table;
use crate::lake::writer::WriteError;
use kind::KEY_DAY_COUNTS;

/// Every rollup, each a file of this folder: the one list of them.
pub const ROLLUPS: [&DayRollup; 7] = [
    &gpu_buckets::ROLLUP,
    &namespace_gpus::ROLLUP,
    &unallocated_units::ROLLUP,
    &idle::ROLLUP,
    &pod_buckets::ROLLUP,
    &pending_buckets::ROLLUP,
    &pending_pod_buckets::ROLLUP,
];

/// The kinds by their files' names.
pub const GPU_BUCKETS: Kind = gpu_buckets::KIND;
pub const NAMESPACE_GPUS: Kind = namespace_gpus::KIND;
pub const UNALLOCATED_UNITS: Kind = unallocated_units::KIND;
pub const IDLE_HOLDINGS: Kind = idle::HOLDINGS;
pub const IDLE_STRETCHES: Kind = idle::STRETCHES;
pub const PENDING_BUCKETS: Kind = pending_buckets::KIND;
pub const PENDING_POD_BUCKETS: Kind = pending_pod_buckets::KIND;
pub const POD_BUCKETS: Kind = pod_buckets::KIND;

/// Every kind, in `ROLLUPS`' order.
pub fn kinds() -> impl Iterator<Item = Kind> {
    ROLLUPS.into_iter().flat_map(|r| r.kinds.iter().copied())
}

/// The kinds kept of `table`'s day files.
pub fn kinds_of(table: Table) -> Vec<Kind> {
    kinds().filter(|k| k.source() == table).collect()
}

/// The rollups' root folder under the lake root.
pub const ROOT: &str = crate::lake::layout::ROLLUP_ROOT;
/// The GPU buckets' folder under the lake root.
pub const DIR: &str = "_rollups/gpu_buckets";

const KEY_VERSION: &str = "gpuledger.rollup.version";
const KEY_BUCKET_MS: &str = "gpuledger.rollup.bucket_ms";
const KEY_SOURCE_ROWS: &str = "gpuledger.rollup.source_rows";
const KEY_SOURCE_BYTES: &str = "gpuledger.rollup.source_bytes";

/// The tables rollups are kept of (the sources of `ROLLUPS`; a test holds the two alike).
pub const SOURCES: [Table; 2] = [Table::GpuSamples, Table::PendingSamples];

pub fn kind_dir(lake: &Lake, kind: Kind) -> PathBuf {
    lake.root().join(ROOT).join(kind.name())
}

/// The GPU buckets' folder.
pub fn dir(lake: &Lake) -> PathBuf {
    kind_dir(lake, GPU_BUCKETS)
}

/// Every kind's folder.
pub fn dirs(lake: &Lake) -> Vec<PathBuf> {
    kinds().map(|k| kind_dir(lake, k)).collect()
}

pub fn kind_file(lake: &Lake, kind: Kind, date: NaiveDate) -> PathBuf {
    let day = date.format("%Y-%m-%d");
    kind_dir(lake, kind).join(format!("date={day}")).join(format!("{}-{day}.parquet", kind.name()))
}

/// The day's GPU buckets file.
pub fn file(lake: &Lake, date: NaiveDate) -> PathBuf {
    kind_file(lake, GPU_BUCKETS, date)
}

/// Removes the day's rollups of `table` (before its samples are replaced).
pub fn remove(lake: &Lake, table: Table, date: NaiveDate) -> Result<(), WriteError> {
    for kind in kinds_of(table) {
        let path = kind_file(lake, kind, date);
        lake.remove(&path).map_err(|source| WriteError::Io { path, source })?;
    }
    Ok(())
}

/// The day folds of `table`'s rollups, fresh.
fn folds(table: Table) -> Vec<Box<dyn DayFold>> {
    ROLLUPS.iter().filter(|r| r.source() == table).map(|r| (r.fold)()).collect()
}

/// Every day fold of `table` over `b`.
fn add_all(folds: &mut [Box<dyn DayFold>], strings: &Mutex<Interner>, path: &Path, b: &RecordBatch) -> Result<(), FoldError> {
    folds.iter_mut().try_for_each(|f| f.add(strings, path, b))
}

fn finish_all(folds: Vec<Box<dyn DayFold>>, strings: &Interner) -> Summed {
    folds.into_iter().flat_map(|f| f.finish(strings)).collect()
}

/// The source columns the rollups of `table` read.
fn columns(table: Table) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for c in ROLLUPS.iter().filter(|r| r.source() == table).flat_map(|r| (r.columns)()) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Sums `rows` (the day's rows of `table` as just published at `source_file`) and publishes
/// the day's rollups (atomically, as every lake file), naming the source file's rows and bytes.
pub fn write(lake: &Lake, table: Table, date: NaiveDate, rows: &RecordBatch, source_file: &Path) -> Result<(), WriteError> {
    let strings = Mutex::new(Interner::default());
    let mut folds = folds(table);
    add_all(&mut folds, &strings, source_file, rows).map_err(|e| WriteError::Rollup { date, source: Box::new(e) })?;
    publish(lake, date, finish_all(folds, &strings.into_inner().expect("interner lock")), rows.num_rows() as u64, source_file)
}

fn publish(lake: &Lake, date: NaiveDate, summed: Summed, source_rows: u64, source_file: &Path) -> Result<(), WriteError> {
    let source_bytes = lake.file_len(source_file).map_err(|source| WriteError::Io { path: source_file.to_path_buf(), source })?;
    for (kind, batch, extra) in summed {
        let final_path = kind_file(lake, kind, date);
        let mut meta = vec![
            KeyValue::new(KEY_VERSION.into(), kind.version().to_string()),
            KeyValue::new(KEY_BUCKET_MS.into(), BUCKET_MS.to_string()),
            KeyValue::new(KEY_SOURCE_ROWS.into(), source_rows.to_string()),
            KeyValue::new(KEY_SOURCE_BYTES.into(), source_bytes.to_string()),
        ];
        meta.extend(extra);
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("valid zstd level")))
            .set_dictionary_enabled(true)
            .set_created_by(format!("gpuledger {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(meta))
            .build();
        lake.publish(&final_path, |out| {
            let mut writer = ArrowWriter::try_new(out, kind.schema(), Some(props)).map_err(io::Error::other)?;
            writer.write(&batch).map_err(io::Error::other)?;
            writer.close().map(|_| ()).map_err(io::Error::other)
        })
        .map_err(|source| WriteError::Io { path: final_path.clone(), source })?;
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Sum(#[from] FoldError),
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// What `refresh` found and did, per source table.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Refreshed {
    /// `gpu_samples` days whose rollups were all current.
    pub current: usize,
    /// `gpu_samples` days (re)written: a rollup missing or stale, or `force`.
    pub written: Vec<NaiveDate>,
    /// The same for `pending_samples` days.
    pub pending_current: usize,
    pub pending_written: Vec<NaiveDate>,
}

/// Days of the rollups' source tables in `first..=last` (for progress).
pub fn source_days(lake: &Lake, first: NaiveDate, last: NaiveDate) -> io::Result<usize> {
    let mut n = 0;
    for table in SOURCES {
        n += lake.dates(table)?.into_iter().filter(|d| *d >= first && *d <= last).count();
    }
    Ok(n)
}

/// Makes every rollup of every `gpu_samples` and `pending_samples` day in `first..=last` current,
/// reading the day's rows where one is missing or stale (every day with `force`); `done` is
/// called per day. For lakes written before rollups (or before a kind of them), and after a
/// crash between a day's samples and its rollups.
pub fn refresh(lake: &Lake, first: NaiveDate, last: NaiveDate, force: bool, mut done: impl FnMut(NaiveDate) + Send) -> Result<Refreshed, RefreshError> {
    let mut out = Refreshed::default();
    let mut work: Vec<(Table, NaiveDate, PathBuf)> = Vec::new();
    for table in SOURCES {
        for date in lake.dates(table).map_err(|source| WriteError::Io { path: lake.table_dir(table), source })? {
            if date < first || date > last {
                continue;
            }
            let source = lake.partition_file(table, date);
            if !lake.exists(&source) {
                continue;
            }
            let stale: Vec<String> = if force {
                vec!["forced".into()]
            } else {
                kinds_of(table).into_iter().filter_map(|kind| footer_check(lake, kind, date, &source).err()).collect()
            };
            if stale.is_empty() {
                match table {
                    Table::GpuSamples => out.current += 1,
                    _ => out.pending_current += 1,
                }
                done(date);
                continue;
            }
            if !force {
                tracing::info!("{} rollups of {date} are not current ({}); rewriting them", table.name(), stale.join("; "));
            }
            work.push((table, date, source));
        }
    }
    // The days to rewrite, a day per thread at a time (each streams its day: memory holds
    // sums, not rows).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4).min(work.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = Mutex::new(done);
    let results: Vec<Mutex<Option<Result<(), RefreshError>>>> = work.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((table, date, source)) = work.get(i) else { return };
                let r = refold(lake, *table, source).and_then(|(summed, rows)| publish(lake, *date, summed, rows, source).map_err(RefreshError::from));
                if r.is_ok() {
                    (done.lock().expect("progress lock"))(*date);
                }
                *results[i].lock().expect("result slot") = Some(r);
            });
        }
    });
    for ((table, date, _), r) in work.iter().zip(results) {
        r.into_inner().expect("result slot").expect("every day done")?;
        match table {
            Table::GpuSamples => out.written.push(*date),
            _ => out.pending_written.push(*date),
        }
    }
    Ok(out)
}

/// A day's rollups from its file, its rows streamed by (memory holds the sums, not the rows).
fn refold(lake: &Lake, table: Table, source: &Path) -> Result<(Summed, u64), RefreshError> {
    let strings = Mutex::new(Interner::default());
    let cols = columns(table);
    let mut parts = crate::lake::scan::fold_files(
        lake,
        &[source.to_path_buf()],
        &cols,
        1,
        || (folds(table), 0u64),
        |(folds, rows): &mut (Vec<Box<dyn DayFold>>, u64), path, b| {
            *rows += b.num_rows() as u64;
            add_all(folds, &strings, path, &b)
        },
    )?;
    let (folds, rows) = parts.pop().unwrap_or_else(|| (self::folds(table), 0));
    Ok((finish_all(folds, &strings.into_inner().expect("interner lock")), rows))
}

/// What a day's rollup can be used for.
#[derive(Debug)]
pub enum Rollup {
    /// The day's sums (the kind's schema), matching the samples on disk.
    Current(Vec<RecordBatch>),
    /// No rollup file: a lake written before rollups, or a crash between samples and rollup.
    Missing,
    /// A rollup that does not match the day's samples or cannot be read, and why.
    Stale(String),
}

fn key_value(meta: &parquet::file::metadata::FileMetaData, key: &str) -> Option<String> {
    meta.key_value_metadata()?.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.clone())
}

/// The day's GPU buckets if they are current for `samples_file` (the day's `gpu_samples` file).
pub fn read(lake: &Lake, date: NaiveDate, samples_file: &Path) -> Rollup {
    read_kind(lake, GPU_BUCKETS, date, samples_file)
}

/// The day's rollup of `kind` if it is current for `source_file` (the day's source file).
pub fn read_kind(lake: &Lake, kind: Kind, date: NaiveDate, source_file: &Path) -> Rollup {
    let path = kind_file(lake, kind, date);
    // One read of the whole (small) file rather than a read per column chunk: a month is 30
    // files, and on a cold page cache every read is a trip to the disk.
    let rollup = match lake.read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Rollup::Missing,
        Err(e) => return Rollup::Stale(format!("{}: {e}", path.display())),
    };
    let read = ParquetRecordBatchReaderBuilder::try_new(rollup).map_err(|e| e.to_string()).and_then(|builder| {
        matches_source(lake, kind, builder.metadata().file_metadata(), source_file)?;
        if builder.schema().fields() != kind.schema().fields() {
            return Err("columns differ from the rollup schema".to_string());
        }
        builder.with_batch_size(64 * 1024).build().map_err(|e| e.to_string())?.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
    });
    match read {
        Ok(batch) => Rollup::Current(batch),
        Err(why) => Rollup::Stale(format!("{}: {why}", path.display())),
    }
}

/// The footer of the day's `kind` rollup if it is current for `source_file`, else why not.
fn footer_check(lake: &Lake, kind: Kind, date: NaiveDate, source_file: &Path) -> Result<parquet::file::metadata::ParquetMetaData, String> {
    let path = kind_file(lake, kind, date);
    // A footer that cannot be read is a reason the rollup is not current (logged), not an error.
    let (r, _) = lake.footer(&path).map_err(|e| crate::error_chain::chain(&e))?;
    let meta = r.file_metadata();
    matches_source(lake, kind, meta, source_file).map_err(|why| format!("{}: {why}", path.display()))?;
    let columns = parquet::arrow::parquet_to_arrow_schema(meta.schema_descr(), meta.key_value_metadata()).map_err(|e| e.to_string())?;
    if columns.fields() != kind.schema().fields() {
        return Err(format!("{}: columns differ from the rollup schema", path.display()));
    }
    Ok(r)
}

/// Whether the day's GPU buckets are current, from the footer alone (for `gpuledger check`).
pub fn is_current(lake: &Lake, date: NaiveDate, samples_file: &Path) -> bool {
    kinds_current(lake, &[GPU_BUCKETS], date, samples_file)
}

/// Whether the day's rollups of `kinds` are all current for `source_file` (footers only).
pub fn kinds_current(lake: &Lake, kinds: &[Kind], date: NaiveDate, source_file: &Path) -> bool {
    kinds.iter().all(|k| footer_check(lake, k, date, source_file).is_ok())
}

/// Whether every rollup of `table`'s day is current (for `gpuledger check`).
pub fn all_current(lake: &Lake, table: Table, date: NaiveDate) -> bool {
    kinds_current(lake, &kinds_of(table), date, &lake.partition_file(table, date))
}

/// The completeness counts of a `gpu_samples` day, from its GPU buckets' footer where they are
/// current for `samples_file`.
pub fn day_counts(lake: &Lake, date: NaiveDate, samples_file: &Path) -> Option<StoredCounts> {
    let meta = footer_check(lake, GPU_BUCKETS, date, samples_file).ok()?;
    serde_json::from_str(&key_value(meta.file_metadata(), KEY_DAY_COUNTS)?).ok()
}

/// The rollup's key/value metadata names this kind's version, the bucket width and
/// `source_file` as it is on disk now (row count and size).
fn matches_source(lake: &Lake, kind: Kind, meta: &parquet::file::metadata::FileMetaData, source_file: &Path) -> Result<(), String> {
    let expect = |key: &str, want: String| -> Result<(), String> {
        match key_value(meta, key) {
            Some(v) if v == want => Ok(()),
            Some(v) => Err(format!("{key} is {v}, the lake needs {want}")),
            None => Err(format!("no {key}")),
        }
    };
    expect(KEY_VERSION, kind.version().to_string())?;
    expect(KEY_BUCKET_MS, BUCKET_MS.to_string())?;
    let (source, source_bytes) = lake.footer(source_file).map_err(|e| crate::error_chain::chain(&e))?;
    expect(KEY_SOURCE_BYTES, source_bytes.to_string())?;
    let source_rows = source.file_metadata().num_rows();
    expect(KEY_SOURCE_ROWS, source_rows.to_string())
}

#[cfg(test)]
mod list_tests {
    use super::*;

    /// `SOURCES` is every table a rollup of `ROLLUPS` sums, each once, and no other: a new kind
    /// of another table fails here until it is listed (the writer and collect read `SOURCES`).
    #[test]
    fn sources_are_the_rollups_tables() {
        let mut of_rollups: Vec<Table> = Vec::new();
        for r in ROLLUPS {
            assert!(r.kinds.iter().all(|k| k.source() == r.source()), "one source per rollup: {:?}", r.kinds);
            if !of_rollups.contains(&r.source()) {
                of_rollups.push(r.source());
            }
        }
        assert_eq!(of_rollups, SOURCES.to_vec());
        let names: Vec<&str> = kinds().map(|k| k.name()).collect();
        assert_eq!(
            names,
            ["gpu_buckets", "namespace_gpus", "unallocated_units", "idle_holdings", "idle_stretches", "pod_buckets", "pending_buckets", "pending_pod_buckets"]
        );
    }
}
