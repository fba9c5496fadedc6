//! DCGM exporter series -> `gpu_samples` rows on the lake's step grid, plus the `nodes`
//! inventory. One row per GPU (or MIG instance) per step, standing for `[ts, ts + step)`;
//! the holder is the pod labelled on the scrape inside that step; several pods on one GPU
//! (time-slicing) split it evenly. Energy comes from the counter's deltas (reset-aware, mJ),
//! else power x step; a MIG instance gets its share of its GPU's power and energy.

use std::collections::BTreeMap;
use arrow::array::RecordBatch;

use super::labels::{sane, LabelPick};
use super::prometheus::Series;
use crate::config::PrometheusConfig;
use crate::lake::rows::{GpuSampleRow, GpuSamplesBuilder};

/// Which DCGM field a series carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    Util,
    EngineActive,
    FbUsed,
    FbFree,
    Power,
    Energy,
    Temp,
    Xid,
}

impl Field {
    pub const ALL: [Field; 8] = [Field::Util, Field::EngineActive, Field::FbUsed, Field::FbFree, Field::Power, Field::Energy, Field::Temp, Field::Xid];

    /// The dcgm-exporter name of the field (the collector reads `metric`, which honours the config).
    pub fn default_name(self) -> &'static str {
        match self {
            Field::Util => "DCGM_FI_DEV_GPU_UTIL",
            Field::EngineActive => "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            Field::FbUsed => "DCGM_FI_DEV_FB_USED",
            Field::FbFree => "DCGM_FI_DEV_FB_FREE",
            Field::Power => "DCGM_FI_DEV_POWER_USAGE",
            Field::Energy => "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            Field::Temp => "DCGM_FI_DEV_GPU_TEMP",
            Field::Xid => "DCGM_FI_DEV_XID_ERRORS",
        }
    }

    /// dcgm-exporter's HELP text.
    pub fn help(self) -> &'static str {
        match self {
            Field::Util => "GPU utilization (in %).",
            Field::EngineActive => "Ratio of time the graphics engine is active.",
            Field::FbUsed => "Framebuffer memory used (in MiB).",
            Field::FbFree => "Framebuffer memory free (in MiB).",
            Field::Power => "Power draw (in W).",
            Field::Energy => "Total energy consumption since boot (in mJ).",
            Field::Temp => "GPU temperature (in C).",
            Field::Xid => "Value of the last XID error encountered.",
        }
    }

    pub fn metric(self, cfg: &PrometheusConfig) -> &str {
        let m = &cfg.metrics;
        match self {
            Field::Util => &m.gpu_util,
            Field::EngineActive => &m.engine_active,
            Field::FbUsed => &m.fb_used,
            Field::FbFree => &m.fb_free,
            Field::Power => &m.power,
            Field::Energy => &m.energy,
            Field::Temp => &m.temp,
            Field::Xid => &m.xid,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct UnitKey {
    node: String,
    uuid: String,
    gi: Option<i16>,
}

#[derive(Debug, Clone)]
struct UnitInfo {
    gpu_index: i16,
    model: String,
    profile: Option<String>,
    share: f64,
}

#[derive(Debug, Clone, Default)]
struct Cell {
    seen: bool,
    holders: Vec<(String, String, Option<String>)>,
    values: [Option<f64>; 8],
}

/// The fraction of a GPU a MIG profile holds: `3g.40gb` -> 3/7 (4 slices on an A30).
/// The compute slices of a MIG profile name ("3g.40gb" -> 3, "1g.10gb+me" -> 1).
pub fn parse_mig_slices(profile: &str) -> Option<u32> {
    let (n, rest) = profile.trim().split_once('g')?;
    let n: u32 = n.parse().ok()?;
    (n >= 1 && n <= 8 && rest.starts_with('.')).then_some(n)
}

pub fn mig_share(profile: &str, model: &str) -> f64 {
    let slices: f64 = profile.split('g').next().and_then(|n| n.parse().ok()).unwrap_or(7.0);
    let total = if model.contains("A30") { 4.0 } else { 7.0 };
    (slices / total).min(1.0)
}

/// Grid-aligned DCGM data for a window `[from, to)`.
pub struct DcgmGrid {
    from: i64,
    step: i64,
    cells: usize,
    units: BTreeMap<UnitKey, (UnitInfo, Vec<Cell>)>,
    /// Energy counter (mJ) per physical GPU uuid per cell, one cell past the window.
    energy: BTreeMap<String, Vec<Option<f64>>>,
}

impl DcgmGrid {
    pub fn new(from: i64, to: i64, step_s: u32) -> DcgmGrid {
        let step = step_s as i64 * 1000;
        DcgmGrid { from, step, cells: ((to - from) / step) as usize, units: BTreeMap::new(), energy: BTreeMap::new() }
    }

    /// Adds one query's series (samples may run one step past the window for energy).
    pub fn add(&mut self, field: Field, series: &[Series], cfg: &PrometheusConfig) {
        let ns_pick = LabelPick::for_response(&cfg.labels.namespace, series);
        let pod_pick = LabelPick::for_response(&cfg.labels.pod, series);
        let ctr_pick = LabelPick::for_response(&cfg.labels.container, series);
        let node_pick = LabelPick::plain(&cfg.labels.node);
        for s in series {
            let Some(uuid) = s.labels.get("UUID").or_else(|| s.labels.get("uuid")) else { continue };
            let node = node_pick.get(&s.labels).unwrap_or("").to_string();
            let model = s.labels.get("modelName").cloned().unwrap_or_default();
            let profile = s.labels.get("GPU_I_PROFILE").filter(|p| !p.is_empty()).cloned();
            let gi = s.labels.get("GPU_I_ID").and_then(|g| g.parse::<i16>().ok()).filter(|_| profile.is_some());
            let holder = match (ns_pick.get(&s.labels), pod_pick.get(&s.labels)) {
                (Some(ns), Some(pod)) => Some((ns.to_string(), pod.to_string(), ctr_pick.get(&s.labels).map(str::to_string))),
                _ => None,
            };
            if field == Field::Energy {
                let counters = self.energy.entry(uuid.clone()).or_insert_with(|| vec![None; self.cells + 1]);
                for &(t, v) in &s.samples {
                    let c = (t - self.from).div_euclid(self.step);
                    if (0..=self.cells as i64).contains(&c) && counters[c as usize].is_none() {
                        counters[c as usize] = sane(v);
                    }
                }
            }
            let key = UnitKey { node, uuid: uuid.clone(), gi };
            let cells = self.cells;
            let (_, grid) = self.units.entry(key).or_insert_with(|| {
                let share = profile.as_deref().map_or(1.0, |p| mig_share(p, &model));
                let info = UnitInfo { gpu_index: s.labels.get("gpu").and_then(|g| g.parse().ok()).unwrap_or(0), model: model.clone(), profile: profile.clone(), share };
                (info, vec![Cell::default(); cells])
            });
            for &(t, v) in &s.samples {
                let c = (t - self.from).div_euclid(self.step);
                if c < 0 || c >= cells as i64 {
                    continue;
                }
                let cell = &mut grid[c as usize];
                cell.seen = true;
                if let Some(h) = &holder {
                    if !cell.holders.contains(h) {
                        cell.holders.push(h.clone());
                    }
                }
                let slot = &mut cell.values[field as usize];
                if slot.is_none() {
                    *slot = sane(v);
                }
            }
        }
    }

    /// Number of grid cells with any DCGM sample.
    pub fn cells_seen(&self) -> usize {
        self.units.values().map(|(_, g)| g.iter().filter(|c| c.seen).count()).sum()
    }

    /// Rows for cells `[c0, c1)` of the grid (one day), in the table's schema.
    pub fn batch(&self, c0: usize, c1: usize) -> RecordBatch {
        let step_s = (self.step / 1000) as i32;
        let mut rows = GpuSamplesBuilder::new();
        for (key, (info, grid)) in &self.units {
            let counters = self.energy.get(&key.uuid);
            for c in c0..c1.min(self.cells) {
                let cell = &grid[c];
                if !cell.seen {
                    continue;
                }
                let v = |f: Field| cell.values[f as usize];
                let gpu_power = v(Field::Power);
                let gpu_energy_j = counters
                    .and_then(|e| match (e[c], e[c + 1]) {
                        (Some(a), Some(b)) if b >= a => Some((b - a) / 1000.0),
                        _ => None, // a reset (driver reload) or a missing scrape
                    })
                    .or_else(|| gpu_power.map(|p| p * step_s as f64));
                let utilisation = v(Field::Util).or_else(|| v(Field::EngineActive).map(|r| r * 100.0));
                let total = match (v(Field::FbUsed), v(Field::FbFree)) {
                    (Some(u), Some(f)) => Some(u + f),
                    _ => None,
                };
                let holders: Vec<Option<&(String, String, Option<String>)>> =
                    if cell.holders.is_empty() { vec![None] } else { cell.holders.iter().map(Some).collect() };
                let row_share = info.share / holders.len() as f64;
                for h in holders {
                    rows.push(&GpuSampleRow {
                        ts: self.from + c as i64 * self.step,
                        step_s,
                        node: &key.node,
                        gpu_uuid: &key.uuid,
                        gpu_index: info.gpu_index,
                        gpu_model: &info.model,
                        mig_profile: info.profile.as_deref(),
                        gpu_instance_id: key.gi,
                        namespace: h.map(|h| h.0.as_str()),
                        pod: h.map(|h| h.1.as_str()),
                        container: h.and_then(|h| h.2.as_deref()),
                        share: row_share,
                        util_pct: utilisation.map(|u| u as f32),
                        mem_used_mib: v(Field::FbUsed).map(|x| x as f32),
                        mem_total_mib: total.map(|x| x as f32),
                        power_w: gpu_power.map(|p| (p * row_share) as f32),
                        energy_j: gpu_energy_j.map(|e| e * row_share),
                        temp_c: v(Field::Temp).map(|x| x as f32),
                        xid: v(Field::Xid).map(|x| x as i32),
                    });
                }
            }
        }
        rows.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_shares() {
        assert!((mig_share("3g.40gb", "NVIDIA A100-SXM4-80GB") - 3.0 / 7.0).abs() < 1e-12);
        assert!((mig_share("1g.10gb", "NVIDIA H100 80GB HBM3") - 1.0 / 7.0).abs() < 1e-12);
        assert!((mig_share("2g.12gb", "NVIDIA A30") - 0.5).abs() < 1e-12);
    }

    fn s(labels: &[(&str, &str)], samples: &[(i64, f64)]) -> Series {
        Series { labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), samples: samples.to_vec() }
    }

    #[test]
    fn counter_reset_falls_back_to_power_and_pods_switch_cleanly() {
        let cfg = PrometheusConfig::default();
        let mut g = DcgmGrid::new(0, 90_000, 30);
        let gpu = [("UUID", "GPU-1"), ("Hostname", "n1"), ("modelName", "NVIDIA L4"), ("gpu", "0")];
        fn with_pod<'a>(gpu: &[(&'a str, &'a str)], p: &'a str) -> Vec<(&'a str, &'a str)> {
            let mut v = gpu.to_vec();
            v.extend([("namespace", "a"), ("pod", p)]);
            v
        }
        // pod p1 at 0 and 30 s, pod p2 at 60 s: no cell has both.
        g.add(Field::Util, &[s(&with_pod(&gpu, "p1"), &[(0, 50.0), (30_000, 60.0)]), s(&with_pod(&gpu, "p2"), &[(60_000, 70.0)])], &cfg);
        g.add(Field::Power, &[s(&gpu, &[(0, 100.0), (30_000, 100.0), (60_000, 100.0)])], &cfg);
        // 3000 J in the first step, then a reset, then 3300 J.
        g.add(Field::Energy, &[s(&gpu, &[(0, 1_000_000.0), (30_000, 4_000_000.0), (60_000, 0.0), (90_000, 3_300_000.0)])], &cfg);
        let b = g.batch(0, 3);
        assert_eq!(b.num_rows(), 3);
        let e = b.column_by_name("energy_j").unwrap().as_any().downcast_ref::<arrow::array::Float64Array>().unwrap();
        assert_eq!(e.values().to_vec(), vec![3000.0, 3000.0, 3300.0], "reset cell priced at power x step");
    }
}
