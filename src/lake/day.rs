//! A day of a table published: its file (`writer`), then its rollups (`rollup`), the one way
//! the collector, the simulator and an import write a day. Above both, so that the writer, the
//! lowest primitive, knows nothing of the rollups.

use std::path::PathBuf;

use arrow::array::RecordBatch;
use chrono::NaiveDate;

use super::layout::Lake;
use super::rollup;
use super::schema::Table;
use super::writer::{write_file, Result};

/// Sorts `batch` by the table's sort columns and publishes it as the table's file for `date`,
/// replacing any earlier file for that day atomically, then the day's rollups where the table
/// has any. Returns the path written.
///
/// A day's rollups are replaced once its new file is in place: a write that fails (a full disk)
/// leaves the day's file and its rollups as they were. A crash between the two leaves rollups of
/// the old file beside the new one, in a day the published record marks as being written
/// (`published::Published::begin`), which no session reads until it is written again (and
/// whose rollups name another source file, so they are not current); `collect --accept` drops
/// the rollups of the days it accepts.
pub fn write_partition(lake: &Lake, table: Table, date: NaiveDate, batch: &RecordBatch) -> Result<PathBuf> {
    let (path, written) = write_file(lake, table, date, batch)?;
    if rollup::SOURCES.contains(&table) {
        rollup::write(lake, table, date, &written, &path)?;
    }
    crate::failpoint::pass("publish");
    Ok(path)
}
