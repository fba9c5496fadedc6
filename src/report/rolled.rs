//! Reports over a rollup kind's sums (`lake::rollup::Kind`) instead of every sample: each day's
//! stored rollup where current, else a pass over the day's samples (`lake::passes::rolled`),
//! handed to the report's SQL as a table named after the kind (`pending_buckets`,
//! `namespace_gpus`). The sums are exact integers per bucket, so a report summed from them
//! equals one summed over the rows; a window cut inside a bucket reads that day's rows.

use arrow::array::RecordBatch;
use datafusion::prelude::SessionContext;

use super::columns::window_params;
use super::{ReportError, Result};
use crate::domain::window::Window;
use crate::lake::day_sums::DaySums;
use crate::lake::passes::rolled::scan;
use crate::lake::rollup::Kind;
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
    let threads = ctx.state().config().target_partitions();
    let w = *window;
    let sums = tokio::task::spawn_blocking(move || scan::<S>(&lake, kind, &w, threads))
        .await
        .map_err(|source| ReportError::PassStopped { report, pass: "the rollup pass", source })??;
    tracing::debug!("{report}: {} {} rows ({} days from rollups, samples read for {:?})", kind.name(), sums.batches.iter().map(|b| b.num_rows()).sum::<usize>(), sums.rollup_days, sums.scanned_days);
    let batches = match crate::engine::session_cluster(ctx) {
        Some(c) => sums.batches.iter().map(|b| super::gpu_buckets::of_cluster(b, &c, report)).collect::<Result<Vec<_>>>()?,
        None => sums.batches,
    };
    crate::engine::register_batches(ctx, kind.name(), kind.schema(), super::gpu_buckets::deal(batches, threads))?;
    Ok(())
}

pub fn deregister(ctx: &SessionContext, kind: Kind) {
    let _ = ctx.deregister_table(kind.name());
}
