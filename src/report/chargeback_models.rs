//! The chargeback's detail: GPU-hours and cloud cost per namespace and GPU model (and MIG
//! profile), rounded with the largest-remainder method so the rows add up to the total row.

use std::collections::BTreeMap;

use serde_json::Map;

use super::chargeback::{Chargeback, Quantities, RAW_PER_UNIT, US_PER_HOUR};
use super::render::{Cell, Report};
use crate::config::Config;
use crate::domain::money::apportion;
use crate::domain::window::Window;

const R: &str = "chargeback_models";

pub fn build(cb: &Chargeback, config: &Config, window: &Window) -> Report {
    // GPU rows only (CPU and memory rows have no model).
    let mut groups: BTreeMap<(String, String, String), Quantities> = BTreeMap::new();
    for r in cb.detail.iter().filter(|r| r.gpu_model.is_some()) {
        let key = (r.namespace.clone(), r.gpu_model.clone().unwrap_or_default(), r.mig_profile.clone().unwrap_or_default());
        groups.entry(key).or_default().add(&r.q);
    }
    let gpu_us: Vec<i128> = groups.values().map(|q| q.gpu_us as i128).collect();
    let cost: Vec<i128> = groups.values().map(|q| q.gpu_cost).collect();
    let (hours, hours_total) = apportion(&gpu_us, US_PER_HOUR, 4);
    let (money, money_total) = apportion(&cost, RAW_PER_UNIT, 2);
    let rows = groups
        .into_keys()
        .enumerate()
        .map(|(i, (ns, model, profile))| {
            let team = cb.owner(config, &ns).team.map_or(Cell::Null, Cell::Str);
            vec![
                Cell::Str(ns),
                team,
                Cell::Str(model),
                if profile.is_empty() { Cell::Null } else { Cell::Str(profile) },
                Cell::Dec { units: hours[i], decimals: 4 },
                Cell::Dec { units: money[i], decimals: 2 },
            ]
        })
        .collect();
    Report {
        name: R.into(),
        title: format!("GPU chargeback by GPU model {}", window.label()),
        columns: ["namespace", "team", "gpu_model", "mig_profile", "gpu_hours", "gpu_cost"].map(String::from).to_vec(),
        rows,
        total: Some(vec![Cell::Str("total".into()), Cell::Null, Cell::Null, Cell::Null, Cell::Dec { units: hours_total, decimals: 4 }, Cell::Dec { units: money_total, decimals: 2 }]),
        notes: vec![format!(
            "MIG slices at their share of the GPU price, or their profile's own price per instance-hour where configured; GPU cost at the price on each date, in {}",
            config.pricing.currency
        )],
        meta: Map::new(),
    }
}
