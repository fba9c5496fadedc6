//! Inventory: the pool itself, per node and GPU model: GPUs, framebuffer, MIG layout, first
//! and last seen in the window (what the quota split is a split of). A board replaced in the
//! window (another UUID at the same node and index, seen only after the first's last sample)
//! is one GPU of the node, and both boards are listed in the notes with their own first and
//! last seen.

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::columns::{ints, millis, rfc3339, strs, window_params};
use super::render::{Cell, Report};
use super::Result;
use crate::domain::boards::{replacements, Board};
use crate::domain::window::Window;
use crate::engine::run_query;
use crate::queries::Queries;

const R: &str = "inventory";

#[derive(Default)]
struct NodeModel {
    gpus: std::collections::BTreeSet<String>,
    mig_gpus: std::collections::BTreeSet<String>,
    profiles: BTreeMap<String, i64>,
    /// Per GPU index, each board's (first, last, uuid).
    boards: BTreeMap<i64, BTreeMap<String, (i64, i64)>>,
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
        let index = ints(R, b, "gpu_index")?;
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
            if let (Some(ix), Some(f), Some(l)) = (index[i], first[i], last[i]) {
                let span = e.boards.entry(ix).or_default().entry(uuid[i].clone().unwrap_or_default()).or_insert((f, l));
                (span.0, span.1) = (span.0.min(f), span.1.max(l));
            }
            e.first = e.first.min(first[i]).or(first[i]);
            e.last = e.last.max(last[i]);
        }
    }
    // Replaced boards: at one index, a UUID first seen after the one before it was last seen.
    let mut replaced_notes = Vec::new();
    let mut replaced: BTreeMap<(String, String), usize> = BTreeMap::new();
    for ((node, model), e) in &pool {
        for (ix, boards) in &e.boards {
            for (old, new) in replacements(boards.iter().map(|(uuid, &(first, last))| Board { first, last, uuid: uuid.as_str() })) {
                *replaced.entry((node.clone(), model.clone())).or_default() += 1;
                replaced_notes.push(format!(
                    "{node} GPU {ix} replaced: {} ({} to {}), then {} ({} to {})",
                    old.uuid,
                    rfc3339(old.first),
                    rfc3339(old.last),
                    new.uuid,
                    rfc3339(new.first),
                    rfc3339(new.last)
                ));
            }
        }
    }
    let mut rows = Vec::new();
    let (mut gpus, mut mig) = (0i64, 0i64);
    // A node's GPUs: its boards, a replaced one and its successor counted once.
    let count = |key: &(String, String), e: &NodeModel| e.gpus.len() as i64 - replaced.get(key).copied().unwrap_or(0) as i64;
    for (key, e) in &pool {
        let (node, model) = key;
        let layout = if e.profiles.is_empty() { String::new() } else { e.profiles.iter().map(|(p, n)| format!("{n} x {p}")).collect::<Vec<_>>().join(" + ") };
        gpus += count(key, e);
        mig += e.mig_gpus.len() as i64;
        rows.push(vec![
            Cell::Str(node.clone()),
            Cell::Str(model.clone()),
            Cell::Int(count(key, e)),
            if e.mem_mib > 0 { Cell::Int(e.mem_mib) } else { Cell::Null },
            Cell::Int(e.mig_gpus.len() as i64),
            Cell::Str(layout),
            e.first.map_or(Cell::Null, |t| Cell::Str(rfc3339(t))),
            e.last.map_or(Cell::Null, |t| Cell::Str(rfc3339(t))),
        ]);
    }
    let mut models: BTreeMap<&str, usize> = BTreeMap::new();
    for (key, e) in &pool {
        *models.entry(key.1.as_str()).or_default() += count(key, e) as usize;
    }
    Ok(Report {
        name: R.into(),
        title: format!("GPU inventory {}", window.label()),
        columns: ["node", "gpu_model", "gpus", "fb_mib_per_gpu", "mig_gpus", "mig_layout", "first_seen", "last_seen"].map(String::from).to_vec(),
        rows,
        total: Some(vec![Cell::Str("total".into()), Cell::Null, Cell::Int(gpus), Cell::Null, Cell::Int(mig), Cell::Null, Cell::Null, Cell::Null]),
        notes: std::iter::once(format!(
            "{} nodes; by model: {}",
            pool.keys().map(|(n, _)| n).collect::<std::collections::BTreeSet<_>>().len(),
            models.iter().map(|(m, n)| format!("{m} {n}")).collect::<Vec<_>>().join(", ")
        ))
        .chain(replaced_notes)
        .collect(),
        meta: Map::new(),
    })
}
