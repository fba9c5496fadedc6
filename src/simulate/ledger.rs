//! The simulator's ground truth, computed from the schedule (who held which GPU over which
//! exact interval), never from the sampled lake: GPU-seconds, energy, pods and wait times
//! per namespace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cluster::Cluster;
use super::scheduler::Schedule;
use super::signals::SignalModel;
use super::workload::NamespaceSpec;

pub const UNALLOCATED: &str = "__unallocated__";

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NamespaceLedger {
    pub gpu_seconds: f64,
    pub gpu_hours: f64,
    pub energy_j: f64,
    pub energy_kwh: f64,
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
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

pub fn compute(
    cluster: &Cluster,
    namespaces: &[NamespaceSpec],
    schedule: &Schedule,
    model: &SignalModel,
    window: (i64, i64),
    seed: u64,
) -> Ledger {
    let (ws, we) = window;
    let step = model.step_ms;
    let mut out: BTreeMap<String, NamespaceLedger> = BTreeMap::new();
    for ns in namespaces {
        out.insert(ns.name.to_string(), NamespaceLedger::default());
    }

    // GPU time and energy: exact holding intervals, clipped to the window; energy integrates
    // the GPU's piecewise-constant power over the exact overlap of each interval and step
    // (a MIG instance gets its share of its GPU's energy).
    let mut held_seconds = 0.0;
    let mut held_energy = 0.0;
    for (u, list) in schedule.occupancy.iter().enumerate() {
        let unit = &cluster.units[u];
        for occ in list {
            let (s, e) = (occ.start.max(ws), occ.end.min(we));
            if s >= e {
                continue;
            }
            let ns = namespaces[schedule.pods[occ.pod].ns].name;
            let entry = out.get_mut(ns).expect("known namespace");
            let secs = (e - s) as f64 / 1000.0 * unit.share;
            entry.gpu_seconds += secs;
            held_seconds += secs;
            let mut k = ws + (s - ws).div_euclid(step) * step;
            let mut energy = 0.0;
            while k < e {
                energy += model.gpu_at(unit.gpu, k).energy_between(s.max(k), e.min(k + step)) * unit.share;
                k += step;
            }
            entry.energy_j += energy;
            held_energy += energy;
        }
    }

    // The whole pool's energy over the window.
    let mut cluster_energy = 0.0;
    for gpu in 0..cluster.gpus.len() {
        let mut k = ws;
        while k < we {
            cluster_energy += model.gpu_at(gpu, k).energy_between(k, we.min(k + step));
            k += step;
        }
    }
    let cluster_seconds = cluster.gpu_count() as f64 * (we - ws) as f64 / 1000.0;
    out.insert(
        UNALLOCATED.to_string(),
        NamespaceLedger {
            gpu_seconds: cluster_seconds - held_seconds,
            energy_j: cluster_energy - held_energy,
            ..NamespaceLedger::default()
        },
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
    }
}
