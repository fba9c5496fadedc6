//! The chargeback's detail: GPU-hours and cloud cost per namespace and GPU model (and MIG
//! profile), rounded with the largest-remainder method so the rows add up to the total row.

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::columns::{decimals, ints, strs, window_params};
use super::money::apportion;
use super::render::{Cell, Report};
use super::Result;
use crate::config::Config;
use crate::engine::run_query;
use crate::queries::Queries;
use crate::timewin::Window;

const R: &str = "chargeback_models";

pub async fn build(ctx: &SessionContext, queries: &Queries, config: &Config, window: &Window) -> Result<Report> {
    let mut keys = Vec::new();
    let mut gpu_us = Vec::new();
    let mut cost = Vec::new();
    for b in &run_query(ctx, R, &queries.get(R)?, window_params(window)).await? {
        let (ns, model, profile, us, c) = (strs(R, b, "namespace")?, strs(R, b, "gpu_model")?, strs(R, b, "mig_profile")?, ints(R, b, "gpu_us")?, decimals(R, b, "cloud_cost_us")?);
        for i in 0..b.num_rows() {
            keys.push((ns[i].clone().unwrap_or_default(), model[i].clone().unwrap_or_default(), profile[i].clone().unwrap_or_default()));
            gpu_us.push(us[i].unwrap_or(0) as i128);
            cost.push(c[i]);
        }
    }
    let scale = cost.iter().map(|c| c.1).max().unwrap_or(0);
    let cost: Vec<i128> = cost.iter().map(|(u, s)| u * 10i128.pow(scale - s)).collect();
    let (hours, hours_total) = apportion(&gpu_us, 3_600_000_000, 4);
    let (money, money_total) = apportion(&cost, 3_600_000_000 * 10i128.pow(scale), 2);
    let rows = keys
        .into_iter()
        .enumerate()
        .map(|(i, (ns, model, profile))| {
            let team = config.team_of(&ns).map_or(Cell::Null, |t| Cell::Str(t.to_string()));
            vec![Cell::Str(ns), team, Cell::Str(model), if profile.is_empty() { Cell::Null } else { Cell::Str(profile) }, Cell::Dec { units: hours[i], decimals: 4 }, Cell::Dec { units: money[i], decimals: 2 }]
        })
        .collect();
    Ok(Report {
        name: R.into(),
        title: format!("GPU chargeback by GPU model {}", window.label()),
        columns: ["namespace", "team", "gpu_model", "mig_profile", "gpu_hours", "cloud_cost"].map(String::from).to_vec(),
        rows,
        total: Some(vec![Cell::Str("total".into()), Cell::Null, Cell::Null, Cell::Null, Cell::Dec { units: hours_total, decimals: 4 }, Cell::Dec { units: money_total, decimals: 2 }]),
        notes: vec![format!("MIG slices at their share of the GPU; cloud cost at the model's price on each date, in {}", config.pricing.currency)],
        meta: Map::new(),
    })
}
