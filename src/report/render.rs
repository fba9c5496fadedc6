//! Renders a `Report` as `table` (tabled), `csv`, `json`, `md` or `parquet`.

use std::sync::Arc;

use arrow::array::{ArrayRef, Decimal128Builder, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use serde_json::{Map, Value};

use crate::domain::money::format_units;
use super::{ReportError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
    Md,
    Parquet,
}

impl Format {
    pub const FILES: [Format; 4] = [Format::Csv, Format::Json, Format::Md, Format::Parquet];

    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Md => "md",
            Format::Parquet => "parquet",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Table => "txt",
            other => other.name(),
        }
    }
}

/// One value of a report: text, an integer, or an exact decimal (`units` of `10^-decimals`).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Str(String),
    Int(i64),
    Dec { units: i128, decimals: u32 },
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

    fn json(&self) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::Str(s) => Value::String(s.clone()),
            Cell::Int(i) => Value::from(*i),
            Cell::Dec { .. } => serde_json::from_str(&self.text()).unwrap_or(Value::Null),
            Cell::Time(_) => Value::String(self.text()),
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
        Ok(match format {
            Format::Table => self.table().into_bytes(),
            Format::Csv => self.csv().into_bytes(),
            Format::Json => self.json().into_bytes(),
            Format::Md => self.markdown().into_bytes(),
            Format::Parquet => self.parquet()?,
        })
    }

    fn table(&self) -> String {
        let mut b = tabled::builder::Builder::default();
        b.push_record(self.columns.clone());
        for row in self.rows.iter().chain(self.total.iter()) {
            b.push_record(row.iter().map(Cell::text));
        }
        let mut t = b.build();
        t.with(tabled::settings::Style::psql());
        t.modify(tabled::settings::object::Columns::new(2..), tabled::settings::Alignment::right());
        let mut out = format!("{}\n\n{t}\n", self.title);
        for n in &self.notes {
            out.push_str(n);
            out.push('\n');
        }
        out
    }

    /// RFC 4180 by the csv crate (a field with a comma, quote or line break quoted), rows ended
    /// by `\n`.
    fn csv(&self) -> String {
        let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).flexible(true).from_writer(Vec::new());
        let written = (|| -> csv::Result<()> {
            w.write_record(&self.columns)?;
            for row in &self.rows {
                w.write_record(row.iter().map(Cell::text))?;
            }
            // Where a person opens the file (a spreadsheet) the mark is its last row.
            if let Some(reason) = self.incomplete() {
                w.write_record([format!("{DATA_INCOMPLETE}: {reason}")])?;
            }
            w.flush()?;
            Ok(())
        })();
        written.expect("CSV into memory");
        String::from_utf8(w.into_inner().expect("CSV into memory")).expect("CSV of UTF-8 text is UTF-8")
    }

    fn json(&self) -> String {
        let obj = |row: &Vec<Cell>| -> Value {
            Value::Object(self.columns.iter().cloned().zip(row.iter().map(Cell::json)).collect())
        };
        let mut top = Map::new();
        top.insert("report".into(), Value::String(self.name.clone()));
        top.insert("title".into(), Value::String(self.title.clone()));
        for (k, v) in &self.meta {
            top.insert(k.clone(), v.clone());
        }
        top.insert("rows".into(), Value::Array(self.rows.iter().map(obj).collect()));
        if let Some(t) = &self.total {
            top.insert("total".into(), obj(t));
        }
        top.insert("notes".into(), Value::Array(self.notes.iter().cloned().map(Value::String).collect()));
        let mut s = serde_json::to_string_pretty(&Value::Object(top)).expect("json");
        s.push('\n');
        s
    }

    fn markdown(&self) -> String {
        let mut out = format!("# {}\n\n| {} |\n|", self.title, self.columns.join(" | "));
        for (i, _) in self.columns.iter().enumerate() {
            out.push_str(if i < 2 { "---|" } else { "---:|" });
        }
        out.push('\n');
        for row in self.rows.iter().chain(self.total.iter()) {
            out.push_str(&format!("| {} |\n", row.iter().map(|c| c.text().replace('|', "\\|")).collect::<Vec<_>>().join(" | ")));
        }
        out.push('\n');
        for n in &self.notes {
            out.push_str(&format!("{n}\n\n"));
        }
        out
    }

    /// The rows as an Arrow batch: text as Utf8, integers as Int64, decimals as DECIMAL.
    pub fn to_batch(&self) -> Result<RecordBatch> {
        let err = |detail: String| ReportError::Render { report: self.name.clone(), format: "parquet", detail };
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (i, name) in self.columns.iter().enumerate() {
            let sample = self.rows.iter().map(|r| &r[i]).find(|c| **c != Cell::Null);
            match sample {
                Some(Cell::Int(_)) => {
                    let mut b = Int64Builder::new();
                    for r in &self.rows {
                        match &r[i] {
                            Cell::Int(v) => b.append_value(*v),
                            _ => b.append_null(),
                        }
                    }
                    fields.push(Field::new(name, DataType::Int64, true));
                    arrays.push(Arc::new(b.finish()));
                }
                Some(Cell::Time(_)) => {
                    let values: Vec<Option<i64>> = self.rows.iter().map(|r| if let Cell::Time(ms) = r[i] { Some(ms) } else { None }).collect();
                    fields.push(Field::new(name, DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, Some("UTC".into())), true));
                    arrays.push(Arc::new(arrow::array::TimestampMillisecondArray::from(values).with_timezone("UTC")));
                }
                Some(Cell::Dec { decimals, .. }) => {
                    let d = *decimals;
                    let mut b = Decimal128Builder::new();
                    for r in &self.rows {
                        match &r[i] {
                            Cell::Dec { units, .. } => b.append_value(*units),
                            _ => b.append_null(),
                        }
                    }
                    let arr = b.finish().with_precision_and_scale(38, d as i8).map_err(|e| err(e.to_string()))?;
                    fields.push(Field::new(name, DataType::Decimal128(38, d as i8), true));
                    arrays.push(Arc::new(arr));
                }
                _ => {
                    let mut b = StringBuilder::new();
                    for r in &self.rows {
                        match &r[i] {
                            Cell::Null => b.append_null(),
                            c => b.append_value(c.text()),
                        }
                    }
                    fields.push(Field::new(name, DataType::Utf8, true));
                    arrays.push(Arc::new(b.finish()));
                }
            }
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(|e| err(e.to_string()))
    }

    fn parquet(&self) -> Result<Vec<u8>> {
        let err = |detail: String| ReportError::Render { report: self.name.clone(), format: "parquet", detail };
        let batch = self.to_batch()?;
        let mut props = parquet::file::properties::WriterProperties::builder().set_created_by(format!("gpuledger {}", env!("CARGO_PKG_VERSION")));
        if let Some(reason) = self.incomplete() {
            props = props.set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(format!("gpuledger.{INCOMPLETE_KEY}"), reason.to_string())]));
        }
        let props = props.build();
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).map_err(|e| err(e.to_string()))?;
        w.write(&batch).map_err(|e| err(e.to_string()))?;
        w.close().map_err(|e| err(e.to_string()))?;
        Ok(buf)
    }
}
