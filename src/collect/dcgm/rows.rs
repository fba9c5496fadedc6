//! The grid as `gpu_samples` rows, one day at a time: MIG instances, the unpartitioned rest of
//! a MIG GPU, time-slicing holders, and the pool's unmeasured and unknown rows.

#[allow(unused_imports)]
use super::*;
use crate::collect::hami::HamiPart;

impl DcgmGrid {
    /// Rows for cells `[c0, c1)` of the grid (one day), in the table's schema.
    ///
    /// A GPU with MIG instances in a step is capacity only through them: its own series (the
    /// parent, without `GPU_I_*`) is no unit of its own then, and lends its device-level values
    /// (power, temperature, XID) to instances that do not repeat them; where the instances do
    /// not fill the GPU, the rest is one unallocated row with the remaining share. Device-level
    /// values repeated on every instance are the GPU's, split by share, never summed.
    pub fn batch(&self, c0: usize, c1: usize) -> RecordBatch {
        let mut rows = GpuSamplesBuilder::new();
        let c1 = c1.min(self.cells);
        let keys: Vec<&UnitKey> = self.units.keys().collect();
        let mut i = 0;
        while i < keys.len() {
            let gpu = (&keys[i].node, &keys[i].uuid);
            let mut j = i;
            while j < keys.len() && (&keys[j].node, &keys[j].uuid) == gpu {
                j += 1;
            }
            self.gpu_rows(&keys[i..j], c0, c1, &mut rows);
            i = j;
        }
        self.unknown_gpu_rows(c0, c1, &mut rows);
        rows.finish()
    }

    /// The GPUs kube-state-metrics reports on a node beyond those DCGM showed there: unmeasured
    /// whole GPUs of unknown model, `unmeasured/<node>/<n>`, while the capacity says so.
    pub(super) fn unknown_gpu_rows(&self, c0: usize, c1: usize, rows: &mut GpuSamplesBuilder) {
        let step_s = (self.step / 1000) as i32;
        let no_values = Cell::default();
        for (node, cells) in &self.capacity {
            let known = self.known_gpus(node);
            let most = cells[c0..c1].iter().map(|c| c.0).max().unwrap_or(0);
            for n in known..most {
                let key = UnitKey { node: node.clone(), uuid: format!("unmeasured/{node}/{n}"), gi: None };
                let info = UnitInfo { gpu_index: n as i16, model: UNKNOWN_MODEL.to_string(), profile: None, share: 1.0 };
                for (c, cell) in cells.iter().enumerate().take(c1).skip(c0) {
                    if cell.0 > n {
                        self.push_rows(rows, &key, &info, None, 1.0, &no_values, None, None, &mut None, c, step_s, true);
                    }
                }
            }
        }
    }

    /// The rows of one physical GPU: its parent (or whole-GPU) unit first, then its instances.
    pub(super) fn gpu_rows(&self, keys: &[&UnitKey], c0: usize, c1: usize, rows: &mut GpuSamplesBuilder) {
        let parent = keys.iter().find(|k| k.gi.is_none()).map(|k| (*k, &self.units[*k]));
        let instances: Vec<(&UnitKey, &(UnitInfo, Vec<Cell>))> = keys.iter().filter(|k| k.gi.is_some()).map(|k| (*k, &self.units[*k])).collect();
        // The counters read at each step's start, the holes spanned: a measured step inside a
        // hole (the last sample standing over it for the lookback) takes its part of the
        // counter's delta across the hole too, so the GPU's steps add up to that delta.
        let counters = self.spanning.get(&keys[0].uuid).or_else(|| self.energy.get(&keys[0].uuid));
        let step_s = (self.step / 1000) as i32;
        // The counter's own energy of each step, for the GPU's first row of the step.
        let mut counted: Vec<Option<f64>> = match self.counter_steps.get(&keys[0].uuid) {
            Some(steps) => steps[c0..c1].iter().map(|&j| (!j.is_nan()).then_some(j as f64)).collect(),
            None => vec![None; c1 - c0],
        };
        let within = |k: &UnitKey, c: usize| self.spans.get(k).is_some_and(|&(a, b)| a <= c && c <= b);
        let node_capacity = self.capacity.get(&keys[0].node);
        // The GPU exists at step c: between its units' first and last sample, or while its node
        // reports GPU capacity (and no newer board has taken its place).
        let first_seen = keys.iter().filter_map(|k| self.spans.get(*k).map(|s| s.0)).min();
        let exists =
            |c: usize| keys.iter().any(|k| within(k, c)) || (node_capacity.is_some_and(|v| v[c].1) && self.capacity_covers(&keys[0].uuid, first_seen, c));
        // An instance silent at a step inside its own span while others of its GPU report.
        let silent = |c: usize| instances.iter().filter(move |(k, (_, g))| !g[c].seen && within(k, c));
        // The parent's row (whole GPU, or the unpartitioned rest of a MIG GPU), cell by cell.
        let whole_key = UnitKey { node: keys[0].node.clone(), uuid: keys[0].uuid.clone(), gi: None };
        let no_values = Cell::default();
        for c in c0..c1 {
            let mig_share: f64 = instances.iter().filter(|(_, (_, g))| g[c].seen).map(|(_, (info, _))| info.share).sum();
            let parent_cell = parent.map(|(_, (_, g))| &g[c]).filter(|cell| cell.seen);
            if mig_share > 0.0 {
                let rest = 1.0 - mig_share - silent(c).map(|(_, (info, _))| info.share).sum::<f64>();
                if rest <= 1e-9 {
                    continue;
                }
                // The unpartitioned rest: nobody's, device values from the parent or an instance.
                let device = parent_cell.or_else(|| instances.iter().map(|(_, (_, g))| &g[c]).find(|cell| cell.seen)).expect("an instance is seen");
                let info = parent.map_or_else(|| &instances[0].1 .0, |(_, (info, _))| info);
                let cell = Cell { seen: true, direct: true, holders: Vec::new(), values: device_values(&device.values), ..Cell::default() };
                self.push_rows(rows, &whole_key, info, None, rest, &cell, None, counters, &mut counted[c - c0], c, step_s, false);
            } else if let (Some((key, (info, _))), Some(cell), Some(parts)) = (parent, parent_cell, self.hami.at(&keys[0].uuid, c)) {
                self.push_hami_rows(rows, key, info, cell, parts, counters, &mut counted[c - c0], c, step_s);
            } else if let (Some((key, (info, _))), Some(cell)) = (parent, parent_cell) {
                self.push_rows(rows, key, info, info.profile.as_deref(), info.share, cell, None, counters, &mut counted[c - c0], c, step_s, false);
            } else if exists(c) {
                // Nothing of the GPU reported at this step, even after the lookback: its
                // instances where its MIG layout stands (their spans), else the whole GPU.
                let layout: Vec<_> = instances.iter().filter(|(k, _)| within(k, c)).collect();
                let mut rest = 1.0;
                for (key, (info, _)) in &layout {
                    self.push_rows(rows, key, info, info.profile.as_deref(), info.share, &no_values, None, counters, &mut counted[c - c0], c, step_s, true);
                    rest -= info.share;
                }
                if rest > 1e-9 {
                    let info = parent.map_or_else(|| &instances[0].1 .0, |(_, (info, _))| info);
                    self.push_rows(rows, &whole_key, info, None, rest, &no_values, None, counters, &mut counted[c - c0], c, step_s, true);
                }
            }
        }
        for (key, (info, grid)) in &instances {
            for c in c0..c1 {
                let cell = &grid[c];
                if cell.seen {
                    let parent_values = parent.map(|(_, (_, g))| &g[c]).filter(|p| p.seen).map(|p| &p.values);
                    self.push_rows(rows, key, info, info.profile.as_deref(), info.share, cell, parent_values, counters, &mut counted[c - c0], c, step_s, false);
                } else if within(key, c) && instances.iter().any(|(_, (_, g))| g[c].seen) {
                    self.push_rows(rows, key, info, info.profile.as_deref(), info.share, &no_values, None, counters, &mut counted[c - c0], c, step_s, true);
                }
            }
        }
    }

    /// One row per holder of `cell` (one without a holder when none), `share` split evenly;
    /// `unmeasured`: one row of namespace [`UNMEASURED`] (callers pass a cell without values and
    /// no parent, so its energy comes from the counters alone). `counted`: the GPU's step energy
    /// by its counter alone, taken by the first row pushed (`counter_j`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_rows(
        &self,
        rows: &mut GpuSamplesBuilder,
        key: &UnitKey,
        info: &UnitInfo,
        profile: Option<&str>,
        share: f64,
        cell: &Cell,
        parent: Option<&FieldValues>,
        counters: Option<&Vec<Option<f64>>>,
        counted: &mut Option<f64>,
        c: usize,
        step_s: i32,
        unmeasured: bool,
    ) {
        // A device-level field the instance's series lacks comes from its parent GPU's series.
        let v = |f: Field| cell.values[f].or_else(|| if DEVICE_FIELDS.contains(&f) { parent.and_then(|p| p[f]) } else { None });
        let gpu_energy_j = step_energy(counters, c, v(Field::Power), step_s);
        let total = fb_total(v(Field::FbUsed), v(Field::FbFree));
        let ts = self.from + c as i64 * self.step;
        let parts: Vec<(Option<&Held>, f64)> = if unmeasured { vec![(None, 1.0)] } else { cell.parts(ts, self.step) };
        // A part's own value, else the step's (its first scrape, or what stands over it).
        let part_value = |h: Option<&Held>, f: Field| h.and_then(|h| h.values[f]).or_else(|| v(f));
        let part_power = |h: Option<&Held>| part_value(h, Field::Power);
        // The step's energy split over its parts by time x each part's power where every part
        // has a power reading, else by time.
        let weights: Vec<f64> = if parts.len() > 1 && parts.iter().all(|(h, _)| part_power(*h).is_some()) {
            parts.iter().map(|(h, p)| p * part_power(*h).unwrap_or(0.0)).collect()
        } else {
            parts.iter().map(|(_, p)| *p).collect()
        };
        let weight_sum: f64 = weights.iter().sum();
        for ((held, part), weight) in parts.iter().zip(&weights) {
            let (held, part) = (*held, *part);
            let h = held.and_then(|x| x.holder.as_ref());
            let row_share = share * part;
            let energy_part = if weight_sum > 0.0 { weight / weight_sum } else { part };
            let utilisation = part_value(held, Field::Util).or_else(|| part_value(held, Field::EngineActive).map(|r| r * 100.0));
            rows.push(&GpuSampleRow {
                ts,
                step_s,
                node: &key.node,
                gpu_uuid: &key.uuid,
                gpu_index: info.gpu_index,
                gpu_model: &info.model,
                mig_profile: profile,
                gpu_instance_id: key.gi,
                namespace: if unmeasured { Some(UNMEASURED) } else { h.map(|h| h.0.as_str()) },
                pod: h.map(|h| h.1.as_str()),
                container: h.and_then(|h| h.2.as_deref()),
                share: row_share,
                util_pct: utilisation.map(|u| u as f32),
                mem_used_mib: v(Field::FbUsed).map(|x| x as f32),
                mem_total_mib: total.map(|x| x as f32),
                power_w: part_power(held).map(|p| (p * row_share) as f32),
                energy_j: gpu_energy_j.map(|e| e * share * energy_part),
                temp_c: v(Field::Temp).map(|x| x as f32),
                xid: v(Field::Xid).map(|x| x as i32),
                counter_j: counted.take(),
            });
        }
    }

    /// The rows of a GPU HAMi shares in cell `c`: one per holder its scheduler names, each its
    /// part of the GPU (`parts`) with that part of the energy and power, and its own
    /// utilisation where the vGPU monitor has one (else the GPU's); the rest of the GPU, if
    /// any, one row without a holder and without a utilisation of its own.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_hami_rows(
        &self,
        rows: &mut GpuSamplesBuilder,
        key: &UnitKey,
        info: &UnitInfo,
        cell: &Cell,
        parts: &[HamiPart],
        counters: Option<&Vec<Option<f64>>>,
        counted: &mut Option<f64>,
        c: usize,
        step_s: i32,
    ) {
        let v = |f: Field| cell.values[f];
        let energy = step_energy(counters, c, v(Field::Power), step_s);
        let gpu_util = v(Field::Util).or_else(|| v(Field::EngineActive).map(|r| r * 100.0));
        let ts = self.from + c as i64 * self.step;
        // Shares in whole microseconds of the step (GPU time is summed as integer GPU-us, each
        // row rounded), so the holders and the rest add up to the step exactly.
        let step_us = step_s as f64 * 1e6;
        let mut us: Vec<f64> = parts.iter().map(|p| (p.share * step_us).round()).collect();
        let over = us.iter().sum::<f64>() - step_us;
        if over > 0.0 {
            let largest = (0..us.len()).max_by(|&a, &b| us[a].total_cmp(&us[b])).expect("a holder");
            us[largest] -= over;
        }
        let rest_us = step_us - us.iter().sum::<f64>();
        let rest = (rest_us > 0.0).then_some(rest_us / step_us);
        let holders = parts.iter().zip(&us).map(|(p, u)| (Some(self.hami.holder(p.holder)), u / step_us, p.util_pct.or(gpu_util)));
        for (h, share, util) in holders.chain(rest.map(|r| (None, r, None))) {
            rows.push(&GpuSampleRow {
                ts,
                step_s,
                node: &key.node,
                gpu_uuid: &key.uuid,
                gpu_index: info.gpu_index,
                gpu_model: &info.model,
                mig_profile: None,
                gpu_instance_id: None,
                namespace: h.map(|h| h.0.as_str()),
                pod: h.map(|h| h.1.as_str()),
                container: h.and_then(|h| h.2.as_deref()),
                share,
                util_pct: util.map(|u| u as f32),
                mem_used_mib: v(Field::FbUsed).map(|x| x as f32),
                mem_total_mib: fb_total(v(Field::FbUsed), v(Field::FbFree)).map(|x| x as f32),
                power_w: v(Field::Power).map(|p| (p * share) as f32),
                energy_j: energy.map(|e| e * share),
                temp_c: v(Field::Temp).map(|x| x as f32),
                xid: v(Field::Xid).map(|x| x as i32),
                counter_j: counted.take(),
            });
        }
    }
}

/// A GPU's energy in cell `c` (J): the counter's delta where both ends are read and it did not
/// go back (a driver reload), else power x step.
fn step_energy(counters: Option<&Vec<Option<f64>>>, c: usize, power: Option<f64>, step_s: i32) -> Option<f64> {
    counters
        .and_then(|e| match (e[c], e[c + 1]) {
            (Some(a), Some(b)) if b >= a => Some((b - a) / 1000.0),
            _ => None, // a reset (driver reload) or a missing scrape
        })
        .or_else(|| power.map(|p| p * step_s as f64))
}

/// The framebuffer's size: used + free, where both are read.
fn fb_total(used: Option<f64>, free: Option<f64>) -> Option<f64> {
    Some(used? + free?)
}
