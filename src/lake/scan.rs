//! An ordered scan of one table's day files: the rows in file order (each file is sorted by
//! the table's `sort_columns`), days in date order, only the columns asked for. Decoding runs
//! on its own thread, a few batches ahead of the consumer, so a streaming pass over a month
//! (the idle report's run detection) costs about one core of decoding and holds a few batches
//! in memory, whatever the size of the month. `fold_files` reads several files at once for
//! questions that do not depend on row order.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

use arrow::array::RecordBatch;
use chrono::NaiveDate;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::layout::Lake;
use super::schema::Table;

/// Rows per decoded batch.
pub const SCAN_BATCH_ROWS: usize = 64 * 1024;
/// Batches decoded ahead of the consumer.
const READ_AHEAD: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("listing {table} in {lake}")]
    List { table: &'static str, lake: PathBuf, source: std::io::Error },
    #[error("reading {path}: starting the reader thread")]
    Thread { path: PathBuf, source: std::io::Error },
    #[error("reading {path}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("reading {path}")]
    Parquet { path: PathBuf, source: parquet::errors::ParquetError },
    #[error("reading {path}")]
    Arrow { path: PathBuf, source: arrow::error::ArrowError },
    #[error("reading {path}: not in a date=YYYY-MM-DD folder")]
    NotADay { path: PathBuf },
    #[error("{path} has no column {column} (a file from an older or foreign schema?)")]
    MissingColumn { path: PathBuf, column: String },
}

/// Batches of `columns` of `table` for the days `first..=last`, in order.
pub struct OrderedScan {
    rx: Receiver<Result<(PathBuf, RecordBatch), ScanError>>,
    reader: Option<JoinHandle<()>>,
}

impl OrderedScan {
    pub fn start(lake: &Lake, table: Table, first: NaiveDate, last: NaiveDate, columns: &[&str]) -> Result<OrderedScan, ScanError> {
        let files = day_files(lake, table, first, last)?;
        let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
        let reader_lake = lake.clone();
        let (tx, rx) = sync_channel(READ_AHEAD);
        let reader = std::thread::Builder::new()
            .name("lake-scan".into())
            .spawn(move || {
                for path in files {
                    let sent = read_file(&reader_lake, &path, &columns, |batch| tx.send(Ok((path.clone(), batch))).is_ok());
                    match sent {
                        Ok(true) => {}
                        Ok(false) => return,
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    }
                }
            })
            .map_err(|source| ScanError::Thread { path: lake.table_dir(table), source })?;
        Ok(OrderedScan { rx, reader: Some(reader) })
    }
}

impl Iterator for OrderedScan {
    /// A batch and the file it came from (for error messages).
    type Item = Result<(PathBuf, RecordBatch), ScanError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.rx.recv() {
            Ok(item) => Some(item),
            Err(_) => {
                if let Some(h) = self.reader.take() {
                    let _ = h.join();
                }
                None
            }
        }
    }
}

/// The published files of `table` for the days `first..=last`, in date order.
pub fn day_files(lake: &Lake, table: Table, first: NaiveDate, last: NaiveDate) -> Result<Vec<PathBuf>, ScanError> {
    let list_err = |source| ScanError::List { table: table.name(), lake: lake.root().to_path_buf(), source };
    let wanted = lake.dates(table).map_err(list_err)?.into_iter().filter(|d| *d >= first && *d <= last).map(|d| lake.partition_file(table, d)).collect();
    lake.existing(&lake.table_dir(table), wanted).map_err(list_err)
}

/// Reads `files` on up to `threads` threads, whole files at a time in no particular order; each
/// thread folds its batches into its own state (from `init`), and the states come back for the
/// caller to merge. For questions whose answer does not depend on row order (sums).
pub fn fold_files<S, E>(
    lake: &Lake,
    files: &[PathBuf],
    columns: &[&str],
    threads: usize,
    init: impl Fn() -> S + Sync,
    fold: impl Fn(&mut S, &std::path::Path, RecordBatch) -> Result<(), E> + Sync,
) -> Result<Vec<S>, E>
where
    S: Send,
    E: From<ScanError> + Send,
{
    let next = std::sync::atomic::AtomicUsize::new(0);
    let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    let threads = threads.clamp(1, files.len().max(1));
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> Result<S, E> {
                    let mut state = init();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = files.get(i) else { return Ok(state) };
                        let mut failed = None;
                        read_file(lake, path, &columns, |batch| match fold(&mut state, path, batch) {
                            Ok(()) => true,
                            Err(e) => {
                                failed = Some(e);
                                false
                            }
                        })?;
                        if let Some(e) = failed {
                            return Err(e);
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("lake reader thread panicked")).collect()
    })
}

/// Decodes `path`'s `columns` batch by batch into `sink`; Ok(false) when the sink hung up.
fn read_file(lake: &Lake, path: &Path, columns: &[String], mut sink: impl FnMut(RecordBatch) -> bool) -> Result<bool, ScanError> {
    let parquet_err = |source| ScanError::Parquet { path: path.to_path_buf(), source };
    let file = lake.open_file(path).map_err(|source| ScanError::Open { path: path.to_path_buf(), source })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err)?;
    let schema = builder.schema().clone();
    let mut roots = Vec::with_capacity(columns.len());
    // A column added after the file was written (`LATER_COLUMNS`) reads as nulls.
    let mut later = Vec::new();
    for c in columns {
        match schema.index_of(c) {
            Ok(idx) => roots.push(idx),
            Err(_) => later.push(super::schema::later_column(c).ok_or_else(|| ScanError::MissingColumn { path: path.to_path_buf(), column: c.clone() })?),
        }
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder.with_projection(mask).with_batch_size(SCAN_BATCH_ROWS).build().map_err(parquet_err)?;
    for batch in reader {
        let mut batch = batch.map_err(|source| ScanError::Arrow { path: path.to_path_buf(), source })?;
        if !later.is_empty() {
            let mut fields: Vec<arrow::datatypes::FieldRef> = batch.schema().fields().iter().cloned().collect();
            let mut cols = batch.columns().to_vec();
            for f in &later {
                cols.push(arrow::array::new_null_array(f.data_type(), batch.num_rows()));
                fields.push(std::sync::Arc::new(f.clone()));
            }
            batch = RecordBatch::try_new(std::sync::Arc::new(arrow::datatypes::Schema::new(fields)), cols)
                .map_err(|source| ScanError::Arrow { path: path.to_path_buf(), source })?;
        }
        if !sink(batch) {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A day file that is not Parquet, and one gone between listing and reading: each error
    /// names the file and keeps what went wrong as its source (the kind of I/O error, the
    /// Parquet reader's own error), not a string of it.
    #[test]
    fn a_bad_day_file_is_named_and_its_cause_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let lake = Lake::new(tmp.path().join("lake"));
        let day = NaiveDate::from_ymd_opt(2026, 10, 5).unwrap();
        let path = lake.partition_file(Table::GpuSamples, day);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"not parquet at all").unwrap();
        let first = OrderedScan::start(&lake, Table::GpuSamples, day, day, &["ts"]).unwrap().next().expect("an item");
        match first {
            Err(e @ ScanError::Parquet { .. }) => {
                assert!(crate::error_chain::chain(&e).starts_with(&format!("reading {}: ", path.display())), "{e}");
                assert!(std::error::Error::source(&e).is_some_and(|s| s.is::<parquet::errors::ParquetError>()), "{e:?}");
            }
            other => panic!("a Parquet error naming the file, not {other:?}"),
        }
        std::fs::remove_file(&path).unwrap();
        let gone = fold_files(&lake, std::slice::from_ref(&path), &["ts"], 1, || (), |_: &mut (), _, _| Ok::<(), ScanError>(())).unwrap_err();
        match gone {
            ScanError::Open { path: p, source } => assert!(p == path && source.kind() == std::io::ErrorKind::NotFound, "{source}"),
            other => panic!("an I/O error of kind NotFound, not {other:?}"),
        }
    }
}
