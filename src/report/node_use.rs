//! Node use: per node and GPU model, its GPU-hours in the window, the share a pod held, the
//! utilisation (of all its GPU time and of the held time) and its GPUs' energy, where the pool is
//! crowded or cold node by node (the heatmap shows it hour by hour, the inventory what each node
//! holds).

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::columns::{ints, strs};
use super::render::{Cell, Report};
use super::Result;
use crate::domain::money::round_ratio;
use crate::domain::units::{MJ_PER_KWH, US_PER_HOUR};
use crate::domain::window::Window;
use crate::queries::Queries;

const R: &str = "node_use";

/// A node's sums: GPU-microseconds in all and held by a pod, utilisation-weighted and with a
/// utilisation value (all, held), and energy in mJ.
#[derive(Default, Clone, Copy)]
struct Sums([i64; 7]);

impl Sums {
    fn add(&mut self, other: &Sums) {
        self.0.iter_mut().zip(other.0).for_each(|(a, b)| *a += b);
    }

    fn cells(&self) -> Vec<Cell> {
        let [gpu, held, util, known, held_util, held_known, energy] = self.0;
        let hours = |us: i64| Cell::Dec { units: round_ratio(us as i128, US_PER_HOUR, 4), decimals: 4 };
        let pct = |num: i64, den: i64| if den > 0 { Cell::Dec { units: round_ratio(num as i128 * 100, den as i128, 2), decimals: 2 } } else { Cell::Null };
        // Utilisation-weighted time is already utilisation (0-100) x GPU time.
        let util_pct = |num: i64, den: i64| if den > 0 { Cell::Dec { units: round_ratio(num as i128, den as i128, 2), decimals: 2 } } else { Cell::Null };
        vec![
            hours(gpu),
            hours(held),
            pct(held, gpu),
            util_pct(util, known),
            util_pct(held_util, held_known),
            Cell::Dec { units: round_ratio(energy as i128, MJ_PER_KWH, 3), decimals: 3 },
        ]
    }
}

pub async fn build(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<Report> {
    // From the 15-minute sums (the lake's rollups where current), a week piece at a time.
    let batches = super::gpu_buckets::query(ctx, queries, R, window).await?;
    let mut nodes: BTreeMap<(String, String), Sums> = BTreeMap::new();
    const SUMS: [&str; 7] =
        ["gpu_us", "allocated_gpu_us", "util_gpu_us", "util_known_gpu_us", "allocated_util_gpu_us", "allocated_util_known_gpu_us", "energy_mj"];
    for b in &batches {
        let (node, model) = (strs(R, b, "node")?, strs(R, b, "gpu_model")?);
        let sums: Vec<Vec<Option<i64>>> = SUMS.iter().map(|c| ints(R, b, c)).collect::<Result<_>>()?;
        for i in 0..b.num_rows() {
            let key = (node[i].clone().unwrap_or_default(), model[i].clone().unwrap_or_default());
            nodes.entry(key).or_default().add(&Sums(std::array::from_fn(|k| sums[k][i].unwrap_or(0))));
        }
    }
    let mut all = Sums::default();
    let mut rows = Vec::new();
    for ((node, model), sums) in &nodes {
        all.add(sums);
        rows.push([vec![Cell::Str(node.clone()), Cell::Str(model.clone())], sums.cells()].concat());
    }
    Ok(Report {
        name: R.into(),
        title: format!("GPU use per node {}", window.label()),
        columns: ["node", "gpu_model", "gpu_hours", "allocated_gpu_hours", "allocation_pct", "util_pct", "util_of_allocated_pct", "energy_kwh"]
            .map(String::from)
            .to_vec(),
        rows,
        total: Some([vec![Cell::Str("total".into()), Cell::Null], all.cells()].concat()),
        notes: vec![
            "gpu_hours: the node's GPU time in the window (a MIG instance its share of its GPU); allocated: held by a pod; \
             util_pct: utilisation over all its GPU time, util_of_allocated_pct over the held time, both over the time with a utilisation value"
                .into(),
            "energy_kwh: its GPUs' measured energy (before PUE)".into(),
        ],
        meta: Map::new(),
    })
}
