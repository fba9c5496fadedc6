//! HAMi's own series -> who holds what part of each GPU HAMi shares, step by step.
//!
//! dcgm-exporter does not see HAMi's vGPUs (HAMi#1032): it reports the physical GPU without a
//! pod. HAMi's scheduler says who was given what (`hami_vgpu_core_allocated_ratio`, percent of
//! the GPU's cores, and `hami_vgpu_memory_allocated_bytes`, per container and `device_uuid`;
//! `hami_gpu_memory_limit_bytes` per device), and its vGPU monitor how hard each container
//! worked (`hami_container_device_utilization_ratio`, its part of the whole GPU's work, 0-100)
//! and how long since each last launched a kernel (`hami_container_last_kernel_elapsed_seconds`:
//! where the utilisation is not scraped, a holder with no kernel for a step's length is idle in
//! it, not as busy as the GPU others work on).
//! A holder's part of a step is its allocated share (`[sharing] hami_share`) times the part of
//! the step its series covers: a series stands from half-way to the scrape before its first to
//! half-way to the scrape after its last (the pod started and ended somewhere in between), gaps
//! longer than the lookback cut it. Where a GPU's holders add up to more than the GPU (the
//! `max` rule, HAMi's memory over-commit), they are scaled down together.

use std::collections::BTreeMap;

use super::labels::{Holder, WorkloadLabels};
use super::prometheus::Series;
use crate::config::PrometheusConfig;
use crate::domain::gpu_resource::HamiShare;

/// The HAMi series a run queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HamiMetric {
    CoreAllocated,
    MemoryAllocated,
    MemoryLimit,
    ContainerUtil,
    LastKernel,
}

impl HamiMetric {
    pub const ALL: [HamiMetric; 5] =
        [HamiMetric::CoreAllocated, HamiMetric::MemoryAllocated, HamiMetric::MemoryLimit, HamiMetric::ContainerUtil, HamiMetric::LastKernel];

    /// The configured metric name (`[prometheus.metrics] hami_*`).
    pub fn name(self, cfg: &PrometheusConfig) -> &str {
        let m = &cfg.metrics;
        match self {
            HamiMetric::CoreAllocated => &m.hami_core_allocated,
            HamiMetric::MemoryAllocated => &m.hami_memory_allocated,
            HamiMetric::MemoryLimit => &m.hami_memory_limit,
            HamiMetric::ContainerUtil => &m.hami_container_util,
            HamiMetric::LastKernel => &m.hami_last_kernel,
        }
    }
}

/// One holder's part of a HAMi GPU in one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HamiPart {
    /// Index into [`HamiShares::holders`].
    pub holder: u32,
    /// Its part of the GPU-step: the allocated share x the part of the step it held it.
    pub share: f64,
    /// Its utilisation of what it was allocated (percent), from the vGPU monitor.
    pub util_pct: Option<f64>,
}

/// Per device UUID and grid cell, the holders HAMi names.
#[derive(Debug, Default)]
pub struct HamiShares {
    holders: Vec<Holder>,
    gpus: BTreeMap<String, Vec<Vec<HamiPart>>>,
    /// GPU-steps whose holders added up to more than the GPU (scaled down to it).
    pub scaled_steps: usize,
    /// Holder-steps without a utilisation of their own (the GPU's is used).
    pub without_util: usize,
    /// Holder-steps without the vGPU monitor's utilisation that launched no kernel in the step
    /// (`hami_container_last_kernel_elapsed_seconds` at least the step): idle, 0%.
    pub idle_by_kernel: usize,
}

/// One series' samples, its chunks joined, in time order.
type Joined<'a> = BTreeMap<(HamiMetric, &'a BTreeMap<String, String>), Vec<(i64, f64)>>;

impl HamiShares {
    /// The holders of each HAMi GPU on the grid `[from, from + cells x step)`, from the run's
    /// HAMi series (each chunk's answer, in any order).
    pub fn build(from: i64, step: i64, cells: usize, series: &[(HamiMetric, &Series)], cfg: &PrometheusConfig, rule: HamiShare) -> HamiShares {
        let mut out = HamiShares::default();
        if series.is_empty() {
            return out;
        }
        let mut joined: Joined = BTreeMap::new();
        for (m, s) in series {
            joined.entry((*m, &s.labels)).or_default().extend_from_slice(&s.samples);
        }
        for samples in joined.values_mut() {
            samples.sort_by_key(|x| x.0);
            samples.dedup_by_key(|x| x.0);
        }
        let workload = WorkloadLabels::new(&cfg.labels);
        let uuid_of = |l: &BTreeMap<String, String>| l.get("device_uuid").or_else(|| l.get("deviceuuid")).filter(|u| !u.is_empty()).cloned();
        // The holder as the scheduler names it: namespace and pod (its container is an index).
        let who = |l: &BTreeMap<String, String>| workload.holder(l).map(|(ns, pod, _)| (ns, pod, None::<String>));
        let mut memory_limit: BTreeMap<String, f64> = BTreeMap::new();
        for ((m, l), samples) in &joined {
            if *m == HamiMetric::MemoryLimit {
                if let (Some(u), Some(v)) = (uuid_of(l), samples.iter().map(|s| s.1).filter(|v| v.is_finite() && *v > 0.0).reduce(f64::max)) {
                    memory_limit.insert(u, v);
                }
            }
        }
        // Per (device, holder): its allocated cores and memory samples.
        type Alloc = (Vec<(i64, f64)>, Vec<(i64, f64)>);
        let mut allocs: BTreeMap<(String, Holder), Alloc> = BTreeMap::new();
        let mut utils: BTreeMap<(String, Holder), Vec<(i64, f64)>> = BTreeMap::new();
        let mut kernels: BTreeMap<(String, Holder), Vec<(i64, f64)>> = BTreeMap::new();
        for ((m, l), samples) in &joined {
            let (Some(uuid), Some(holder)) = (uuid_of(l), who(l)) else { continue };
            match m {
                HamiMetric::CoreAllocated => allocs.entry((uuid, holder)).or_default().0.extend_from_slice(samples),
                HamiMetric::MemoryAllocated => allocs.entry((uuid, holder)).or_default().1.extend_from_slice(samples),
                HamiMetric::ContainerUtil => utils.entry((uuid, holder)).or_default().extend_from_slice(samples),
                HamiMetric::LastKernel => kernels.entry((uuid, holder)).or_default().extend_from_slice(samples),
                HamiMetric::MemoryLimit => {}
            }
        }
        let lookback = cfg.lookback_secs as i64 * 1000;
        let to = from + cells as i64 * step;
        let mut idle_by_kernel = 0;
        for ((uuid, holder), (cores, memory)) in allocs {
            // The share at each scrape: the cores' samples, with the memory at the same scrape.
            let limit = memory_limit.get(&uuid).copied();
            let mem_at: BTreeMap<i64, f64> = memory.iter().copied().collect();
            let times: Vec<(i64, f64)> = if cores.is_empty() {
                memory.iter().map(|&(t, m)| (t, rule.of(None, limit.map(|l| m / l)))).collect()
            } else {
                cores.iter().map(|&(t, c)| (t, rule.of(Some(c), mem_at.get(&t).zip(limit).map(|(m, l)| m / l)))).collect()
            };
            if times.is_empty() {
                continue;
            }
            let h = out.holder_index(&holder);
            let util = utils.get(&(uuid.clone(), holder.clone()));
            let kernel = kernels.get(&(uuid.clone(), holder.clone()));
            let grid = out.gpus.entry(uuid).or_insert_with(|| vec![Vec::new(); cells]);
            let interval = super::prometheus::median_gap(&times).unwrap_or(step);
            for (i, &(t, share)) in times.iter().enumerate() {
                let prev = i.checked_sub(1).map(|j| times[j].0).filter(|p| t - p <= lookback);
                let next = times.get(i + 1).map(|n| n.0).filter(|n| n - t <= lookback);
                let a = prev.map_or(t - interval / 2, |p| p + (t - p) / 2).max(from);
                let b = next.map_or(t + interval / 2, |n| t + (n - t) / 2).min(to);
                let mut c = (a - from).div_euclid(step).max(0);
                while a < b && c < cells as i64 {
                    let (cs, ce) = (from + c * step, from + (c + 1) * step);
                    let part = (b.min(ce) - a.max(cs)) as f64 / step as f64;
                    if part <= 0.0 {
                        break;
                    }
                    let cell = &mut grid[c as usize];
                    let util_pct = util.and_then(|u| standing(u, cs, step, lookback)).map(|r| (r / share).clamp(0.0, 100.0));
                    // Without a utilisation of its own, a holder that launched no kernel for
                    // the step's length worked nothing in it (the GPU's utilisation is others').
                    let idle = util_pct.is_none() && kernel.and_then(|k| standing(k, cs, step, lookback)).is_some_and(|s| s * 1000.0 >= step as f64);
                    let util_pct = if idle { Some(0.0) } else { util_pct };
                    match cell.iter_mut().find(|p| p.holder == h) {
                        Some(p) => {
                            p.share += share * part;
                            idle_by_kernel += usize::from(idle && p.util_pct.is_none());
                            p.util_pct = p.util_pct.or(util_pct);
                        }
                        None => {
                            idle_by_kernel += usize::from(idle);
                            cell.push(HamiPart { holder: h, share: share * part, util_pct });
                        }
                    }
                    c += 1;
                }
            }
        }
        out.idle_by_kernel = idle_by_kernel;
        for grid in out.gpus.values_mut() {
            for cell in grid.iter_mut() {
                let total: f64 = cell.iter().map(|p| p.share).sum();
                if total > 1.0 + 1e-9 {
                    out.scaled_steps += 1;
                    for p in cell.iter_mut() {
                        p.share /= total;
                    }
                }
                out.without_util += cell.iter().filter(|p| p.util_pct.is_none()).count();
            }
        }
        out
    }

    fn holder_index(&mut self, holder: &Holder) -> u32 {
        match self.holders.iter().position(|h| h == holder) {
            Some(i) => i as u32,
            None => {
                self.holders.push(holder.clone());
                (self.holders.len() - 1) as u32
            }
        }
    }

    /// The holders HAMi names for GPU `uuid` in cell `c`; None where it names none.
    pub fn at(&self, uuid: &str, c: usize) -> Option<&[HamiPart]> {
        self.gpus.get(uuid).map(|g| g[c].as_slice()).filter(|parts| !parts.is_empty())
    }

    pub fn holder(&self, i: u32) -> &Holder {
        &self.holders[i as usize]
    }

    /// How many GPUs HAMi named holders on.
    pub fn gpus(&self) -> usize {
        self.gpus.len()
    }
}

/// The value standing in the step `[start, start + step)`: its first sample, else the last one
/// before it within the lookback.
fn standing(samples: &[(i64, f64)], start: i64, step: i64, lookback: i64) -> Option<f64> {
    let i = samples.partition_point(|s| s.0 < start);
    match samples.get(i) {
        Some(&(t, v)) if t < start + step => Some(v),
        _ => i.checked_sub(1).map(|j| samples[j]).filter(|&(t, _)| start - t <= lookback).map(|s| s.1),
    }
    .filter(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(pairs: &[(&str, &str)], samples: &[(i64, f64)]) -> Series {
        Series { labels: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), samples: samples.to_vec() }
    }

    /// Without the vGPU monitor's utilisation: a holder whose last kernel was at least a step
    /// ago at the step's scrape is idle there (0%); one that launched a kernel within the step
    /// has no utilisation of its own (the GPU's is used).
    #[test]
    fn a_holder_that_launched_no_kernel_for_a_step_is_idle_in_it() {
        let cfg = PrometheusConfig::default();
        let a = [("namespace", "a"), ("pod", "p1"), ("device_uuid", "GPU-1"), ("container_index", "0")];
        let cores = series(&a, &[(7_000, 25.0), (37_000, 25.0), (67_000, 25.0)]);
        let kernel =
            series(&[("namespace", "a"), ("pod", "p1"), ("device_uuid", "GPU-1"), ("container", "c")], &[(7_000, 3.0), (37_000, 33.0), (67_000, 63.0)]);
        let input = [(HamiMetric::CoreAllocated, &cores), (HamiMetric::LastKernel, &kernel)];
        let h = HamiShares::build(0, 30_000, 3, &input, &cfg, HamiShare::Max);
        let util = |c: usize| h.at("GPU-1", c).unwrap()[0].util_pct;
        assert_eq!((util(0), util(1), util(2)), (None, Some(0.0), Some(0.0)));
        assert_eq!((h.idle_by_kernel, h.without_util), (2, 1));
    }

    /// Two pods on one GPU at 25% and 50% cores, scraped every 30 s at +7 s; the second leaves
    /// after its scrape at 67 s. Steps of 30 s from 0.
    #[test]
    fn holders_take_their_share_for_the_part_of_the_step_they_held_it() {
        let cfg = PrometheusConfig::default();
        let a = [("namespace", "a"), ("pod", "p1"), ("device_uuid", "GPU-1"), ("container_index", "0")];
        let b = [("namespace", "b"), ("pod", "p2"), ("device_uuid", "GPU-1"), ("container_index", "0")];
        let s1 = series(&a, &[(7_000, 25.0), (37_000, 25.0), (67_000, 25.0), (97_000, 25.0)]);
        let s2 = series(&b, &[(7_000, 50.0), (37_000, 50.0), (67_000, 50.0)]);
        let lim = series(&[("device_uuid", "GPU-1")], &[(7_000, 80.0 * 1024.0 * 1024.0 * 1024.0)]);
        let util = series(&[("namespace", "b"), ("pod", "p2"), ("device_uuid", "GPU-1"), ("container", "c")], &[(5_000, 40.0)]);
        let input = [(HamiMetric::CoreAllocated, &s1), (HamiMetric::CoreAllocated, &s2), (HamiMetric::MemoryLimit, &lim), (HamiMetric::ContainerUtil, &util)];
        let h = HamiShares::build(0, 30_000, 4, &input, &cfg, HamiShare::Max);
        let share = |c: usize, pod: &str| h.at("GPU-1", c).unwrap().iter().find(|p| h.holder(p.holder).1 == pod).map_or(0.0, |p| p.share);
        // p1 from 7 - 15 s = -8 s (clipped to 0) on: whole steps at 25%, until 97 + 15 s.
        assert!((share(0, "p1") - 0.25).abs() < 1e-12 && (share(2, "p1") - 0.25).abs() < 1e-12);
        assert!((share(3, "p1") - 0.25 * 22.0 / 30.0).abs() < 1e-12, "{}", share(3, "p1"));
        // p2's last scrape at 67 s stands until 82 s: 22 s of step 2, nothing of step 3.
        assert!((share(2, "p2") - 0.5 * 22.0 / 30.0).abs() < 1e-12, "{}", share(2, "p2"));
        assert_eq!(share(3, "p2"), 0.0);
        // Its 40% of the GPU's work is 80% of its half.
        let p2 = h.at("GPU-1", 0).unwrap().iter().find(|p| h.holder(p.holder).1 == "p2").unwrap();
        assert_eq!(p2.util_pct, Some(80.0));
        assert_eq!(h.scaled_steps, 0);
        assert!(h.at("GPU-2", 0).is_none());
    }

    #[test]
    fn holders_beyond_the_gpu_are_scaled_down_together() {
        let cfg = PrometheusConfig::default();
        let gib = 1024.0 * 1024.0 * 1024.0;
        let a = [("namespace", "a"), ("pod", "p1"), ("device_uuid", "GPU-1")];
        let b = [("namespace", "a"), ("pod", "p2"), ("device_uuid", "GPU-1")];
        // p1: 80% cores, 10% memory; p2: 10% cores, 80% memory: 160% by the larger. Scraped at
        // 0 and 30 s, they stand over the whole step from 0.
        let (c1, m1) = (series(&a, &[(0, 80.0), (30_000, 80.0)]), series(&a, &[(0, 8.0 * gib), (30_000, 8.0 * gib)]));
        let (c2, m2) = (series(&b, &[(0, 10.0), (30_000, 10.0)]), series(&b, &[(0, 64.0 * gib), (30_000, 64.0 * gib)]));
        let lim = series(&[("device_uuid", "GPU-1")], &[(0, 80.0 * gib)]);
        let input = [
            (HamiMetric::CoreAllocated, &c1),
            (HamiMetric::MemoryAllocated, &m1),
            (HamiMetric::CoreAllocated, &c2),
            (HamiMetric::MemoryAllocated, &m2),
            (HamiMetric::MemoryLimit, &lim),
        ];
        let h = HamiShares::build(0, 30_000, 1, &input, &cfg, HamiShare::Max);
        let parts = h.at("GPU-1", 0).unwrap();
        let total: f64 = parts.iter().map(|p| p.share).sum();
        assert!((total - 1.0).abs() < 1e-12 && h.scaled_steps == 1, "{total}");
        let h = HamiShares::build(0, 30_000, 1, &input, &cfg, HamiShare::Cores);
        let total: f64 = h.at("GPU-1", 0).unwrap().iter().map(|p| p.share).sum();
        assert!((total - 0.9).abs() < 1e-12 && h.scaled_steps == 0, "by cores: {total}");
    }
}
