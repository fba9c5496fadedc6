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
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().map_err(|source| WriteError::Decode { path: path.clone(), source })?;
    let schema = table.schema();
    let batches = batches
        .into_iter()
        .map(|b| {
            with_later_columns(&schema, b).ok_or_else(|| WriteError::Schema {
                table: table.name(),
                date,
                detail: format!("{} has an older or foreign schema", path.display()),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let batch = concat_batches(&schema, &batches)
        .map_err(|e| WriteError::Parquet { path: path.clone(), source: parquet::errors::ParquetError::ArrowError(e.to_string()) })?;
    Ok(Some(batch))
}

/// `b` in `schema`: as it is when it matches, with the columns added since its file was
/// written (`LATER_COLUMNS`) as nulls; None when it differs otherwise.
fn with_later_columns(schema: &arrow::datatypes::SchemaRef, b: RecordBatch) -> Option<RecordBatch> {
    if b.schema().fields() == schema.fields() {
        return Some(b);
    }
    let mut columns = Vec::with_capacity(schema.fields().len());
    let mut used = 0;
    for f in schema.fields() {
        match b.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => {
                used += 1;
                columns.push(c.clone());
            }
            None if super::schema::later_column(f.name()).is_some() => columns.push(arrow::array::new_null_array(f.data_type(), b.num_rows())),
            _ => return None,
        }
    }
    // A column the table does not have is a foreign file, not an older one.
    (used == b.num_columns()).then(|| RecordBatch::try_new(schema.clone(), columns).ok()).flatten()
}
