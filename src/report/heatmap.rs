//! Heatmap: allocation and utilisation by weekday x hour of day (UTC), where night and
//! weekend capacity sits idle.

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::columns::ints;
use super::render::{Cell, Report};
use super::Result;
use crate::domain::money::round_ratio;
use crate::domain::units::US_PER_HOUR;
use crate::domain::window::Window;
use crate::queries::Queries;

const R: &str = "heatmap";
pub const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// One cell: GPU-microseconds in all, allocated, utilisation-weighted (all, allocated), and the
/// GPU time with a utilisation value (all, allocated): the averages' denominators.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HeatCell {
    pub gpu_us: i64,
    pub allocated_us: i64,
    pub util_us: i64,
    pub util_known_us: i64,
    pub allocated_util_us: i64,
    pub allocated_util_known_us: i64,
}

impl HeatCell {
    fn add(self, c: &HeatCell) -> HeatCell {
        HeatCell {
            gpu_us: self.gpu_us + c.gpu_us,
            allocated_us: self.allocated_us + c.allocated_us,
            util_us: self.util_us + c.util_us,
            util_known_us: self.util_known_us + c.util_known_us,
            allocated_util_us: self.allocated_util_us + c.allocated_util_us,
            allocated_util_known_us: self.allocated_util_known_us + c.allocated_util_known_us,
        }
    }
}

/// `[weekday (Mon = 0)][hour]`.
pub async fn cells(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<[[HeatCell; 24]; 7]> {
    // From the 15-minute sums (the lake's rollups where current), not every sample.
    let batches = super::gpu_buckets::query(ctx, queries, R, window).await?;
    let mut grid = [[HeatCell::default(); 24]; 7];
    for b in &batches {
        let (dow, hour, all, alloc, util) =
            (ints(R, b, "dow")?, ints(R, b, "hour")?, ints(R, b, "gpu_us")?, ints(R, b, "allocated_gpu_us")?, ints(R, b, "util_gpu_us")?);
        let (known, alloc_util, alloc_known) =
            (ints(R, b, "util_known_gpu_us")?, ints(R, b, "allocated_util_gpu_us")?, ints(R, b, "allocated_util_known_gpu_us")?);
        for i in 0..b.num_rows() {
            let (Some(d), Some(h)) = (dow[i], hour[i]) else { continue };
            let day = ((d + 6) % 7) as usize; // SQL: 0 = Sunday
            let c = &mut grid[day][(h as usize).min(23)];
            *c = c.add(&HeatCell {
                gpu_us: all[i].unwrap_or(0),
                allocated_us: alloc[i].unwrap_or(0),
                util_us: util[i].unwrap_or(0),
                util_known_us: known[i].unwrap_or(0),
                allocated_util_us: alloc_util[i].unwrap_or(0),
                allocated_util_known_us: alloc_known[i].unwrap_or(0),
            });
        }
    }
    Ok(grid)
}

pub async fn build(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<Report> {
    let grid = cells(ctx, queries, window).await?;
    let pct = |num: i64, den: i64| if den > 0 { Cell::Dec { units: round_ratio(num as i128 * 100, den as i128, 2), decimals: 2 } } else { Cell::Null };
    // util_us is already utilisation (0-100) x GPU time: a ratio of it is a percentage.
    let util = |num: i64, den: i64| if den > 0 { Cell::Dec { units: round_ratio(num as i128, den as i128, 2), decimals: 2 } } else { Cell::Null };
    let hours = |us: i64| Cell::Dec { units: round_ratio(us as i128, US_PER_HOUR, 4), decimals: 4 };
    let mut rows = Vec::new();
    for (d, day) in grid.iter().enumerate() {
        for (h, c) in day.iter().enumerate() {
            rows.push(vec![
                Cell::Str(WEEKDAYS[d].into()),
                Cell::Int(h as i64),
                pct(c.allocated_us, c.gpu_us),
                util(c.util_us, c.util_known_us),
                util(c.allocated_util_us, c.allocated_util_known_us),
                hours(c.gpu_us),
                hours(c.allocated_us),
            ]);
        }
    }
    let all: HeatCell = grid.iter().flatten().fold(HeatCell::default(), |a, c| a.add(c));
    let total = vec![
        Cell::Str("all".into()),
        Cell::Null,
        pct(all.allocated_us, all.gpu_us),
        util(all.util_us, all.util_known_us),
        util(all.allocated_util_us, all.allocated_util_known_us),
        hours(all.gpu_us),
        hours(all.allocated_us),
    ];
    Ok(Report {
        name: R.into(),
        title: format!("Allocation and utilisation by weekday and hour (UTC) {}", window.label()),
        columns: ["weekday", "hour", "allocation_pct", "util_pct", "util_of_allocated_pct", "gpu_hours", "allocated_gpu_hours"].map(String::from).to_vec(),
        rows,
        total: Some(total),
        notes: vec!["allocation_pct: GPU time held by a pod; util_pct: utilisation over all GPU time; util_of_allocated_pct: over the held GPU time; both over the time with a utilisation value".into()],
        meta: Map::new(),
    })
}
