//! A column's values as text (tables, Markdown, CSV) and as JSON, formatted once here for every
//! report and ad hoc result.
//!
//! Text is arrow's display: decimals exact at their scale (`754.59`, `-0.0005`), timestamps in
//! RFC 3339 (`2026-10-01T00:00:00Z`), NULL empty. JSON keeps integers, floats and booleans as
//! JSON numbers and booleans, and writes decimals as strings: a JSON reader turns numbers into
//! binary floats, and money must come out as it went in.

use std::fmt::Write as _;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float32Array, Float64Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Float32Type, Float64Type, Int64Type, UInt64Type};
use arrow::error::ArrowError;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use serde_json::Value;

const OPTIONS: FormatOptions<'static> = FormatOptions::new();

/// A batch's columns as text, cell by cell, without a string per cell.
pub struct TextColumns<'a> {
    formatters: Vec<ArrayFormatter<'a>>,
}

impl<'a> TextColumns<'a> {
    pub fn new(batch: &'a RecordBatch) -> Result<Self, ArrowError> {
        let formatters = batch.columns().iter().map(|c| ArrayFormatter::try_new(c.as_ref(), &OPTIONS)).collect::<Result<_, _>>()?;
        Ok(TextColumns { formatters })
    }

    /// Appends cell (`row`, `column`) to `out`; NULL as nothing.
    pub fn write(&self, row: usize, column: usize, out: &mut String) -> Result<(), ArrowError> {
        self.formatters[column].value(row).write(out)
    }
}

/// The rows of `batch` as text, row by row (the forms that hold every row anyway).
pub fn text_rows(batch: &RecordBatch) -> Result<Vec<Vec<String>>, ArrowError> {
    let columns = TextColumns::new(batch)?;
    (0..batch.num_rows())
        .map(|r| {
            (0..batch.num_columns())
                .map(|c| {
                    let mut s = String::new();
                    columns.write(r, c, &mut s)?;
                    Ok(s)
                })
                .collect()
        })
        .collect()
}

/// One column of a batch as JSON: the one place its type decides its JSON form.
pub enum JsonColumn<'a> {
    Null,
    Bool(&'a BooleanArray),
    Int(Int64Array),
    UInt(UInt64Array),
    /// NaN and infinities have no JSON number: null, as arrow's JSON writer does.
    Float(Float64Array),
    Float32(Float32Array),
    /// Strings (and dictionary-encoded labels) as text.
    Utf8(StringArray),
    /// Decimals, dates, times, durations, binary: their text (as in CSV), as a JSON string.
    Text(ArrayFormatter<'a>, &'a ArrayRef),
    /// Lists, structs and maps as arrow's JSON writer encodes them (arrays and objects).
    Nested(Vec<Value>),
}

impl<'a> JsonColumn<'a> {
    pub fn new(column: &'a ArrayRef) -> Result<Self, ArrowError> {
        Ok(match column.data_type() {
            DataType::Null => JsonColumn::Null,
            DataType::Boolean => JsonColumn::Bool(column.as_boolean()),
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                JsonColumn::Int(arrow::compute::cast(column, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
            }
            DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
                JsonColumn::UInt(arrow::compute::cast(column, &DataType::UInt64)?.as_primitive::<UInt64Type>().clone())
            }
            // A float keeps its own width's shortest text (an f32 643.2 stays 643.2).
            DataType::Float16 | DataType::Float32 => {
                JsonColumn::Float32(arrow::compute::cast(column, &DataType::Float32)?.as_primitive::<Float32Type>().clone())
            }
            DataType::Float64 => JsonColumn::Float(arrow::compute::cast(column, &DataType::Float64)?.as_primitive::<Float64Type>().clone()),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                JsonColumn::Utf8(arrow::compute::cast(column, &DataType::Utf8)?.as_string::<i32>().clone())
            }
            DataType::Dictionary(_, v) if matches!(v.as_ref(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
                JsonColumn::Utf8(arrow::compute::cast(column, &DataType::Utf8)?.as_string::<i32>().clone())
            }
            DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
            | DataType::FixedSizeList(..)
            | DataType::Struct(_)
            | DataType::Map(..) => JsonColumn::Nested(nested(column)?),
            _ => JsonColumn::Text(ArrayFormatter::try_new(column.as_ref(), &OPTIONS)?, column),
        })
    }

    fn is_null(&self, row: usize) -> bool {
        match self {
            JsonColumn::Null => true,
            JsonColumn::Bool(a) => a.is_null(row),
            JsonColumn::Int(a) => a.is_null(row),
            JsonColumn::UInt(a) => a.is_null(row),
            JsonColumn::Float(a) => a.is_null(row) || !a.value(row).is_finite(),
            JsonColumn::Float32(a) => a.is_null(row) || !a.value(row).is_finite(),
            JsonColumn::Utf8(a) => a.is_null(row),
            JsonColumn::Text(_, a) => a.is_null(row),
            JsonColumn::Nested(v) => v[row].is_null(),
        }
    }

    /// Appends the value of `row` to `out` as JSON text; `scratch` is reused for text.
    pub fn write(&self, row: usize, out: &mut Vec<u8>, scratch: &mut String) -> Result<(), ArrowError> {
        if self.is_null(row) {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        let json = |out: &mut Vec<u8>, v: &dyn erased::Json| v.write_to(out);
        match self {
            JsonColumn::Null => {}
            JsonColumn::Bool(a) => out.extend_from_slice(if a.value(row) { b"true" } else { b"false" }),
            JsonColumn::Int(a) => {
                let _ = write!(Adapter(out), "{}", a.value(row));
            }
            JsonColumn::UInt(a) => {
                let _ = write!(Adapter(out), "{}", a.value(row));
            }
            JsonColumn::Float(a) => json(out, &a.value(row))?,
            JsonColumn::Float32(a) => json(out, &a.value(row))?,
            JsonColumn::Utf8(a) => json(out, &a.value(row))?,
            JsonColumn::Text(f, _) => {
                scratch.clear();
                f.value(row).write(scratch)?;
                json(out, &scratch.as_str())?;
            }
            JsonColumn::Nested(v) => json(out, &v[row])?,
        }
        Ok(())
    }

    /// The value of `row` as a JSON value (for documents held whole).
    pub fn value(&self, row: usize) -> Result<Value, ArrowError> {
        let mut out = Vec::new();
        self.write(row, &mut out, &mut String::new())?;
        serde_json::from_slice(&out).map_err(|e| ArrowError::JsonError(e.to_string()))
    }
}

/// serde_json's writer for the few value types a cell has.
mod erased {
    use arrow::error::ArrowError;

    pub trait Json {
        fn write_to(&self, out: &mut Vec<u8>) -> Result<(), ArrowError>;
    }

    impl<T: serde::Serialize> Json for T {
        fn write_to(&self, out: &mut Vec<u8>) -> Result<(), ArrowError> {
            serde_json::to_writer(out, self).map_err(|e| ArrowError::JsonError(e.to_string()))
        }
    }
}

/// `fmt::Write` into a byte buffer (integers written without a string in between).
struct Adapter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Adapter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Lists, structs and maps as arrow's JSON writer encodes them (arrays and objects).
fn nested(column: &ArrayRef) -> Result<Vec<Value>, ArrowError> {
    let field = arrow::datatypes::Field::new("v", column.data_type().clone(), true);
    let batch = RecordBatch::try_new(std::sync::Arc::new(arrow::datatypes::Schema::new(vec![field])), vec![column.clone()])?;
    let mut buf = Vec::new();
    let mut w = arrow::json::WriterBuilder::new().with_explicit_nulls(true).build::<_, arrow::json::writer::JsonArray>(&mut buf);
    w.write(&batch)?;
    w.finish()?;
    drop(w);
    let rows: Vec<serde_json::Map<String, Value>> = serde_json::from_slice(&buf).map_err(|e| ArrowError::JsonError(e.to_string()))?;
    Ok(rows.into_iter().map(|mut r| r.remove("v").unwrap_or(Value::Null)).collect())
}

/// The rows of `batch` as JSON values, row by row.
pub fn json_rows(batch: &RecordBatch) -> Result<Vec<Vec<Value>>, ArrowError> {
    let columns: Vec<JsonColumn> = batch.columns().iter().map(JsonColumn::new).collect::<Result<_, _>>()?;
    (0..batch.num_rows()).map(|r| columns.iter().map(|c| c.value(r)).collect()).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Decimal128Array, Float64Array, Int64Array, StringArray, TimestampMillisecondArray};

    use super::*;

    fn texts(column: &dyn Array) -> Result<Vec<String>, ArrowError> {
        let f = ArrayFormatter::try_new(column, &OPTIONS)?;
        (0..column.len()).map(|i| f.value(i).try_to_string()).collect()
    }

    fn json_values(column: &ArrayRef) -> Result<Vec<Value>, ArrowError> {
        let c = JsonColumn::new(column)?;
        (0..column.len()).map(|r| c.value(r)).collect()
    }

    #[test]
    fn text_is_exact_and_null_is_empty() {
        let d: ArrayRef = Arc::new(Decimal128Array::from(vec![Some(75459), Some(-5), None]).with_precision_and_scale(38, 2).unwrap());
        assert_eq!(texts(d.as_ref()).unwrap(), ["754.59", "-0.05", ""]);
        let d4: ArrayRef = Arc::new(Decimal128Array::from(vec![Some(-5), Some(0)]).with_precision_and_scale(38, 4).unwrap());
        assert_eq!(texts(d4.as_ref()).unwrap(), ["-0.0005", "0.0000"]);
        let t: ArrayRef = Arc::new(TimestampMillisecondArray::from(vec![1_790_812_800_000, 1_790_812_800_250]).with_timezone("UTC"));
        assert_eq!(texts(t.as_ref()).unwrap(), ["2026-10-01T00:00:00Z", "2026-10-01T00:00:00.250Z"]);
    }

    #[test]
    fn json_keeps_numbers_and_writes_decimals_as_strings() {
        let d: ArrayRef = Arc::new(Decimal128Array::from(vec![Some(1_234_567_890_123_456_789), None]).with_precision_and_scale(38, 2).unwrap());
        assert_eq!(json_values(&d).unwrap(), [Value::String("12345678901234567.89".into()), Value::Null]);
        let i: ArrayRef = Arc::new(Int64Array::from(vec![Some(42), None]));
        assert_eq!(json_values(&i).unwrap(), [Value::from(42), Value::Null]);
        let f: ArrayRef = Arc::new(Float64Array::from(vec![0.5, f64::NAN]));
        assert_eq!(json_values(&f).unwrap(), [Value::from(0.5), Value::Null]);
        let f32s: ArrayRef = Arc::new(arrow::array::Float32Array::from(vec![643.2f32]));
        assert_eq!(json_values(&f32s).unwrap(), [serde_json::json!(643.2)], "an f32 keeps its shortest text");
        let s: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None]));
        assert_eq!(json_values(&s).unwrap(), [Value::from("a"), Value::Null]);
    }

    #[test]
    fn lists_stay_json_arrays() {
        let l: ArrayRef = Arc::new(arrow::array::ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1), Some(2)]), None]));
        assert_eq!(json_values(&l).unwrap(), [serde_json::json!([1, 2]), Value::Null]);
    }
}
