//! Loads a simple CSV (header row of lake column names, no quoted commas, empty = null) into
//! a lake table, one file per day of the table's first timestamp column. Used for fixtures
//! and for seeding a lake by hand.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::compute::cast;
use chrono::{DateTime, NaiveDate};

use super::{write_partition, Lake, Table};

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("reading {path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} line {line}: {message}")]
    Parse { path: PathBuf, line: usize, message: String },
    #[error(transparent)]
    Write(#[from] super::WriteError),
    #[error(transparent)]
    Published(#[from] super::published::PublishedError),
}

/// Imports `csv` into `table`; returns the days written.
pub fn import_csv(lake: &Lake, table: Table, csv: &Path) -> Result<Vec<NaiveDate>, ImportError> {
    let text = std::fs::read_to_string(csv).map_err(|source| ImportError::Io { path: csv.to_path_buf(), source })?;
    let perr = |line: usize, message: String| ImportError::Parse { path: csv.to_path_buf(), line, message };
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or_else(|| perr(1, "empty file".into()))?.split(',').collect();
    let schema = table.schema();
    // The columns added since the table's first version may be left out (they import as null).
    let named: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let expected: Vec<&str> = named.iter().copied().filter(|n| header.contains(n) || !super::schema::LATER_COLUMNS.contains(n)).collect();
    if header != expected {
        return Err(perr(
            1,
            format!("header must be the {} columns in order: {:?}", table.name(), schema.fields().iter().map(|f| f.name()).collect::<Vec<_>>()),
        ));
    }
    let day_col = table.delta_columns()[0];
    let day_idx = header.iter().position(|h| *h == day_col).expect("the delta column is never a later one");
    let mut by_day: BTreeMap<NaiveDate, Vec<Vec<Option<String>>>> = BTreeMap::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let fields: Vec<Option<String>> = line.split(',').map(|f| (!f.is_empty()).then(|| f.to_string())).collect();
        if fields.len() != header.len() {
            return Err(perr(i + 2, format!("{} fields, expected {}", fields.len(), header.len())));
        }
        let ts = fields[day_idx].as_deref().ok_or_else(|| perr(i + 2, format!("{day_col} is empty")))?;
        let day = DateTime::parse_from_rfc3339(ts).map_err(|e| perr(i + 2, format!("{day_col}: {e}")))?.date_naive();
        by_day.entry(day).or_default().push(fields);
    }
    let mut days = Vec::new();
    for (day, rows) in by_day {
        let mut columns: Vec<ArrayRef> = Vec::new();
        for field in schema.fields().iter() {
            let at = header.iter().position(|h| h == field.name());
            let strings: StringArray = rows.iter().map(|r| at.and_then(|a| r.get(a).cloned().flatten())).collect();
            let array = cast(&(Arc::new(strings) as ArrayRef), field.data_type()).map_err(|e| perr(0, format!("column {}: {e}", field.name())))?;
            columns.push(array);
        }
        let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| perr(0, e.to_string()))?;
        write_partition(lake, table, day, &batch)?;
        days.push(day);
    }
    super::published::Published::record(lake, days.iter().copied())?;
    Ok(days)
}
