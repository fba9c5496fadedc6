//! Reports over a rollup kind's sums (`lake::rollup::Kind`) instead of every sample: each day's
//! stored rollup where current, else a pass over the day's samples (`lake::passes::rolled`),
//! handed to the report's SQL as a table named after the kind (`pending_buckets`,
//! `namespace_gpus`). The sums are exact integers per bucket, so a report summed from them
//! equals one summed over the rows; a window cut inside a bucket reads that day's rows.
//!
//! On the local engine, where every day has a current rollup, the table is a set of streams, a
//! day at a time, read as the query runs: a month of 10,000 GPUs' unit buckets never sits in
//! memory at once. Otherwise (a day read from its samples, or Ballista, whose executors cannot
//! run this process's streams) the sums are gathered once and registered as a table.

use std::marker::PhantomData;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use super::columns::window_params;
use super::{ReportError, Result};
use crate::domain::window::Window;
use crate::lake::passes::rolled::{day_parts, day_sums, scan_parts, DayPart};
use crate::lake::rollup::DaySums;
use crate::lake::rollup::Kind;
use crate::lake::Lake;
use crate::queries::Queries;

/// Runs query `name` (with the window as `$1`..`$4`) over `kind`'s sums of `window`, folded
/// with `S`, registered as the table `kind.name()` for the query and taken away after.
pub async fn query<S: DaySums + 'static>(ctx: &SessionContext, queries: &Queries, name: &'static str, kind: Kind, window: &Window) -> Result<Vec<RecordBatch>> {
    register::<S>(ctx, name, kind, window).await?;
    let result = match queries.get(name) {
        Ok(sql) => crate::engine::run_query(ctx, name, &sql, window_params(window)).await.map_err(ReportError::from),
        Err(e) => Err(e.into()),
    };
    deregister(ctx, kind);
    result
}

/// Registers `kind`'s sums of `window` (folded with `S`, limited to the session's cluster) as
/// the table `kind.name()`, for `report`'s queries; `deregister` takes it away.
pub async fn register<S: DaySums + 'static>(ctx: &SessionContext, report: &'static str, kind: Kind, window: &Window) -> Result<()> {
    let shape = |detail: &str| ReportError::Shape { report, detail: detail.into() };
    let lake = crate::engine::session_lake(ctx).ok_or_else(|| shape("the session has no lake to scan"))?;
    let threads = ctx.state().config().target_partitions().max(1);
    let cluster = crate::engine::session_cluster(ctx);
    let w = *window;
    let listed = lake.clone();
    let parts = tokio::task::spawn_blocking(move || day_parts(&listed, kind, &w)).await.map_err(|source| ReportError::PassStopped {
        report,
        pass: "the rollup pass",
        source,
    })??;
    // Streamed only when every day's rollup answers it (footers only): a day read from its
    // samples would be read again by every query over the table (idle runs two).
    let check = (lake.clone(), parts.clone());
    let all_rolled = tokio::task::spawn_blocking(move || {
        check.1.iter().all(|p| p.on_bucket_edges() && crate::lake::rollup::kinds_current(&check.0, &[kind], p.date, &p.source))
    })
    .await
    .map_err(|source| ReportError::PassStopped { report, pass: "the rollup pass", source })?;
    // Day i goes to stream i mod threads: the streams run side by side, each a day at a time.
    let streams: Vec<Arc<dyn PartitionStream>> = (0..threads)
        .map(|p| {
            Arc::new(DayStream::<S> {
                lake: lake.clone(),
                kind,
                report,
                cluster: cluster.clone(),
                days: parts.iter().skip(p).step_by(threads).cloned().collect(),
                schema: kind.schema(),
                sums: PhantomData,
            }) as Arc<dyn PartitionStream>
        })
        .collect();
    if all_rolled && crate::engine::register_streams(ctx, kind.name(), kind.schema(), streams)? {
        tracing::debug!("{report}: {} streamed from {} days", kind.name(), parts.len());
        return Ok(());
    }
    let sums = tokio::task::spawn_blocking(move || scan_parts::<S>(&lake, kind, &w, parts, threads)).await.map_err(|source| ReportError::PassStopped {
        report,
        pass: "the rollup pass",
        source,
    })??;
    tracing::debug!(
        "{report}: {} {} rows ({} days from rollups, samples read for {:?})",
        kind.name(),
        sums.batches.iter().map(|b| b.num_rows()).sum::<usize>(),
        sums.rollup_days,
        sums.scanned_days
    );
    let batches = match &cluster {
        Some(c) => sums.batches.iter().map(|b| super::gpu_buckets::of_cluster(b, c, report)).collect::<Result<Vec<_>>>()?,
        None => sums.batches,
    };
    crate::engine::register_batches(ctx, kind.name(), kind.schema(), super::gpu_buckets::deal(batches, threads))?;
    Ok(())
}

/// Some days of a window's sums of `kind`, each from its rollup or its samples
/// (`passes::rolled::day_sums`) when the stream reaches it, limited to `cluster`.
struct DayStream<S> {
    lake: Arc<Lake>,
    kind: Kind,
    report: &'static str,
    cluster: Option<String>,
    days: Vec<DayPart>,
    schema: SchemaRef,
    sums: PhantomData<fn() -> S>,
}

impl<S> std::fmt::Debug for DayStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} days", self.kind.name(), self.days.len())
    }
}

impl<S: DaySums + 'static> PartitionStream for DayStream<S> {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let (lake, kind, report, cluster) = (self.lake.clone(), self.kind, self.report, self.cluster.clone());
        let batches = futures::stream::iter(self.days.clone())
            .then(move |part| {
                let (lake, cluster) = (lake.clone(), cluster.clone());
                async move {
                    let date = part.date;
                    let day = tokio::task::spawn_blocking(move || -> Result<Vec<RecordBatch>> {
                        let (batches, from_rollup) = day_sums::<S>(&lake, kind, &part)?;
                        tracing::trace!("{report}: {} of {} from its {}", kind.name(), part.date, if from_rollup { "rollup" } else { "samples" });
                        match &cluster {
                            Some(c) => batches.iter().map(|b| super::gpu_buckets::of_cluster(b, c, report)).collect(),
                            None => Ok(batches),
                        }
                    })
                    .await
                    .map_err(|e| DataFusionError::External(Box::new(e)))
                    .and_then(|day| day.map_err(|e| DataFusionError::External(format!("{} of {date}: {e}", kind.name()).into())));
                    futures::stream::iter(match day {
                        Ok(batches) => batches.into_iter().map(Ok).collect::<Vec<_>>(),
                        Err(e) => vec![Err(e)],
                    })
                }
            })
            .flatten();
        Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&self.schema), batches))
    }
}

pub fn deregister(ctx: &SessionContext, kind: Kind) {
    let _ = ctx.deregister_table(kind.name());
}
