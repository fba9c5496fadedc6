//! Reading query results by column name, and the window parameters every report query takes.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type, TimeUnit, TimestampMillisecondType};
use datafusion::common::ScalarValue;

use super::error::{ReportError, Result};
use crate::domain::window::Window;
use crate::engine::{str_param, ts_param};

/// `$1`, `$2`: the window's start and end; `$3`, `$4`: its first and last `date` partition.
pub fn window_params(window: &Window) -> Vec<ScalarValue> {
    let (first, last) = window.date_bounds();
    vec![
        ts_param(window.start.timestamp_millis()),
        ts_param(window.end.timestamp_millis()),
        str_param(first.format("%Y-%m-%d").to_string()),
        str_param(last.format("%Y-%m-%d").to_string()),
    ]
}

fn column<'a>(report: &'static str, b: &'a RecordBatch, name: &str) -> Result<&'a arrow::array::ArrayRef> {
    b.column_by_name(name).ok_or_else(|| ReportError::Shape { report, detail: format!("no column {name}") })
}

fn cast(report: &'static str, a: &arrow::array::ArrayRef, to: &DataType) -> Result<arrow::array::ArrayRef> {
    arrow::compute::cast(a, to).map_err(|e| ReportError::Shape { report, detail: e.to_string() })
}

/// An integer column (NULL -> None).
pub fn ints(report: &'static str, b: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>> {
    let c = cast(report, column(report, b, name)?, &DataType::Int64)?;
    let a = c.as_primitive::<Int64Type>();
    Ok((0..a.len()).map(|i| (!a.is_null(i)).then(|| a.value(i))).collect())
}

/// A floating-point column (NULL -> None).
pub fn floats(report: &'static str, b: &RecordBatch, name: &str) -> Result<Vec<Option<f64>>> {
    let c = cast(report, column(report, b, name)?, &DataType::Float64)?;
    let a = c.as_primitive::<arrow::datatypes::Float64Type>();
    Ok((0..a.len()).map(|i| (!a.is_null(i)).then(|| a.value(i))).collect())
}

/// A text column (NULL -> None).
pub fn strs(report: &'static str, b: &RecordBatch, name: &str) -> Result<Vec<Option<String>>> {
    let c = cast(report, column(report, b, name)?, &DataType::Utf8)?;
    let a = c.as_string::<i32>();
    Ok((0..a.len()).map(|i| (!a.is_null(i)).then(|| a.value(i).to_string())).collect())
}

/// A text column (plain or dictionary-encoded) as one string array, without a `String` per
/// row: for results of many rows.
pub fn texts(report: &'static str, b: &RecordBatch, name: &str) -> Result<arrow::array::StringArray> {
    let c = cast(report, column(report, b, name)?, &DataType::Utf8)?;
    Ok(c.as_string::<i32>().clone())
}

/// A timestamp column as milliseconds since the epoch (NULL -> None).
pub fn millis(report: &'static str, b: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>> {
    let c = cast(report, column(report, b, name)?, &DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())))?;
    let a = c.as_primitive::<TimestampMillisecondType>();
    Ok((0..a.len()).map(|i| (!a.is_null(i)).then(|| a.value(i))).collect())
}

/// RFC 3339 (UTC, seconds) for a millisecond timestamp.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).unwrap_or_else(|| ms.to_string())
}

/// An exact DECIMAL column as (units, scale); NULL -> 0.
pub fn decimals(report: &'static str, b: &RecordBatch, name: &str) -> Result<Vec<(i128, u32)>> {
    let c = column(report, b, name)?;
    match c.data_type() {
        DataType::Decimal128(_, s) if *s >= 0 => {
            let a = c.as_primitive::<arrow::datatypes::Decimal128Type>();
            Ok((0..a.len()).map(|i| (if a.is_null(i) { 0 } else { a.value(i) }, *s as u32)).collect())
        }
        other => Err(ReportError::Shape { report, detail: format!("{name} is {other}, expected DECIMAL") }),
    }
}

/// `(units, scale)` of GPU-microseconds x price per hour, as money rounded to cents.
pub fn money_from_us(v: (i128, u32)) -> i128 {
    crate::domain::money::round_ratio(v.0, crate::domain::units::US_PER_HOUR * 10i128.pow(v.1), 2)
}
