//! What a timeline of pods comes to, stated the same way for the recorded month and for every
//! replay: per namespace the waits (scheduled - created of the pods created in the window),
//! the GPU-hours delivered, the pending GPU-hours, preemptions, energy and cost (cloud and
//! power); the same for the GPU-time no pod held; per hour the pool's allocated share.

use crate::domain::stats::nearest_rank;

use super::model::{Ms, Outcome, PodOutcome, Setup};
use super::prices::Prices;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NsSummary {
    /// Pods created in the window.
    pub pods: u64,
    /// Of those, pods bound to a node by the end.
    pub started: u64,
    /// Pods waiting at the window's end (whenever created).
    pub pending_at_end: u64,
    pub wait_p50_s: f64,
    pub wait_p95_s: f64,
    pub wait_max_s: f64,
    pub pending_gpu_hours: f64,
    pub gpu_hours: f64,
    pub preemptions: u64,
    pub energy_kwh: f64,
    /// Energy x PUE x the tariff of when it was drawn.
    pub power_cost: f64,
    /// GPU-hours x the configured cloud price of the GPU model (and MIG profile).
    pub cloud_cost: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub namespaces: Vec<NsSummary>,
    /// Per hour of the window: GPU-hours held and the pool's GPU-hours.
    pub allocated_by_hour: Vec<f64>,
    pub pool_by_hour: Vec<f64>,
    /// Per hour: pending GPU-hours, all namespaces.
    pub pending_by_hour: Vec<f64>,
    /// The GPU-time no pod held: its energy, power and cloud cost.
    pub idle: Idle,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Idle {
    pub energy_kwh: f64,
    pub power_cost: f64,
    pub cloud_cost: f64,
}

impl Summary {
    pub fn gpu_hours(&self) -> f64 {
        self.namespaces.iter().map(|n| n.gpu_hours).sum()
    }

    pub fn pool_hours(&self) -> f64 {
        self.pool_by_hour.iter().sum()
    }

    /// The share of the pool's GPU-time that no pod held, in percent.
    pub fn unallocated_pct(&self) -> f64 {
        let pool = self.pool_hours();
        if pool <= 0.0 {
            return 0.0;
        }
        (1.0 - self.gpu_hours() / pool) * 100.0
    }
}

/// The share of a physical GPU one unit of `resource` on `node` is (1 where unknown).
pub fn unit_share(setup: &Setup, node: Option<usize>, resource: usize) -> f64 {
    node.and_then(|n| setup.nodes.get(n)).and_then(|n| n.units.iter().find(|g| g.resource == resource)).map_or(1.0, |g| g.share)
}

/// Summarises `pods` (and the pending GPU steps counted alongside them) over `setup`'s window.
/// `pending_gpu_s` per namespace, `pending_by_hour` per namespace and hour, in GPU-seconds.
pub fn summarize(setup: &Setup, pods: &[PodOutcome], pending_gpu_s: &[i64], pending_by_hour: &[Vec<i64>], prices: &Prices) -> Summary {
    let (from, to) = (setup.from, setup.to);
    let hours = ((to - from + 3_599_999) / 3_600_000).max(0) as usize;
    let nns = setup.namespaces.len();
    let mut ns = vec![NsSummary::default(); nns];
    let mut waits: Vec<Vec<Ms>> = vec![Vec::new(); nns];
    let mut allocated = vec![0.0; hours];
    // Per model, what pods held: GPU-hours, the tariff over them (GPU x price x hours), cloud cost.
    let nmodels = setup.models.len();
    let (mut held_h, mut held_tariff, mut held_cloud) = (vec![0.0; nmodels], vec![0.0; nmodels], vec![0.0; nmodels]);
    let power = &prices.power;
    for p in pods {
        let s = &mut ns[p.ns];
        if p.created >= from && p.created < to {
            s.pods += 1;
            if let Some(at) = p.scheduled.filter(|&at| at < to) {
                s.started += 1;
                waits[p.ns].push(at - p.created);
            }
        }
        if p.scheduled.is_none_or(|at| at >= to) && p.created < to && p.finished.is_none_or(|f| f >= to) {
            s.pending_at_end += 1;
        }
        if p.preempted && p.finished.is_some_and(|f| f >= from && f < to) {
            s.preemptions += 1;
        }
        let Some(start) = p.started else { continue };
        // Nothing of a pod is known after its node left the pool.
        let node_end = p.node.and_then(|n| setup.nodes.get(n)).map_or(Ms::MAX, |n| n.available_to);
        let (a, b) = (start.max(from), p.finished.unwrap_or(Ms::MAX).min(to).min(node_end));
        if a >= b {
            continue;
        }
        let share = unit_share(setup, p.node, p.resource) * p.count as f64;
        s.gpu_hours += share * (b - a) as f64 / 3_600_000.0;
        if let Some(node) = p.node {
            let m = setup.nodes[node].model;
            let cloud = prices.cloud.cost(m, p.resource, a, b) * p.count as f64;
            let tariff = share * power.price_hours(a, b);
            let kwh = power.kwh_per_gpu_hour.get(p.ns).and_then(|r| r.get(m)).copied().unwrap_or(0.0);
            s.cloud_cost += cloud;
            s.energy_kwh += kwh * share * (b - a) as f64 / 3_600_000.0;
            s.power_cost += kwh * power.pue * tariff;
            held_h[m] += share * (b - a) as f64 / 3_600_000.0;
            held_tariff[m] += tariff;
            held_cloud[m] += cloud;
        }
        let mut x = a;
        while x < b {
            let h = ((x - from) / 3_600_000) as usize;
            let y = b.min(from + (h as i64 + 1) * 3_600_000);
            allocated[h] += share * (y - x) as f64 / 3_600_000.0;
            x = y;
        }
    }
    for (i, mut w) in waits.into_iter().enumerate() {
        w.sort_unstable();
        let sec = |v: Option<Ms>| v.unwrap_or(0) as f64 / 1000.0;
        ns[i].wait_p50_s = sec(nearest_rank(&w, 0.5));
        ns[i].wait_p95_s = sec(nearest_rank(&w, 0.95));
        ns[i].wait_max_s = sec(w.last().copied());
    }
    for (i, s) in ns.iter_mut().enumerate() {
        s.pending_gpu_hours = pending_gpu_s.get(i).copied().unwrap_or(0) as f64 / 3600.0;
    }
    let mut pending = vec![0.0; hours];
    for per_ns in pending_by_hour {
        for (h, v) in per_ns.iter().enumerate().take(hours) {
            pending[h] += *v as f64 / 3600.0;
        }
    }
    // The pool's GPU-time per model less what pods held: the idle GPUs' draw and price.
    let mut idle = Idle::default();
    for n in &setup.nodes {
        let (a, b) = (from.max(n.available_from), to.min(n.available_to));
        if a >= b {
            continue;
        }
        let gpus: f64 = n.units.iter().map(|g| g.count as f64 * g.share).sum();
        held_h[n.model] -= gpus * (b - a) as f64 / 3_600_000.0;
        held_tariff[n.model] -= gpus * power.price_hours(a, b);
        held_cloud[n.model] -= n.units.iter().map(|g| prices.cloud.cost(n.model, g.resource, a, b) * g.count as f64).sum::<f64>();
    }
    for m in 0..nmodels {
        let kwh = power.idle_kwh_per_gpu_hour.get(m).copied().unwrap_or(0.0);
        idle.energy_kwh -= kwh * held_h[m];
        idle.power_cost -= kwh * power.pue * held_tariff[m];
        idle.cloud_cost -= held_cloud[m];
    }
    Summary { namespaces: ns, allocated_by_hour: allocated, pool_by_hour: pool_by_hour(setup), pending_by_hour: pending, idle }
}

pub fn summarize_outcome(setup: &Setup, o: &Outcome, prices: &Prices) -> Summary {
    summarize(setup, &o.pods, &o.pending_gpu_s, &o.pending_by_hour, prices)
}

/// The pool's GPU-hours in each hour of the window (every unit x its share x the time its node
/// was there).
pub fn pool_by_hour(setup: &Setup) -> Vec<f64> {
    let (from, to) = (setup.from, setup.to);
    let hours = ((to - from + 3_599_999) / 3_600_000).max(0) as usize;
    let mut pool = vec![0.0; hours];
    for n in &setup.nodes {
        let gpus: f64 = n.units.iter().map(|g| g.count as f64 * g.share).sum();
        for (h, slot) in pool.iter_mut().enumerate() {
            let (a, b) = (from + h as i64 * 3_600_000, (from + (h as i64 + 1) * 3_600_000).min(to));
            let (x, y) = (a.max(n.available_from), b.min(n.available_to));
            if x < y {
                *slot += gpus * (y - x) as f64 / 3_600_000.0;
            }
        }
    }
    pool
}
