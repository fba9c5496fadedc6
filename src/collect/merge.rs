//! A day's new rows merged with what its file already holds: rows of the window replaced, rows
//! outside it kept (pods, their owners and labels by uid).

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::TimestampMillisecondType;
use chrono::NaiveDate;

use super::error::{CollectError, Result};
use crate::lake::reader::read_partition;
use crate::lake::{Lake, Table};

fn merge_err(table: Table, date: NaiveDate) -> impl Fn(arrow::error::ArrowError) -> CollectError {
    move |e| CollectError::Merge { table: table.name(), date, source: e.into() }
}

/// The day's existing rows with `column` outside `[w0, w1)`, plus `new`.
pub(super) fn merge_window(lake: &Lake, table: Table, date: NaiveDate, column: &str, w0: i64, w1: i64, new: RecordBatch) -> Result<RecordBatch> {
    let Some(old) = read_partition(lake, table, date)? else { return Ok(new) };
    let ts = old.column_by_name(column).expect("time column").as_primitive::<TimestampMillisecondType>();
    let keep: BooleanArray = ts.iter().map(|t| Some(t.is_none_or(|t| t < w0 || t >= w1))).collect();
    let kept = filter_record_batch(&old, &keep).map_err(merge_err(table, date))?;
    concat_batches(&table.schema(), [&kept, &new]).map_err(merge_err(table, date))
}

/// The day's existing rows of `table` (pods, their owners, their labels) whose uid is not in
/// `new`, plus `new`.
pub(super) fn merge_by_uid(lake: &Lake, table: Table, date: NaiveDate, new: RecordBatch) -> Result<RecordBatch> {
    let Some(old) = read_partition(lake, table, date)? else { return Ok(new) };
    let new_uids: std::collections::BTreeSet<String> =
        new.column_by_name("uid").expect("uid").as_string::<i32>().iter().flatten().map(str::to_string).collect();
    let uids = old.column_by_name("uid").expect("uid").as_string::<i32>();
    let keep: BooleanArray = uids.iter().map(|u| Some(u.is_none_or(|u| !new_uids.contains(u)))).collect();
    let kept = filter_record_batch(&old, &keep).map_err(merge_err(table, date))?;
    concat_batches(&table.schema(), [&kept, &new]).map_err(merge_err(table, date))
}
