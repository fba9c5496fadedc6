//! Events: OOM kills, crashes, preemptions and evictions by namespace and priority class,
//! counted when the pod finished, with the GPU time those pods had run (work lost).

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::columns::{ints, strs, window_params};
use super::render::{Cell, Report};
use super::Result;
use crate::domain::money::round_ratio;
use crate::domain::units::US_PER_HOUR;
use crate::domain::window::Window;
use crate::engine::run_query;
use crate::queries::Queries;

const R: &str = "events";
const COUNTS: [&str; 5] = ["pods_finished", "oom_killed", "crashed", "preempted", "evicted"];

pub async fn build(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<Report> {
    let batches = run_query(ctx, R, &queries.get(R)?, window_params(window)).await?;
    let mut rows = Vec::new();
    let mut totals = [0i64; 6];
    for b in &batches {
        let ns = strs(R, b, "namespace")?;
        let pc = strs(R, b, "priority_class")?;
        let counts: Vec<Vec<Option<i64>>> = COUNTS.iter().map(|c| ints(R, b, c)).collect::<Result<_>>()?;
        let lost = ints(R, b, "lost_gpu_us")?;
        for i in 0..b.num_rows() {
            let mut row = vec![Cell::Str(ns[i].clone().unwrap_or_default()), Cell::Str(pc[i].clone().unwrap_or_default())];
            for (k, c) in counts.iter().enumerate() {
                let v = c[i].unwrap_or(0);
                totals[k] += v;
                row.push(Cell::Int(v));
            }
            let l = lost[i].unwrap_or(0);
            totals[5] += l;
            row.push(Cell::Dec { units: round_ratio(l as i128, US_PER_HOUR, 4), decimals: 4 });
            rows.push(row);
        }
    }
    let mut total = vec![Cell::Str("total".into()), Cell::Null];
    total.extend(totals[..5].iter().map(|v| Cell::Int(*v)));
    total.push(Cell::Dec { units: round_ratio(totals[5] as i128, US_PER_HOUR, 4), decimals: 4 });
    Ok(Report {
        name: R.into(),
        title: format!("Pod events {}", window.label()),
        columns: ["namespace", "priority_class", "pods_finished", "oom_killed", "crashed", "preempted", "evicted", "lost_gpu_hours"].map(String::from).to_vec(),
        rows,
        total: Some(total),
        notes: vec![
            format!(
                "pods that finished in {} to {}; lost_gpu_hours = GPUs x run time of the pods that ended OOMKilled, Error, Preempted or Evicted",
                window.start.to_rfc3339(),
                window.end.to_rfc3339()
            ),
            "a preemption seen through kube-state-metrics is an eviction (kube_pod_status_reason=Evicted)".into(),
        ],
        meta: Map::new(),
    })
}
