//! Ad hoc SQL for finance and platform leads: one read-only statement, named parameters,
//! results written by the one renderer (`crate::render`) as they stream; an interactive prompt on a terminal; the catalog
//! `gpuledger tables` prints.

pub mod catalog;
pub mod guard;
pub mod repl;

use std::collections::HashMap;

use arrow::array::RecordBatch;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::prelude::SessionContext;

use crate::engine::EngineError;
use crate::render::{Format, Frame, Writer};

pub use guard::{check_read_only, GuardError};

#[derive(Debug, thiserror::Error)]
pub enum AdhocError {
    #[error("query: {0}")]
    TooLarge(String),
    #[error("writing the result")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Guard(#[from] GuardError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("--param {0:?}: expected NAME=VALUE with NAME made of letters, digits and _")]
    BadParam(String),
    #[error("rendering the result as {format}")]
    Render { format: &'static str, source: crate::render::RenderError },
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

/// Checks that `sql` is one read-only statement, runs it with `params` bound and writes the
/// result to `out` in `format` as it streams (the one renderer, `crate::render`: CSV, JSON and
/// Parquet batch by batch; the table and Markdown forms, which size their columns over every
/// row, at the end). The result is metered against the session's caps
/// (`engine.max_result_rows`, `engine.max_result_bytes`). Returns the rows written.
pub async fn run_to(
    session: &SessionContext,
    sql: &str,
    params: &[(String, String)],
    format: Format,
    out: &mut (dyn std::io::Write + Send),
) -> Result<u64, AdhocError> {
    check_read_only(sql)?;
    let render = |source| AdhocError::Render { format: format.name(), source };
    let (mut stream, deadline) = crate::engine::stream_query(session, NAME, sql, param_values(params)).await?;
    let frame = Frame::default();
    let mut w = Writer::new(format, stream.schema(), &frame, out).map_err(render)?;
    let mut rows = 0u64;
    drain(session, &mut stream, deadline, &mut |b| {
        rows += b.num_rows() as u64;
        w.write(&b).map_err(render)
    })
    .await?;
    w.finish().map_err(render)?;
    Ok(rows)
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
