//! Queue: who waits for GPUs and for how long. Sections:
//! - `queue`: wait (scheduled - created) count, p50, p95, max by namespace and priority class
//!   for pods created in the window, and pods still waiting;
//! - `queue_longest`: the longest waiters;
//! - `queue_hourly`: average pending pods and pending GPU demand per hour, by namespace and
//!   priority class;
//! - `queue_hour_of_day`: average queue length by hour of day (UTC);
//! - `queue_kueue`: Kueue pending workloads per ClusterQueue, where Kueue runs.
//!
//! Percentiles are nearest-rank (`round(p x (n - 1))` of the sorted waits), exact.

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::columns::{ints, millis, rfc3339, strs, window_params};
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
    gpus: i64,
    created: i64,
    wait_ms: Option<i64>,
}

pub async fn build(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<Vec<Report>> {
    let params = window_params(window);
    let label = window.label();
    let mut pods = Vec::new();
    for b in &run_query(ctx, "queue_waits", &queries.get("queue_waits")?, params.clone()).await? {
        let r = "queue_waits";
        let (ns, pc, pod, gpus, created, wait) = (
            strs(r, b, "namespace")?,
            strs(r, b, "priority_class")?,
            strs(r, b, "pod")?,
            ints(r, b, "gpu_request")?,
            millis(r, b, "created")?,
            ints(r, b, "wait_ms")?,
        );
        for i in 0..b.num_rows() {
            pods.push(Pod {
                ns: ns[i].clone().unwrap_or_default(),
                pc: pc[i].clone().unwrap_or_default(),
                pod: pod[i].clone().unwrap_or_default(),
                gpus: gpus[i].unwrap_or(0),
                created: created[i].unwrap_or(0),
                wait_ms: wait[i],
            });
        }
    }

    // Wait percentiles by namespace and priority class.
    let mut groups: BTreeMap<(&str, &str), (Vec<i64>, i64)> = BTreeMap::new();
    for p in &pods {
        let g = groups.entry((p.ns.as_str(), p.pc.as_str())).or_default();
        match p.wait_ms {
            Some(w) => g.0.push(w),
            None => g.1 += 1,
        }
    }
    let mut all: Vec<i64> = pods.iter().filter_map(|p| p.wait_ms).collect();
    all.sort_unstable();
    let stat = |waits: &[i64], p: f64| nearest_rank(waits, p).map_or(Cell::Null, minutes);
    let mut rows = Vec::new();
    for ((ns, pc), (mut waits, waiting)) in groups {
        waits.sort_unstable();
        rows.push(vec![
            Cell::Str(ns.into()),
            Cell::Str(pc.into()),
            Cell::Int(waits.len() as i64),
            Cell::Int(waiting),
            stat(&waits, 0.5),
            stat(&waits, 0.95),
            stat(&waits, 1.0),
        ]);
    }
    let still: i64 = pods.iter().filter(|p| p.wait_ms.is_none()).count() as i64;
    let waits = Report {
        name: "queue".into(),
        title: format!("GPU queue: wait for a node (scheduled - created) {label}"),
        columns: ["namespace", "priority_class", "scheduled", "still_pending", "p50_wait_min", "p95_wait_min", "max_wait_min"].map(String::from).to_vec(),
        rows,
        total: Some(vec![
            Cell::Str("all".into()),
            Cell::Null,
            Cell::Int(all.len() as i64),
            Cell::Int(still),
            stat(&all, 0.5),
            stat(&all, 0.95),
            stat(&all, 1.0),
        ]),
        notes: vec![format!("pods created in {} to {}; percentiles are nearest-rank over the exact waits", window.start.to_rfc3339(), window.end.to_rfc3339())],
        meta: Map::new(),
    };

    // The longest waiters.
    let mut order: Vec<&Pod> = pods.iter().filter(|p| p.wait_ms.is_some()).collect();
    order.sort_by(|a, b| b.wait_ms.cmp(&a.wait_ms).then(a.ns.cmp(&b.ns)).then(a.pod.cmp(&b.pod)).then(a.created.cmp(&b.created)));
    let longest = Report {
        name: "queue_longest".into(),
        title: format!("Longest waits for GPUs {label}"),
        columns: ["namespace", "pod", "priority_class", "gpu_request", "created", "wait_min"].map(String::from).to_vec(),
        rows: order
            .iter()
            .take(LONGEST)
            .map(|p| {
                vec![
                    Cell::Str(p.ns.clone()),
                    Cell::Str(p.pod.clone()),
                    Cell::Str(p.pc.clone()),
                    Cell::Int(p.gpus),
                    Cell::Str(rfc3339(p.created)),
                    minutes(p.wait_ms.unwrap_or(0)),
                ]
            })
            .collect(),
        total: None,
        notes: vec![format!("the {LONGEST} longest waits of pods created in the window")],
        meta: Map::new(),
    };

    // Pending pods and GPU demand over time.
    let mut hourly = Vec::new();
    let mut by_hour: BTreeMap<(i64, String, String), (i64, i64)> = BTreeMap::new();
    let pending = super::rolled::query::<PendingSums>(ctx, queries, "queue_pending", rollup::PENDING_BUCKETS, window).await?;
    for b in &pending {
        let r = "queue_pending";
        let (hour, ns, pc, pod_us, gpu_us) =
            (millis(r, b, "hour")?, strs(r, b, "namespace")?, strs(r, b, "priority_class")?, ints(r, b, "pod_us")?, ints(r, b, "gpu_us")?);
        for i in 0..b.num_rows() {
            let h = hour[i].unwrap_or(0);
            let (pu, gu) = (pod_us[i].unwrap_or(0), gpu_us[i].unwrap_or(0));
            let (ns, pc) = (ns[i].clone().unwrap_or_default(), pc[i].clone().unwrap_or_default());
            hourly.push(vec![Cell::Str(rfc3339(h)), Cell::Str(ns.clone()), Cell::Str(pc.clone()), avg(pu, 1), avg(gu, 1)]);
            let hod = h.rem_euclid(86_400_000) / 3_600_000;
            let e = by_hour.entry((hod, ns, pc)).or_default();
            e.0 += pu;
            e.1 += gu;
        }
    }
    let hourly = Report {
        name: "queue_hourly".into(),
        title: format!("Pending pods and pending GPU demand per hour {label}"),
        columns: ["hour", "namespace", "priority_class", "avg_pending_pods", "avg_pending_gpus"].map(String::from).to_vec(),
        rows: hourly,
        total: None,
        notes: vec!["hours with nothing pending are left out".into()],
        meta: Map::new(),
    };
    let days = (window.seconds() + 86_399) / 86_400;
    let by_hour = Report {
        name: "queue_hour_of_day".into(),
        title: format!("Average queue length by hour of day (UTC) {label}"),
        columns: ["hour", "namespace", "priority_class", "avg_pending_pods", "avg_pending_gpus"].map(String::from).to_vec(),
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
