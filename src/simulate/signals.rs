//! Per-step DCGM signals of every GPU: utilisation, framebuffer, power, energy, temperature
//! and XID errors, as a pure function of the schedule and the step, so the lake writer, the
//! OpenMetrics writer and the ledger all see the same values.

use super::cluster::{Cluster, MAX_UNITS};
use super::rng::{hash01, hash_normal};
use super::scheduler::{Occupancy, Schedule, Zombie};
use super::workload::Behavior;

/// One unit (whole GPU or MIG instance) at one step.
#[derive(Debug, Clone, Copy, Default)]
pub struct UnitStep {
    pub pod: Option<usize>,
    /// Utilisation in percent (GPU_UTIL; GR_ENGINE_ACTIVE x 100 on MIG).
    pub util_pct: f64,
    pub mem_used_mib: f64,
    /// The physical GPU's power x this unit's share.
    pub power_w: f64,
    pub temp_c: f64,
    pub xid: i32,
}

/// One physical GPU at one step `[ts, ts + step)`.
///
/// Power is the idle draw plus each busy unit's dynamic draw. A pod's work starts at the
/// first step it holds the unit at the step's start (the part-step after a container starts
/// is spent loading, at idle power) and stops the instant the pod finishes, so a step's
/// energy is the exact integral of that piecewise-constant power, as a real energy counter
/// would measure it.
#[derive(Debug, Clone, Copy)]
pub struct GpuStep {
    pub ts: i64,
    pub step_ms: i64,
    /// Instantaneous power of the whole GPU at `ts` (W), what DCGM_FI_DEV_POWER_USAGE reads.
    pub power_w: f64,
    /// Draw that lasts the whole step (W).
    pub base_w: f64,
    /// Per unit: dynamic draw (W) and the instant (ms) it stops, at most `ts + step_ms`.
    pub busy: [(f64, i64); MAX_UNITS],
    pub temp_c: f64,
    pub units: [UnitStep; MAX_UNITS],
    /// Each unit's share of the GPU at this step: its fixed share (1, a MIG slice), or for
    /// time-slicing replicas 1/n among the n held ones (the first replica carries an unheld
    /// GPU; the others get 0 and have no row).
    pub shares: [f64; MAX_UNITS],
    pub n_units: usize,
}

impl GpuStep {
    /// Energy (J) the whole GPU draws over `[a, b)`, a sub-interval of this step.
    pub fn energy_between(&self, a: i64, b: i64) -> f64 {
        let (a, b) = (a.max(self.ts), b.min(self.ts + self.step_ms));
        if a >= b {
            return 0.0;
        }
        let mut e = self.base_w * (b - a) as f64;
        for &(w, until) in &self.busy[..self.n_units] {
            e += w * (b.min(until) - a).max(0) as f64;
        }
        e / 1000.0
    }

    /// Energy (J) over the whole step.
    pub fn energy_j(&self) -> f64 {
        self.energy_between(self.ts, self.ts + self.step_ms)
    }
}

/// Chance that a pod's framebuffer reading equals the one a minute before: 63.6% of readings
/// in the Alibaba GenAI trace (`pod_gpu_memory_used_bytes_anon`, 143 containers at 1-minute
/// steps). A step of `s` seconds keeps the level with chance 0.636^(s/60): 0.80 at 30 s.
const MEM_UNCHANGED_PER_MINUTE: f64 = 0.636;
/// The spread of a pod's framebuffer levels around its mean (relative sd): in the same trace a
/// change moves the reading by 13% (median), which two draws at this sd give.
const MEM_LEVEL_SD: f64 = 0.14;
/// Steps between the knots of the temperature's slow drift (5 minutes at 30 s).
const TEMP_DRIFT_STEPS: u64 = 10;

/// The step at or before `step_no` (not before `first`) at which the framebuffer level of
/// whatever holds unit `key` last changed.
fn mem_level_step(seed: u64, key: u64, step_no: u64, first: u64, change: f64) -> u64 {
    let mut k = step_no;
    while k > first && hash01(seed, key, k, 7) >= change {
        k -= 1;
    }
    k
}

/// Slow noise (sd about 1), linear between knots drawn every `TEMP_DRIFT_STEPS` steps: what a
/// die's temperature wanders by under a steady load.
fn temp_drift(seed: u64, gpu: u64, step_no: u64) -> f64 {
    let (knot, into) = (step_no / TEMP_DRIFT_STEPS, step_no % TEMP_DRIFT_STEPS);
    let (a, b) = (hash_normal(seed, gpu, knot, 6), hash_normal(seed, gpu, knot + 1, 6));
    a + (b - a) * into as f64 / TEMP_DRIFT_STEPS as f64
}

pub struct SignalModel<'a> {
    pub cluster: &'a Cluster,
    pub schedule: &'a Schedule,
    pub seed: u64,
    pub step_ms: i64,
    /// Real utilisation series the held units replay instead of the workload model.
    pub util_trace: Option<&'a super::util_trace::UtilTrace>,
}

/// Finds the interval covering `ts` in a sorted, non-overlapping list.
fn covering<T>(list: &[T], ts: i64, start: impl Fn(&T) -> i64, end: impl Fn(&T) -> i64) -> Option<&T> {
    let idx = list.partition_point(|x| start(x) <= ts);
    if idx == 0 {
        return None;
    }
    let x = &list[idx - 1];
    (ts < end(x)).then_some(x)
}

/// Walks a unit's occupancy and zombie lists forward in time.
#[derive(Debug, Default, Clone)]
pub struct UnitCursor {
    occ: usize,
    zombie: usize,
}

impl UnitCursor {
    pub fn at(&mut self, occ: &[Occupancy], zombies: &[Zombie], ts: i64) -> (Option<usize>, Option<f32>) {
        while self.occ < occ.len() && occ[self.occ].end <= ts {
            self.occ += 1;
        }
        let holder = occ.get(self.occ).filter(|o| o.start <= ts).map(|o| o.pod);
        while self.zombie < zombies.len() && zombies[self.zombie].end <= ts {
            self.zombie += 1;
        }
        let zombie = zombies.get(self.zombie).filter(|z| z.start <= ts).map(|z| z.mib);
        (holder, zombie)
    }
}

impl<'a> SignalModel<'a> {
    pub fn holder_at(&self, unit: usize, ts: i64) -> Option<usize> {
        covering(&self.schedule.occupancy[unit], ts, |o| o.start, |o| o.end).map(|o| o.pod)
    }

    pub fn zombie_at(&self, unit: usize, ts: i64) -> Option<f32> {
        covering(&self.schedule.zombies[unit], ts, |z| z.start, |z| z.end).map(|z| z.mib)
    }

    /// The GPU at `ts` (random access; the writers use `UnitCursor` instead).
    pub fn gpu_at(&self, gpu: usize, ts: i64) -> GpuStep {
        let units = &self.cluster.gpus[gpu].units;
        let mut holders = [None; MAX_UNITS];
        let mut zombies = [None; MAX_UNITS];
        for (i, &u) in units.iter().enumerate() {
            holders[i] = self.holder_at(u, ts);
            zombies[i] = self.zombie_at(u, ts);
        }
        self.gpu_step(gpu, ts, &holders, &zombies)
    }

    /// All signals of physical GPU `gpu` at `ts`, given who holds each of its units.
    pub fn gpu_step(&self, gpu: usize, ts: i64, holders: &[Option<usize>; MAX_UNITS], zombies: &[Option<f32>; MAX_UNITS]) -> GpuStep {
        let phys = &self.cluster.gpus[gpu];
        let model = phys.model;
        let step_no = (ts.div_euclid(self.step_ms)) as u64;
        let n_units = phys.units.len();
        let mut shares = [0.0; MAX_UNITS];
        if phys.units.first().is_some_and(|&u| self.cluster.units[u].time_sliced) {
            let held = holders[..n_units].iter().filter(|h| h.is_some()).count();
            for i in 0..n_units {
                shares[i] = match (held, holders[i]) {
                    (0, _) if i == 0 => 1.0,
                    (0, _) | (_, None) => 0.0,
                    (n, Some(_)) => 1.0 / n as f64,
                };
            }
        } else {
            for (i, &u) in phys.units.iter().enumerate() {
                shares[i] = self.cluster.units[u].share;
            }
        }
        let mut out = GpuStep {
            ts,
            step_ms: self.step_ms,
            power_w: 0.0,
            base_w: 0.0,
            busy: [(0.0, ts); MAX_UNITS],
            temp_c: 0.0,
            units: [UnitStep::default(); MAX_UNITS],
            shares,
            n_units,
        };
        let mut busy = 0.0;
        // The load the die's temperature follows: each pod's mean utilisation, not each
        // step's draw around it (the thermal time constant is minutes, a step is 30 s).
        let mut mean_busy = 0.0;
        let mut busy_until = [ts; MAX_UNITS];
        let mut zombie_load = 0.0;
        for (i, &u) in phys.units.iter().enumerate() {
            let unit = &self.cluster.units[u];
            let key = u as u64;
            let mut s = UnitStep { pod: holders[i], ..UnitStep::default() };
            match holders[i] {
                Some(id) => {
                    let pod = &self.schedule.pods[id];
                    let noise = hash_normal(self.seed, key, step_no, 1);
                    let util = match (self.util_trace, pod.behavior) {
                        (Some(trace), _) => {
                            let step_start = step_no as i64 * self.step_ms;
                            trace.util(self.seed, id, u, step_start - pod.started.unwrap_or(step_start))
                        }
                        (None, Behavior::Idle) => {
                            if hash01(self.seed, key, step_no, 2) < 0.9 {
                                0.0
                            } else {
                                3.0 * hash01(self.seed, key, step_no, 3)
                            }
                        }
                        (None, Behavior::DataStarved) if (step_no + id as u64) % 12 < 4 => 0.0,
                        _ => pod.base_util + 6.0 * noise,
                    };
                    // Read inside the step its container started in (a scrape between the
                    // steps' starts): still loading, at 0%, as the ledger and the energy have it.
                    let loading = pod.started.is_some_and(|st| st > step_no as i64 * self.step_ms);
                    let util = if loading { 0.0 } else { util.clamp(0.0, 100.0) };
                    s.util_pct = if unit.mig_profile.is_some() { (util * 100.0).round() / 100.0 } else { util.round() };
                    let fb = unit.fb_mib as f64;
                    let started = pod.started.unwrap_or(ts);
                    s.mem_used_mib = match (pod.behavior, pod.fail_after_ms) {
                        (Behavior::Oom, Some(f)) => {
                            let progress = ((ts - started) as f64 / f.max(1) as f64).clamp(0.0, 1.0);
                            fb * (0.5 + 0.49 * progress)
                        }
                        // Piecewise constant, as framebuffer use is: a level held for steps at a
                        // time, drawn afresh when it moves and when the pod starts.
                        _ => {
                            let first = started.div_euclid(self.step_ms).max(0) as u64;
                            let change = 1.0 - MEM_UNCHANGED_PER_MINUTE.powf(self.step_ms as f64 / 60_000.0);
                            let level = mem_level_step(self.seed, key, step_no, first, change);
                            fb * pod.mem_frac * (1.0 + MEM_LEVEL_SD * hash_normal(self.seed, key, level, 4))
                        }
                    }
                    .max(0.0)
                    .round()
                    .min(fb);
                    if pod.reason == Some("Error") {
                        if let Some(end) = pod.finished {
                            if ts < end && ts + self.step_ms >= end {
                                s.xid = 31;
                            }
                        }
                    }
                    busy += s.util_pct / 100.0 * shares[i];
                    let mean_util = match (self.util_trace, pod.behavior) {
                        (Some(_), _) => s.util_pct,
                        (None, Behavior::Idle) => 0.0,
                        (None, Behavior::DataStarved) => pod.base_util * 8.0 / 12.0,
                        _ => pod.base_util,
                    };
                    mean_busy += mean_util.clamp(0.0, 100.0) / 100.0 * shares[i];
                    busy_until[i] = pod.finished.map_or(ts + self.step_ms, |f| f.min(ts + self.step_ms));
                }
                None => {
                    if let Some(mib) = zombies[i] {
                        s.mem_used_mib = mib as f64;
                        zombie_load += 0.04 * unit.share.min(shares[i].max(0.25));
                    }
                }
            }
            out.units[i] = s;
        }
        let jitter = 0.92 + 0.08 * hash01(self.seed, gpu as u64, step_no, 5);
        out.base_w = model.idle_w * (1.0 + zombie_load);
        let dynamic = (model.max_w - model.idle_w) * jitter;
        for i in 0..n_units {
            out.busy[i] = (dynamic * out.units[i].util_pct / 100.0 * shares[i], busy_until[i]);
        }
        let power = out.base_w + dynamic * busy;
        out.power_w = (power * 1000.0).round() / 1000.0;
        out.temp_c = (28.0 + 50.0 * mean_busy + temp_drift(self.seed, gpu as u64, step_no)).round();
        let sliced = phys.units.first().is_some_and(|&u| self.cluster.units[u].time_sliced);
        let (power_w, temp_c) = (out.power_w, out.temp_c);
        for (unit, share) in out.units.iter_mut().zip(shares.iter()).take(out.n_units) {
            unit.power_w = power_w * share;
            unit.temp_c = temp_c;
            // DCGM reports a time-sliced GPU's utilisation once, for the device.
            if sliced && unit.pod.is_some() {
                unit.util_pct = (busy * 100.0).round();
            }
        }
        out
    }
}
