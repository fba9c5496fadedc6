//! The chargeback's detail: GPU-hours and cloud cost per namespace (or a key of each pod:
//! workload, queue, label, `--by`) and GPU model (and MIG profile), rounded with the
//! largest-remainder method so the rows add up to the total row.

use std::collections::BTreeMap;

use serde_json::Map;

use super::chargeback::{Attribution, ChargeBy, Chargeback, Quantities, RAW_PER_UNIT, UNALLOCATED, UNMEASURED, US_PER_HOUR};
use super::render::{Cell, Report};
use crate::config::Config;
use crate::domain::money::apportion;
use crate::domain::window::Window;

const R: &str = "chargeback_models";

/// By namespace, its team beside it; by a key of each pod (`attribution`) each namespace's GPU
/// rows split between its pods' keys as the chargeback splits them, with the namespaces where
/// each key's pods ran beside it. Any other `by` is by namespace.
pub fn build(cb: &Chargeback, config: &Config, window: &Window, by: &ChargeBy, attribution: Option<&Attribution>) -> Report {
    // GPU rows only (CPU and memory rows have no model): (key, model, profile) -> quantities
    // and the key's namespaces.
    let mut groups: BTreeMap<(String, String, String), (Quantities, Vec<String>)> = BTreeMap::new();
    let mut add = |key: &str, ns: &str, model: &Option<String>, profile: &Option<String>, q: &Quantities| {
        let g = groups.entry((key.to_string(), model.clone().unwrap_or_default(), profile.clone().unwrap_or_default())).or_default();
        g.0.add(q);
        if !g.1.iter().any(|n| n == ns) {
            g.1.push(ns.to_string());
        }
    };
    let special = |ns: &str| ns == UNALLOCATED || ns == UNMEASURED;
    for r in cb.detail.iter().filter(|r| r.gpu_model.is_some()) {
        if attribution.is_none() || special(&r.namespace) {
            add(&r.namespace, &r.namespace, &r.gpu_model, &r.mig_profile, &r.q);
        }
    }
    if let Some(a) = attribution {
        for ((_, ns, model, profile, _), parts) in a.per_row.iter().filter(|(at, _)| at.2.is_some()) {
            for (k, q) in parts {
                add(k, ns, model, profile, q);
            }
        }
    }
    let gpu_us: Vec<i128> = groups.values().map(|(q, _)| q.gpu_us as i128).collect();
    let cost: Vec<i128> = groups.values().map(|(q, _)| q.gpu_cost).collect();
    let (hours, hours_total) = apportion(&gpu_us, US_PER_HOUR, 4);
    let (money, money_total) = apportion(&cost, RAW_PER_UNIT, 2);
    let rows = groups
        .into_iter()
        .enumerate()
        .map(|(i, ((key, model, profile), (_, mut namespaces)))| {
            // By namespace the namespace's team; by a key of each pod the key's namespaces.
            let beside = match attribution {
                None => cb.owner(config, &key).team.map_or(Cell::Null, Cell::Str),
                Some(_) => {
                    namespaces.sort();
                    Cell::Str(namespaces.join(", "))
                }
            };
            vec![
                Cell::Str(key),
                beside,
                Cell::Str(model),
                if profile.is_empty() { Cell::Null } else { Cell::Str(profile) },
                Cell::Dec { units: hours[i], decimals: 4 },
                Cell::Dec { units: money[i], decimals: 2 },
            ]
        })
        .collect();
    let (key_column, beside_column) = match attribution {
        None => ("namespace".to_string(), "team"),
        Some(_) => (by.column(), "namespaces"),
    };
    Report {
        name: R.into(),
        title: format!("GPU chargeback by GPU model {}", window.label()),
        columns: [key_column, beside_column.into(), "gpu_model".into(), "mig_profile".into(), "gpu_hours".into(), "gpu_cost".into()].to_vec(),
        rows,
        total: Some(vec![Cell::Str("total".into()), Cell::Null, Cell::Null, Cell::Null, Cell::Dec { units: hours_total, decimals: 4 }, Cell::Dec { units: money_total, decimals: 2 }]),
        notes: vec![format!(
            "MIG slices at their share of the GPU price, or their profile's own price per instance-hour where configured; GPU cost at the price on each date, in {}",
            config.pricing.currency
        )],
        meta: Map::new(),
    }
}
