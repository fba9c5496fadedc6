//! A discrete-time model of kube-scheduler (plus quota admission and priority preemption)
//! running on the simulated pool. Pods arrive at arbitrary instants; the scheduler binds at
//! every step tick; pods finish, crash or are OOM-killed at arbitrary instants.

use std::cmp::Reverse;

use chrono::DateTime;

use super::cluster::{Cluster, HAMI_SLOTS_PCT};
use super::rng::Rng;
use super::workload::{rhythm, Behavior, NamespaceSpec, Priority, Resource};

#[derive(Debug, Clone)]
pub struct SimPod {
    pub ns: usize,
    pub name: String,
    pub uid: String,
    pub priority: Priority,
    pub resource: Resource,
    pub gpu_request: u32,
    pub cpu_request: f64,
    pub mem_request_bytes: i64,
    pub created: i64,
    pub scheduled: Option<i64>,
    pub started: Option<i64>,
    pub finished: Option<i64>,
    pub node: Option<usize>,
    pub units: Vec<usize>,
    pub behavior: Behavior,
    /// Planned run time (ms) once started.
    pub work_ms: i64,
    /// Offset from start (ms) at which a Crash/Oom job dies.
    pub fail_after_ms: Option<i64>,
    /// "Completed", "Error", "OOMKilled" or "Preempted" once finished.
    pub reason: Option<&'static str>,
    pub base_util: f64,
    pub mem_frac: f64,
    /// How long a crashed pod's zombie process keeps its framebuffer (ms).
    pub zombie_ms: i64,
}

impl SimPod {
    pub fn phase(&self) -> &'static str {
        match (self.started, self.reason) {
            (_, Some("Completed")) => "Succeeded",
            (_, Some(_)) => "Failed",
            (Some(_), None) => "Running",
            (None, None) => "Pending",
        }
    }

    fn planned_end(&self) -> Option<i64> {
        let start = self.started?;
        Some(start + self.fail_after_ms.map_or(self.work_ms, |f| f.min(self.work_ms)))
    }
}

/// A pod holding a unit over `[start, end)` (end `i64::MAX` while still running).
#[derive(Debug, Clone, Copy)]
pub struct Occupancy {
    pub start: i64,
    pub end: i64,
    pub pod: usize,
}

/// Framebuffer held by a crashed pod's zombie process over `[start, end)`.
#[derive(Debug, Clone, Copy)]
pub struct Zombie {
    pub start: i64,
    pub end: i64,
    pub mib: f32,
}

/// A pod pending for the same reason at every scheduler tick from `first` to `last`
/// (inclusive, one tick per step): one `pending_samples` row per tick. Kept as runs, not
/// rows, so a month of 10,000 GPUs (hundreds of millions of pending rows) fits in memory.
#[derive(Debug, Clone, Copy)]
pub struct PendingRun {
    pub pod: usize,
    pub reason: &'static str,
    pub first: i64,
    pub last: i64,
}

/// Appends pending ticks as runs: a tick extends the pod's open run when it is the next tick
/// with the same reason.
struct PendingRuns {
    step_ms: i64,
    runs: Vec<PendingRun>,
    /// Per pod id, the index of its latest run (`usize::MAX`: none).
    latest: Vec<usize>,
}

impl PendingRuns {
    fn record(&mut self, pod: usize, t: i64, reason: &'static str) {
        if pod >= self.latest.len() {
            self.latest.resize(pod + 1, usize::MAX);
        }
        match self.runs.get_mut(self.latest[pod]) {
            Some(run) if run.reason == reason && run.last + self.step_ms == t => run.last = t,
            _ => {
                self.latest[pod] = self.runs.len();
                self.runs.push(PendingRun { pod, reason, first: t, last: t });
            }
        }
    }
}

/// Placements known to fail at the current tick, per namespace and resource: the smallest
/// request that found no node. Units are only taken within a tick (until a preemption frees
/// some), so any request at least as large fails too, and the scan over every node is skipped.
#[derive(Default)]
struct FailedPlacements(Vec<(usize, Resource, u32)>);

impl FailedPlacements {
    fn known(&self, ns: usize, resource: Resource, req: u32) -> bool {
        self.0.iter().any(|&(n, r, min)| n == ns && r == resource && req >= min)
    }

    fn add(&mut self, ns: usize, resource: Resource, req: u32) {
        match self.0.iter_mut().find(|(n, r, _)| *n == ns && *r == resource) {
            Some(entry) => entry.2 = entry.2.min(req),
            None => self.0.push((ns, resource, req)),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct QuotaSample {
    pub ts: i64,
    pub ns: usize,
    pub hard: u32,
    pub used: u32,
}

/// Everything that happened, from which the lake, the OpenMetrics history and the ledger are
/// derived.
#[derive(Debug)]
pub struct Schedule {
    pub pods: Vec<SimPod>,
    /// Per unit, sorted by start.
    pub occupancy: Vec<Vec<Occupancy>>,
    /// Per unit, sorted by start.
    pub zombies: Vec<Vec<Zombie>>,
    /// Pending pods per tick, as runs in order of their first tick.
    pub pending: Vec<PendingRun>,
    pub quotas: Vec<QuotaSample>,
    pub quota_hard: Vec<u32>,
}

pub struct SchedulerParams {
    pub sim_start_ms: i64,
    pub end_ms: i64,
    pub step_ms: i64,
    pub target_util: f64,
    pub seed: u64,
}

pub const QUOTA_SAMPLE_MS: i64 = 300_000;

/// The most a bound pod waits before it starts (image pull, init).
const MAX_START_DELAY_MS: i64 = 25_000;
/// The chance a server's, notebook's or batch job asks for a HAMi vGPU where a node offers them.
const HAMI_JOB_FRAC: f64 = 0.9;

pub fn run(cluster: &Cluster, namespaces: &[NamespaceSpec], p: &SchedulerParams) -> Schedule {
    let mut rng = Rng::new(p.seed);
    let pool = cluster.gpu_count();
    let quota_hard: Vec<u32> = namespaces.iter().map(|ns| ((ns.quota_frac * pool as f64).round() as u32).max(1)).collect();
    let rates: Vec<f64> = namespaces.iter().map(|ns| ns.base_rate_per_hour(pool, p.target_util)).collect();
    let mut job_seq = vec![0u32; namespaces.len()];
    let shared_offered = cluster.units.iter().any(|u| u.time_sliced);
    let hami_offered = cluster.units.iter().any(|u| u.hami);

    let mut pods: Vec<SimPod> = Vec::new();
    let mut holder: Vec<Option<usize>> = vec![None; cluster.units.len()];
    let mut running: Vec<usize> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut used_gpus = vec![0u32; namespaces.len()];
    let mut pending_samples = PendingRuns { step_ms: p.step_ms, runs: Vec::new(), latest: Vec::new() };
    let mut quota_samples = Vec::new();

    let mut t = p.sim_start_ms;
    while t < p.end_ms {
        // 1. Completions, crashes and OOM kills up to this tick free their units.
        running.retain(|&id| {
            let pod = &mut pods[id];
            let end = pod.planned_end().expect("running pods have started");
            if end > t {
                return true;
            }
            pod.finished = Some(end);
            pod.reason = Some(match pod.behavior {
                Behavior::Crash if pod.fail_after_ms.is_some_and(|f| f < pod.work_ms) => "Error",
                Behavior::Oom if pod.fail_after_ms.is_some_and(|f| f < pod.work_ms) => "OOMKilled",
                _ => "Completed",
            });
            for &u in &pod.units {
                holder[u] = None;
            }
            if pod.resource == Resource::Gpu {
                used_gpus[pod.ns] -= pod.gpu_request;
            }
            false
        });

        // 2. Arrivals in (t - step, t].
        let now = DateTime::from_timestamp_millis(t).expect("valid time");
        for (ns_idx, ns) in namespaces.iter().enumerate() {
            let mean = rates[ns_idx] * rhythm(now) * p.step_ms as f64 / 3_600_000.0;
            for _ in 0..rng.poisson(mean) {
                job_seq[ns_idx] += 1;
                // kube-state-metrics reports whole seconds; so does the model.
                let created = t - rng.int(0, p.step_ms / 1000 - 1) * 1000;
                let pod = new_job(&mut rng, ns_idx, ns, job_seq[ns_idx], created, shared_offered, hami_offered);
                pending.push(pods.len());
                pods.push(pod);
            }
        }

        // 3. Scheduling pass: highest priority first, then oldest.
        pending.sort_by_key(|&id| (Reverse(pods[id].priority), pods[id].created, id));
        let mut still_pending = Vec::with_capacity(pending.len());
        let mut failed = FailedPlacements::default();
        // Preemptions known to find no victims at this tick. Only high-priority pods preempt,
        // and their victims always rank below them, so evicting frees nothing a later
        // high-priority pod could not already have counted: no eviction undoes such a failure.
        let mut no_victims = FailedPlacements::default();
        for id in std::mem::take(&mut pending) {
            if pods[id].created > t {
                still_pending.push(id);
                continue;
            }
            let (ns, req, resource, priority) = (pods[id].ns, pods[id].gpu_request, pods[id].resource, pods[id].priority);
            if resource == Resource::Gpu && used_gpus[ns] + req > quota_hard[ns] {
                pending_samples.record(id, t, "QuotaExceeded");
                still_pending.push(id);
                continue;
            }
            // The units must be there from now until the pod's planned end (a node the
            // autoscaler removes, a board taken out, takes no pod that would outlive it).
            let span = (t, t + MAX_START_DELAY_MS + pods[id].work_ms);
            let mut placement = if failed.known(ns, resource, req) { None } else { place(cluster, &namespaces[ns], &holder, resource, req, span) };
            if placement.is_none() {
                failed.add(ns, resource, req);
            }
            if placement.is_none() && priority == Priority::High {
                let victims = if no_victims.known(ns, resource, req) {
                    None
                } else {
                    choose_victims(cluster, &namespaces[ns], &holder, &pods, resource, req, priority, span)
                };
                if victims.is_none() {
                    no_victims.add(ns, resource, req);
                }
                if let Some(victims) = victims {
                    failed = FailedPlacements::default(); // the evictions free units
                    for v in victims {
                        let replacement = preempt(&mut pods, v, t, &mut holder, &mut used_gpus);
                        running.retain(|&r| r != v);
                        if let Some(r) = replacement {
                            still_pending.push(pods.len());
                            pods.push(r);
                        }
                    }
                    placement = place(cluster, &namespaces[ns], &holder, resource, req, span);
                    if placement.is_none() {
                        failed.add(ns, resource, req);
                    }
                }
            }
            match placement {
                Some((node, units)) => {
                    let delay = rng.int(2, MAX_START_DELAY_MS / 1000) * 1000;
                    let pod = &mut pods[id];
                    pod.scheduled = Some(t);
                    pod.started = Some(t + delay);
                    pod.node = Some(node);
                    for &u in &units {
                        holder[u] = Some(id);
                    }
                    pod.units = units;
                    if resource == Resource::Gpu {
                        used_gpus[ns] += req;
                    }
                    running.push(id);
                }
                None => {
                    pending_samples.record(id, t, "Unschedulable");
                    still_pending.push(id);
                }
            }
        }
        pending = still_pending;

        if t.rem_euclid(QUOTA_SAMPLE_MS) < p.step_ms {
            for ns in 0..namespaces.len() {
                quota_samples.push(QuotaSample { ts: t, ns, hard: quota_hard[ns], used: used_gpus[ns] });
            }
        }
        t += p.step_ms;
    }

    // Crashed pods leave a zombie holding framebuffer on their GPUs.
    for pod in pods.iter_mut() {
        if pod.reason == Some("Error") {
            pod.zombie_ms = rng.int(600_000, 4 * 3_600_000);
        }
    }
    let mut occupancy = vec![Vec::new(); cluster.units.len()];
    let mut zombies = vec![Vec::new(); cluster.units.len()];
    for (id, pod) in pods.iter().enumerate() {
        let Some(start) = pod.started else { continue };
        let end = pod.finished.unwrap_or(i64::MAX);
        for &u in &pod.units {
            occupancy[u].push(Occupancy { start, end, pod: id });
            if pod.reason == Some("Error") {
                let mib = (pod.mem_frac * cluster.units[u].fb_mib as f64) as f32;
                zombies[u].push(Zombie { start: end, end: end + pod.zombie_ms, mib });
            }
        }
    }
    for list in occupancy.iter_mut() {
        list.sort_by_key(|o| o.start);
    }
    for list in zombies.iter_mut() {
        list.sort_by_key(|z| z.start);
    }
    Schedule { pods, occupancy, zombies, pending: pending_samples.runs, quotas: quota_samples, quota_hard }
}

fn new_job(rng: &mut Rng, ns_idx: usize, ns: &NamespaceSpec, seq: u32, created: i64, shared_offered: bool, hami_offered: bool) -> SimPod {
    // Servers, notebooks and batch jobs take a HAMi vGPU where a node offers them (the draw
    // only then, so a pool without one schedules as before).
    let resource = if rng.f64() < ns.mig_frac {
        Resource::Mig(if rng.f64() < 0.5 { "3g.40gb" } else { "4g.40gb" })
    } else if hami_offered && matches!(ns.container, "server" | "notebook" | "job") && rng.f64() < HAMI_JOB_FRAC {
        // The share it asks for, one of the slots' (the pod waits for a free slot of it).
        let slot = ((rng.f64() * HAMI_SLOTS_PCT.len() as f64) as usize).min(HAMI_SLOTS_PCT.len() - 1);
        Resource::Hami(HAMI_SLOTS_PCT[slot])
    } else if shared_offered && ns.shared_frac > 0.0 && rng.f64() < ns.shared_frac {
        Resource::Shared
    } else {
        Resource::Gpu
    };
    let gpus = if resource == Resource::Gpu { ns.pick_size(rng) } else { 1 };
    let work_ms = rng.log_uniform(ns.dur_s.0, ns.dur_s.1).round() as i64 * 1000;
    let behavior = ns.pick_behavior(rng);
    let fail_after_ms = matches!(behavior, Behavior::Crash | Behavior::Oom).then(|| (work_ms as f64 / 1000.0 * rng.range(0.1, 0.9)).round() as i64 * 1000);
    let short = ns.name.trim_start_matches("team-");
    SimPod {
        ns: ns_idx,
        name: format!("{short}-{}-{seq:05}", ns.container),
        uid: new_uid(rng),
        priority: ns.priority,
        resource,
        gpu_request: gpus,
        cpu_request: 8.0 * gpus as f64,
        mem_request_bytes: 64 * (1 << 30) * gpus as i64,
        created,
        scheduled: None,
        started: None,
        finished: None,
        node: None,
        units: Vec::new(),
        behavior,
        work_ms,
        fail_after_ms,
        reason: None,
        base_util: rng.range(ns.util.0, ns.util.1),
        mem_frac: rng.range(0.35, 0.9),
        zombie_ms: 0,
    }
}

fn new_uid(rng: &mut Rng) -> String {
    let a = rng.next_u64();
    let b = rng.next_u64();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        (a >> 32) as u32,
        (a >> 16) as u16,
        a as u16 & 0x0fff,
        ((b >> 48) as u16 & 0x3fff) | 0x8000,
        b & 0xFFFF_FFFF_FFFF
    )
}

fn node_fits(cluster: &Cluster, ns: &NamespaceSpec, node: usize, resource: Resource) -> bool {
    let n = &cluster.nodes[node];
    match resource {
        Resource::Gpu => !n.mig && ns.models.contains(&n.model.kind) && !n.units.iter().any(|&u| cluster.units[u].hami),
        Resource::Mig(_) => n.mig,
        Resource::Shared => n.units.iter().any(|&u| cluster.units[u].time_sliced),
        Resource::Hami(_) => n.units.iter().any(|&u| cluster.units[u].hami),
    }
}

fn unit_matches(cluster: &Cluster, u: usize, resource: Resource) -> bool {
    match resource {
        Resource::Gpu => !cluster.units[u].time_sliced && !cluster.units[u].hami,
        Resource::Mig(profile) => cluster.units[u].mig_profile == Some(profile),
        Resource::Shared => cluster.units[u].time_sliced,
        Resource::Hami(pct) => cluster.units[u].hami && (cluster.units[u].share * 100.0).round() as u32 == pct,
    }
}

/// Best fit: the node of an acceptable model left with the fewest free units (the first such
/// node), and its first `req` free units; only units there over all of `span`.
fn place(cluster: &Cluster, ns: &NamespaceSpec, holder: &[Option<usize>], resource: Resource, req: u32, span: (i64, i64)) -> Option<(usize, Vec<usize>)> {
    let free_units = |node: usize| {
        cluster.nodes[node]
            .units
            .iter()
            .copied()
            .filter(move |&u| holder[u].is_none() && unit_matches(cluster, u, resource) && cluster.life_of(u).exists_over(span.0, span.1))
    };
    let mut best: Option<(usize, usize)> = None;
    for node in 0..cluster.nodes.len() {
        if !node_fits(cluster, ns, node, resource) {
            continue;
        }
        let free = free_units(node).count();
        if free >= req as usize {
            let left = free - req as usize;
            if best.is_none_or(|b| left < b.1) {
                best = Some((node, left));
            }
        }
    }
    best.map(|(node, _)| (node, free_units(node).take(req as usize).collect()))
}

/// The fewest lower-priority pods whose eviction frees enough units on one node (of units there
/// over all of `span`).
#[allow(clippy::too_many_arguments)]
fn choose_victims(
    cluster: &Cluster,
    ns: &NamespaceSpec,
    holder: &[Option<usize>],
    pods: &[SimPod],
    resource: Resource,
    req: u32,
    priority: Priority,
    span: (i64, i64),
) -> Option<Vec<usize>> {
    let mut best: Option<Vec<usize>> = None;
    for node in 0..cluster.nodes.len() {
        if !node_fits(cluster, ns, node, resource) {
            continue;
        }
        let units: Vec<usize> = cluster.nodes[node]
            .units
            .iter()
            .copied()
            .filter(|&u| unit_matches(cluster, u, resource) && cluster.life_of(u).exists_over(span.0, span.1))
            .collect();
        let mut free = units.iter().filter(|&&u| holder[u].is_none()).count();
        let mut candidates: Vec<usize> = units.iter().filter_map(|&u| holder[u]).filter(|&p| pods[p].priority < priority).collect();
        candidates.sort_by_key(|&p| (pods[p].priority, Reverse(pods[p].started), p));
        candidates.dedup();
        let mut victims = Vec::new();
        for v in candidates {
            if free >= req as usize {
                break;
            }
            free += pods[v].units.iter().filter(|u| units.contains(u)).count();
            victims.push(v);
        }
        if free >= req as usize && !victims.is_empty() && best.as_ref().is_none_or(|b| victims.len() < b.len()) {
            best = Some(victims);
        }
    }
    best
}

/// Evicts `victim` at `t`; returns the replacement pod (same name, new uid) that its
/// controller creates for the remaining work, if any is left.
fn preempt(pods: &mut [SimPod], victim: usize, t: i64, holder: &mut [Option<usize>], used: &mut [u32]) -> Option<SimPod> {
    let pod = &mut pods[victim];
    let started = pod.started.expect("victims are running");
    let done = (t - started).max(0);
    pod.finished = Some(t.max(started));
    pod.reason = Some("Preempted");
    for &u in &pod.units {
        holder[u] = None;
    }
    if pod.resource == Resource::Gpu {
        used[pod.ns] -= pod.gpu_request;
    }
    let left = pod.work_ms - done;
    if left < 60_000 {
        return None;
    }
    let mut uid_rng = Rng::new(super::rng::mix(victim as u64 ^ (t as u64).rotate_left(17)));
    let mut next = pod.clone();
    next.uid = new_uid(&mut uid_rng);
    next.created = t + 1_000;
    next.scheduled = None;
    next.started = None;
    next.finished = None;
    next.node = None;
    next.units = Vec::new();
    next.reason = None;
    next.work_ms = left;
    next.fail_after_ms = next.fail_after_ms.map(|f| (f - done).max(1_000));
    Some(next)
}
