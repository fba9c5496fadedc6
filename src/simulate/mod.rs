//! `gpuledger simulate`: a seeded, deterministic model of a shared GPU cluster. It writes
//! (a) the lake, (b) optionally the same history as DCGM exporter and kube-state-metrics
//! OpenMetrics for `promtool tsdb create-blocks-from openmetrics`, and (c) a ground-truth
//! ledger computed from the schedule itself.

pub mod cluster;
pub mod lake_out;
pub mod ledger;
pub mod openmetrics;
pub mod owners;
pub mod rng;
pub mod scheduler;
pub mod signals;
pub mod trace;
mod trace_file;
pub mod util_trace;
pub mod workload;

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};

use cluster::Cluster;
use ledger::Ledger;
use scheduler::{Schedule, SchedulerParams};
use signals::SignalModel;
use workload::NamespaceSpec;

#[derive(Debug, Clone)]
pub struct SimParams {
    pub gpus: usize,
    pub days: u32,
    pub seed: u64,
    pub step_s: u32,
    /// First day of the window (UTC midnight).
    pub start: NaiveDate,
    /// Days simulated before the window so it opens on a busy cluster, not an empty one.
    pub warmup_days: u32,
    /// Offered load as a fraction of the pool.
    pub target_util: f64,
    /// Time-slicing replicas of one shared GPU (the last node's last GPU); 0: none.
    pub time_sliced: u32,
}

impl SimParams {
    pub fn window_ms(&self) -> (i64, i64) {
        let ws = self.start.and_time(NaiveTime::MIN).and_utc().timestamp_millis();
        (ws, ws + self.days as i64 * 86_400_000)
    }

    pub fn window(&self) -> (DateTime<Utc>, DateTime<Utc>) {
        let (s, e) = self.window_ms();
        (DateTime::from_timestamp_millis(s).expect("valid"), DateTime::from_timestamp_millis(e).expect("valid"))
    }
}

/// A finished simulation: the pool, its tenants and what the scheduler did.
pub struct Simulation {
    pub params: SimParams,
    pub cluster: Cluster,
    pub namespaces: Vec<NamespaceSpec>,
    pub schedule: Schedule,
    /// Real utilisation replayed as the pods' own (`--util-trace`), instead of the model's.
    pub util_trace: Option<std::sync::Arc<util_trace::UtilTrace>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("--gpus must be 1..=16384, got {0}")]
    Gpus(usize),
    #[error("--days must be 1..=400, got {0}")]
    Days(u32),
    #[error("--step must divide a day and be 1..=3600 s, got {0}")]
    Step(u32),
    #[error("--time-sliced must be 0 (none) or 2..=4 replicas, got {0}")]
    TimeSliced(u32),
}

impl SimParams {
    pub fn validate(&self) -> Result<(), SimError> {
        if self.gpus == 0 || self.gpus > 16_384 {
            return Err(SimError::Gpus(self.gpus));
        }
        if self.days == 0 || self.days > 400 {
            return Err(SimError::Days(self.days));
        }
        if self.step_s == 0 || self.step_s > 3600 || 86_400 % self.step_s != 0 {
            return Err(SimError::Step(self.step_s));
        }
        if self.time_sliced == 1 || self.time_sliced > cluster::MAX_UNITS as u32 {
            return Err(SimError::TimeSliced(self.time_sliced));
        }
        Ok(())
    }
}

impl Simulation {
    pub fn run(params: SimParams) -> Result<Simulation, SimError> {
        Simulation::run_shaped(params, cluster::PoolShape::default())
    }

    /// [`run`](Self::run) on a pool that changes as `shape` says (an autoscaled node, a
    /// replaced board).
    pub fn run_shaped(params: SimParams, shape: cluster::PoolShape) -> Result<Simulation, SimError> {
        params.validate()?;
        let (ws, we) = params.window_ms();
        let cluster = Cluster::build_with(params.gpus, params.seed, params.time_sliced as usize).shaped(shape, ws, params.seed);
        let namespaces = workload::default_namespaces();
        let sched = SchedulerParams {
            sim_start_ms: ws - params.warmup_days as i64 * 86_400_000,
            end_ms: we,
            step_ms: params.step_s as i64 * 1000,
            target_util: params.target_util,
            seed: params.seed,
        };
        let schedule = scheduler::run(&cluster, &namespaces, &sched);
        Ok(Simulation { params, cluster, namespaces, schedule, util_trace: None })
    }

    pub fn signals(&self) -> SignalModel<'_> {
        SignalModel {
            cluster: &self.cluster,
            schedule: &self.schedule,
            seed: self.params.seed,
            step_ms: self.params.step_s as i64 * 1000,
            util_trace: self.util_trace.as_deref(),
        }
    }

    pub fn ledger(&self) -> Ledger {
        ledger::compute(&self.cluster, &self.namespaces, &self.schedule, &self.signals(), self.params.window_ms(), self.params.seed, &self.owners())
    }

    /// Every pod's ownership and labels (`owners`), by pod index; Deployments roll out half-way
    /// through the window.
    pub fn owners(&self) -> Vec<owners::Ownership> {
        owners::all(&self.namespaces, &self.schedule.pods, self.params.window_ms())
    }

    /// What an exporter outage hid: its node and interval, the GPU-seconds of the node's pool in
    /// it and the GPU-seconds each namespace held there (`__unallocated__` the rest), from the
    /// schedule.
    pub fn outage_ledger(&self, o: &openmetrics::Outage) -> serde_json::Value {
        let node = &self.cluster.nodes[o.node];
        let pool: f64 = node.units.iter().map(|&u| self.cluster.units[u].share * self.cluster.life_of(u).existing_ms(o.start, o.end) as f64 / 1000.0).sum();
        let mut held: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
        for p in ledger::holding_pieces(&self.cluster, &self.schedule, self.params.window_ms()) {
            if self.cluster.units[p.unit].node != o.node {
                continue;
            }
            let (a, b) = (p.start.max(o.start), p.end.min(o.end));
            if a < b {
                *held.entry(self.namespaces[self.schedule.pods[p.pod].ns].name.to_string()).or_default() += (b - a) as f64 / 1000.0 * p.share;
            }
        }
        let held_total: f64 = held.values().sum();
        held.insert(crate::domain::units::UNALLOCATED.to_string(), pool - held_total);
        let ms = |t: i64| chrono::DateTime::from_timestamp_millis(t).map_or(String::new(), |t| t.to_rfc3339());
        serde_json::json!({ "node": node.name, "start": ms(o.start), "end": ms(o.end), "pool_gpu_seconds": pool, "namespaces_gpu_seconds": held })
    }
}
