//! Reports over the 15-minute GPU sums instead of every sample: the lake's rollups where they
//! are current, else a pass over the day's samples (`lake::passes::gpu_buckets`), handed to a
//! report's SQL as the table `gpu_buckets` with the view `gpu_bucket_time` over it. The sums keep
//! every per-row rounding (`n` rows of one share and step), so a report summed from them is the
//! same, to the microsecond, as one summed over the rows, and a window cut inside a bucket reads
//! that day's rows. A week of buckets at a time: memory follows a week however long the window.

use arrow::array::RecordBatch;
use datafusion::prelude::SessionContext;

use super::columns::window_params;
use super::{ReportError, Result};
use crate::domain::window::Window;
use crate::lake::passes::gpu_buckets::{scan, schema, TABLE};
use crate::queries::Queries;

/// Days per piece.
const PIECE_DAYS: i64 = 7;

/// Runs query `name` over the 15-minute sums of `window`, one week piece at a time (each piece's
/// window as `$1`..`$4`), and returns every piece's rows in order. Pieces end at UTC midnights,
/// so a row per day never repeats.
pub async fn query(ctx: &SessionContext, queries: &Queries, name: &'static str, window: &Window) -> Result<Vec<RecordBatch>> {
    let shape = |detail: &str| ReportError::Shape { report: name, detail: detail.into() };
    let lake = crate::engine::session_lake(ctx).ok_or_else(|| shape("the session has no lake to scan"))?;
    let threads = ctx.state().config().target_partitions();
    let only_cluster = crate::engine::session_cluster(ctx);
    let sql = queries.get(name)?;
    let mut out = Vec::new();
    for piece in window.pieces(PIECE_DAYS) {
        let (lake, scan_window) = (lake.clone(), piece);
        let buckets = tokio::task::spawn_blocking(move || scan(&lake, &scan_window, threads)).await.map_err(|source| ReportError::PassStopped {
            report: name,
            pass: "the GPU row pass",
            source,
        })??;
        tracing::debug!(
            "{name} {}: {} rows in {} buckets ({} days from rollups)",
            piece.label(),
            buckets.rows,
            buckets.batches.iter().map(|b| b.num_rows()).sum::<usize>(),
            buckets.rollup_days
        );
        let batches = match &only_cluster {
            Some(c) => buckets.batches.iter().map(|b| of_cluster(b, c, name)).collect::<Result<Vec<_>>>()?,
            None => buckets.batches,
        };
        let result = match register(ctx, batches, threads).await {
            Ok(()) => crate::engine::run_query(ctx, name, &sql, window_params(&piece)).await.map_err(ReportError::from),
            Err(e) => Err(e),
        };
        deregister(ctx);
        out.extend(result?);
    }
    Ok(out)
}

/// Registers bucket rows as the table `gpu_buckets` (dealt round-robin over the session's
/// partitions) and the view `gpu_bucket_time` over it; `deregister` takes both away.
pub async fn register(ctx: &SessionContext, batches: Vec<RecordBatch>, threads: usize) -> Result<()> {
    crate::engine::register_batches(ctx, TABLE, schema(), deal(batches, threads))?;
    let (view, select) = crate::queries::BUCKET_VIEW;
    crate::engine::register_view(ctx, view, select).await?;
    Ok(())
}

/// `batches` dealt round-robin into `threads` partitions, so a query over them aggregates on
/// every core.
pub(super) fn deal(batches: Vec<RecordBatch>, threads: usize) -> Vec<Vec<RecordBatch>> {
    let mut partitions: Vec<Vec<RecordBatch>> = vec![Vec::new(); threads.max(1)];
    for (i, b) in batches.into_iter().enumerate() {
        partitions[i % threads.max(1)].push(b);
    }
    partitions
}

pub fn deregister(ctx: &SessionContext) {
    let _ = ctx.deregister_table(crate::queries::BUCKET_VIEW.0);
    let _ = ctx.deregister_table(TABLE);
}

/// The bucket rows of `b` in `cluster` (`--cluster`).
pub fn of_cluster(b: &RecordBatch, cluster: &str, report: &'static str) -> Result<RecordBatch> {
    let shape = |detail: &str| ReportError::Shape { report, detail: detail.into() };
    let names = arrow::compute::cast(b.column_by_name("cluster").ok_or_else(|| shape("gpu_buckets without cluster"))?, &arrow::datatypes::DataType::Utf8)
        .map_err(|source| ReportError::Arrow { report, source })?;
    let keep: arrow::array::BooleanArray =
        names.as_any().downcast_ref::<arrow::array::StringArray>().ok_or_else(|| shape("cluster as text"))?.iter().map(|n| Some(n == Some(cluster))).collect();
    arrow::compute::filter_record_batch(b, &keep).map_err(|source| ReportError::Arrow { report, source })
}
