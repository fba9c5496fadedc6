//! The quota review against the schedulers' own split: per Kueue ClusterQueue, per cohort (its
//! ClusterQueues summed at each step), per Volcano and KAI queue, its quota over the window
//! (nominal / deserved, borrowing limit, capability) against its use (average, p95 and peak
//! GPUs in use, GPU-hours), the GPU-hours it borrowed and lent, the hours it spent over its
//! limit, its pending demand, and how long its pods waited for a node (pods created in the
//! window, by their queue label: `queries/queue_pod_waits.sql`). A section of `report quota`, from `queue_quotas`; none where
//! the lake has no scheduler queue.
//!
//! Definitions, per step (the collect step: the smallest gap between a queue's rows):
//! - **borrowed**: GPUs in use above the nominal quota (Volcano: above `deserved`);
//! - **lent**: a ClusterQueue's unused nominal quota, times the share of its cohort's unused
//!   quota that the cohort's members borrowed at that step (at most all of it): what others of
//!   its cohort ran on its quota;
//! - **over limit**: in use above nominal + borrowing limit (Kueue), above the capability
//!   (Volcano).

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::columns::{floats, ints, millis, strs, window_params};
use super::quota::{recommend, Usage};
use super::render::{Cell, Report};
use super::Result;
use crate::domain::stats::nearest_rank;
use crate::domain::window::Window;
use crate::queries::Queries;

const R: &str = "queue_quotas";

/// A queue's values at one step, in GPUs.
#[derive(Debug, Clone, Copy, Default)]
struct Step {
    nominal: Option<f64>,
    limit: Option<f64>,
    capacity: Option<f64>,
    allocated: f64,
    pending: f64,
}

/// A queue's steps, by instant (ms), and its pods' waits (seconds).
#[derive(Debug, Default)]
struct Queue {
    cohort: Option<String>,
    steps: BTreeMap<i64, Step>,
    waits_s: Vec<f64>,
}

type QueueKey = (String, String, String);

/// The section, or None where the window holds no queue series.
pub async fn build(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<Option<Report>> {
    let mut queues: BTreeMap<QueueKey, Queue> = BTreeMap::new();
    for b in &crate::engine::run_query(ctx, R, &queries.get("queue_quota_steps")?, window_params(window)).await? {
        let (cluster, scheduler, queue, cohort, ts) =
            (strs(R, b, "cluster")?, strs(R, b, "scheduler")?, strs(R, b, "queue")?, strs(R, b, "cohort")?, millis(R, b, "ts")?);
        let f = |name| floats(R, b, name);
        let (nominal, limit, capacity, allocated, pending) = (f("nominal")?, f("borrowing_limit")?, f("capacity")?, f("allocated")?, f("pending")?);
        for i in 0..b.num_rows() {
            let (Some(c), Some(s), Some(q), Some(t)) = (cluster[i].clone(), scheduler[i].clone(), queue[i].clone(), ts[i]) else { continue };
            let e = queues.entry((c, s, q)).or_default();
            if cohort[i].is_some() {
                e.cohort.clone_from(&cohort[i]);
            }
            e.steps.insert(
                t,
                Step {
                    nominal: nominal[i],
                    limit: limit[i],
                    capacity: capacity[i],
                    allocated: allocated[i].unwrap_or(0.0),
                    pending: pending[i].unwrap_or(0.0),
                },
            );
        }
    }
    if queues.is_empty() {
        return Ok(None);
    }
    for b in &crate::engine::run_query(ctx, R, &queries.get("queue_pod_waits")?, window_params(window)).await? {
        let (cluster, scheduler, queue, wait) = (strs(R, b, "cluster")?, strs(R, b, "scheduler")?, strs(R, b, "queue")?, ints(R, b, "wait_ms")?);
        for i in 0..b.num_rows() {
            let (Some(c), Some(s), Some(q), Some(w)) = (cluster[i].clone(), scheduler[i].clone(), queue[i].clone(), wait[i]) else { continue };
            // A queue with pods but no quota series has no row to put them in.
            if let Some(e) = queues.get_mut(&(c, s, q)) {
                e.waits_s.push(w as f64 / 1000.0);
            }
        }
    }
    let lent = lent_gpu_s(&queues);
    let mut rows = Vec::new();
    for ((cluster, scheduler, queue), q) in &queues {
        rows.push(row(cluster, scheduler, queue, q, lent.get(&(cluster.clone(), scheduler.clone(), queue.clone())).copied()));
    }
    for ((cluster, cohort), q) in cohorts(&queues) {
        rows.push(row(&cluster, "kueue cohort", &cohort, &q, None));
    }
    Ok(Some(Report {
        name: R.into(),
        title: format!("Scheduler queues: quota against use {}", window.label()),
        columns: [
            "scheduler",
            "queue",
            "cohort",
            "nominal_gpus",
            "borrowing_limit_gpus",
            "capacity_gpus",
            "avg_gpus",
            "p95_gpus",
            "peak_gpus",
            "gpu_hours",
            "nominal_gpu_hours",
            "use_pct_of_nominal",
            "borrowed_gpu_hours",
            "lent_gpu_hours",
            "over_limit_hours",
            "avg_pending_gpus",
            "pods",
            "wait_p50_s",
            "wait_p95_s",
            "wait_max_s",
            "recommendation",
            "suggested_nominal_gpus",
            "reason",
            "cluster",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        total: None,
        notes: vec![
            "per Kueue ClusterQueue, per cohort (its ClusterQueues summed at each step), per Volcano and KAI queue, from the schedulers' own series (queue_quotas), in GPUs; quotas are their last value in the window".into(),
            "borrowed: GPU time in use above the nominal quota (Volcano: above deserved); lent: a ClusterQueue's unused nominal quota times the share of its cohort's unused quota its members borrowed at the same step; over limit: hours in use above nominal + borrowing limit (Volcano: above capability)".into(),
            "recommendation: the namespaces' rules on the nominal quota (raise: at or over it 10% of the time while a GPU or more was pending on average; lower: p95 at most half of it and never reached; keep; set where there is none)".into(),
            "pods and waits: the queue's pods created in the window and bound to a node (its ClusterQueue, Volcano or KAI queue label), their wait from creation to binding; a cohort's are its ClusterQueues'".into(),
        ],
        meta: Map::new(),
    }))
}

/// Each row counts for the queue's step: the smallest gap between its rows (one row: a minute).
fn step_ms(q: &Queue) -> i64 {
    let ts: Vec<i64> = q.steps.keys().copied().collect();
    ts.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0).min().unwrap_or(60_000)
}

/// Each ClusterQueue's lent GPU-seconds (see the module's definition).
fn lent_gpu_s(queues: &BTreeMap<QueueKey, Queue>) -> BTreeMap<QueueKey, f64> {
    // Per cluster, cohort and step: the members' (key, unused, borrowed).
    let mut at: BTreeMap<(String, String, i64), Vec<(QueueKey, f64, f64, i64)>> = BTreeMap::new();
    for (k, q) in queues {
        let Some(cohort) = &q.cohort else { continue };
        let step = step_ms(q);
        for (t, s) in &q.steps {
            let Some(n) = s.nominal else { continue };
            at.entry((k.0.clone(), cohort.clone(), *t)).or_default().push((k.clone(), (n - s.allocated).max(0.0), (s.allocated - n).max(0.0), step));
        }
    }
    let mut out: BTreeMap<QueueKey, f64> = queues.iter().filter(|(_, q)| q.cohort.is_some()).map(|(k, _)| (k.clone(), 0.0)).collect();
    for members in at.values() {
        let unused: f64 = members.iter().map(|m| m.1).sum();
        let borrowed: f64 = members.iter().map(|m| m.2).sum();
        if unused > 0.0 && borrowed > 0.0 {
            let share = (borrowed / unused).min(1.0);
            for (k, u, _, step) in members {
                *out.entry(k.clone()).or_default() += u * share * *step as f64 / 1000.0;
            }
        }
    }
    out
}

/// Each cohort as a queue: its members' values summed at each step.
fn cohorts(queues: &BTreeMap<QueueKey, Queue>) -> BTreeMap<(String, String), Queue> {
    let mut out: BTreeMap<(String, String), Queue> = BTreeMap::new();
    for ((cluster, _, _), q) in queues {
        let Some(cohort) = &q.cohort else { continue };
        let c = out.entry((cluster.clone(), cohort.clone())).or_insert_with(|| Queue { cohort: Some(cohort.clone()), ..Queue::default() });
        c.waits_s.extend(&q.waits_s);
        for (t, s) in &q.steps {
            let e = c.steps.entry(*t).or_default();
            let add = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
            e.nominal = add(e.nominal, s.nominal);
            e.limit = add(e.limit, s.limit);
            e.allocated += s.allocated;
            e.pending += s.pending;
        }
    }
    out
}

fn row(cluster: &str, scheduler: &str, queue: &str, q: &Queue, lent_gpu_s: Option<f64>) -> Vec<Cell> {
    let step_s = step_ms(q) as f64 / 1000.0;
    let n = q.steps.len().max(1) as f64;
    let last = q.steps.values().next_back().copied().unwrap_or_default();
    let mut used: Vec<f64> = q.steps.values().map(|s| s.allocated).collect();
    used.sort_by(f64::total_cmp);
    // Nearest rank: the smallest value at or below which 95% of the steps fall.
    let p95 = used.get(((0.95 * used.len() as f64).ceil() as usize).saturating_sub(1)).copied().unwrap_or(0.0);
    let (mut gpu_s, mut nominal_s, mut borrowed_s, mut over_s, mut pending) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for s in q.steps.values() {
        gpu_s += s.allocated * step_s;
        pending += s.pending;
        if let Some(nominal) = s.nominal {
            nominal_s += nominal * step_s;
            borrowed_s += (s.allocated - nominal).max(0.0) * step_s;
        }
        let limit = match (scheduler, s.nominal, s.limit, s.capacity) {
            ("volcano", _, _, Some(c)) => Some(c),
            (_, Some(n), Some(l), _) => Some(n + l),
            _ => None,
        };
        if limit.is_some_and(|l| s.allocated > l + 1e-9) {
            over_s += step_s;
        }
    }
    // The namespaces' rules (`quota::recommend`) on the queue's nominal quota: its whole GPUs in
    // use and pending per step as the time it held them.
    let mut usage = Usage { quota: last.nominal.map(|n| (n.round() as i64, "scheduler")), ..Usage::default() };
    for s in q.steps.values() {
        *usage.histogram.entry(s.allocated.round() as i64).or_default() += step_s as i64;
        usage.pending_gpu_s += (s.pending * step_s).round() as i64;
    }
    usage.histogram.remove(&0);
    let (recommendation, suggested, reason) = recommend(&usage, (n * step_s) as i64);
    let mut waits = q.waits_s.clone();
    waits.sort_by(f64::total_cmp);
    let dec = |v: f64, d: u32| Cell::Dec { units: (v * 10f64.powi(d as i32)).round() as i128, decimals: d };
    let opt = |v: Option<f64>, d: u32| v.map_or(Cell::Null, |v| dec(v, d));
    let avg = gpu_s / step_s / n;
    vec![
        Cell::Str(scheduler.into()),
        Cell::Str(queue.into()),
        q.cohort.clone().map_or(Cell::Null, Cell::Str),
        opt(last.nominal, 2),
        opt(last.limit, 2),
        opt(last.capacity, 2),
        dec(avg, 2),
        dec(p95, 2),
        dec(used.last().copied().unwrap_or(0.0), 2),
        dec(gpu_s / 3600.0, 4),
        dec(nominal_s / 3600.0, 4),
        match last.nominal {
            Some(nominal) if nominal > 0.0 => dec(avg / nominal * 100.0, 1),
            _ => Cell::Null,
        },
        dec(borrowed_s / 3600.0, 4),
        opt(lent_gpu_s.map(|s| s / 3600.0), 4),
        dec(over_s / 3600.0, 4),
        dec(pending / n, 2),
        Cell::Int(waits.len() as i64),
        opt(nearest_rank(&waits, 0.5), 1),
        opt(nearest_rank(&waits, 0.95), 1),
        opt(waits.last().copied(), 1),
        Cell::Str(recommendation.into()),
        suggested.map_or(Cell::Null, Cell::Int),
        Cell::Str(reason),
        Cell::Str(cluster.into()),
    ]
}
