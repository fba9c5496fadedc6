//! Events: OOM kills, crashes, preemptions and evictions by namespace and priority class,
//! counted when the pod finished, with the GPU time those pods had run (work lost). By a key of
//! each pod (`--by workload`, `queue`, `label:KEY`, ...), by the pod's value and priority class
//! instead, naming the value's namespaces.

use std::collections::{BTreeMap, BTreeSet};

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::chargeback::{ChargeBy, UNATTRIBUTED};
use super::columns::{ints, strs, window_params};
use super::grouping::Grouping;
use super::render::{Cell, Report};
use super::Result;
use crate::domain::money::round_ratio;
use crate::domain::units::US_PER_HOUR;
use crate::domain::window::Window;
use crate::engine::run_query;
use crate::queries::Queries;

const R: &str = "events";
const COUNTS: [&str; 5] = ["pods_finished", "oom_killed", "crashed", "preempted", "evicted"];

/// A group's counts (`COUNTS`), its lost GPU-microseconds and its namespaces.
#[derive(Default)]
struct Counts {
    counts: [i64; 5],
    lost_us: i64,
    namespaces: BTreeSet<String>,
}

pub async fn build(ctx: &SessionContext, queries: &Queries, window: &Window, by: &ChargeBy) -> Result<Report> {
    let grouping = Grouping::of(ctx, queries, window, by).await?;
    let name = if grouping.per_pod() { "events_pods" } else { R };
    let batches = run_query(ctx, name, &queries.get(name)?, window_params(window)).await?;
    // By (group, priority class); by namespace the query's rows are the groups, in its order.
    let mut groups: BTreeMap<(String, String), Counts> = BTreeMap::new();
    let (mut pods_keyed, mut pods_unkeyed) = (0i64, 0i64);
    for b in &batches {
        let ns = strs(name, b, "namespace")?;
        let pc = strs(name, b, "priority_class")?;
        let counts: Vec<Vec<Option<i64>>> = COUNTS.iter().map(|c| ints(name, b, c)).collect::<Result<_>>()?;
        let lost = ints(name, b, "lost_gpu_us")?;
        let (cluster, pod) = match grouping.per_pod() {
            true => (strs(name, b, "cluster")?, strs(name, b, "pod")?),
            false => (vec![None; b.num_rows()], vec![None; b.num_rows()]),
        };
        for i in 0..b.num_rows() {
            let ns = ns[i].clone().unwrap_or_default();
            let (group, keyed) = grouping.group(cluster[i].as_deref().unwrap_or_default(), &ns, pod[i].as_deref().unwrap_or_default());
            let finished = counts[0][i].unwrap_or(0);
            match keyed {
                true => pods_keyed += finished,
                false => pods_unkeyed += finished,
            }
            let g = groups.entry((group, pc[i].clone().unwrap_or_default())).or_default();
            for (k, c) in counts.iter().enumerate() {
                g.counts[k] += c[i].unwrap_or(0);
            }
            g.lost_us += lost[i].unwrap_or(0);
            g.namespaces.insert(ns);
        }
    }
    let hours = |us: i64| Cell::Dec { units: round_ratio(us as i128, US_PER_HOUR, 4), decimals: 4 };
    let per_pod = grouping.per_pod();
    let mut totals = Counts::default();
    let mut rows = Vec::new();
    for ((group, pc), g) in groups {
        let mut row = vec![Cell::Str(group), Cell::Str(pc)];
        if per_pod {
            row.push(Cell::Str(g.namespaces.iter().cloned().collect::<Vec<_>>().join(", ")));
        }
        row.extend(g.counts.iter().map(|v| Cell::Int(*v)));
        row.push(hours(g.lost_us));
        (0..5).for_each(|k| totals.counts[k] += g.counts[k]);
        totals.lost_us += g.lost_us;
        rows.push(row);
    }
    let mut total = vec![Cell::Str("total".into()), Cell::Null];
    let mut columns: Vec<String> = [grouping.column().as_str(), "priority_class"].map(String::from).to_vec();
    if per_pod {
        total.push(Cell::Null);
        columns.push("namespaces".into());
    }
    total.extend(totals.counts.iter().map(|v| Cell::Int(*v)));
    total.push(hours(totals.lost_us));
    columns.extend(["pods_finished", "oom_killed", "crashed", "preempted", "evicted", "lost_gpu_hours"].map(String::from));
    let mut notes = vec![
        format!(
            "pods that finished in {} to {}; lost_gpu_hours = GPUs x run time of the pods that ended OOMKilled, Error, Preempted or Evicted",
            window.start.to_rfc3339(),
            window.end.to_rfc3339()
        ),
        "a preemption seen through kube-state-metrics is an eviction (kube_pod_status_reason=Evicted)".into(),
    ];
    if let Some(by) = grouping.key() {
        notes.push(format!("by {by}: {pods_keyed} pods finished with a value, {pods_unkeyed} without ({UNATTRIBUTED})"));
    }
    Ok(Report {
        name: R.into(),
        title: format!("Pod events{} {}", grouping.words(), window.label()),
        columns,
        rows,
        total: Some(total),
        notes,
        meta: Map::new(),
    })
}
