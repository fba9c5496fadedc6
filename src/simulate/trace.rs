//! Trace mode: arrivals, placements and lifetimes from a real trace instead of the model.
//!
//! Alibaba cluster-trace-gpu-v2025 (`disaggregated_DLRM_trace.csv.gz`): one row per
//! inference instance; `app_name` becomes the namespace, `gpu_request` the GPUs held from
//! `scheduled_time` (trace start when empty) to `deletion_time` (still running when empty).
//! Times are seconds from the trace start, which is mapped to the window start. The trace
//! does not say which GPU model it ran on; the pool is built of A100 nodes sized to the
//! peak number of GPUs in use within the window.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::cluster::{Cluster, Node, PhysicalGpu, Unit, A100, GPUS_PER_NODE};
use super::rng::Rng;
use super::scheduler::{Occupancy, Schedule, SimPod};
pub use super::trace_file::open_text;
use super::workload::{Behavior, NamespaceSpec, Priority, Resource};
use super::{SimParams, Simulation};

pub const DLRM_FILE: &str = "disaggregated_DLRM_trace.csv.gz";

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("reading trace {path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("trace {path} line {line}: {message}")]
    Parse { path: PathBuf, line: usize, message: String },
    #[error("trace {path}: no GPU instances in the window")]
    Empty { path: PathBuf },
}

/// One GPU instance of the trace, times in seconds from the trace start.
#[derive(Debug, Clone)]
pub struct TraceInstance {
    pub name: String,
    pub app: String,
    pub gpus: u32,
    pub cpu: f64,
    pub mem_gib: f64,
    pub created: Option<f64>,
    pub scheduled: Option<f64>,
    pub deleted: Option<f64>,
}

/// Reads the GPU (HN) instances of the DLRM trace in `dir` (or the file itself).
pub fn read_dlrm(path: &Path) -> Result<Vec<TraceInstance>, TraceError> {
    let file_path = if path.is_dir() { path.join(DLRM_FILE) } else { path.to_path_buf() };
    let io_err = |source| TraceError::Io { path: file_path.clone(), source };
    let reader = open_text(&file_path).map_err(io_err)?;
    let mut out = Vec::new();
    let mut header: Vec<String> = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(io_err)?;
        let fields: Vec<&str> = line.split(',').collect();
        if i == 0 {
            header = fields.iter().map(|s| s.to_string()).collect();
            continue;
        }
        let parse_err = |message: String| TraceError::Parse { path: file_path.clone(), line: i + 1, message };
        let col = |name: &str| -> Result<&str, TraceError> {
            let idx = header.iter().position(|h| h == name).ok_or_else(|| parse_err(format!("no column {name}")))?;
            fields.get(idx).copied().ok_or_else(|| parse_err(format!("missing field {name}")))
        };
        let num = |name: &str| -> Result<Option<f64>, TraceError> {
            let v = col(name)?.trim();
            if v.is_empty() {
                return Ok(None);
            }
            v.parse::<f64>().map(Some).map_err(|_| parse_err(format!("{name}: not a number: {v:?}")))
        };
        let gpus = num("gpu_request")?.unwrap_or(0.0);
        if gpus <= 0.0 {
            continue;
        }
        out.push(TraceInstance {
            name: col("instance_sn")?.to_string(),
            app: col("app_name")?.to_string(),
            gpus: gpus.round() as u32,
            cpu: num("cpu_request")?.unwrap_or(0.0),
            mem_gib: num("memory_request")?.unwrap_or(0.0),
            created: num("creation_time")?,
            scheduled: num("scheduled_time")?,
            deleted: num("deletion_time")?,
        });
    }
    Ok(out)
}

/// Builds a simulation whose schedule is the trace's own, clipped to the window.
pub fn simulate_trace(path: &Path, params: SimParams) -> Result<Simulation, TraceError> {
    let instances = read_dlrm(path)?;
    let (ws, we) = params.window_ms();
    let file_path = path.to_path_buf();
    // Instances holding GPUs at some point of the window.
    let mut spans: Vec<(i64, Option<i64>, TraceInstance)> = instances
        .into_iter()
        .filter_map(|inst| {
            let start = ws + (inst.scheduled.unwrap_or(0.0) * 1000.0).round() as i64;
            let end = inst.deleted.map(|d| ws + (d * 1000.0).round() as i64);
            (start < we && end.is_none_or(|e| e > ws && e > start)).then_some((start, end, inst))
        })
        .collect();
    if spans.is_empty() {
        return Err(TraceError::Empty { path: file_path });
    }
    spans.sort_by(|a, b| (a.0, &a.2.name).cmp(&(b.0, &b.2.name)));

    // Peak concurrency (GPUs) within the window sizes the pool.
    let mut events: Vec<(i64, i64)> = Vec::new();
    for (s, e, inst) in &spans {
        events.push((*s, inst.gpus as i64));
        events.push((e.unwrap_or(i64::MAX).min(we), -(inst.gpus as i64)));
    }
    events.sort();
    let (mut cur, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        cur += d;
        peak = peak.max(cur);
    }
    let cluster = a100_pool(peak as usize, params.seed);

    // Namespaces: one per app, in name order.
    let mut apps: Vec<String> = spans.iter().map(|s| s.2.app.clone()).collect();
    apps.sort();
    apps.dedup();
    let ns_index: BTreeMap<String, usize> = apps.iter().enumerate().map(|(i, a)| (a.clone(), i)).collect();
    let namespaces: Vec<NamespaceSpec> = apps
        .iter()
        .map(|a| {
            let name: &'static str = Box::leak(a.clone().into_boxed_str());
            NamespaceSpec {
                name,
                team: name,
                priority: Priority::Medium,
                container: "inference",
                quota_frac: 1.0,
                load: 0.0,
                models: &[],
                sizes: &[(1, 1.0)],
                dur_s: (1.0, 1.0),
                mig_frac: 0.0,
                shared_frac: 0.0,
                util: (30.0, 80.0),
                behaviors: [1.0, 0.0, 0.0, 0.0, 0.0],
            }
        })
        .collect();

    // First-fit placement in start order; a unit is free again at its holder's end.
    let mut rng = Rng::new(params.seed);
    let mut free_at = vec![i64::MIN; cluster.units.len()];
    let mut pods = Vec::with_capacity(spans.len());
    let mut occupancy = vec![Vec::new(); cluster.units.len()];
    for (start, end, inst) in spans {
        let mut units = Vec::new();
        for (u, f) in free_at.iter_mut().enumerate() {
            if *f <= start {
                units.push(u);
                *f = end.unwrap_or(i64::MAX);
                if units.len() == inst.gpus as usize {
                    break;
                }
            }
        }
        let id = pods.len();
        for &u in &units {
            occupancy[u].push(Occupancy { start, end: end.unwrap_or(i64::MAX), pod: id });
        }
        let created = inst.created.map_or(start.min(ws), |c| ws + (c * 1000.0).round() as i64);
        pods.push(SimPod {
            ns: ns_index[&inst.app],
            name: inst.name.clone(),
            uid: format!("trace-{}", inst.name),
            priority: Priority::Medium,
            resource: Resource::Gpu,
            gpu_request: inst.gpus,
            cpu_request: inst.cpu,
            mem_request_bytes: (inst.mem_gib * (1u64 << 30) as f64) as i64,
            created,
            scheduled: Some(start),
            started: Some(start),
            finished: end.filter(|&e| e < we),
            node: units.first().map(|&u| cluster.units[u].node),
            units,
            behavior: Behavior::Normal,
            work_ms: end.map_or(i64::MAX / 4, |e| e - start),
            fail_after_ms: None,
            reason: end.filter(|&e| e < we).map(|_| "Completed"),
            base_util: rng.range(30.0, 80.0),
            mem_frac: rng.range(0.3, 0.8),
            zombie_ms: 0,
        });
    }
    for list in occupancy.iter_mut() {
        list.sort_by_key(|o| o.start);
    }
    let zombies = vec![Vec::new(); cluster.units.len()];
    let quota_hard = vec![0; namespaces.len()];
    let schedule = Schedule { pods, occupancy, zombies, pending: Vec::new(), quotas: Vec::new(), quota_hard };
    Ok(Simulation { params, cluster, namespaces, schedule, util_trace: None })
}

fn a100_pool(gpus: usize, seed: u64) -> Cluster {
    let mut cluster = Cluster { nodes: Vec::new(), units: Vec::new(), gpus: Vec::new() };
    for n in 0..gpus.div_ceil(GPUS_PER_NODE).max(1) {
        cluster.nodes.push(Node { name: format!("trace-node-{:04}", n + 1), model: &A100, mig: false, dra: false, units: Vec::new() });
        for g in 0..GPUS_PER_NODE {
            let u = cluster.units.len();
            let h = super::rng::mix(seed ^ ((n as u64) << 8 | g as u64));
            cluster.units.push(Unit {
                node: n,
                gpu_index: g as i16,
                uuid: format!("GPU-{:016x}-{:04x}", h, u),
                model: &A100,
                mig_profile: None,
                gi_id: None,
                share: 1.0,
                fb_mib: A100.fb_mib,
                gpu: cluster.gpus.len(),
                time_sliced: false,
                hami: false,
            });
            cluster.nodes[n].units.push(u);
            cluster.gpus.push(PhysicalGpu { node: n, units: vec![u], model: &A100, life: Default::default() });
        }
    }
    cluster
}
