//! A column's values as text (tables, Markdown, CSV) and as JSON, formatted once here for every
//! report and ad hoc result.
//!
//! Text is arrow's display: decimals exact at their scale (`754.59`, `-0.0005`), timestamps in
//! RFC 3339 (`2026-10-01T00:00:00Z`), NULL empty. JSON keeps integers, floats and booleans as
//! JSON numbers and booleans, and writes decimals as strings: a JSON reader turns numbers into
//! binary floats, and money must come out as it went in.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int64Type, UInt64Type};
use arrow::error::ArrowError;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use serde_json::Value;

/// Whether a column holds numbers (right-aligned in tables and Markdown).
pub fn is_numeric(t: &DataType) -> bool {
    t.is_numeric()
}

/// Every value of `column` as text; NULL as the empty string.
pub fn texts(column: &dyn Array) -> Result<Vec<String>, ArrowError> {
    let options = FormatOptions::new();
    let f = ArrayFormatter::try_new(column, &options)?;
    (0..column.len()).map(|i| f.value(i).try_to_string()).collect()
}

/// The rows of `batch` as text, row by row.
pub fn text_rows(batch: &RecordBatch) -> Result<Vec<Vec<String>>, ArrowError> {
    let columns: Vec<Vec<String>> = batch.columns().iter().map(|c| texts(c.as_ref())).collect::<Result<_, _>>()?;
    Ok((0..batch.num_rows()).map(|r| columns.iter().map(|c| c[r].clone()).collect()).collect())
}

/// Every value of `column` as JSON.
pub fn json_values(column: &ArrayRef) -> Result<Vec<Value>, ArrowError> {
    let t = column.data_type();
    let nulls = |mut values: Vec<Value>| {
        for (i, v) in values.iter_mut().enumerate() {
            if column.is_null(i) {
                *v = Value::Null;
            }
        }
        values
    };
    Ok(match t {
        DataType::Null => vec![Value::Null; column.len()],
        DataType::Boolean => {
            let a = column.as_boolean();
            nulls((0..a.len()).map(|i| Value::Bool(a.value(i))).collect())
        }
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            let c = arrow::compute::cast(column, &DataType::Int64)?;
            let a = c.as_primitive::<Int64Type>();
            nulls(a.values().iter().map(|v| Value::from(*v)).collect())
        }
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            let c = arrow::compute::cast(column, &DataType::UInt64)?;
            let a = c.as_primitive::<UInt64Type>();
            nulls(a.values().iter().map(|v| Value::from(*v)).collect())
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let c = arrow::compute::cast(column, &DataType::Float64)?;
            let a = c.as_primitive::<Float64Type>();
            // NaN and infinities have no JSON number: null, as arrow's JSON writer does.
            nulls(a.values().iter().map(|v| serde_json::Number::from_f64(*v).map_or(Value::Null, Value::Number)).collect())
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::ListView(_) | DataType::LargeListView(_) | DataType::FixedSizeList(..) | DataType::Struct(_) | DataType::Map(..) => nested(column)?,
        // Decimals, text, dates, times, durations, binary: their text, as a JSON string.
        _ => {
            let text = texts(column.as_ref())?;
            nulls(text.into_iter().map(Value::String).collect())
        }
    })
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
    let mut columns: Vec<std::vec::IntoIter<Value>> = batch.columns().iter().map(|c| json_values(c).map(Vec::into_iter)).collect::<Result<_, _>>()?;
    Ok((0..batch.num_rows()).map(|_| columns.iter_mut().map(|c| c.next().unwrap_or(Value::Null)).collect()).collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Decimal128Array, Float64Array, Int64Array, StringArray, TimestampMillisecondArray};

    use super::*;

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
        let s: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None]));
        assert_eq!(json_values(&s).unwrap(), [Value::from("a"), Value::Null]);
    }

    #[test]
    fn lists_stay_json_arrays() {
        let l: ArrayRef = Arc::new(arrow::array::ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1), Some(2)]), None]));
        assert_eq!(json_values(&l).unwrap(), [serde_json::json!([1, 2]), Value::Null]);
    }
}
