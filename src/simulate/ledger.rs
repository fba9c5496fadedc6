//! The simulator's ground truth, computed from the schedule (who held which GPU over which
//! exact interval), never from the sampled lake: GPU-seconds, energy, pods and wait times
//! per namespace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cluster::Cluster;
use super::owners::Ownership;
use super::scheduler::Schedule;
use super::signals::SignalModel;
use super::workload::NamespaceSpec;

use crate::domain::units::UNALLOCATED;

/// The idle rule the ledger's `idle_gpu_seconds` follow: the idle report's defaults
/// (`idle.util_threshold_pct`, `idle.min_minutes`).
pub const IDLE_UTIL_PCT: f64 = 5.0;
pub const IDLE_MIN_S: f64 = 1800.0;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NamespaceLedger {
    pub gpu_seconds: f64,
    pub gpu_hours: f64,
    pub energy_j: f64,
    pub energy_kwh: f64,
    /// Utilisation x GPU time held (GPU-seconds at 100%): `avg_util_pct` = this / gpu_seconds.
    pub util_gpu_seconds: f64,
    pub avg_util_pct: f64,
    /// Allocated but idle: GPU time held in runs under `IDLE_UTIL_PCT` of at least `IDLE_MIN_S`.
    pub idle_gpu_seconds: f64,
    pub idle_gpu_hours: f64,
    pub pods_created: u64,
    pub pods_started: u64,
    pub preempted: u64,
    pub oom_killed: u64,
    pub crashed: u64,
    pub wait_p50_s: f64,
    pub wait_p95_s: f64,
    pub wait_max_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ledger {
    pub window_start: String,
    pub window_end: String,
    pub step_s: u32,
    pub seed: u64,
    pub gpus: usize,
    pub cluster_gpu_seconds: f64,
    pub cluster_energy_j: f64,
    pub namespaces: BTreeMap<String, NamespaceLedger>,
    /// Per top-level workload (`namespace/Kind/name`, `simulate::owners`): its pods and the
    /// GPU time they held.
    #[serde(default)]
    pub workloads: BTreeMap<String, WorkloadLedger>,
    /// Per pod label (as kube-state-metrics names it, without `label_`) and value: the GPU
    /// time held by pods with that value. Pods without the label are in no entry of it.
    #[serde(default)]
    pub labels: BTreeMap<String, BTreeMap<String, f64>>,
    /// Per scheduler queue (`owners::QUEUES`): its quota and the GPU time its pods were
    /// admitted for (requested GPUs from being bound to a node to the end, as Kueue's and
    /// Volcano's usage gauges count it).
    #[serde(default)]
    pub queues: BTreeMap<String, QueueLedger>,
}

/// A scheduler queue's truth.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct QueueLedger {
    pub scheduler: String,
    pub nominal_gpus: f64,
    /// Kueue's borrowing limit, Volcano's capability.
    pub limit_gpus: f64,
    pub admitted_gpu_seconds: f64,
    /// The GPUs its pods requested, over the pods admitted in the window.
    pub gpus: u64,
    /// GPU time admitted above its nominal quota (borrowed from its cohort, or over its
    /// deserved share), exact (not on the step grid).
    #[serde(default)]
    pub borrowed_gpu_seconds: f64,
    /// A cohort member's unused nominal quota that others of its cohort borrowed at the same
    /// time (each member's unused part in proportion, at most what was borrowed); 0 without a
    /// cohort.
    #[serde(default)]
    pub lent_gpu_seconds: f64,
    /// Its pods created in the window and bound to a node, and their waits (created to bound).
    #[serde(default)]
    pub pods_waited: u64,
    #[serde(default)]
    pub wait_p50_s: f64,
    #[serde(default)]
    pub wait_p95_s: f64,
    #[serde(default)]
    pub wait_max_s: f64,
    /// GPUs in use: the most at any instant, and the smallest count at or below which 95% of
    /// the window's time falls.
    #[serde(default)]
    pub peak_gpus: f64,
    #[serde(default)]
    pub p95_gpus: f64,
}

/// A top-level workload's truth.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkloadLedger {
    pub namespace: String,
    pub kind: String,
    pub name: String,
    /// Its pods that held GPUs in the window, and the GPUs they requested (a MIG instance or a
    /// shared GPU's replica counts 1).
    pub pods: u64,
    pub gpus: u64,
    pub gpu_seconds: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    crate::domain::stats::nearest_rank(sorted, p).unwrap_or(0.0)
}

pub fn compute(
    cluster: &Cluster,
    namespaces: &[NamespaceSpec],
    schedule: &Schedule,
    model: &SignalModel,
    window: (i64, i64),
    seed: u64,
    owners: &[Ownership],
) -> Ledger {
    let (ws, we) = window;
    let step = model.step_ms;
    let mut out: BTreeMap<String, NamespaceLedger> = BTreeMap::new();
    for ns in namespaces {
        out.insert(ns.name.to_string(), NamespaceLedger::default());
    }

    // GPU time and energy: exact holding pieces, clipped to the window; energy integrates
    // the GPU's piecewise-constant power over the exact overlap of each piece and step (a
    // MIG instance gets its share of its GPU's energy, a time-sliced pod 1/n).
    // The signals are recomputed for every step here (three passes over the month), so each
    // pass is spread over the cores; the sums are then added up in the original order, so the
    // ledger is the same to the last bit on any number of cores.
    let pieces = holding_pieces(cluster, schedule, window);
    let piece_sums = in_order(pieces.len(), |i| {
        let piece = &pieces[i];
        let unit = &cluster.units[piece.unit];
        let mut k = ws + (piece.start - ws).div_euclid(step) * step;
        let slot = cluster.gpus[unit.gpu].units.iter().position(|&x| x == piece.unit).expect("unit of its gpu");
        let (mut energy, mut util) = (0.0, 0.0);
        while k < piece.end {
            let g = model.gpu_at(unit.gpu, k);
            let (a, b) = (piece.start.max(k), piece.end.min(k + step));
            energy += g.energy_between(a, b) * piece.share;
            util += (b - a) as f64 / 1000.0 * piece.share * g.units[slot].util_pct / 100.0;
            k += step;
        }
        (energy, util)
    });
    let mut held_seconds = 0.0;
    let mut held_energy = 0.0;
    let mut workloads: BTreeMap<String, WorkloadLedger> = BTreeMap::new();
    let mut labels: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    fn workload_of<'w>(workloads: &'w mut BTreeMap<String, WorkloadLedger>, ns: &str, o: &Ownership) -> &'w mut WorkloadLedger {
        workloads.entry(format!("{ns}/{}", o.workload_key())).or_insert_with(|| WorkloadLedger {
            namespace: ns.to_string(),
            kind: o.workload.0.to_string(),
            name: o.workload.1.clone(),
            ..WorkloadLedger::default()
        })
    }
    let mut counted = vec![false; schedule.pods.len()];
    for (piece, (energy, util)) in pieces.iter().zip(piece_sums) {
        let ns = namespaces[schedule.pods[piece.pod].ns].name;
        let entry = out.get_mut(ns).expect("known namespace");
        let secs = (piece.end - piece.start) as f64 / 1000.0 * piece.share;
        let w = workload_of(&mut workloads, ns, &owners[piece.pod]);
        w.gpu_seconds += secs;
        if !std::mem::replace(&mut counted[piece.pod], true) {
            w.pods += 1;
            w.gpus += schedule.pods[piece.pod].gpu_request as u64;
        }
        for (key, value) in &owners[piece.pod].labels {
            *labels.entry(crate::domain::ksm_label::sanitised(key)).or_default().entry(value.clone()).or_default() += secs;
        }
        entry.gpu_seconds += secs;
        held_seconds += secs;
        entry.energy_j += energy;
        entry.util_gpu_seconds += util;
        held_energy += energy;
    }

    // Allocated but idle, by the idle report's rule on the step grid: per unit and pod, the
    // runs of steps the pod held (any part of) with utilisation under the threshold, counted
    // when their steps add up to the minimum; the GPU time is the exact part of those steps it
    // held. (A run is measured in steps, as the report measures it from the lake's rows.)
    let idle_runs = in_order(cluster.units.len(), |u| {
        let unit = &cluster.units[u];
        let slot = cluster.gpus[unit.gpu].units.iter().position(|&x| x == u).expect("unit of its gpu");
        let mut counted: Vec<(usize, f64)> = Vec::new();
        for occ in &schedule.occupancy[u] {
            let ns = schedule.pods[occ.pod].ns;
            let (mut run_steps, mut run_gpu_s) = (0i64, 0.0);
            let (s, e) = (occ.start.max(ws), occ.end.min(we));
            let mut k = ws + (s - ws).div_euclid(step) * step;
            while k < e {
                let g = model.gpu_at(unit.gpu, k);
                // A step the pod started inside: it was loading (0%, the model's rule).
                let util = if k < s { 0.0 } else { g.units[slot].util_pct };
                if util < IDLE_UTIL_PCT {
                    run_steps += 1;
                    run_gpu_s += (e.min(k + step) - s.max(k)) as f64 / 1000.0 * g.shares[slot];
                } else {
                    if (run_steps * step) as f64 >= IDLE_MIN_S * 1000.0 {
                        counted.push((ns, run_gpu_s));
                    }
                    (run_steps, run_gpu_s) = (0, 0.0);
                }
                k += step;
            }
            if (run_steps * step) as f64 >= IDLE_MIN_S * 1000.0 {
                counted.push((ns, run_gpu_s));
            }
        }
        counted
    });
    for (ns, gpu_s) in idle_runs.into_iter().flatten() {
        out.get_mut(namespaces[ns].name).expect("known namespace").idle_gpu_seconds += gpu_s;
    }

    // The whole pool's energy over the window, GPU by GPU and step by step (a block of GPUs'
    // steps at a time, computed on every core).
    let mut cluster_energy = 0.0;
    const GPU_BLOCK: usize = 64;
    for block in (0..cluster.gpus.len()).step_by(GPU_BLOCK) {
        let n = GPU_BLOCK.min(cluster.gpus.len() - block);
        let steps = in_order(n, |i| {
            let life = &cluster.gpus[block + i].life;
            let mut energies = Vec::new();
            let mut k = ws;
            while k < we {
                let (a, b) = (k, we.min(k + step));
                if life.exists_over(a, b) {
                    energies.push(model.gpu_at(block + i, k).energy_between(a, b));
                } else {
                    // Only the part of the step the GPU was there (an autoscaled node, a board out).
                    let g = model.gpu_at(block + i, k);
                    let gone: f64 = life.absent.iter().map(|&(s, e)| (s.max(a), e.min(b))).filter(|(x, y)| x < y).map(|(x, y)| g.energy_between(x, y)).sum();
                    energies.push(g.energy_between(a, b) - gone);
                }
                k += step;
            }
            energies
        });
        for e in steps.into_iter().flatten() {
            cluster_energy += e;
        }
    }
    // The pool: each GPU for the time it was there.
    let cluster_seconds: f64 = cluster.gpus.iter().map(|g| g.life.existing_ms(ws, we) as f64 / 1000.0).sum();
    out.insert(
        UNALLOCATED.to_string(),
        NamespaceLedger { gpu_seconds: cluster_seconds - held_seconds, energy_j: cluster_energy - held_energy, ..NamespaceLedger::default() },
    );

    // Pods and waits: pods created in the window.
    let mut waits: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for pod in &schedule.pods {
        if pod.created < ws || pod.created >= we {
            continue;
        }
        let ns = namespaces[pod.ns].name;
        let entry = out.get_mut(ns).expect("known namespace");
        entry.pods_created += 1;
        if let Some(sched) = pod.scheduled {
            entry.pods_started += 1;
            waits.entry(ns).or_default().push((sched - pod.created) as f64 / 1000.0);
        }
        match pod.reason {
            Some("Preempted") => entry.preempted += 1,
            Some("OOMKilled") => entry.oom_killed += 1,
            Some("Error") => entry.crashed += 1,
            _ => {}
        }
    }
    for (ns, mut w) in waits {
        w.sort_by(f64::total_cmp);
        let entry = out.get_mut(ns).expect("known namespace");
        entry.wait_p50_s = percentile(&w, 0.5);
        entry.wait_p95_s = percentile(&w, 0.95);
        entry.wait_max_s = *w.last().unwrap_or(&0.0);
    }
    for entry in out.values_mut() {
        entry.gpu_hours = entry.gpu_seconds / 3600.0;
        entry.energy_kwh = entry.energy_j / 3.6e6;
        entry.idle_gpu_hours = entry.idle_gpu_seconds / 3600.0;
        entry.avg_util_pct = if entry.gpu_seconds > 0.0 { entry.util_gpu_seconds / entry.gpu_seconds * 100.0 } else { 0.0 };
    }
    let fmt = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).expect("valid").to_rfc3339();
    Ledger {
        window_start: fmt(ws),
        window_end: fmt(we),
        step_s: (step / 1000) as u32,
        seed,
        gpus: cluster.gpu_count(),
        cluster_gpu_seconds: cluster_seconds,
        cluster_energy_j: cluster_energy,
        namespaces: out,
        workloads,
        labels,
        queues: queue_ledger(cluster.gpu_count(), schedule, owners, window),
    }
}

/// Each simulated queue's quota, admitted GPU time, and what it borrowed and lent over `window`.
fn queue_ledger(gpus: usize, schedule: &Schedule, owners: &[Ownership], window: (i64, i64)) -> BTreeMap<String, QueueLedger> {
    let (ws, we) = window;
    let queues = &super::owners::QUEUES;
    let mut out: Vec<QueueLedger> = queues
        .iter()
        .map(|q| QueueLedger { scheduler: q.scheduler.into(), nominal_gpus: q.nominal(gpus), limit_gpus: q.limit(gpus), ..QueueLedger::default() })
        .collect();
    // (instant, queue, GPUs in use added) at each pod's admission and end.
    let mut events: Vec<(i64, usize, f64)> = Vec::new();
    let mut waits: Vec<Vec<f64>> = vec![Vec::new(); queues.len()];
    for (p, o) in schedule.pods.iter().zip(owners) {
        let Some(bound) = p.scheduled else { continue };
        let Some(qi) = queues.iter().position(|q| o.labels.iter().any(|(k, v)| *k == q.label && v == q.name)) else { continue };
        if p.created >= ws && p.created < we {
            waits[qi].push((bound - p.created) as f64 / 1000.0);
        }
        let (a, b) = (bound.max(ws), p.finished.unwrap_or(we).min(we));
        if a < b {
            out[qi].admitted_gpu_seconds += (b - a) as f64 / 1000.0 * p.gpu_request as f64;
            out[qi].gpus += p.gpu_request as u64;
            events.push((a, qi, p.gpu_request as f64));
            events.push((b, qi, -(p.gpu_request as f64)));
        }
    }
    // Between events every queue's use is constant: borrowed is use above nominal; a cohort
    // member lends its unused nominal in proportion to what the cohort borrowed then.
    events.sort_by(|x, y| x.0.cmp(&y.0).then(x.1.cmp(&y.1)));
    let mut in_use = vec![0.0f64; queues.len()];
    // Per queue: seconds at each GPU count in use.
    let mut held: Vec<BTreeMap<i64, f64>> = vec![BTreeMap::new(); queues.len()];
    let mut at = ws;
    for (t, qi, d) in events {
        let dt = (t - at) as f64 / 1000.0;
        if dt > 0.0 {
            for (i, u) in in_use.iter().enumerate() {
                *held[i].entry(*u as i64).or_default() += dt;
            }
            let (mut borrowed, mut unused) = (0.0, 0.0);
            for (i, q) in queues.iter().enumerate() {
                let (over, under) = ((in_use[i] - out[i].nominal_gpus).max(0.0), (out[i].nominal_gpus - in_use[i]).max(0.0));
                out[i].borrowed_gpu_seconds += over * dt;
                if q.scheduler == "kueue" {
                    borrowed += over;
                    unused += under;
                }
            }
            if unused > 0.0 {
                for (i, _) in queues.iter().enumerate().filter(|(_, q)| q.scheduler == "kueue") {
                    out[i].lent_gpu_seconds += (out[i].nominal_gpus - in_use[i]).max(0.0) * (borrowed / unused).min(1.0) * dt;
                }
            }
            at = t;
        }
        in_use[qi] += d;
    }
    let window_s = (we - ws) as f64 / 1000.0;
    for (l, h) in out.iter_mut().zip(&held) {
        l.peak_gpus = h.iter().filter(|(_, s)| **s > 0.0).map(|(g, _)| *g).max().unwrap_or(0) as f64;
        let mut below = window_s - h.values().sum::<f64>() + h.get(&0).copied().unwrap_or(0.0);
        l.p95_gpus = 0.0;
        for (g, s) in h.iter().filter(|(g, _)| **g > 0) {
            if below >= 0.95 * window_s {
                break;
            }
            below += s;
            l.p95_gpus = *g as f64;
        }
    }
    for (l, mut w) in out.iter_mut().zip(waits) {
        w.sort_by(f64::total_cmp);
        l.pods_waited = w.len() as u64;
        l.wait_p50_s = percentile(&w, 0.5);
        l.wait_p95_s = percentile(&w, 0.95);
        l.wait_max_s = w.last().copied().unwrap_or(0.0);
    }
    queues.iter().map(|q| q.name.to_string()).zip(out).collect()
}

/// `f(0), f(1), ..., f(n - 1)` in order, computed on every core (items handed out one at a time).
fn in_order<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |c| c.get()).min(n.max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, T)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= n {
                            break mine;
                        }
                        mine.push((i, f(i)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("ledger worker")).collect()
    });
    done.sort_unstable_by_key(|&(i, _)| i);
    done.into_iter().map(|(_, t)| t).collect()
}

/// A pod holding (a share of) a unit over `[start, end)`, inside the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece {
    pub pod: usize,
    pub unit: usize,
    pub start: i64,
    pub end: i64,
    /// The unit's share of its GPU (1, a MIG slice), or 1/n while n pods time-slice it.
    pub share: f64,
}

/// Every exact holding piece in `window`, from the schedule's occupancy intervals. A
/// time-sliced GPU is swept over the instants its holders change, each holder getting 1/n.
pub fn holding_pieces(cluster: &Cluster, schedule: &Schedule, window: (i64, i64)) -> Vec<Piece> {
    let (ws, we) = window;
    let mut out = Vec::new();
    for phys in &cluster.gpus {
        let sliced = phys.units.first().is_some_and(|&u| cluster.units[u].time_sliced);
        let mut intervals = Vec::new();
        for &u in &phys.units {
            for occ in &schedule.occupancy[u] {
                let (s, e) = (occ.start.max(ws), occ.end.min(we));
                if s < e {
                    intervals.push((u, occ.pod, s, e));
                }
            }
        }
        if !sliced {
            out.extend(intervals.into_iter().map(|(unit, pod, start, end)| Piece { pod, unit, start, end, share: cluster.units[unit].share }));
            continue;
        }
        let mut cuts: Vec<i64> = intervals.iter().flat_map(|&(_, _, s, e)| [s, e]).collect();
        cuts.sort_unstable();
        cuts.dedup();
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            let holders: Vec<&(usize, usize, i64, i64)> = intervals.iter().filter(|&&(_, _, s, e)| s <= a && e >= b).collect();
            let n = holders.len() as f64;
            for &&(unit, pod, _, _) in &holders {
                out.push(Piece { pod, unit, start: a, end: b, share: 1.0 / n });
            }
        }
    }
    out
}

/// Cloud and power cost per namespace (and `__unallocated__`), integrated over the exact
/// holding pieces: `gpu_price(unit, t)` is the price per hour of the unit's whole share at
/// step start `t` (the caller's price list, a MIG profile price divided by its slice),
/// `kwh_price(t)` the price per kWh including PUE. Prices may change only at step edges.
pub fn priced(
    cluster: &Cluster,
    namespaces: &[NamespaceSpec],
    schedule: &Schedule,
    model: &SignalModel,
    window: (i64, i64),
    gpu_price: impl Fn(&super::cluster::Unit, i64) -> f64,
    kwh_price: impl Fn(i64) -> f64,
) -> BTreeMap<String, (f64, f64)> {
    let (ws, we) = window;
    let step = model.step_ms;
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let (mut held_cloud, mut held_power) = (0.0, 0.0);
    for piece in holding_pieces(cluster, schedule, window) {
        let unit = &cluster.units[piece.unit];
        let ns = namespaces[schedule.pods[piece.pod].ns].name;
        let mut k = ws + (piece.start - ws).div_euclid(step) * step;
        let (mut cloud, mut power) = (0.0, 0.0);
        while k < piece.end {
            let (a, b) = (piece.start.max(k), piece.end.min(k + step));
            cloud += (b - a) as f64 / 3_600_000.0 * piece.share * gpu_price(unit, k);
            power += model.gpu_at(unit.gpu, k).energy_between(a, b) * piece.share / 3.6e6 * kwh_price(k);
            k += step;
        }
        let e = out.entry(ns.to_string()).or_default();
        e.0 += cloud;
        e.1 += power;
        held_cloud += cloud;
        held_power += power;
    }
    // The pool: every unit at its nominal share (time-slicing replicas 1/replicas each).
    let (mut pool_cloud, mut pool_power) = (0.0, 0.0);
    let mut k = ws;
    while k < we {
        let b = we.min(k + step);
        for unit in &cluster.units {
            pool_cloud += (b - k) as f64 / 3_600_000.0 * unit.share * gpu_price(unit, k);
        }
        for gpu in 0..cluster.gpus.len() {
            pool_power += model.gpu_at(gpu, k).energy_between(k, b) / 3.6e6 * kwh_price(k);
        }
        k += step;
    }
    out.insert(UNALLOCATED.to_string(), (pool_cloud - held_cloud, pool_power - held_power));
    out
}

/// The unit-steps the pool held over `window` on a grid of `step_ms`: each GPU or MIG instance
/// for every step it was there (what `report completeness` expects of DCGM, counted from the
/// simulated pool, not from the lake). A time-sliced GPU is one unit.
pub fn pool_unit_steps(cluster: &Cluster, window: (i64, i64), step_ms: i64) -> i64 {
    let (ws, we) = window;
    let mut n = 0;
    for gpu in &cluster.gpus {
        // A HAMi GPU is one series too: DCGM sees the GPU, not its vGPUs.
        let units = gpu.units.iter().filter(|&&u| !cluster.units[u].time_sliced && !cluster.units[u].hami).count().max(1) as i64;
        let mut k = ws;
        while k < we {
            if gpu.life.exists(k) {
                n += units;
            }
            k += step_ms;
        }
    }
    n
}
