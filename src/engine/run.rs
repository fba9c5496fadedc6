//! The one way our queries run: planned read-only with their parameters bound, explained when
//! asked (`GPULEDGER_EXPLAIN`), collected or streamed under the session's time limit, with
//! errors that name the query and, where one is to blame, the lake file.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::prelude::{SQLOptions, SessionContext};

use super::error::{EngineError, Result};
use super::session::{session_lake, QueryLimit};
use crate::distributed::Engine;

/// Runs `sql` with positional parameters (`$1`, `$2`, ...) bound, never formatted in.
pub async fn run_query(ctx: &SessionContext, name: &str, sql: &str, params: Vec<ScalarValue>) -> Result<Vec<RecordBatch>> {
    run_query_with(ctx, name, sql, ParamValues::from(params)).await
}

/// Runs read-only `sql` with positional or named (`$month`) parameters bound.
pub async fn run_query_with(ctx: &SessionContext, name: &str, sql: &str, params: ParamValues) -> Result<Vec<RecordBatch>> {
    let df = prepared_frame(ctx, name, sql, params).await?;
    tracing::debug!("query {name}: running");
    collect_within_limit(ctx, name, df).await
}

/// The read-only plan of `sql` with its parameters bound (and explained when asked): the one
/// way every query of ours is planned.
async fn prepared_frame(ctx: &SessionContext, name: &str, sql: &str, params: ParamValues) -> Result<datafusion::dataframe::DataFrame> {
    let q_err = |source| EngineError::Query { query: name.into(), source };
    let options = SQLOptions::new().with_allow_ddl(false).with_allow_dml(false).with_allow_statements(false);
    let df = ctx.sql_with_options(sql, options).await.map_err(q_err)?;
    let empty = match &params {
        ParamValues::List(l) => l.is_empty(),
        ParamValues::Map(m) => m.is_empty(),
    };
    let df = if empty { df } else { df.with_param_values(params).map_err(q_err)? };
    explain_if_asked(name, &df).await.map_err(q_err)?;
    Ok(df)
}

/// The query's batches as they are computed (nothing collected), and the time by which the
/// session's query time limit ends it.
pub async fn stream_query(
    ctx: &SessionContext,
    name: &str,
    sql: &str,
    params: ParamValues,
) -> Result<(datafusion::physical_plan::SendableRecordBatchStream, Option<tokio::time::Instant>)> {
    let df = prepared_frame(ctx, name, sql, params).await?;
    let deadline = ctx.state().config().get_extension::<QueryLimit>().map(|l| tokio::time::Instant::now() + l.timeout);
    let stream = df.execute_stream().await.map_err(|e| query_error(ctx, name, e))?;
    Ok((stream, deadline))
}

/// A query's error, naming the lake file behind a Parquet error (DataFusion's message does not).
pub fn query_error(ctx: &SessionContext, name: &str, source: DataFusionError) -> EngineError {
    let text = source.to_string();
    if text.contains("spilling process has exceeded the allowable limit") {
        let limit = ctx.runtime_env().disk_manager.max_temp_directory_size();
        return EngineError::SpillLimit { query: name.into(), limit: format!("{} MiB", limit >> 20) };
    }
    // An execution error may come from a damaged or foreign lake file: name it if one is.
    if text.contains("Parquet error") || text.contains("Arrow error") || text.contains("Schema error") {
        if let Some(file) = session_lake(ctx).and_then(|lake| lake.unreadable_file()) {
            return EngineError::LakeFile { query: name.into(), file, source };
        }
    }
    EngineError::Query { query: name.into(), source }
}

/// The error for a query past the session's time limit.
pub fn timeout_error(ctx: &SessionContext, name: &str) -> EngineError {
    let limit = ctx.state().config().get_extension::<QueryLimit>();
    EngineError::Timeout {
        query: name.into(),
        secs: limit.as_ref().map_or(0, |l| l.timeout.as_secs()),
        engine: match limit.as_ref().map(|l| &l.engine) {
            Some(Engine::Remote(addr)) => format!("the Ballista scheduler at {addr}"),
            Some(Engine::Standalone) => "the in-process Ballista cluster".into(),
            _ => "the local engine".into(),
        },
        hint: if matches!(limit.as_ref().map(|l| &l.engine), Some(Engine::Remote(_))) {
            "; is an executor registered with the scheduler? (a job with none waits for one)"
        } else {
            ""
        },
    }
}

/// `df.collect()` (planned, then run), failing with `EngineError::Timeout` past the session's
/// query time limit. The planning time is logged: on small inputs it can be most of a query's.
async fn collect_within_limit(ctx: &SessionContext, name: &str, df: datafusion::dataframe::DataFrame) -> Result<Vec<RecordBatch>> {
    let q_err = |source: DataFusionError| query_error(ctx, name, source);
    let run = async {
        let started = std::time::Instant::now();
        let (state, logical) = df.into_parts();
        let plan = state.create_physical_plan(&logical).await?;
        tracing::debug!("query {name}: planned in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
        datafusion::physical_plan::collect(plan, Arc::new(datafusion::execution::TaskContext::from(&state))).await
    };
    let Some(limit) = ctx.state().config().get_extension::<QueryLimit>() else {
        return run.await.map_err(q_err);
    };
    match tokio::time::timeout(limit.timeout, run).await {
        Ok(result) => result.map_err(q_err),
        Err(_) => Err(timeout_error(ctx, name)),
    }
}

/// As `run_query`, also returning the result's schema (known even when no row comes back).
pub async fn run_query_schema(ctx: &SessionContext, name: &str, sql: &str, params: Vec<ScalarValue>) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let df = prepared_frame(ctx, name, sql, ParamValues::from(params)).await?;
    let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
    tracing::debug!("query {name}: running");
    let batches = collect_within_limit(ctx, name, df).await?;
    Ok((schema, batches))
}

/// With `GPULEDGER_EXPLAIN=<query name>`, prints that query's plan with its run-time metrics
/// (`EXPLAIN ANALYZE`, which runs it once more) to stderr: for finding where a report's time goes.
async fn explain_if_asked(name: &str, df: &datafusion::dataframe::DataFrame) -> std::result::Result<(), DataFusionError> {
    if std::env::var("GPULEDGER_EXPLAIN").is_ok_and(|v| v == name) {
        let plan = df.clone().explain(false, true)?.collect().await?;
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{}", arrow::util::pretty::pretty_format_batches(&plan)?);
    }
    Ok(())
}

/// A timestamp parameter (milliseconds, UTC) for the report window.
pub fn ts_param(ms: i64) -> ScalarValue {
    ScalarValue::TimestampMillisecond(Some(ms), Some("UTC".into()))
}

pub fn str_param(s: impl Into<String>) -> ScalarValue {
    ScalarValue::Utf8(Some(s.into()))
}

/// A task cancelled when its handle is dropped before it is joined (its caller failed first).
pub struct Spawned<T>(tokio::task::JoinHandle<T>);

impl<T: Send + 'static> Spawned<T> {
    /// Starts `work` on the runtime now.
    pub fn new(work: impl std::future::Future<Output = T> + Send + 'static) -> Self {
        Spawned(tokio::spawn(work))
    }

    /// Its result, once it has finished.
    pub async fn join(mut self) -> std::result::Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for Spawned<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A query on a task of its own, over a clone of the session (which shares its tables), for
/// queries that do not wait on each other: on two cores one is planned while another runs.
pub struct QueryTask {
    name: String,
    task: Spawned<Result<(SchemaRef, Vec<RecordBatch>)>>,
}

impl QueryTask {
    /// Starts `run_query_schema(ctx, name, sql, params)` now.
    pub fn spawn(ctx: &SessionContext, name: &str, sql: String, params: Vec<ScalarValue>) -> Self {
        let (ctx, query) = (ctx.clone(), name.to_string());
        let task = Spawned::new(async move { run_query_schema(&ctx, &query, &sql, params).await });
        QueryTask { name: name.to_string(), task }
    }

    /// The query's schema and batches, once it has run.
    pub async fn join(self) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let name = self.name;
        self.task.join().await.unwrap_or_else(|source| Err(EngineError::Stopped { query: name, source }))
    }
}
