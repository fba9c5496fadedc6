//! Inventory: the pool itself, per node and GPU model: GPUs, framebuffer, MIG layout, first
//! and last seen in the window (what the quota split is a split of).

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::columns::{ints, millis, rfc3339, strs, window_params};
use super::render::{Cell, Report};
use super::Result;
use crate::engine::run_query;
use crate::queries::Queries;
use crate::domain::window::Window;

const R: &str = "inventory";

#[derive(Default)]
struct NodeModel {
    gpus: std::collections::BTreeSet<String>,
    mig_gpus: std::collections::BTreeSet<String>,
    profiles: BTreeMap<String, i64>,
    mem_mib: i64,
    first: Option<i64>,
    last: Option<i64>,
}

pub async fn build(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<Report> {
    let batches = run_query(ctx, R, &queries.get(R)?, window_params(window)).await?;
    let mut pool: BTreeMap<(String, String), NodeModel> = BTreeMap::new();
    for b in &batches {
        let (node, model, uuid, profile) = (strs(R, b, "node")?, strs(R, b, "gpu_model")?, strs(R, b, "gpu_uuid")?, strs(R, b, "mig_profile")?);
        let (mem, first, last) = (ints(R, b, "mem_total_mib")?, millis(R, b, "first_seen")?, millis(R, b, "last_seen")?);
        for i in 0..b.num_rows() {
            let e = pool.entry((node[i].clone().unwrap_or_default(), model[i].clone().unwrap_or_default())).or_default();
            let u = uuid[i].clone().unwrap_or_default();
            e.gpus.insert(u.clone());
            if let Some(p) = &profile[i] {
                e.mig_gpus.insert(u);
                *e.profiles.entry(p.clone()).or_default() += 1;
            } else {
                e.mem_mib = e.mem_mib.max(mem[i].unwrap_or(0));
            }
            e.first = e.first.min(first[i]).or(first[i]);
            e.last = e.last.max(last[i]);
        }
    }
    let mut rows = Vec::new();
    let (mut gpus, mut mig) = (0i64, 0i64);
    for ((node, model), e) in &pool {
        let layout = if e.profiles.is_empty() {
            String::new()
        } else {
            e.profiles.iter().map(|(p, n)| format!("{n} x {p}")).collect::<Vec<_>>().join(" + ")
        };
        gpus += e.gpus.len() as i64;
        mig += e.mig_gpus.len() as i64;
        rows.push(vec![
            Cell::Str(node.clone()),
            Cell::Str(model.clone()),
            Cell::Int(e.gpus.len() as i64),
            if e.mem_mib > 0 { Cell::Int(e.mem_mib) } else { Cell::Null },
            Cell::Int(e.mig_gpus.len() as i64),
            Cell::Str(layout),
            e.first.map_or(Cell::Null, |t| Cell::Str(rfc3339(t))),
            e.last.map_or(Cell::Null, |t| Cell::Str(rfc3339(t))),
        ]);
    }
    let mut models: BTreeMap<&str, usize> = BTreeMap::new();
    for ((_, m), e) in &pool {
        *models.entry(m.as_str()).or_default() += e.gpus.len();
    }
    Ok(Report {
        name: R.into(),
        title: format!("GPU inventory {}", window.label()),
        columns: ["node", "gpu_model", "gpus", "fb_mib_per_gpu", "mig_gpus", "mig_layout", "first_seen", "last_seen"].map(String::from).to_vec(),
        rows,
        total: Some(vec![Cell::Str("total".into()), Cell::Null, Cell::Int(gpus), Cell::Null, Cell::Int(mig), Cell::Null, Cell::Null, Cell::Null]),
        notes: vec![format!("{} nodes; by model: {}", pool.keys().map(|(n, _)| n).collect::<std::collections::BTreeSet<_>>().len(), models.iter().map(|(m, n)| format!("{m} {n}")).collect::<Vec<_>>().join(", "))],
        meta: Map::new(),
    })
}
