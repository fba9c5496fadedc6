//! The pool per day (all, allocated and utilised GPU-hours) for the month's page, from the
//! 15-minute sums: the page is handed these, it runs no query itself.

use super::columns::{ints, strs};
use super::Result;

/// One day of the pool, in GPU-hours.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolDay {
    pub date: String,
    pub gpu_hours: f64,
    pub allocated_hours: f64,
    pub util_pct: f64,
}

/// The pool per day of `window` for the page's time series.
pub async fn pool_days(
    ctx: &datafusion::prelude::SessionContext,
    queries: &crate::queries::Queries,
    window: &crate::domain::window::Window,
) -> Result<Vec<PoolDay>> {
    let r = "daily_pool";
    let mut out = Vec::new();
    // From the 15-minute sums (the lake's rollups where current), a week at a time.
    for b in &super::gpu_buckets::query(ctx, queries, r, window).await? {
        let (date, all, alloc, util) = (strs(r, b, "date")?, ints(r, b, "gpu_us")?, ints(r, b, "allocated_gpu_us")?, ints(r, b, "util_gpu_us")?);
        let known = ints(r, b, "util_known_gpu_us")?;
        for i in 0..b.num_rows() {
            let (a, al, u, k) = (all[i].unwrap_or(0), alloc[i].unwrap_or(0), util[i].unwrap_or(0), known[i].unwrap_or(0));
            out.push(PoolDay {
                date: date[i].clone().unwrap_or_default(),
                gpu_hours: a as f64 / 3.6e9,
                allocated_hours: al as f64 / 3.6e9,
                util_pct: if k > 0 { u as f64 / k as f64 } else { 0.0 },
            });
        }
    }
    Ok(out)
}
