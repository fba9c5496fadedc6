//! Queue: who waits for GPUs and for how long. Sections:
//! - `queue`: wait (scheduled - created) count, p50, p95, max by namespace and priority class
//!   for pods created in the window, and pods still waiting;
//! - `queue_longest`: the longest waiters;
//! - `queue_hourly`: average pending pods and pending GPU demand per hour, by namespace and
//!   priority class;
//! - `queue_hour_of_day`: average queue length by hour of day (UTC);
//! - `queue_kueue`: Kueue pending workloads per ClusterQueue, where Kueue runs.
//!
//! By a key of each pod (`--by workload`, `queue`, `label:KEY`, ...), the first four group by the
//! pod's value instead of its namespace (`__unattributed__` for a pod without one; the waits
//! name the namespaces beside each value), the pending demand from the `pending_pod_buckets`
//! rollup.
//!
//! Percentiles are nearest-rank (`round(p x (n - 1))` of the sorted waits), exact.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::Array;
use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::chargeback::{ChargeBy, UNATTRIBUTED};
use super::columns::{ints, millis, rfc3339, strs, texts, window_params};
use super::grouping::Grouping;
use super::render::{Cell, Report};
use super::Result;
use crate::domain::money::round_ratio;
use crate::domain::stats::nearest_rank;
use crate::domain::units::US_PER_HOUR;
use crate::domain::window::Window;
use crate::engine::run_query;
use crate::lake::rollup::PendingSums;
use crate::lake::rollup::{self};
use crate::queries::Queries;

const LONGEST: usize = 20;

fn minutes(ms: i64) -> Cell {
    Cell::Dec { units: round_ratio(ms as i128, 60_000, 2), decimals: 2 }
}

fn avg(us: i64, hours: i64) -> Cell {
    Cell::Dec { units: round_ratio(us as i128, US_PER_HOUR * hours.max(1) as i128, 2), decimals: 2 }
}

struct Pod {
    ns: String,
    pc: String,
    pod: String,
    /// Its group: its namespace, or its value of the key (`UNATTRIBUTED` where it has none).
    group: String,
    keyed: bool,
    gpus: i64,
    created: i64,
    wait_ms: Option<i64>,
}

pub async fn build(ctx: &SessionContext, queries: &Queries, window: &Window, by: &ChargeBy) -> Result<Vec<Report>> {
    let params = window_params(window);
    let label = window.label();
    let grouping = Grouping::of(ctx, queries, window, by).await?;
    let (key, by_words) = (grouping.column(), grouping.words());
    let mut pods = Vec::new();
    for b in &run_query(ctx, "queue_waits", &queries.get("queue_waits")?, params.clone()).await? {
        let r = "queue_waits";
        let (cluster, ns, pc, pod, gpus, created, wait) = (
            strs(r, b, "cluster")?,
            strs(r, b, "namespace")?,
            strs(r, b, "priority_class")?,
            strs(r, b, "pod")?,
            ints(r, b, "gpu_request")?,
            millis(r, b, "created")?,
            ints(r, b, "wait_ms")?,
        );
        for i in 0..b.num_rows() {
            let (ns, pod) = (ns[i].clone().unwrap_or_default(), pod[i].clone().unwrap_or_default());
            let (group, keyed) = grouping.group(cluster[i].as_deref().unwrap_or_default(), &ns, &pod);
            pods.push(Pod {
                ns,
                pc: pc[i].clone().unwrap_or_default(),
                pod,
                group,
                keyed,
                gpus: gpus[i].unwrap_or(0),
                created: created[i].unwrap_or(0),
                wait_ms: wait[i],
            });
        }
    }

    // Wait percentiles by namespace (or the key's value) and priority class.
    let mut groups: BTreeMap<(&str, &str), (Vec<i64>, i64, BTreeSet<&str>)> = BTreeMap::new();
    for p in &pods {
        let g = groups.entry((p.group.as_str(), p.pc.as_str())).or_default();
        match p.wait_ms {
            Some(w) => g.0.push(w),
            None => g.1 += 1,
        }
        g.2.insert(p.ns.as_str());
    }
    let mut all: Vec<i64> = pods.iter().filter_map(|p| p.wait_ms).collect();
    all.sort_unstable();
    let stat = |waits: &[i64], p: f64| nearest_rank(waits, p).map_or(Cell::Null, minutes);
    let per_pod = grouping.per_pod();
    let mut rows = Vec::new();
    for ((group, pc), (mut waits, waiting, namespaces)) in groups {
        waits.sort_unstable();
        let mut row = vec![
            Cell::Str(group.into()),
            Cell::Str(pc.into()),
            Cell::Int(waits.len() as i64),
            Cell::Int(waiting),
            stat(&waits, 0.5),
            stat(&waits, 0.95),
            stat(&waits, 1.0),
        ];
        if per_pod {
            row.insert(1, Cell::Str(namespaces.into_iter().collect::<Vec<_>>().join(", ")));
        }
        rows.push(row);
    }
    let still: i64 = pods.iter().filter(|p| p.wait_ms.is_none()).count() as i64;
    let mut columns: Vec<String> =
        [key.as_str(), "priority_class", "scheduled", "still_pending", "p50_wait_min", "p95_wait_min", "max_wait_min"].map(String::from).to_vec();
    let mut total =
        vec![Cell::Str("all".into()), Cell::Null, Cell::Int(all.len() as i64), Cell::Int(still), stat(&all, 0.5), stat(&all, 0.95), stat(&all, 1.0)];
    let mut notes =
        vec![format!("pods created in {} to {}; percentiles are nearest-rank over the exact waits", window.start.to_rfc3339(), window.end.to_rfc3339())];
    if let Some(by) = grouping.key() {
        columns.insert(1, "namespaces".into());
        total.insert(1, Cell::Null);
        let keyed = pods.iter().filter(|p| p.keyed).count();
        notes.push(format!("by {by}: {keyed} pods created in the window with a value, {} without ({UNATTRIBUTED})", pods.len() - keyed));
    }
    let waits = Report {
        name: "queue".into(),
        title: format!("GPU queue: wait for a node (scheduled - created){by_words} {label}"),
        columns,
        rows,
        total: Some(total),
        notes,
        meta: Map::new(),
    };

    // The longest waiters.
    let mut order: Vec<&Pod> = pods.iter().filter(|p| p.wait_ms.is_some()).collect();
    order.sort_by(|a, b| b.wait_ms.cmp(&a.wait_ms).then(a.ns.cmp(&b.ns)).then(a.pod.cmp(&b.pod)).then(a.created.cmp(&b.created)));
    let mut columns: Vec<String> = ["namespace", "pod", "priority_class", "gpu_request", "created", "wait_min"].map(String::from).to_vec();
    if per_pod {
        columns.insert(2, key.clone());
    }
    let longest = Report {
        name: "queue_longest".into(),
        title: format!("Longest waits for GPUs {label}"),
        columns,
        rows: order
            .iter()
            .take(LONGEST)
            .map(|p| {
                let mut row = vec![
                    Cell::Str(p.ns.clone()),
                    Cell::Str(p.pod.clone()),
                    Cell::Str(p.pc.clone()),
                    Cell::Int(p.gpus),
                    Cell::Str(rfc3339(p.created)),
                    minutes(p.wait_ms.unwrap_or(0)),
                ];
                if per_pod {
                    row.insert(2, Cell::Str(p.group.clone()));
                }
                row
            })
            .collect(),
        total: None,
        notes: vec![format!("the {LONGEST} longest waits of pods created in the window")],
        meta: Map::new(),
    };

    // Pending pods and GPU demand over time.
    let mut hourly = Vec::new();
    let mut by_hour: BTreeMap<(i64, String, String), (i64, i64)> = BTreeMap::new();
    for (h, group, pc, pu, gu) in pending_by_hour(ctx, queries, window, &grouping).await? {
        hourly.push(vec![Cell::Str(rfc3339(h)), Cell::Str(group.clone()), Cell::Str(pc.clone()), avg(pu, 1), avg(gu, 1)]);
        let hod = h.rem_euclid(86_400_000) / 3_600_000;
        let e = by_hour.entry((hod, group, pc)).or_default();
        e.0 += pu;
        e.1 += gu;
    }
    let hourly = Report {
        name: "queue_hourly".into(),
        title: format!("Pending pods and pending GPU demand per hour{by_words} {label}"),
        columns: ["hour", key.as_str(), "priority_class", "avg_pending_pods", "avg_pending_gpus"].map(String::from).to_vec(),
        rows: hourly,
        total: None,
        notes: vec!["hours with nothing pending are left out".into()],
        meta: Map::new(),
    };
    let days = (window.seconds() + 86_399) / 86_400;
    let by_hour = Report {
        name: "queue_hour_of_day".into(),
        title: format!("Average queue length by hour of day (UTC){by_words} {label}"),
        columns: ["hour", key.as_str(), "priority_class", "avg_pending_pods", "avg_pending_gpus"].map(String::from).to_vec(),
        rows: by_hour.into_iter().map(|((h, ns, pc), (pu, gu))| vec![Cell::Int(h), Cell::Str(ns), Cell::Str(pc), avg(pu, days), avg(gu, days)]).collect(),
        total: None,
        notes: vec![format!("averaged over the {days} days of the window")],
        meta: Map::new(),
    };
    let mut out = vec![waits, longest, hourly, by_hour];

    // Kueue, where it runs.
    let mut kueue = Vec::new();
    for b in &run_query(ctx, "kueue", &queries.get("kueue")?, params).await? {
        let r = "kueue";
        let (q, st, avg_c, max) = (strs(r, b, "cluster_queue")?, strs(r, b, "status")?, ints(r, b, "avg_workloads_centi")?, ints(r, b, "max_workloads")?);
        for i in 0..b.num_rows() {
            kueue.push(vec![
                Cell::Str(q[i].clone().unwrap_or_default()),
                Cell::Str(st[i].clone().unwrap_or_default()),
                Cell::Dec { units: avg_c[i].unwrap_or(0) as i128, decimals: 2 },
                Cell::Int(max[i].unwrap_or(0)),
            ]);
        }
    }
    if !kueue.is_empty() {
        out.push(Report {
            name: "queue_kueue".into(),
            title: format!("Kueue pending workloads {label}"),
            columns: ["cluster_queue", "status", "avg_pending_workloads", "max_pending_workloads"].map(String::from).to_vec(),
            rows: kueue,
            total: None,
            notes: vec![],
            meta: Map::new(),
        });
    }
    Ok(out)
}

/// Pending pod- and GPU-microseconds per hour, group (namespace, or the key's value) and
/// priority class, in that order: by namespace from the `pending_buckets` rollup, by a key of
/// each pod from `pending_pod_buckets`, each pod's sums added to its value's.
async fn pending_by_hour(ctx: &SessionContext, queries: &Queries, window: &Window, grouping: &Grouping) -> Result<Vec<(i64, String, String, i64, i64)>> {
    if !grouping.per_pod() {
        let r = "queue_pending";
        let mut rows = Vec::new();
        for b in &super::rolled::query::<PendingSums>(ctx, queries, r, rollup::PENDING_BUCKETS, window).await? {
            let (hour, ns, pc, pod_us, gpu_us) =
                (millis(r, b, "hour")?, strs(r, b, "namespace")?, strs(r, b, "priority_class")?, ints(r, b, "pod_us")?, ints(r, b, "gpu_us")?);
            for i in 0..b.num_rows() {
                rows.push((
                    hour[i].unwrap_or(0),
                    ns[i].clone().unwrap_or_default(),
                    pc[i].clone().unwrap_or_default(),
                    pod_us[i].unwrap_or(0),
                    gpu_us[i].unwrap_or(0),
                ));
            }
        }
        return Ok(rows);
    }
    // Rows come a pod at a time (the query's order), so each pod's value is looked up once.
    let r = "queue_pending_pods";
    let mut summed: BTreeMap<(i64, String, String), (i64, i64)> = BTreeMap::new();
    let mut last: Option<((String, String, String), String)> = None;
    for b in &super::rolled::query::<PendingSums<true>>(ctx, queries, r, rollup::PENDING_POD_BUCKETS, window).await? {
        let (cluster, ns, pod, pc) = (texts(r, b, "cluster")?, texts(r, b, "namespace")?, texts(r, b, "pod")?, texts(r, b, "priority_class")?);
        let (hour, pod_us, gpu_us) = (millis(r, b, "hour")?, ints(r, b, "pod_us")?, ints(r, b, "gpu_us")?);
        for i in 0..b.num_rows() {
            let id = (text(&cluster, i), text(&ns, i), text(&pod, i));
            let group = match &last {
                Some((k, g)) if (k.0.as_str(), k.1.as_str(), k.2.as_str()) == id => g.clone(),
                _ => {
                    let (g, _) = grouping.group(id.0, id.1, id.2);
                    last = Some(((id.0.to_string(), id.1.to_string(), id.2.to_string()), g.clone()));
                    g
                }
            };
            let e = summed.entry((hour[i].unwrap_or(0), group, text(&pc, i).to_string())).or_default();
            e.0 += pod_us[i].unwrap_or(0);
            e.1 += gpu_us[i].unwrap_or(0);
        }
    }
    Ok(summed.into_iter().map(|((h, group, pc), (pu, gu))| (h, group, pc, pu, gu)).collect())
}

/// Row `i` of a text column, "" where null.
fn text(a: &arrow::array::StringArray, i: usize) -> &str {
    if a.is_valid(i) {
        a.value(i)
    } else {
        ""
    }
}
