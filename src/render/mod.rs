//! The one renderer: Arrow batches as `table` (tabled), `csv` (the csv crate), `json`, `md` or
//! `parquet` (arrow's writer). Reports come here through `Report::to_batch` with a `Frame` (title,
//! total row, notes, the JSON document's fields); ad hoc results come as they stream, with none.
//!
//! CSV, JSON and Parquet are written batch by batch, so a result of any size streams in a
//! batch's memory; the table and Markdown forms size their columns over every row and hold the
//! batches until `finish`. Cell text and JSON values come from `cells`, the same for both.

pub mod cells;
mod text;
pub mod xlsx;

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
    Md,
    Parquet,
    /// An Excel workbook with one worksheet (`render::xlsx`).
    Xlsx,
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
            Format::Xlsx => "xlsx",
        }
    }

    /// Bytes no terminal should print (Parquet, Excel).
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Parquet | Format::Xlsx)
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Table => "txt",
            other => other.name(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    #[error(transparent)]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error(transparent)]
    Csv(#[from] csv::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = RenderError> = std::result::Result<T, E>;

/// What a document carries besides its rows (a report has these; an ad hoc result none).
#[derive(Debug, Clone, Default)]
pub struct Frame {
    /// The heading of the table and Markdown forms.
    pub title: Option<String>,
    /// A total row (its own schema, same column names), under the rows in the table and
    /// Markdown forms and as `total` in the JSON document; never in CSV or Parquet.
    pub total: Option<RecordBatch>,
    /// Lines stated under the table (table, Markdown) and as `notes` in the JSON document.
    pub notes: Vec<String>,
    /// The JSON form as one object: these fields, then `rows`, `total` and `notes`. None: a bare
    /// array of rows.
    pub json_fields: Option<Vec<(String, Value)>>,
    /// One line after the CSV rows (where a spreadsheet user sees it).
    pub csv_last_line: Option<String>,
    /// Key-value metadata in the Parquet footer.
    pub parquet_metadata: Vec<(String, String)>,
}

/// Writes one document in one format, batch by batch.
pub struct Writer<'a> {
    schema: SchemaRef,
    frame: &'a Frame,
    state: State<'a>,
}

type Out<'a> = &'a mut (dyn Write + Send);

enum State<'a> {
    /// Table and Markdown: every batch is held until `finish`.
    Held {
        format: Format,
        out: Out<'a>,
        batches: Vec<RecordBatch>,
    },
    /// Boxed: the writer holds its buffer inline, ten times the other states.
    Csv(Box<csv::Writer<Out<'a>>>),
    /// A bare array streamed row by row.
    JsonArray {
        out: Out<'a>,
        first: bool,
        keys: Vec<Vec<u8>>,
    },
    /// A document object: its rows are held until `finish` (reports are small).
    JsonDocument {
        out: Out<'a>,
        rows: Vec<Vec<Value>>,
    },
    Parquet(Box<ArrowWriter<Out<'a>>>),
}

impl<'a> Writer<'a> {
    pub fn new(format: Format, schema: SchemaRef, frame: &'a Frame, out: Out<'a>) -> Result<Self> {
        let state = match format {
            Format::Table | Format::Md | Format::Xlsx => State::Held { format, out, batches: Vec::new() },
            Format::Csv => {
                // RFC 4180 (a field with a comma, quote or line break quoted), rows ended by `\n`.
                let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).flexible(true).from_writer(out);
                w.write_record(schema.fields().iter().map(|f| f.name()))?;
                State::Csv(Box::new(w))
            }
            Format::Json if frame.json_fields.is_some() => State::JsonDocument { out, rows: Vec::new() },
            Format::Json => {
                out.write_all(b"[")?;
                // Each key once, as JSON text with its colon.
                let keys = schema
                    .fields()
                    .iter()
                    .map(|f| {
                        serde_json::to_vec(f.name()).map(|mut k| {
                            k.push(b':');
                            k
                        })
                    })
                    .collect::<std::result::Result<_, _>>()?;
                State::JsonArray { out, first: true, keys }
            }
            Format::Parquet => {
                let mut props = parquet::file::properties::WriterProperties::builder().set_created_by(format!("gpuledger {}", env!("CARGO_PKG_VERSION")));
                if !frame.parquet_metadata.is_empty() {
                    let kv = frame.parquet_metadata.iter().map(|(k, v)| parquet::file::metadata::KeyValue::new(k.clone(), v.clone())).collect();
                    props = props.set_key_value_metadata(Some(kv));
                }
                State::Parquet(Box::new(ArrowWriter::try_new(out, schema.clone(), Some(props.build()))?))
            }
        };
        Ok(Writer { schema, frame, state })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match &mut self.state {
            State::Held { batches, .. } => batches.push(batch.clone()),
            State::Csv(w) => {
                let text = cells::TextColumns::new(batch)?;
                let mut cell = String::new();
                for r in 0..batch.num_rows() {
                    for c in 0..batch.num_columns() {
                        cell.clear();
                        text.write(r, c, &mut cell)?;
                        w.write_field(&cell)?;
                    }
                    w.write_record(None::<&[u8]>)?;
                }
            }
            State::JsonArray { out, first, keys } => {
                let columns: Vec<cells::JsonColumn> = batch.columns().iter().map(cells::JsonColumn::new).collect::<std::result::Result<_, _>>()?;
                let (mut buf, mut scratch) = (Vec::with_capacity(64 * 1024), String::new());
                for r in 0..batch.num_rows() {
                    if !*first {
                        buf.push(b',');
                    }
                    *first = false;
                    buf.push(b'{');
                    for (c, (key, column)) in keys.iter().zip(&columns).enumerate() {
                        if c > 0 {
                            buf.push(b',');
                        }
                        buf.extend_from_slice(key);
                        column.write(r, &mut buf, &mut scratch)?;
                    }
                    buf.push(b'}');
                    if buf.len() >= 60 * 1024 {
                        out.write_all(&buf)?;
                        buf.clear();
                    }
                }
                out.write_all(&buf)?;
            }
            State::JsonDocument { rows, .. } => rows.extend(cells::json_rows(batch)?),
            State::Parquet(w) => w.write(batch)?,
        }
        Ok(())
    }

    pub fn finish(self) -> Result<()> {
        let frame = self.frame;
        match self.state {
            State::Held { format, out, batches } => {
                let bytes = match format {
                    Format::Md => text::markdown(&self.schema, &batches, frame)?.into_bytes(),
                    Format::Xlsx => {
                        let name =
                            frame.json_fields.as_ref().and_then(|f| f.iter().find(|(k, _)| k == "report")).and_then(|(_, v)| v.as_str()).unwrap_or("result");
                        xlsx::workbook(&[xlsx::Sheet { name, schema: &self.schema, batches: &batches, frame }])?
                    }
                    _ => text::table(&self.schema, &batches, frame)?.into_bytes(),
                };
                out.write_all(&bytes)?;
                out.flush()?;
            }
            State::Csv(mut w) => {
                if let Some(line) = &frame.csv_last_line {
                    w.write_record([line])?;
                }
                w.flush()?;
            }
            State::JsonArray { out, .. } => {
                out.write_all(b"]\n")?;
                out.flush()?;
            }
            State::JsonDocument { out, rows } => {
                let columns = names(&self.schema);
                let total = match &frame.total {
                    Some(t) => Some((names(&t.schema()), cells::json_rows(t)?.into_iter().next().unwrap_or_default())),
                    None => None,
                };
                let doc = Document {
                    fields: frame.json_fields.as_deref().unwrap_or_default(),
                    names: &columns,
                    rows: &rows,
                    total: total.as_ref().map(|(n, v)| Row { names: n, values: v }),
                    notes: &frame.notes,
                };
                serde_json::to_writer_pretty(&mut *out, &doc)?;
                out.write_all(b"\n")?;
                out.flush()?;
            }
            State::Parquet(w) => {
                w.close()?;
            }
        }
        Ok(())
    }
}

/// `batches` (all of `schema`) in `format`, framed by `frame`, into memory.
pub fn render(format: Format, schema: SchemaRef, batches: &[RecordBatch], frame: &Frame) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut w = Writer::new(format, schema, frame, &mut buf)?;
    for b in batches {
        w.write(b)?;
    }
    w.finish()?;
    Ok(buf)
}

fn names(schema: &SchemaRef) -> Vec<String> {
    schema.fields().iter().map(|f| f.name().clone()).collect()
}

/// One row as a JSON object, its keys in column order.
struct Row<'a> {
    names: &'a [String],
    values: &'a [Value],
}

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.names.len()))?;
        for (k, v) in self.names.iter().zip(self.values) {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

struct Rows<'a> {
    names: &'a [String],
    rows: &'a [Vec<Value>],
}

impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.rows.len()))?;
        for values in self.rows {
            seq.serialize_element(&Row { names: self.names, values })?;
        }
        seq.end()
    }
}

/// A report's JSON form: its fields, `rows`, `total` where it has one, `notes`.
struct Document<'a> {
    fields: &'a [(String, Value)],
    names: &'a [String],
    rows: &'a [Vec<Value>],
    total: Option<Row<'a>>,
    notes: &'a [String],
}

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.fields {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("rows", &Rows { names: self.names, rows: self.rows })?;
        if let Some(t) = &self.total {
            m.serialize_entry("total", t)?;
        }
        m.serialize_entry("notes", self.notes)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Decimal128Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("namespace", DataType::Utf8, true),
            Field::new("pods", DataType::Int64, true),
            Field::new("cost", DataType::Decimal128(38, 2), true),
        ]));
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("a,b"), None])),
            Arc::new(Int64Array::from(vec![Some(3), None])),
            Arc::new(Decimal128Array::from(vec![Some(150), Some(-5)]).with_precision_and_scale(38, 2).unwrap()),
        ];
        RecordBatch::try_new(schema, cols).unwrap()
    }

    fn text(format: Format, frame: &Frame) -> String {
        let b = batch();
        String::from_utf8(render(format, b.schema(), &[b.slice(0, 1), b.slice(1, 1)], frame).unwrap()).unwrap()
    }

    #[test]
    fn csv_quotes_and_keeps_decimals_exact_across_batches() {
        let frame = Frame { csv_last_line: Some("DATA INCOMPLETE: x".into()), ..Frame::default() };
        assert_eq!(text(Format::Csv, &frame), "namespace,pods,cost\n\"a,b\",3,1.50\n,,-0.05\nDATA INCOMPLETE: x\n");
        let empty = batch().slice(0, 0);
        assert_eq!(
            String::from_utf8(render(Format::Csv, empty.schema(), &[], &Frame::default()).unwrap()).unwrap(),
            "namespace,pods,cost\n",
            "an empty result still has its header"
        );
    }

    #[test]
    fn json_array_streams_and_document_keeps_column_order() {
        assert_eq!(
            text(Format::Json, &Frame::default()),
            "[{\"namespace\":\"a,b\",\"pods\":3,\"cost\":\"1.50\"},{\"namespace\":null,\"pods\":null,\"cost\":\"-0.05\"}]\n"
        );
        let frame = Frame { json_fields: Some(vec![("report".into(), Value::from("r"))]), notes: vec!["n".into()], ..Frame::default() };
        let doc: Value = serde_json::from_str(&text(Format::Json, &frame)).unwrap();
        assert_eq!(doc["report"], "r");
        assert_eq!(doc["rows"][0]["cost"], "1.50");
        assert_eq!(doc["notes"][0], "n");
        let raw = text(Format::Json, &frame);
        assert!(raw.find("\"namespace\"").unwrap() < raw.find("\"pods\"").unwrap() && raw.find("\"pods\"").unwrap() < raw.find("\"cost\"").unwrap(), "{raw}");
    }

    #[test]
    fn table_and_markdown_align_numbers_right() {
        let frame = Frame { title: Some("T".into()), notes: vec!["note".into()], ..Frame::default() };
        let md = text(Format::Md, &frame);
        assert_eq!(md, "# T\n\n| namespace | pods | cost |\n|---|---:|---:|\n| a,b | 3 | 1.50 |\n|  |  | -0.05 |\n\nnote\n\n");
        let table = text(Format::Table, &frame);
        assert!(table.starts_with("T\n\n") && table.ends_with("\nnote\n"), "{table}");
        assert!(table.contains(" 1.50 ") && table.contains("-0.05"), "{table}");
    }

    #[test]
    fn parquet_round_trips_with_metadata() {
        let frame = Frame { parquet_metadata: vec![("gpuledger.k".into(), "v".into())], ..Frame::default() };
        let b = batch();
        let bytes = render(Format::Parquet, b.schema(), std::slice::from_ref(&b), &frame).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes)).unwrap();
        let kv = reader.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
        assert!(kv.iter().any(|e| e.key == "gpuledger.k" && e.value.as_deref() == Some("v")));
        let back: Vec<RecordBatch> = reader.build().unwrap().collect::<std::result::Result<_, _>>().unwrap();
        assert_eq!(back, [b]);
    }
}
