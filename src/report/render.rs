//! A report's model: `Report` (columns, rows of `Cell`s, a total, notes) and its Arrow form,
//! which the one renderer (`crate::render`) writes in every format.

use std::sync::Arc;

use arrow::array::{ArrayRef, Decimal128Builder, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::{Map, Value};

use super::error::{ReportError, Result};
use crate::domain::money::format_units;
pub use crate::render::Format;

/// One value of a report: text, an integer, or an exact decimal (`units` of `10^-decimals`).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Str(String),
    Int(i64),
    Dec {
        units: i128,
        decimals: u32,
    },
    /// An instant (ms since the epoch, UTC): RFC 3339 text, a UTC timestamp in Parquet.
    Time(i64),
}

impl Cell {
    pub fn text(&self) -> String {
        match self {
            Cell::Null => String::new(),
            Cell::Str(s) => s.clone(),
            Cell::Int(i) => i.to_string(),
            Cell::Dec { units, decimals } => format_units(*units, *decimals),
            Cell::Time(ms) => super::columns::rfc3339(*ms),
        }
    }
}

/// A finished report: columns, rows, a total row shown by the human formats, and notes (the
/// conservation line) stated under it.
#[derive(Debug, Clone)]
pub struct Report {
    pub name: String,
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    pub total: Option<Vec<Cell>>,
    pub notes: Vec<String>,
    /// Extra machine-readable facts for the JSON form.
    pub meta: Map<String, Value>,
}

/// The JSON key, Parquet metadata key and note prefix that mark a report made from less data
/// than `run.min_completeness_pct` asks for.
pub const DATA_INCOMPLETE: &str = "DATA INCOMPLETE";
const INCOMPLETE_KEY: &str = "data_incomplete";

impl Report {
    /// Marks the report as made from incomplete data, in every format: the first note (table,
    /// Markdown, HTML), `data_incomplete` in JSON, a last line in CSV, a key in Parquet's
    /// metadata.
    pub fn mark_incomplete(&mut self, reason: &str) {
        if self.incomplete().is_none() {
            self.notes.insert(0, format!("{DATA_INCOMPLETE}: {reason}"));
            self.meta.insert(INCOMPLETE_KEY.into(), Value::String(reason.to_string()));
        }
    }

    /// Why the report is marked incomplete, if it is.
    pub fn incomplete(&self) -> Option<&str> {
        self.meta.get(INCOMPLETE_KEY).and_then(Value::as_str)
    }

    pub fn render(&self, format: Format) -> Result<Vec<u8>> {
        let rows = self.to_batch()?;
        let frame = self.frame()?;
        crate::render::render(format, rows.schema(), &[rows], &frame).map_err(|source| ReportError::Render {
            report: self.name.clone(),
            format: format.name(),
            source,
        })
    }

    /// `reports` as one Excel workbook, a worksheet each (named after the report; a repeated
    /// name gets a number).
    pub fn workbook(reports: &[&Report]) -> Result<Vec<u8>> {
        let report = reports.first().map_or_else(String::new, |r| r.name.clone());
        let err = |source| ReportError::Render { report: report.clone(), format: "xlsx", source };
        let mut book = crate::render::xlsx::Book::new().map_err(err)?;
        let mut names: Vec<String> = Vec::new();
        // A sheet's rows as a batch only while that sheet is written.
        for r in reports {
            let mut name = r.name.clone();
            let mut n = 2;
            while names.contains(&name) {
                name = format!("{}-{n}", r.name);
                n += 1;
            }
            let (batch, frame) = (r.to_batch()?, r.frame()?);
            book.add(&crate::render::xlsx::Sheet { name: &name, schema: batch.schema_ref(), batches: std::slice::from_ref(&batch), frame: &frame })
                .map_err(err)?;
            names.push(name);
        }
        book.finish().map_err(err)
    }

    /// What the formats show besides the rows: the title, the total row, the notes, the JSON
    /// document's fields (`report`, `title`, the meta facts), the CSV and Parquet incomplete marks.
    fn frame(&self) -> Result<crate::render::Frame> {
        let mut json_fields = vec![("report".to_string(), Value::String(self.name.clone())), ("title".to_string(), Value::String(self.title.clone()))];
        json_fields.extend(self.meta.iter().map(|(k, v)| (k.clone(), v.clone())));
        let total = match &self.total {
            Some(t) => Some(self.batch_of(std::slice::from_ref(t))?),
            None => None,
        };
        Ok(crate::render::Frame {
            title: Some(self.title.clone()),
            total,
            notes: self.notes.clone(),
            json_fields: Some(json_fields),
            // Where a person opens the CSV (a spreadsheet) the mark is its last row.
            csv_last_line: self.incomplete().map(|reason| format!("{DATA_INCOMPLETE}: {reason}")),
            parquet_metadata: self.incomplete().map(|reason| (format!("gpuledger.{INCOMPLETE_KEY}"), reason.to_string())).into_iter().collect(),
        })
    }

    /// The rows as an Arrow batch: text as Utf8, integers as Int64, decimals as DECIMAL at their
    /// scale, instants as UTC timestamps. A column whose cells are not all of one kind (or one
    /// scale) is text, so that no value is lost.
    pub fn to_batch(&self) -> Result<RecordBatch> {
        self.batch_of(&self.rows)
    }

    fn batch_of(&self, rows: &[Vec<Cell>]) -> Result<RecordBatch> {
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (i, name) in self.columns.iter().enumerate() {
            let cells = || rows.iter().map(move |r| r.get(i).unwrap_or(&Cell::Null));
            let kind = column_kind(cells());
            let (data_type, array): (DataType, ArrayRef) = match kind {
                ColumnKind::Int => {
                    let mut b = Int64Builder::new();
                    cells().for_each(|c| b.append_option(if let Cell::Int(v) = c { Some(*v) } else { None }));
                    (DataType::Int64, Arc::new(b.finish()))
                }
                ColumnKind::Time => {
                    let values: Vec<Option<i64>> = cells().map(|c| if let Cell::Time(ms) = c { Some(*ms) } else { None }).collect();
                    (
                        DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, Some("UTC".into())),
                        Arc::new(arrow::array::TimestampMillisecondArray::from(values).with_timezone("UTC")),
                    )
                }
                ColumnKind::Dec(scale) => {
                    let mut b = Decimal128Builder::new();
                    cells().for_each(|c| b.append_option(if let Cell::Dec { units, .. } = c { Some(*units) } else { None }));
                    let dt = DataType::Decimal128(38, scale as i8);
                    let arr = b.finish().with_data_type(dt.clone());
                    (dt, Arc::new(arr))
                }
                ColumnKind::Text => {
                    let mut b = StringBuilder::new();
                    cells().for_each(|c| if *c == Cell::Null { b.append_null() } else { b.append_value(c.text()) });
                    (DataType::Utf8, Arc::new(b.finish()))
                }
            };
            fields.push(Field::new(name, data_type, true));
            arrays.push(array);
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(|e| ReportError::Render {
            report: self.name.clone(),
            format: "arrow",
            source: crate::render::RenderError::Arrow(e),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ColumnKind {
    Int,
    Time,
    Dec(u32),
    Text,
}

/// The one Arrow type that holds every cell of a column without loss (NULLs fit any).
fn column_kind<'c>(cells: impl Iterator<Item = &'c Cell>) -> ColumnKind {
    let mut kind = None;
    for c in cells {
        let k = match c {
            Cell::Null => continue,
            Cell::Int(_) => ColumnKind::Int,
            Cell::Time(_) => ColumnKind::Time,
            Cell::Dec { decimals, .. } if *decimals <= 38 => ColumnKind::Dec(*decimals),
            Cell::Dec { .. } | Cell::Str(_) => ColumnKind::Text,
        };
        match kind {
            None => kind = Some(k),
            Some(prev) if prev != k => return ColumnKind::Text,
            _ => {}
        }
    }
    kind.unwrap_or(ColumnKind::Text)
}
