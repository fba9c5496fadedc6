//! The stored 15-minute rollup of `gpu_samples`, one file per day file:
//! `<lake>/_rollups/gpu_buckets/date=YYYY-MM-DD/gpu_buckets-YYYY-MM-DD.parquet`, the day's rows
//! summed per namespace, node, GPU model, MIG profile, bucket, share and step (`buckets`): about
//! a hundredth of the rows, so a month's chargeback reads the rollups instead of every sample.
//!
//! It is derived data and never the only copy of anything: a day without a current rollup is
//! priced from its samples, with the same result. "Current" means the rollup names its source
//! (row count and byte size of the day's `gpu_samples` file, in its key/value metadata) and the
//! source on disk still matches. The writer removes a day's rollup before it replaces the day's
//! samples and writes the new one after, so a crash between the two leaves a day with no rollup,
//! never one paired with other samples. The leading underscore keeps the folder out of Hive-style
//! readers (Spark, Trino, DuckDB globs over `*/date=*`) that scan the lake's tables.

use std::io;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use chrono::NaiveDate;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::buckets::{self, BUCKET_MS};
use super::layout::Lake;
use super::writer::WriteError;

/// The rollups' folder under the lake root.
pub const DIR: &str = "_rollups/gpu_buckets";
/// Bumped when the rollup's content changes meaning; a rollup of another version is not current.
pub const ROLLUP_VERSION: u32 = 3;

const KEY_VERSION: &str = "gpuledger.rollup.version";
const KEY_BUCKET_MS: &str = "gpuledger.rollup.bucket_ms";
const KEY_SOURCE_ROWS: &str = "gpuledger.rollup.source_rows";
const KEY_SOURCE_BYTES: &str = "gpuledger.rollup.source_bytes";

pub fn dir(lake: &Lake) -> PathBuf {
    lake.root().join(DIR)
}

pub fn partition_dir(lake: &Lake, date: NaiveDate) -> PathBuf {
    dir(lake).join(format!("date={}", date.format("%Y-%m-%d")))
}

pub fn file(lake: &Lake, date: NaiveDate) -> PathBuf {
    partition_dir(lake, date).join(format!("gpu_buckets-{}.parquet", date.format("%Y-%m-%d")))
}

/// Sums `samples` (the day's rows as just published at `samples_file`) and publishes them as
/// the day's rollup (atomically, as every lake file), naming the source file's rows and bytes.
pub fn write(lake: &Lake, date: NaiveDate, samples: &RecordBatch, samples_file: &Path) -> Result<PathBuf, WriteError> {
    let sums = buckets::sum_batch(samples_file, samples).map_err(|e| WriteError::Rollup { date, detail: e.to_string() })?;
    write_sums(lake, date, &sums, samples.num_rows() as u64, samples_file)
}

fn write_sums(lake: &Lake, date: NaiveDate, sums: &RecordBatch, source_rows: u64, samples_file: &Path) -> Result<PathBuf, WriteError> {
    let source_bytes = lake.file_len(samples_file).map_err(|source| WriteError::Io { path: samples_file.to_path_buf(), source })?;
    let final_path = file(lake, date);
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("valid zstd level")))
        .set_dictionary_enabled(true)
        .set_created_by(format!("gpuledger {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![
            KeyValue::new(KEY_VERSION.into(), ROLLUP_VERSION.to_string()),
            KeyValue::new(KEY_BUCKET_MS.into(), BUCKET_MS.to_string()),
            KeyValue::new(KEY_SOURCE_ROWS.into(), source_rows.to_string()),
            KeyValue::new(KEY_SOURCE_BYTES.into(), source_bytes.to_string()),
        ]))
        .build();
    lake.publish(&final_path, |out| {
        let mut writer = ArrowWriter::try_new(out, buckets::schema(), Some(props)).map_err(io::Error::other)?;
        writer.write(sums).map_err(io::Error::other)?;
        writer.close().map(|_| ()).map_err(io::Error::other)
    })
    .map_err(|source| WriteError::Io { path: final_path.clone(), source })?;
    Ok(final_path)
}

#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Sum(#[from] buckets::BucketError),
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// What `refresh` found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Refreshed {
    /// Days whose rollup was already current.
    pub current: usize,
    /// Days (re)written: no rollup, a stale one, or `force`.
    pub written: Vec<NaiveDate>,
}

/// Makes the rollup of every `gpu_samples` day in `first..=last` current, reading the day's
/// samples where it is missing or stale (every day with `force`); `done` is called per day.
/// For lakes written before rollups, and after a crash between a day's samples and its rollup.
pub fn refresh(lake: &Lake, first: NaiveDate, last: NaiveDate, force: bool, mut done: impl FnMut(NaiveDate)) -> Result<Refreshed, RefreshError> {
    let mut out = Refreshed::default();
    for date in lake.dates(super::Table::GpuSamples).map_err(|source| WriteError::Io { path: lake.table_dir(super::Table::GpuSamples), source })? {
        if date < first || date > last {
            continue;
        }
        let samples = lake.partition_file(super::Table::GpuSamples, date);
        if !lake.exists(&samples) {
            continue;
        }
        if !force {
            match read(lake, date, &samples) {
                Rollup::Current(_) => {
                    out.current += 1;
                    done(date);
                    continue;
                }
                Rollup::Stale(why) => tracing::info!("rollup of {date} is stale ({why}); rewriting it"),
                Rollup::Missing => {}
            }
        }
        let strings = std::sync::Mutex::new(super::intern::Interner::default());
        let parts = super::scan::fold_files(lake, std::slice::from_ref(&samples), &buckets::COLUMNS, 1, buckets::BucketSums::default, |g, path, b| {
            g.add(&strings, path, &b, i64::MIN, i64::MAX)
        })?;
        let rows = parts.iter().map(|g| g.rows).sum();
        let batch = buckets::BucketSums::finish(&parts, &strings.into_inner().expect("interner lock"));
        write_sums(lake, date, &batch, rows, &samples)?;
        out.written.push(date);
        done(date);
    }
    Ok(out)
}

/// What a day's rollup can be used for.
#[derive(Debug)]
pub enum Rollup {
    /// The day's sums (`buckets::schema()`), matching the samples on disk.
    Current(Vec<RecordBatch>),
    /// No rollup file: a lake written before rollups, or a crash between samples and rollup.
    Missing,
    /// A rollup that does not match the day's samples or cannot be read, and why.
    Stale(String),
}

fn key_value(meta: &parquet::file::metadata::FileMetaData, key: &str) -> Option<String> {
    meta.key_value_metadata()?.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.clone())
}

/// The day's rollup if it is current for `samples_file` (the day's `gpu_samples` file).
pub fn read(lake: &Lake, date: NaiveDate, samples_file: &Path) -> Rollup {
    let path = file(lake, date);
    // One read of the whole (small) file rather than a read per column chunk: a month is 30
    // files, and on a cold page cache every read is a trip to the disk.
    let rollup = match lake.read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Rollup::Missing,
        Err(e) => return Rollup::Stale(format!("{}: {e}", path.display())),
    };
    let read = ParquetRecordBatchReaderBuilder::try_new(rollup).map_err(|e| e.to_string()).and_then(|builder| {
        matches_source(lake, builder.metadata().file_metadata(), samples_file)?;
        if builder.schema().fields() != buckets::schema().fields() {
            return Err("columns differ from the rollup schema".to_string());
        }
        builder.with_batch_size(64 * 1024).build().map_err(|e| e.to_string())?.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
    });
    match read {
        Ok(batch) => Rollup::Current(batch),
        Err(why) => Rollup::Stale(format!("{}: {why}", path.display())),
    }
}

/// Whether the day's rollup is current, from its footer alone (for `gpuledger check`).
pub fn is_current(lake: &Lake, date: NaiveDate, samples_file: &Path) -> bool {
    lake.footer(&file(lake, date)).is_ok_and(|(r, _)| {
        let meta = r.file_metadata();
        let columns = parquet::arrow::parquet_to_arrow_schema(meta.schema_descr(), meta.key_value_metadata());
        matches_source(lake, meta, samples_file).is_ok() && columns.is_ok_and(|c| c.fields() == buckets::schema().fields())
    })
}

/// The rollup's key/value metadata names this version, this bucket width and `samples_file`
/// as it is on disk now (row count and size).
fn matches_source(lake: &Lake, meta: &parquet::file::metadata::FileMetaData, samples_file: &Path) -> Result<(), String> {
    let expect = |key: &str, want: String| -> Result<(), String> {
        match key_value(meta, key) {
            Some(v) if v == want => Ok(()),
            Some(v) => Err(format!("{key} is {v}, the lake needs {want}")),
            None => Err(format!("no {key}")),
        }
    };
    expect(KEY_VERSION, ROLLUP_VERSION.to_string())?;
    expect(KEY_BUCKET_MS, BUCKET_MS.to_string())?;
    let (source, source_bytes) = lake.footer(samples_file)?;
    expect(KEY_SOURCE_BYTES, source_bytes.to_string())?;
    let source_rows = source.file_metadata().num_rows();
    expect(KEY_SOURCE_ROWS, source_rows.to_string())
}
