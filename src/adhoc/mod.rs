//! Ad hoc SQL for finance and platform leads: one read-only statement, named parameters,
//! results rendered with arrow's writers; an interactive prompt on a terminal; the catalog
//! `gpuledger tables` prints.

pub mod catalog;
pub mod guard;
pub mod repl;

use std::collections::HashMap;

use arrow::array::RecordBatch;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::prelude::SessionContext;

use crate::engine::EngineError;
use crate::report::Format;

pub use guard::{check_read_only, GuardError};

#[derive(Debug, thiserror::Error)]
pub enum AdhocError {
    #[error("query: {0}")]
    TooLarge(String),
    #[error("writing the result: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Guard(#[from] GuardError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("--param {0:?}: expected NAME=VALUE with NAME made of letters, digits and _")]
    BadParam(String),
    #[error("rendering the result as {format}: {detail}")]
    Render { format: &'static str, detail: String },
}

impl crate::exit::ExitStatus for AdhocError {
    fn exit_code(&self) -> Option<u8> {
        match self {
            AdhocError::BadParam(_) => Some(crate::exit::USAGE),
            AdhocError::Guard(g) => crate::exit::ExitStatus::exit_code(g),
            _ => None,
        }
    }
}

/// `NAME=VALUE` -> (NAME, VALUE); the SQL refers to it as `$NAME`.
pub fn parse_param(text: &str) -> Result<(String, String), AdhocError> {
    let (name, value) = text.split_once('=').ok_or_else(|| AdhocError::BadParam(text.into()))?;
    let name = name.trim().trim_start_matches('$');
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(AdhocError::BadParam(text.into()));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Named parameters are bound as text; DataFusion coerces them where they meet a typed
/// column (`ts >= $from`), and `CAST($n AS INT)` makes a number of one.
pub fn param_values(params: &[(String, String)]) -> ParamValues {
    let map: HashMap<String, ScalarValue> = params.iter().map(|(k, v)| (k.clone(), ScalarValue::Utf8(Some(v.clone())))).collect();
    ParamValues::from(map)
}

const NAME: &str = "ad hoc query";

/// Checks that `sql` is one read-only statement, then runs it with `params` bound; the result
/// is held only up to the session's caps (`engine.max_result_rows`, `engine.max_result_bytes`).
pub async fn run(session: &SessionContext, sql: &str, params: &[(String, String)]) -> Result<Vec<RecordBatch>, AdhocError> {
    check_read_only(sql)?;
    let mut batches = Vec::new();
    each_batch(session, sql, params, &mut |b| {
        batches.push(b);
        Ok(())
    })
    .await?;
    Ok(batches)
}

/// As `run`, writing the result to `out` in `format` as it streams: CSV, JSON and Parquet
/// batch by batch (memory stays at a batch, whatever the result's size); the table and
/// Markdown forms, which size their columns over every row, from the result held within the
/// caps. Returns the rows written.
pub async fn run_to(session: &SessionContext, sql: &str, params: &[(String, String)], format: Format, out: &mut (dyn std::io::Write + Send)) -> Result<u64, AdhocError> {
    check_read_only(sql)?;
    let err = |detail: String| AdhocError::Render { format: format.name(), detail };
    let mut rows = 0u64;
    match format {
        Format::Table | Format::Md => {
            let batches = run(session, sql, params).await?;
            rows = batches.iter().map(|b| b.num_rows() as u64).sum();
            out.write_all(&render_batches(&batches, format)?)?;
        }
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new().with_header(true).build(&mut *out);
            let schema = each_batch(session, sql, params, &mut |b| {
                rows += b.num_rows() as u64;
                w.write(&b).map_err(|e| err(e.to_string()))
            })
            .await?;
            drop(w);
            if rows == 0 {
                // arrow writes the header with the first batch: an empty result still has one.
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                out.write_all(format!("{}\n", names.join(",")).as_bytes())?;
            }
        }
        Format::Json => {
            let mut w = arrow::json::ArrayWriter::new(&mut *out);
            each_batch(session, sql, params, &mut |b| {
                rows += b.num_rows() as u64;
                w.write(&b).map_err(|e| err(e.to_string()))
            })
            .await?;
            w.finish().map_err(|e| err(e.to_string()))?;
            drop(w);
            out.write_all(b"\n")?;
        }
        Format::Parquet => {
            let (mut stream, deadline) = crate::engine::stream_query(session, NAME, sql, param_values(params)).await?;
            let mut w = parquet::arrow::ArrowWriter::try_new(&mut *out, stream.schema(), None).map_err(|e| err(e.to_string()))?;
            drain(session, &mut stream, deadline, &mut |b| {
                rows += b.num_rows() as u64;
                w.write(&b).map_err(|e| err(e.to_string()))
            })
            .await?;
            w.close().map_err(|e| err(e.to_string()))?;
        }
    }
    out.flush()?;
    Ok(rows)
}

/// Runs the query and hands each batch to `sink`, metered against the session's caps; returns
/// the result's schema.
async fn each_batch(
    session: &SessionContext,
    sql: &str,
    params: &[(String, String)],
    sink: &mut dyn FnMut(RecordBatch) -> Result<(), AdhocError>,
) -> Result<arrow::datatypes::SchemaRef, AdhocError> {
    let (mut stream, deadline) = crate::engine::stream_query(session, NAME, sql, param_values(params)).await?;
    let schema = stream.schema();
    drain(session, &mut stream, deadline, sink).await?;
    Ok(schema)
}

async fn drain(
    session: &SessionContext,
    stream: &mut datafusion::physical_plan::SendableRecordBatchStream,
    deadline: Option<tokio::time::Instant>,
    sink: &mut dyn FnMut(RecordBatch) -> Result<(), AdhocError>,
) -> Result<(), AdhocError> {
    use futures::StreamExt;
    let limits = crate::engine::session_result_limits(session);
    let mut meter = crate::limits::ResultMeter::default();
    loop {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, stream.next()).await {
                Ok(n) => n,
                Err(_) => return Err(crate::engine::timeout_error(session, NAME).into()),
            },
            None => stream.next().await,
        };
        let Some(batch) = next else { return Ok(()) };
        let batch = batch.map_err(|e| crate::engine::query_error(session, NAME, e))?;
        meter.add(&limits, batch.num_rows(), batch.get_array_memory_size()).map_err(AdhocError::TooLarge)?;
        sink(batch)?;
    }
}

/// Renders query results with arrow's own writers.
pub fn render_batches(batches: &[RecordBatch], format: Format) -> Result<Vec<u8>, AdhocError> {
    let err = |detail: String| AdhocError::Render { format: format.name(), detail };
    let mut buf = Vec::new();
    match format {
        Format::Table => {
            let text = arrow::util::pretty::pretty_format_batches(batches).map_err(|e| err(e.to_string()))?;
            buf = format!("{text}\n").into_bytes();
        }
        Format::Md => {
            let text = arrow::util::pretty::pretty_format_batches(batches).map_err(|e| err(e.to_string()))?.to_string();
            let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('+')).collect();
            for (i, l) in lines.iter().enumerate() {
                buf.extend_from_slice(l.as_bytes());
                buf.push(b'\n');
                if i == 0 {
                    let cols = l.matches('|').count().saturating_sub(1);
                    buf.extend_from_slice(format!("|{}\n", "---|".repeat(cols)).as_bytes());
                }
            }
        }
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new().with_header(true).build(&mut buf);
            for b in batches {
                w.write(b).map_err(|e| err(e.to_string()))?;
            }
        }
        Format::Json => {
            let mut w = arrow::json::ArrayWriter::new(&mut buf);
            for b in batches {
                w.write(b).map_err(|e| err(e.to_string()))?;
            }
            w.finish().map_err(|e| err(e.to_string()))?;
            buf.push(b'\n');
        }
        Format::Parquet => {
            let schema = batches.first().map(|b| b.schema()).unwrap_or_else(|| std::sync::Arc::new(arrow::datatypes::Schema::empty()));
            let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None).map_err(|e| err(e.to_string()))?;
            for b in batches {
                w.write(b).map_err(|e| err(e.to_string()))?;
            }
            w.close().map_err(|e| err(e.to_string()))?;
        }
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_parse() {
        assert_eq!(parse_param("month=2026-10").unwrap(), ("month".into(), "2026-10".into()));
        assert_eq!(parse_param("$team=a=b").unwrap(), ("team".into(), "a=b".into()));
        assert!(parse_param("month").is_err());
        assert!(parse_param("1x=2").is_err());
        assert!(parse_param("a b=2").is_err());
    }
}
