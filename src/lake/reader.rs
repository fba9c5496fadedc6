//! Reads one published partition back (for merging a re-collected window into a day).

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use chrono::NaiveDate;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::{Lake, Table, WriteError};

/// The rows of `table` for `date`, or None when the day has no file yet.
pub fn read_partition(lake: &Lake, table: Table, date: NaiveDate) -> Result<Option<RecordBatch>, WriteError> {
    let path = lake.partition_file(table, date);
    let file = match lake.open_file(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(WriteError::Io { path, source }),
    };
    let pq = |source| WriteError::Parquet { path: path.clone(), source };
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?.build().map_err(pq)?;
    let batches: Vec<RecordBatch> = reader
        .collect::<Result<_, _>>()
        .map_err(|e| WriteError::Parquet { path: path.clone(), source: parquet::errors::ParquetError::ArrowError(e.to_string()) })?;
    let schema = table.schema();
    if let Some(b) = batches.first() {
        if b.schema().fields() != schema.fields() {
            return Err(WriteError::Schema { table: table.name(), date, detail: format!("{} has an older or foreign schema", path.display()) });
        }
    }
    let batch = concat_batches(&schema, &batches).map_err(|e| WriteError::Parquet {
        path: path.clone(),
        source: parquet::errors::ParquetError::ArrowError(e.to_string()),
    })?;
    Ok(Some(batch))
}
