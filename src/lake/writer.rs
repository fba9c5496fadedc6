//! The one Parquet writer of the lake (after GreptimeDB's and Parseable's): measurements at
//! the lake's resolution (`quantize`), rows sorted before `sorting_columns` is declared, ZSTD,
//! delta-encoded timestamps without dictionary, byte-stream-split energy, temperature and
//! utilisation, plain framebuffer use, dictionary-encoded labels and power, ~128k-row groups, schema version and window in key/value
//! metadata; published atomically through `store` (locally `.tmp` + fsync + rename, on S3 one PUT).

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;

use std::cmp::Ordering;

use arrow::array::{make_comparator, Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::compute::{lexsort_to_indices, sort_to_indices, take_record_batch, SortColumn, SortOptions};
use arrow::datatypes::DataType;
use arrow::error::ArrowError;
use chrono::NaiveDate;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use super::layout::Lake;
use super::schema::{Table, SCHEMA_VERSION};

pub const ROW_GROUP_ROWS: usize = 128 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{table} for {date}: batch schema does not match the lake schema: {detail}")]
    Schema { table: &'static str, date: NaiveDate, detail: String },
    #[error("{table} for {date}: preparing rows")]
    Sort { table: &'static str, date: NaiveDate, source: ArrowError },
    #[error("writing {path}")]
    Parquet { path: PathBuf, source: ParquetError },
    #[error("writing {path}")]
    Io { path: PathBuf, source: io::Error },
    #[error("rollup for {date}")]
    Rollup { date: NaiveDate, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("reading {path}")]
    Decode { path: PathBuf, source: ArrowError },
    #[error(transparent)]
    Published(#[from] super::published::PublishedError),
}

pub type Result<T, E = WriteError> = std::result::Result<T, E>;

/// Sorts `batch` by the table's sort columns and publishes it as the table's file for `date`,
/// replacing any earlier file for that day atomically. Returns the path written and the rows as
/// written (sorted, at the lake's resolution). The day's rollups are not this file's business:
/// `lake::day::write_partition` publishes them after it.
pub fn write_file(lake: &Lake, table: Table, date: NaiveDate, batch: &RecordBatch) -> Result<(PathBuf, RecordBatch)> {
    let schema = table.schema();
    if batch.schema().fields() != schema.fields() {
        return Err(WriteError::Schema {
            table: table.name(),
            date,
            detail: format!("got {:?}", batch.schema().fields().iter().map(|f| f.name()).collect::<Vec<_>>()),
        });
    }
    let quantized = super::quantize::quantize(table, batch).map_err(|source| WriteError::Sort { table: table.name(), date, source })?;
    let sorted = sort_batch(table, &quantized).map_err(|source| WriteError::Sort { table: table.name(), date, source })?;

    let final_path = lake.partition_file(table, date);
    lake.publish(&final_path, |out| {
        write_parquet(table, date, &sorted, out)?;
        crate::failpoint::write("write")
    })
    .map_err(|source| WriteError::Io { path: final_path.clone(), source })?;
    Ok((final_path, sorted))
}

/// The rows of `batch` in the table's sort order (nulls first, ascending).
pub fn sort_batch(table: Table, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    if batch.num_rows() < 2 {
        return Ok(batch.clone());
    }
    let columns: Vec<SortColumn> = table
        .sort_columns()
        .iter()
        .map(|name| {
            let idx = batch.schema().index_of(name)?;
            Ok(SortColumn { values: sort_key(batch.column(idx))?, options: Some(ASCENDING) })
        })
        .collect::<Result<_, ArrowError>>()?;
    let indices = lexsort_to_indices(&columns, None)?;
    take_record_batch(batch, &indices)
}

const ASCENDING: SortOptions = SortOptions { descending: false, nulls_first: true };

/// A column that sorts like `column`: a dictionary's keys replaced by the ranks of their
/// values, so the sort compares integers rather than strings (on a day of 10,000 GPUs, string
/// comparisons of node names and UUIDs were most of the writer's time). Other types as they are.
fn sort_key(column: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    if !matches!(column.data_type(), DataType::Dictionary(_, _)) {
        return Ok(Arc::clone(column));
    }
    let dictionary = column.as_any_dictionary();
    let values = dictionary.values();
    if values.is_empty() {
        // No values: every row is null (a label no row has, such as `mig_profile` on a pool
        // without MIG), and all rows sort alike.
        return Ok(Arc::new(UInt32Array::new_null(column.len())));
    }
    let order = sort_to_indices(values, Some(ASCENDING), None)?;
    let compare = make_comparator(values.as_ref(), values.as_ref(), ASCENDING)?;
    let mut rank = vec![0u32; values.len()];
    let mut previous: Option<usize> = None;
    let mut next_rank = 0u32;
    for &i in order.values() {
        let i = i as usize;
        if previous.is_some_and(|p| compare(p, i) != Ordering::Equal) {
            next_rank += 1;
        }
        rank[i] = next_rank;
        previous = Some(i);
    }
    let nulls = column.logical_nulls();
    let ranks: UInt32Array =
        dictionary.normalized_keys().into_iter().enumerate().map(|(row, key)| nulls.as_ref().is_none_or(|n| n.is_valid(row)).then(|| rank[key])).collect();
    Ok(Arc::new(ranks))
}

pub fn writer_properties(table: Table, date: NaiveDate) -> WriterProperties {
    let schema = table.schema();
    let sorting: Vec<SortingColumn> = table
        .sort_columns()
        .iter()
        .map(|name| SortingColumn { column_idx: schema.index_of(name).expect("sort column in schema") as i32, descending: false, nulls_first: true })
        .collect();
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("valid zstd level")))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_dictionary_enabled(true)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_sorting_columns(Some(sorting))
        .set_created_by(format!("gpuledger {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![
            KeyValue::new("gpuledger.schema_version".into(), SCHEMA_VERSION.to_string()),
            KeyValue::new("gpuledger.table".into(), table.name().to_string()),
            KeyValue::new("gpuledger.window".into(), format!("{date}T00:00:00Z/P1D")),
        ]));
    for name in table.split_columns() {
        let path = ColumnPath::from(*name);
        builder = builder.set_column_dictionary_enabled(path.clone(), false).set_column_encoding(path, Encoding::BYTE_STREAM_SPLIT);
    }
    for name in table.plain_columns() {
        let path = ColumnPath::from(*name);
        builder = builder.set_column_dictionary_enabled(path.clone(), false).set_column_encoding(path, Encoding::PLAIN);
    }
    for name in table.delta_columns() {
        let path = ColumnPath::from(*name);
        builder = builder.set_column_dictionary_enabled(path.clone(), false).set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
    }
    builder.build()
}

/// Encodes `batch` as the table's Parquet file into `out`, one row group per ROW_GROUP_ROWS.
fn write_parquet(table: Table, date: NaiveDate, batch: &RecordBatch, out: &mut (dyn Write + Send)) -> io::Result<()> {
    let pq_err = io::Error::other;
    let mut writer = ArrowWriter::try_new(out, Arc::clone(&table.schema()), Some(writer_properties(table, date))).map_err(pq_err)?;
    let mut offset = 0;
    while offset < batch.num_rows() {
        let len = ROW_GROUP_ROWS.min(batch.num_rows() - offset);
        writer.write(&batch.slice(offset, len)).map_err(pq_err)?;
        offset += len;
    }
    writer.close().map_err(pq_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{DictionaryArray, Int64Array, StringArray};
    use arrow::compute::cast;
    use arrow::datatypes::Int32Type;

    /// Dictionary columns sort by their ranks exactly as by their strings: values out of order,
    /// repeated in the dictionary, null keys first.
    #[test]
    fn dictionary_ranks_sort_like_the_strings() {
        let keys = arrow::array::Int32Array::from(vec![Some(2), None, Some(0), Some(3), Some(1), Some(2), None, Some(0)]);
        let values = StringArray::from(vec!["node-10", "node-2", "GPU-b", "node-10"]);
        let dict: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values)).unwrap());
        let ts: ArrayRef = Arc::new(Int64Array::from(vec![5, 4, 3, 2, 1, 0, 7, 6]));
        let by = |first: ArrayRef| {
            let columns = vec![SortColumn { values: first, options: Some(ASCENDING) }, SortColumn { values: Arc::clone(&ts), options: Some(ASCENDING) }];
            lexsort_to_indices(&columns, None).unwrap()
        };
        let strings = cast(&dict, &DataType::Utf8).unwrap();
        let ranks = sort_key(&dict).unwrap();
        assert_eq!(ranks.data_type(), &DataType::UInt32);
        // Keys 0 and 3 hold the same string, so they share a rank and ts breaks the tie.
        assert_eq!(by(ranks).values(), by(strings).values());
        assert_eq!(by(sort_key(&dict).unwrap()).values(), &[1, 6, 5, 0, 3, 2, 7, 4]);

        // A dictionary with no values at all (every row null) sorts as all-equal nulls.
        let keys = arrow::array::Int32Array::from(vec![None::<i32>; 8]);
        let empty: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::new(StringArray::from(Vec::<&str>::new()))).unwrap());
        let ranks = sort_key(&empty).unwrap();
        assert_eq!((ranks.len(), ranks.null_count()), (8, 8));
        assert_eq!(by(ranks).values(), &[5, 4, 3, 2, 1, 0, 7, 6]);
    }
}
