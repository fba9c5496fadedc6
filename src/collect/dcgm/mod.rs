//! DCGM exporter series -> `gpu_samples` rows on the lake's step grid, plus the `nodes`
//! inventory. One row per GPU (or MIG instance) per step, standing for `[ts, ts + step)`;
//! the holder is the pod labelled on the scrape inside that step; several pods on one GPU
//! (time-slicing) split it evenly. Energy comes from the counter's deltas (reset-aware, mJ),
//! else power x step; a MIG instance gets its share of its GPU's power and energy.

mod counters;
mod pool;
mod rows;

use std::collections::BTreeMap;

use arrow::array::RecordBatch;

use super::hami::HamiShares;
use super::labels::{sane, Holder, LabelPick, WorkloadLabels};

/// A sample's value as the lake keeps it: none for NaN, infinities, DCGM's blanks and values
/// the field cannot take (a negative or 10 kW power, a utilisation of 150 %).
fn reading(field: Field, v: f64) -> Option<f64> {
    sane(v).filter(|x| field.plausible(*x))
}
use super::prometheus::{median_gap, Series};
use crate::config::PrometheusConfig;
use crate::domain::dcgm_field::{Field, FieldValues};
use crate::domain::mig::mig_share;
use crate::domain::units::{UNKNOWN_MODEL, UNMEASURED};
use crate::lake::rows::{GpuSampleRow, GpuSamplesBuilder};

/// An energy counter is interpolated across a gap of at most this (or the lookback, if longer):
/// its delta is the energy used in the gap even where no other sample covers it, and a driver
/// reload that restarts the counter shows as a decrease (within an hour it cannot climb back
/// past the last value at GPU power).
const COUNTER_GAP_MAX_MS: i64 = 3_600_000;

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
    /// A sample of the unit falls in the step, or one stands over it (the lookback).
    seen: bool,
    /// A sample of the unit falls in the step itself: its holders are the step's, and no
    /// earlier series lingers into it.
    direct: bool,
    /// Who held the unit in the step, each with the first and last scrape inside the step
    /// that name it and the values of its first (`holder: None`: a series without a workload,
    /// the GPU free). Several scrapes in a step that name different holders split the step by
    /// time ([`Cell::parts`]): a pod that starts or ends inside a step has the part of it from
    /// its first scrape on, with its own utilisation and power.
    holders: Vec<Held>,
    values: FieldValues,
    /// The step's first scrape (ms), when `direct`: the values are its.
    first_ts: i64,
    /// The fields (bit per `Field`) whose value came from the step's first scrape.
    at_first: u8,
}

const _: () = assert!(Field::COUNT <= u8::BITS as usize, "Cell::at_first holds a bit per field");

#[derive(Debug, Clone)]
struct Held {
    holder: Option<Holder>,
    first: i64,
    last: i64,
    values: FieldValues,
}

impl Cell {
    fn hold(&mut self, holder: &Option<Holder>, t: i64, field: Field, v: Option<f64>) {
        let f = field;
        match self.holders.iter_mut().find(|h| &h.holder == holder) {
            Some(h) => {
                if t < h.first {
                    h.first = t;
                    h.values = FieldValues::default();
                }
                h.last = h.last.max(t);
                if t == h.first && h.values[f].is_none() {
                    h.values[f] = v;
                }
            }
            None => {
                let mut values = FieldValues::default();
                values[f] = v;
                // One holder in nearly every step: no room for four (a Vec's first growth).
                self.holders.reserve_exact(1);
                self.holders.push(Held { holder: holder.clone(), first: t, last: t, values });
            }
        }
    }

    /// The step `[start, start + step)` cut where a holder is first named (half-way from the
    /// scrape before), each piece going to
    /// the pods named both at or before its start and at or after it (the first piece from the
    /// step's start), shared evenly (time-sliced pods); where no pod is, to a series without a
    /// workload (the GPU free, with its values), else to nobody (`None`). Per holder: the
    /// fraction of the step.
    fn parts(&self, start: i64, step: i64) -> Vec<(Option<&Held>, f64)> {
        let mut cuts: Vec<i64> = self.holders.iter().map(|h| h.first).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut out: Vec<(Option<&Held>, f64)> = Vec::new();
        fn add<'a>(out: &mut Vec<(Option<&'a Held>, f64)>, h: Option<&'a Held>, part: f64) {
            let same = |x: &Option<&Held>| match (x, h) {
                (Some(a), Some(b)) => std::ptr::eq(*a, b),
                (None, None) => true,
                _ => false,
            };
            match out.iter_mut().find(|(x, _)| same(x)) {
                Some(e) => e.1 += part,
                None => out.push((h, part)),
            }
        }
        if cuts.is_empty() {
            add(&mut out, None, 1.0);
        }
        // A holder first named at `t` took over half-way between the scrape before and `t`:
        // the change happened somewhere in between.
        let boundary = |t: i64| {
            let before = self.holders.iter().map(|h| h.last).filter(|&l| l < t).max();
            before.map_or(t, |b| b + (t - b) / 2).clamp(start, start + step)
        };
        for (j, &t) in cuts.iter().enumerate() {
            let a = if j == 0 { start } else { boundary(t) };
            let b = cuts.get(j + 1).map_or(start + step, |&n| boundary(n));
            if b <= a {
                continue;
            }
            let part = (b - a) as f64 / step as f64;
            let standing = |h: &&Held| h.first <= t && t <= h.last;
            let pods: Vec<&Held> = self.holders.iter().filter(standing).filter(|h| h.holder.is_some()).collect();
            if pods.is_empty() {
                add(&mut out, self.holders.iter().filter(standing).find(|h| h.holder.is_none()), part);
            } else {
                let n = pods.len() as f64;
                for h in pods {
                    add(&mut out, Some(h), part / n);
                }
            }
        }
        out
    }
}

/// Grid-aligned DCGM data for a window `[from, to)`.
pub struct DcgmGrid {
    from: i64,
    step: i64,
    cells: usize,
    units: BTreeMap<UnitKey, (UnitInfo, Vec<Cell>)>,
    /// Energy counter (mJ) per physical GPU uuid per cell, one cell past the window.
    energy: BTreeMap<String, Vec<Option<f64>>>,
    /// When each of `energy`'s direct readings was scraped (ms; `i64::MAX`: none yet).
    energy_read_at: BTreeMap<String, Vec<i64>>,
    /// The same with the holes spanned ([`fill_counters`](Self::fill_counters)): what the
    /// `__unmeasured__` rows' energy is read from.
    spanning: BTreeMap<String, Vec<Option<f64>>>,
    /// Per physical GPU uuid per cell, its energy (J) by the counter's raw readings alone, NaN
    /// where they do not cover the whole step ([`fill_counters`](Self::fill_counters)): the
    /// rows' `counter_j`, the independent side of energy's conservation.
    counter_steps: BTreeMap<String, Vec<f32>>,
    /// The pool beyond what DCGM saw ([`set_pool`](Self::set_pool)): per node, per cell, the
    /// whole GPUs kube-state-metrics reports, and whether it reports GPU resources while DCGM
    /// measured none of the node's GPUs (its exporter down or not yet up).
    capacity: BTreeMap<String, Vec<(u32, bool)>>,
    /// First and last cell each unit was seen in.
    spans: BTreeMap<UnitKey, (usize, usize)>,
    /// Boards replaced in the window ([`set_pool`](Self::set_pool)), by UUID: the cell a new
    /// board (another UUID at the same node and index) was first seen in. The old board exists
    /// until then at most, whatever the node's capacity says.
    replaced_at: BTreeMap<String, usize>,
    /// UUIDs that replaced an earlier board at their node and index: they exist from their
    /// first sample, not before.
    successors: std::collections::BTreeSet<String>,
    /// The holders HAMi's scheduler names on the GPUs it shares ([`set_hami`](Self::set_hami)):
    /// where it names any, they are the step's holders, not DCGM's labels.
    hami: HamiShares,
}

/// What [`DcgmGrid::set_pool`] found about the pool, for the run's log.
#[derive(Debug, Clone, Default)]
pub struct PoolNote {
    /// Nodes kube-state-metrics reports GPUs on that no DCGM series names: (node, most GPUs).
    pub without_dcgm: Vec<(String, u32)>,
    /// kube-state-metrics' node names share none with DCGM's (`Hostname`): capacity not used.
    pub names_disagree: bool,
    /// Nodes whose `nvidia.com/gpu` capacity beyond DCGM's GPUs is always an exact multiple of
    /// them (a sharing layer's replicas: time-slicing without a rename): (node, DCGM's GPUs,
    /// most capacity). Their GPUs are DCGM's; no GPU of unknown model is added.
    pub multiplied: Vec<(String, u32, u32)>,
    /// Nodes kube-state-metrics reports GPU resources on, but no count of whole GPUs (HAMi's
    /// vGPUs, MIG or time-slicing resources only), that no DCGM series names: not in the pool.
    pub uncounted_without_dcgm: Vec<String>,
}

impl DcgmGrid {
    pub fn new(from: i64, to: i64, step_s: u32) -> DcgmGrid {
        let step = step_s as i64 * 1000;
        DcgmGrid {
            from,
            step,
            cells: ((to - from) / step) as usize,
            units: BTreeMap::new(),
            energy: BTreeMap::new(),
            energy_read_at: BTreeMap::new(),
            spanning: BTreeMap::new(),
            counter_steps: BTreeMap::new(),
            capacity: BTreeMap::new(),
            spans: BTreeMap::new(),
            replaced_at: BTreeMap::new(),
            successors: std::collections::BTreeSet::new(),
            hami: HamiShares::default(),
        }
    }

    /// The holders of the GPUs HAMi shares, from its own series.
    pub fn set_hami(&mut self, shares: HamiShares) {
        self.hami = shares;
    }

    /// Adds one query's series (samples may run one step past the window for energy).
    pub fn add(&mut self, field: Field, series: &[Series], cfg: &PrometheusConfig) {
        let workload = WorkloadLabels::new(&cfg.labels);
        let node_pick = LabelPick::plain(&cfg.labels.node);
        for s in series {
            let Some(uuid) = s.labels.get("UUID").or_else(|| s.labels.get("uuid")) else { continue };
            let node = node_pick.get(&s.labels).unwrap_or("").to_string();
            let model = s.labels.get("modelName").cloned().unwrap_or_default();
            let profile = s.labels.get("GPU_I_PROFILE").filter(|p| !p.is_empty()).cloned();
            let gi = s.labels.get("GPU_I_ID").and_then(|g| g.parse::<i16>().ok()).filter(|_| profile.is_some());
            let holder = workload.holder(&s.labels);
            if field == Field::Energy {
                // Per step, the counter of the GPU's first scrape in it (whichever series has it).
                let counters = self.energy.entry(uuid.clone()).or_insert_with(|| vec![None; self.cells + 1]);
                let read_at = self.energy_read_at.entry(uuid.clone()).or_insert_with(|| vec![i64::MAX; self.cells + 1]);
                for &(t, v) in &s.samples {
                    let c = (t - self.from).div_euclid(self.step);
                    if !(0..=self.cells as i64).contains(&c) {
                        continue;
                    }
                    let c = c as usize;
                    if let Some(x) = reading(field, v) {
                        if t < read_at[c] {
                            (counters[c], read_at[c]) = (Some(x), t);
                        }
                    }
                }
            }
            let key = UnitKey { node, uuid: uuid.clone(), gi };
            let cells = self.cells;
            let (_, grid) = self.units.entry(key).or_insert_with(|| {
                let share = profile.as_deref().map_or(1.0, |p| mig_share(p, &model));
                let info = UnitInfo {
                    gpu_index: s.labels.get("gpu").and_then(|g| g.parse().ok()).unwrap_or(0),
                    model: model.clone(),
                    profile: profile.clone(),
                    share,
                };
                (info, vec![Cell::default(); cells])
            });
            for &(t, v) in &s.samples {
                let c = (t - self.from).div_euclid(self.step);
                if c < 0 || c >= cells as i64 {
                    continue;
                }
                let cell = &mut grid[c as usize];
                let bit = 1u8 << field as u8;
                if !cell.direct || t < cell.first_ts {
                    // The step's first scrape so far: its holders replace those of later ones;
                    // values of later scrapes stay only as stand-ins for fields it lacks.
                    cell.seen = true;
                    cell.direct = true;
                    cell.first_ts = t;
                    cell.holders.clear();
                    cell.at_first = 0;
                }
                cell.hold(&holder, t, field, reading(field, v));
                if t == cell.first_ts {
                    if cell.at_first & bit == 0 {
                        if let Some(x) = reading(field, v) {
                            cell.values[field] = Some(x);
                            cell.at_first |= bit;
                        }
                    }
                } else if cell.values[field].is_none() {
                    cell.values[field] = reading(field, v);
                }
            }
        }
    }

    /// Prometheus' sample semantics on the grid, after every [`add`](Self::add): a sample stands
    /// until its series' next sample, for at most `prometheus.lookback_secs`; the last one of a
    /// series until its unit's next scrape within the lookback, else for its own scrape interval
    /// (the median gap between its samples, else `fallback_interval_ms`). A step no sample of its unit falls in takes the holders and
    /// values of the samples standing over its start; a step with a sample of its own keeps its
    /// holders (an ended series never lingers next to the next holder) and only takes values it
    /// lacks. Energy counters are read at each step's start by
    /// [`align_counters`](Self::align_counters); [`fill_counters`](Self::fill_counters) then
    /// spans the holes.
    /// `samples` are one series' samples (its chunks joined), in time order. Returns the steps
    /// filled.
    pub fn fill(
        &mut self,
        field: Field,
        labels: &BTreeMap<String, String>,
        samples: &[(i64, f64)],
        cfg: &PrometheusConfig,
        fallback_interval_ms: i64,
    ) -> usize {
        let Some(uuid) = labels.get("UUID").or_else(|| labels.get("uuid")) else { return 0 };
        let node = LabelPick::plain(&cfg.labels.node).get(labels).unwrap_or("").to_string();
        let profile = labels.get("GPU_I_PROFILE").filter(|p| !p.is_empty());
        let gi = labels.get("GPU_I_ID").and_then(|g| g.parse::<i16>().ok()).filter(|_| profile.is_some());
        let holder = WorkloadLabels::new(&cfg.labels).holder(labels);
        if samples.is_empty() {
            return 0;
        }
        let interval = median_gap(samples).unwrap_or(fallback_interval_ms);
        let lookback = cfg.lookback_secs as i64 * 1000;
        let (from, step, cells) = (self.from, self.step, self.cells as i64);
        let cell_of = |t: i64| (t - from).div_euclid(step);
        let mut filled = 0;
        let key = UnitKey { node, uuid: uuid.clone(), gi };
        let Some((_, grid)) = self.units.get_mut(&key) else { return 0 };
        for (i, &(t, v)) in samples.iter().enumerate() {
            let next = samples.get(i + 1).map(|s| s.0);
            let end = match next {
                Some(n) => n.min(t + lookback),
                // The series' last sample: it stands until its unit's next scrape (where a live
                // Prometheus writes the staleness marker), within the lookback; with no later
                // scrape of the unit at all, for the series' own interval.
                None => {
                    let next_scrape = (cell_of(t) + 1..cells).take_while(|&c| from + c * step < t + lookback).find(|&c| c >= 0 && grid[c as usize].direct);
                    match next_scrape {
                        Some(c) => from + c * step,
                        None => t + interval.min(lookback),
                    }
                }
            };
            let next_cell = next.map(cell_of);
            let mut c = cell_of(t) + 1;
            while c < cells && from + c * step < end && Some(c) != next_cell {
                if c >= 0 {
                    let cell = &mut grid[c as usize];
                    if !cell.direct {
                        if !cell.seen {
                            filled += 1;
                        }
                        cell.seen = true;
                        cell.hold(&holder, from + c * step, field, reading(field, v));
                    }
                    let slot = &mut cell.values[field];
                    if slot.is_none() {
                        *slot = reading(field, v);
                    }
                }
                c += 1;
            }
        }
        filled
    }

    /// Number of grid cells with any DCGM sample.
    pub fn cells_seen(&self) -> usize {
        self.units.values().map(|(_, g)| g.iter().filter(|c| c.seen).count()).sum()
    }
}

/// Fields that belong to the physical GPU, not to a MIG instance.
const DEVICE_FIELDS: [Field; 4] = [Field::Power, Field::Energy, Field::Temp, Field::Xid];

/// Only the device-level values of a cell (the unpartitioned rest of a MIG GPU runs nothing).
fn device_values(values: &FieldValues) -> FieldValues {
    let mut out = FieldValues::default();
    for f in DEVICE_FIELDS {
        out[f] = values[f];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

#[cfg(test)]
mod mig_tests {
    use super::*;
    use arrow::array::{AsArray, Float64Array};
    use arrow::datatypes::Float64Type;

    fn s(labels: &[(&str, &str)], samples: &[(i64, f64)]) -> Series {
        Series { labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), samples: samples.to_vec() }
    }

    const GPU: [(&str, &str); 4] = [("UUID", "GPU-M"), ("Hostname", "n1"), ("modelName", "NVIDIA A100-SXM4-80GB"), ("gpu", "0")];

    fn instance(profile: &'static str, gi: &'static str, pod: &'static str) -> Vec<(&'static str, &'static str)> {
        let mut v = GPU.to_vec();
        v.extend([("GPU_I_PROFILE", profile), ("GPU_I_ID", gi), ("namespace", "a"), ("pod", pod)]);
        v
    }

    fn shares_and_energy(b: &RecordBatch) -> (f64, f64, usize) {
        let share: f64 = b.column_by_name("share").unwrap().as_primitive::<Float64Type>().values().iter().sum();
        let e: f64 = b.column_by_name("energy_j").unwrap().as_any().downcast_ref::<Float64Array>().unwrap().iter().flatten().sum();
        let unallocated = b.column_by_name("namespace").unwrap().null_count();
        (share, e, unallocated)
    }

    /// Two steps of 30 s, 100 W and 3000 J a step: whatever the exporter's shape, the GPU is one
    /// GPU (2 GPU-steps) and 6000 J, never its instances plus itself.
    #[test]
    fn a_mig_gpu_is_counted_once_in_both_exporter_shapes() {
        let cfg = PrometheusConfig::default();
        let energy = [(0, 1_000_000.0), (30_000, 4_000_000.0), (60_000, 7_000_000.0)];
        let power = [(0, 100.0), (30_000, 100.0)];
        let active = [(0, 0.5), (30_000, 0.5)];
        // Device-level fields on the parent's own series (no GPU_I_*, no pod).
        let mut parent = DcgmGrid::new(0, 60_000, 30);
        parent.add(Field::EngineActive, &[s(&instance("3g.40gb", "1", "p1"), &active), s(&instance("4g.40gb", "2", "p2"), &active)], &cfg);
        parent.add(Field::Power, &[s(&GPU, &power)], &cfg);
        parent.add(Field::Energy, &[s(&GPU, &energy)], &cfg);
        parent.add(Field::Temp, &[s(&GPU, &[(0, 40.0), (30_000, 41.0)])], &cfg);
        let b = parent.batch(0, 2);
        assert_eq!(b.num_rows(), 4, "two instances x two steps, no row for the parent");
        let (share, e, unalloc) = shares_and_energy(&b);
        assert!((share - 2.0).abs() < 1e-12 && (e - 6000.0).abs() < 1e-9 && unalloc == 0, "{share} {e} {unalloc}");
        let watts: f64 = b.column_by_name("power_w").unwrap().as_primitive::<arrow::datatypes::Float32Type>().values().iter().map(|p| *p as f64).sum();
        assert!((watts - 200.0).abs() < 1e-3, "the parent's power split over its instances: {watts}");
        assert_eq!(b.column_by_name("temp_c").unwrap().null_count(), 0, "and its temperature");

        // Device-level fields repeated on every instance's series, with the GPU's value.
        let mut repeated = DcgmGrid::new(0, 60_000, 30);
        let both = |f: &[(i64, f64)]| vec![s(&instance("3g.40gb", "1", "p1"), f), s(&instance("4g.40gb", "2", "p2"), f)];
        repeated.add(Field::EngineActive, &both(&active), &cfg);
        repeated.add(Field::Power, &both(&power), &cfg);
        repeated.add(Field::Energy, &both(&energy), &cfg);
        let b = repeated.batch(0, 2);
        let (share, e, unalloc) = shares_and_energy(&b);
        assert!(b.num_rows() == 4 && (share - 2.0).abs() < 1e-12 && (e - 6000.0).abs() < 1e-9 && unalloc == 0, "{share} {e} {unalloc}");
    }

    /// One 3g.40gb instance on an A100 (3/7), the rest unpartitioned: the rest is an unallocated
    /// row of 4/7 with its share of the energy; then the GPU leaves MIG mode and is whole again.
    #[test]
    fn the_unpartitioned_rest_is_unallocated_and_a_switch_to_whole_mode_reads_right() {
        let cfg = PrometheusConfig::default();
        let mut g = DcgmGrid::new(0, 90_000, 30);
        g.add(Field::EngineActive, &[s(&instance("3g.40gb", "1", "p1"), &[(0, 0.9), (30_000, 0.9)])], &cfg);
        let mut whole = GPU.to_vec();
        whole.extend([("namespace", "b"), ("pod", "w1")]);
        g.add(Field::Util, &[s(&whole, &[(60_000, 80.0)])], &cfg);
        g.add(Field::Power, &[s(&GPU, &[(0, 70.0), (30_000, 70.0)]), s(&whole, &[(60_000, 300.0)])], &cfg);
        g.add(Field::Energy, &[s(&GPU, &[(0, 0.0), (30_000, 2_100_000.0), (60_000, 4_200_000.0)]), s(&whole, &[(90_000, 13_200_000.0)])], &cfg);
        let b = g.batch(0, 3);
        let (share, e, unalloc) = shares_and_energy(&b);
        assert!((share - 3.0).abs() < 1e-12, "three GPU-steps, not more: {share}");
        assert!((e - (2100.0 * 2.0 + 9000.0)).abs() < 1e-9, "{e}");
        assert_eq!(unalloc, 2, "the rest in each MIG step");
        let ns = b.column_by_name("namespace").unwrap();
        let ns = arrow::compute::cast(ns, &arrow::datatypes::DataType::Utf8).unwrap();
        let sh = b.column_by_name("share").unwrap().as_primitive::<Float64Type>();
        let util = b.column_by_name("util_pct").unwrap();
        for i in 0..b.num_rows() {
            if ns.is_null(i) {
                assert!((sh.value(i) - 4.0 / 7.0).abs() < 1e-12 && util.is_null(i), "the rest: 4/7, no utilisation");
            }
        }
        let whole_rows: Vec<usize> = (0..b.num_rows()).filter(|&i| ns.as_string::<i32>().value(i) == "b").collect();
        assert!(whole_rows.len() == 1 && sh.value(whole_rows[0]) == 1.0, "whole again after the switch");
    }
}

#[cfg(test)]
mod lookback_tests {
    use super::*;
    use arrow::array::{Array, AsArray, Float64Array};

    fn labels(pod: Option<&str>) -> BTreeMap<String, String> {
        let mut l: BTreeMap<String, String> =
            [("UUID", "GPU-1"), ("Hostname", "n1"), ("modelName", "NVIDIA L4"), ("gpu", "0")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if let Some(p) = pod {
            l.insert("namespace".into(), "a".into());
            l.insert("pod".into(), p.into());
        }
        l
    }

    /// Adds then fills, as `collect` does.
    fn grid(to_s: i64, step_s: u32, data: &[(Field, Option<&str>, Vec<(i64, f64)>)]) -> RecordBatch {
        let cfg = PrometheusConfig::default();
        let mut g = DcgmGrid::new(0, to_s * 1000, step_s);
        let series: Vec<(Field, Series)> =
            data.iter().map(|(f, pod, s)| (*f, Series { labels: labels(*pod), samples: s.iter().map(|(t, v)| (t * 1000, *v)).collect() })).collect();
        for (f, s) in &series {
            g.add(*f, std::slice::from_ref(s), &cfg);
        }
        for (f, s) in &series {
            g.fill(*f, &s.labels, &s.samples, &cfg, step_s as i64 * 1000);
        }
        let of = |field: Field| series.iter().filter(move |(f, _)| *f == field).map(|(_, s)| (&s.labels, s.samples.as_slice()));
        g.align_counters(of(Field::Energy), of(Field::Power), &cfg);
        g.fill_counters(of(Field::Energy), &cfg);
        g.batch(0, (to_s / step_s as i64) as usize)
    }

    fn pods(b: &RecordBatch) -> Vec<(i64, Option<String>)> {
        let ts = b.column_by_name("ts").unwrap().as_primitive::<arrow::datatypes::TimestampMillisecondType>();
        let pod = arrow::compute::cast(b.column_by_name("pod").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
        let pod = pod.as_string::<i32>();
        let mut out: Vec<_> = (0..b.num_rows()).map(|i| (ts.value(i) / 1000, pod.is_valid(i).then(|| pod.value(i).to_string()))).collect();
        out.sort();
        out
    }

    #[test]
    fn a_scrape_every_minute_covers_a_30_s_grid() {
        let b = grid(180, 30, &[(Field::Util, Some("p1"), vec![(0, 50.0), (60, 50.0), (120, 50.0)])]);
        let want: Vec<(i64, Option<String>)> = (0..6).map(|c| (c * 30, Some("p1".to_string()))).collect();
        assert_eq!(pods(&b), want, "every step held, the last for the series' own interval");
    }

    /// Scrapes every 15 s on a 60 s step: pod p1 at 0-30 s, the GPU free at 45-75 s, p2 from
    /// 90 s. Each step is split half-way between the scrapes either side of a change, each
    /// part with its own utilisation and power, the step's energy by power x time.
    #[test]
    fn several_scrapes_in_a_step_split_it_by_time() {
        let b = grid(
            120,
            60,
            &[
                (Field::Util, Some("p1"), vec![(0, 80.0), (15, 80.0), (30, 80.0)]),
                (Field::Util, None, vec![(45, 0.0), (60, 0.0), (75, 0.0)]),
                (Field::Util, Some("p2"), vec![(90, 40.0), (105, 40.0)]),
                (Field::Power, Some("p1"), vec![(0, 300.0), (15, 300.0), (30, 300.0)]),
                (Field::Power, None, vec![(45, 60.0), (60, 60.0), (75, 60.0)]),
                (Field::Power, Some("p2"), vec![(90, 200.0), (105, 200.0)]),
            ],
        );
        let pod = arrow::compute::cast(b.column_by_name("pod").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
        let pod = pod.as_string::<i32>();
        let ts = b.column_by_name("ts").unwrap().as_primitive::<arrow::datatypes::TimestampMillisecondType>();
        let col = |n: &str| b.column_by_name(n).unwrap().as_primitive::<arrow::datatypes::Float64Type>().clone();
        let (share, energy) = (col("share"), col("energy_j"));
        let util = b.column_by_name("util_pct").unwrap().as_primitive::<arrow::datatypes::Float32Type>().clone();
        let mut rows: Vec<(i64, String, f64, f32, f64)> = (0..b.num_rows())
            .map(|i| (ts.value(i) / 1000, if pod.is_valid(i) { pod.value(i).to_string() } else { "-".into() }, share.value(i), util.value(i), energy.value(i)))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let got: Vec<(i64, &str, f64, f32)> = rows.iter().map(|r| (r.0, r.1.as_str(), r.2, r.3)).collect();
        // p1 to 37.5 s (half-way 30-45), free to 82.5 s (half-way 75-90), p2 after.
        assert_eq!(got, vec![(0, "-", 0.375, 0.0), (0, "p1", 0.625, 80.0), (60, "-", 0.375, 0.0), (60, "p2", 0.625, 40.0)]);
        // No energy counter: power x step, split by power x time.
        let e0 = 300.0 * 37.5 + 60.0 * 22.5;
        assert!((rows[1].4 - 300.0 * 60.0 * (300.0 * 37.5 / e0)).abs() < 1e-6, "{rows:?}");
    }

    #[test]
    fn an_ended_series_does_not_linger_next_to_the_next_holder() {
        let b = grid(180, 30, &[(Field::Util, Some("p1"), vec![(0, 50.0), (60, 50.0)]), (Field::Util, Some("p2"), vec![(95, 70.0), (150, 70.0)])]);
        let p = |s: &str| Some(s.to_string());
        assert_eq!(pods(&b), vec![(0, p("p1")), (30, p("p1")), (60, p("p1")), (90, p("p2")), (120, p("p2")), (150, p("p2"))]);
    }

    /// Scrape interval and lake step are independent: 10, 15, 30, 60 and 120 s scrapes with
    /// jitter (a tenth of the interval) and an occasional missed scrape, on a 30 and a 60 s
    /// step. Pod p1 holds the GPU for the first hour, p2 for the second. Every step of the two
    /// hours is covered (the GPU time is the window's, exactly), and each pod's GPU time is its
    /// hour to within a scrape interval or a step, whichever is longer.
    #[test]
    fn any_scrape_interval_on_any_step_keeps_every_gpu_second() {
        for step in [30u32, 60] {
            for interval in [10i64, 15, 30, 60, 120] {
                let mut scrapes: Vec<(i64, f64)> = Vec::new();
                let (mut t, mut k) = (0i64, 0u64);
                while t < 7200 * 1000 {
                    k += 1;
                    // Deterministic jitter in [-interval/10, +interval/10] (none on the first), every
                    // 13th scrape missed (none of the last two).
                    let jitter = if k == 1 { 0 } else { ((k * 7919) % 21) as i64 - 10 };
                    let at = t + jitter * interval * 10;
                    let last_two = t + 2 * interval * 1000 >= 7_200_000;
                    if k % 13 != 0 || last_two {
                        scrapes.push((at, 50.0));
                    }
                    t += interval * 1000;
                }
                let (p1, p2): (Vec<_>, Vec<_>) = scrapes.iter().partition(|(t, _)| *t < 3_600_000);
                let cfg = PrometheusConfig::default();
                let mut g = DcgmGrid::new(0, 7_200_000, step);
                let series =
                    [(Field::Util, Series { labels: labels(Some("p1")), samples: p1 }), (Field::Util, Series { labels: labels(Some("p2")), samples: p2 })];
                for (f, se) in &series {
                    g.add(*f, std::slice::from_ref(se), &cfg);
                }
                for (f, se) in &series {
                    g.fill(*f, &se.labels, &se.samples, &cfg, step as i64 * 1000);
                }
                let b = g.batch(0, (7200 / step) as usize);
                let pod = arrow::compute::cast(b.column_by_name("pod").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
                let pod = pod.as_string::<i32>();
                let share = b.column_by_name("share").unwrap().as_primitive::<arrow::datatypes::Float64Type>().clone();
                let (mut held, mut total) = (BTreeMap::<String, f64>::new(), 0.0);
                for i in 0..b.num_rows() {
                    let secs = share.value(i) * step as f64;
                    total += secs;
                    *held.entry(if pod.is_valid(i) { pod.value(i).to_string() } else { "-".into() }).or_default() += secs;
                }
                let case = format!("{interval} s scrapes on a {step} s step: {held:?}");
                assert!((total - 7200.0).abs() < 1e-6, "every GPU-second of the window: {total} ({case})");
                // The switch moves by at most a scrape interval (an ended series stands until the
                // unit's next scrape) or a step (a step with one scrape is not split), plus jitter.
                let tolerance = interval.max(step as i64) as f64 * 1.1;
                for p in ["p1", "p2"] {
                    let got = held.get(p).copied().unwrap_or(0.0);
                    assert!((got - 3600.0).abs() <= tolerance, "{p} held {got} s, not its hour ({case})");
                }
            }
        }
    }

    #[test]
    fn a_gap_longer_than_the_lookback_stays_a_gap() {
        let b = grid(900, 30, &[(Field::Util, None, vec![(0, 0.0), (600, 0.0)])]);
        let steps: Vec<i64> = pods(&b).into_iter().map(|(t, _)| t).collect();
        // The sample at 0 s stands for the lookback (300 s), not until the next at 600 s; the
        // last stands for its series' interval (600 s) capped by the lookback: 600-900 s.
        let want: Vec<i64> = (0..10).chain(20..30).map(|c| c * 30).collect();
        assert_eq!(steps, want);
    }

    #[test]
    fn energy_between_two_scrapes_is_spread_over_the_steps() {
        let b = grid(60, 30, &[(Field::Util, Some("p1"), vec![(0, 50.0)]), (Field::Energy, Some("p1"), vec![(0, 0.0), (60, 6_000_000.0)])]);
        let e = b.column_by_name("energy_j").unwrap().as_any().downcast_ref::<Float64Array>().unwrap();
        assert_eq!(e.iter().collect::<Vec<_>>(), vec![Some(3000.0), Some(3000.0)]);
    }
}

#[cfg(test)]
mod pool_tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Float64Type;

    fn labels(uuid: &str, node: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut l: BTreeMap<String, String> = [("UUID", uuid), ("Hostname", node), ("modelName", "NVIDIA A100-SXM4-80GB"), ("gpu", "0")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        l
    }

    /// Adds, fills and closes the pool, as `collect` does; samples in seconds.
    fn grid(to_s: i64, series: &[(Field, BTreeMap<String, String>, Vec<(i64, f64)>)], capacity: BTreeMap<String, Vec<(u32, bool)>>) -> (RecordBatch, PoolNote) {
        let cfg = PrometheusConfig::default();
        let mut g = DcgmGrid::new(0, to_s * 1000, 30);
        let series: Vec<(Field, Series)> =
            series.iter().map(|(f, l, s)| (*f, Series { labels: l.clone(), samples: s.iter().map(|(t, v)| (t * 1000, *v)).collect() })).collect();
        for (f, s) in &series {
            g.add(*f, std::slice::from_ref(s), &cfg);
        }
        for (f, s) in &series {
            g.fill(*f, &s.labels, &s.samples, &cfg, 30_000);
        }
        let of = |field: Field| series.iter().filter(move |(f, _)| *f == field).map(|(_, s)| (&s.labels, s.samples.as_slice()));
        g.align_counters(of(Field::Energy), of(Field::Power), &cfg);
        g.fill_counters(of(Field::Energy), &cfg);
        let note = g.set_pool(capacity);
        (g.batch(0, (to_s / 30) as usize), note)
    }

    /// (namespace, share) of every row; namespace "" for none.
    fn rows(b: &RecordBatch) -> Vec<(String, f64)> {
        let ns = arrow::compute::cast(b.column_by_name("namespace").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
        let ns = ns.as_string::<i32>();
        let share = b.column_by_name("share").unwrap().as_primitive::<Float64Type>();
        (0..b.num_rows()).map(|i| (if ns.is_valid(i) { ns.value(i).to_string() } else { String::new() }, share.value(i))).collect()
    }

    fn gpu_steps(rows: &[(String, f64)], ns: &str) -> f64 {
        rows.iter().filter(|r| r.0 == ns).map(|r| r.1).sum()
    }

    /// A 30-minute window, one GPU scraped every 30 s except 300-900 s (its exporter down): the
    /// last sample before the hole (270 s) stands for the lookback, to 570 s; 570-900 s is
    /// `__unmeasured__`, with the energy the counter says was used; the pool is every step.
    #[test]
    fn a_hole_beyond_the_lookback_is_unmeasured_not_lost() {
        let times: Vec<i64> = (0..60).map(|k| k * 30).filter(|t| !(300..900).contains(t)).collect();
        let gpu = labels("GPU-1", "n1", &[("namespace", "a"), ("pod", "p")]);
        let util = times.iter().map(|&t| (t, 50.0)).collect();
        let energy = times.iter().map(|&t| (t, t as f64 * 100_000.0)).collect(); // 100 W
        let power = times.iter().map(|&t| (t, 100.0)).collect();
        let (b, _) = grid(1800, &[(Field::Util, gpu.clone(), util), (Field::Power, gpu.clone(), power), (Field::Energy, gpu, energy)], BTreeMap::new());
        let r = rows(&b);
        assert_eq!(r.len(), 60, "every step of the window once");
        assert_eq!(gpu_steps(&r, UNMEASURED), 11.0, "570-900 s");
        assert_eq!(gpu_steps(&r, "a"), 49.0);
        let e: f64 = b.column_by_name("energy_j").unwrap().as_primitive::<Float64Type>().iter().flatten().sum();
        // Counter deltas where two samples are at most the lookback apart, and across the hole
        // for its unmeasured rows; power x step where neither (the lookback's steps, the last).
        assert!((e - 100.0 * 1800.0).abs() < 1e-6, "100 W over the whole window, hole included: {e}");
    }

    /// The counter's own energy per step (`counter_j`), read from the raw readings: across the
    /// hole of 300-900 s (spanned), not across a reset at 1200 s (the step before it has no
    /// full coverage), nor after the last reading (1770 s). One row per step carries it, and
    /// on every step it covers it is what the rows say.
    #[test]
    fn each_step_carries_the_counters_own_energy_where_they_cover_it() {
        let times: Vec<i64> = (0..60).map(|k| k * 30).filter(|t| !(300..900).contains(t)).collect();
        let gpu = labels("GPU-1", "n1", &[("namespace", "a"), ("pod", "p")]);
        let util = times.iter().map(|&t| (t, 50.0)).collect();
        // 100 W; the driver reloaded at 1200 s (the counter starts again from 0).
        let energy = times.iter().map(|&t| (t, if t < 1200 { t } else { t - 1200 } as f64 * 100_000.0)).collect();
        let power = times.iter().map(|&t| (t, 100.0)).collect();
        let (b, _) = grid(1800, &[(Field::Util, gpu.clone(), util), (Field::Power, gpu.clone(), power), (Field::Energy, gpu, energy)], BTreeMap::new());
        let ts = b.column_by_name("ts").unwrap().as_primitive::<arrow::datatypes::TimestampMillisecondType>();
        let counter = b.column_by_name("counter_j").unwrap().as_primitive::<Float64Type>();
        let energy = b.column_by_name("energy_j").unwrap().as_primitive::<Float64Type>();
        let carried: Vec<i64> = (0..b.num_rows()).filter(|&i| counter.is_valid(i)).map(|i| ts.value(i) / 1000).collect();
        let want: Vec<i64> = (0..60).map(|c| c * 30).filter(|&t| t != 1170 && t != 1770).collect();
        assert_eq!(carried, want, "every step the readings cover whole, once");
        for i in (0..b.num_rows()).filter(|&i| counter.is_valid(i)) {
            assert!((counter.value(i) - 3000.0).abs() < 1e-6, "100 W x 30 s at {} s: {}", ts.value(i) / 1000, counter.value(i));
            assert!((energy.value(i) - counter.value(i)).abs() < 1e-6, "the rows' energy at {} s", ts.value(i) / 1000);
        }
        let sums = crate::lake::gpu_energy::EnergyByGpu::of(&b).take(None, "n1", "GPU-1");
        assert_eq!((sums.counter_energy_j, sums.counter_delta_j), (Some(58.0 * 3000.0), Some(58.0 * 3000.0)));
    }

    /// The exporter down from the window's start (before the GPU's first sample) and after its
    /// last: unmeasured while kube-state-metrics reports the node's GPUs. A node only
    /// kube-state-metrics knows gets its GPUs as unknown-model unmeasured ones.
    #[test]
    fn capacity_tells_the_pool_beyond_the_samples() {
        let gpu = labels("GPU-1", "n1", &[]);
        let util = (20..40).map(|k| (k * 30, 10.0)).collect(); // 600-1170 s
        let mut cap = BTreeMap::new();
        cap.insert("n1".to_string(), vec![(1, true); 60]);
        cap.insert("n2".to_string(), (0..60).map(|c| if c < 30 { (2, true) } else { (0, false) }).collect());
        // n3: GPU resources but no whole-GPU count (HAMi's vGPUs), and no DCGM: named, not counted.
        cap.insert("n3".to_string(), vec![(0, true); 60]);
        let (b, note) = grid(1800, &[(Field::Util, gpu, util)], cap);
        assert_eq!(note.uncounted_without_dcgm, vec!["n3".to_string()]);
        let r = rows(&b);
        assert_eq!(gpu_steps(&r, ""), 20.0, "600-1200 s measured (the last sample stands its interval)");
        assert_eq!(gpu_steps(&r, UNMEASURED), 40.0 + 2.0 * 30.0, "n1's other 40 steps, n2's two GPUs for 30 steps");
        assert_eq!(note.without_dcgm, vec![("n2".to_string(), 2)]);
        let model = arrow::compute::cast(b.column_by_name("gpu_model").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
        assert_eq!(model.as_string::<i32>().iter().filter(|m| *m == Some(UNKNOWN_MODEL)).count(), 60);
    }

    /// Capacity names nodes DCGM never does (another naming convention): not used at all. A
    /// fully qualified name on one side and the short one on the other are one node.
    #[test]
    fn capacity_under_other_node_names_is_ignored() {
        let gpu = labels("GPU-1", "n1", &[]);
        let mut cap = BTreeMap::new();
        cap.insert("node-1".to_string(), vec![(8, true); 60]);
        let (b, note) = grid(1800, &[(Field::Util, gpu.clone(), (0..60).map(|k| (k * 30, 1.0)).collect())], cap);
        assert!(note.names_disagree);
        assert_eq!(gpu_steps(&rows(&b), UNMEASURED), 0.0);
        let mut cap = BTreeMap::new();
        cap.insert("n1.cluster.local".to_string(), vec![(1, true); 60]);
        let (b, note) = grid(1800, &[(Field::Util, gpu, (0..30).map(|k| (k * 30, 1.0)).collect())], cap);
        assert!(!note.names_disagree && note.without_dcgm.is_empty(), "{note:?}");
        // n1's one known GPU after its last sample's step (steps 30-59), by its capacity.
        assert_eq!(gpu_steps(&rows(&b), UNMEASURED), 30.0);
    }

    /// Time-slicing without a rename: two GPUs DCGM reports, `nvidia.com/gpu: 8` (4 replicas
    /// each) is the two GPUs, not six more of unknown model; `nvidia.com/gpu: 3` is not a
    /// multiple of them, so the third is a GPU DCGM never showed.
    #[test]
    fn capacity_that_multiplies_the_gpus_is_a_sharing_layers() {
        let series: Vec<(Field, BTreeMap<String, String>, Vec<(i64, f64)>)> =
            ["0", "1"].iter().map(|ix| (Field::Util, labels(&format!("GPU-{ix}"), "n1", &[("gpu", ix)]), (0..60).map(|k| (k * 30, 5.0)).collect())).collect();
        let mut cap = BTreeMap::new();
        cap.insert("n1".to_string(), vec![(8, true); 60]);
        let (b, note) = grid(1800, &series, cap);
        assert_eq!(note.multiplied, vec![("n1".to_string(), 2, 8)]);
        assert_eq!(b.num_rows(), 2 * 60, "the two GPUs, nothing made up");
        let mut cap = BTreeMap::new();
        cap.insert("n1".to_string(), vec![(3, true); 60]);
        let (b, note) = grid(1800, &series, cap);
        assert!(note.multiplied.is_empty());
        assert_eq!(gpu_steps(&rows(&b), UNMEASURED), 60.0, "one GPU of unknown model");
    }

    /// A board replaced: GPU-1 at index 0 until 600 s, out until 900 s (capacity one GPU less,
    /// the node's other GPU reporting), then GPU-9 at index 0. Later the node's exporter is down
    /// 1200-1650 s while its capacity names 2 GPUs: the node's two GPUs then are GPU-9 and
    /// GPU-2, never the old board, and no GPU of unknown model makes up a third.
    #[test]
    fn a_replaced_board_is_two_gpus_each_for_its_own_time() {
        let old = labels("GPU-1", "n1", &[]);
        let new = labels("GPU-9", "n1", &[]);
        let other = labels("GPU-2", "n1", &[("gpu", "1")]);
        let up = |t: &i64| !(1200..1650).contains(t);
        let mut cap = BTreeMap::new();
        cap.insert("n1".to_string(), (0..60).map(|c| if (20..30).contains(&c) { (1, true) } else { (2, true) }).collect());
        let (b, _) = grid(
            1800,
            &[
                (Field::Util, old, (0..20).map(|k| (k * 30, 1.0)).collect()),
                (Field::Util, new, (30..60).map(|k| k * 30).filter(up).map(|t| (t, 1.0)).collect()),
                (Field::Util, other, (0..60).map(|k| k * 30).filter(up).map(|t| (t, 1.0)).collect()),
            ],
            cap,
        );
        let uuid = arrow::compute::cast(b.column_by_name("gpu_uuid").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
        let uuid = uuid.as_string::<i32>();
        let ns = arrow::compute::cast(b.column_by_name("namespace").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
        let ns = ns.as_string::<i32>();
        let count = |u: &str, unmeasured: bool| {
            (0..b.num_rows()).filter(|&i| uuid.value(i) == u && (ns.is_valid(i) && ns.value(i) == UNMEASURED) == unmeasured).count()
        };
        // GPU-1 0-600 s; the lookback stands the last samples before the hole to 1470 s.
        assert_eq!((count("GPU-1", false), count("GPU-1", true)), (20, 0), "the old board ends at its last sample's interval");
        assert_eq!(count("GPU-9", false) + count("GPU-9", true), 30, "the new board from 900 s, the outage unmeasured");
        assert_eq!(count("GPU-2", false) + count("GPU-2", true), 60);
        assert_eq!(count("GPU-9", true), count("GPU-2", true), "the hole beyond the lookback, for both GPUs there");
        assert!(count("GPU-2", true) > 0);
        assert_eq!(b.num_rows(), 20 + 30 + 60, "no unknown GPU: a replaced board and its successor are one slot");
    }

    /// One GPU of a node goes quiet for good while the other keeps reporting (removed, or
    /// repartitioned): not unmeasured. A MIG GPU whose exporter is down keeps its layout: each
    /// instance unmeasured at its share.
    #[test]
    fn a_removed_gpu_is_not_unmeasured_and_mig_keeps_its_layout() {
        let stays = labels("GPU-1", "n1", &[]);
        let gone = labels("GPU-2", "n1", &[]);
        let inst = |gi: &'static str, p: &'static str| labels("GPU-3", "n2", &[("GPU_I_PROFILE", p), ("GPU_I_ID", gi)]);
        let mig_times: Vec<i64> = (0..60).map(|k| k * 30).filter(|t| !(300..1200).contains(t)).collect();
        let mut cap = BTreeMap::new();
        cap.insert("n1".to_string(), vec![(2, true); 60]);
        cap.insert("n2".to_string(), vec![(0, true); 60]);
        let (b, _) = grid(
            1800,
            &[
                (Field::Util, stays, (0..60).map(|k| (k * 30, 1.0)).collect()),
                (Field::Util, gone, (0..20).map(|k| (k * 30, 1.0)).collect()),
                (Field::EngineActive, inst("1", "3g.40gb"), mig_times.iter().map(|&t| (t, 0.5)).collect()),
                (Field::EngineActive, inst("2", "4g.40gb"), mig_times.iter().map(|&t| (t, 0.5)).collect()),
            ],
            cap,
        );
        let r = rows(&b);
        let unmeasured: Vec<f64> = r.iter().filter(|x| x.0 == UNMEASURED).map(|x| x.1).collect();
        // n2's hole after the lookback, 570-1200 s: 21 steps x (3/7 + 4/7), as two rows a step.
        assert_eq!(unmeasured.len(), 42, "{r:?}");
        assert!((unmeasured.iter().sum::<f64>() - 21.0).abs() < 1e-9);
        assert!(unmeasured.iter().all(|s| (s - 3.0 / 7.0).abs() < 1e-12 || (s - 4.0 / 7.0).abs() < 1e-12));
        // GPU-1 every step; GPU-2 0-600 s (its last sample stands its interval), then gone; the
        // MIG instances measured 39 steps each (0-570 s, 1200-1800 s).
        assert_eq!(r.len(), 60 + 20 + 39 * 2 + 42);
    }
}
