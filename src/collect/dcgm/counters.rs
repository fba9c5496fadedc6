//! Energy counters on the grid: each step's counter read at the step's start, interpolated
//! between scrapes with the power they read, and the holes spanned for `__unmeasured__` rows.

#[allow(unused_imports)]
use super::*;

/// A counter gap longer than [`COUNTER_GAP_MAX_MS`] is spanned where the power it implies is at
/// most this many times the most the GPU was seen to draw.
const LONG_GAP_POWER_FACTOR: f64 = 1.5;

impl DcgmGrid {
    /// The most power (W) each physical GPU was seen to draw in the window, by uuid.
    fn most_power(&self) -> BTreeMap<String, f64> {
        let mut out: BTreeMap<String, f64> = BTreeMap::new();
        for (k, (_, grid)) in &self.units {
            let most = grid.iter().filter_map(|c| c.values[Field::Power]).fold(0.0f64, f64::max);
            if most > 0.0 {
                let e = out.entry(k.uuid.clone()).or_insert(0.0);
                *e = e.max(most);
            }
        }
        out
    }

    /// Each step's energy counter read at the step's own start, after every
    /// [`fill`](Self::fill): between two scrapes of the GPU (at most a lookback apart, no reset
    /// between) the counter is interpolated with the power each scrape read, standing until
    /// half-way to the other (as the holders do, [`Cell::parts`]), so a step's energy is what
    /// the GPU used over the step itself and stays with the part of it that drew it.
    /// `energy` and `power` are the GPU's series of those fields.
    pub fn align_counters<'s>(
        &mut self,
        energy: impl IntoIterator<Item = (&'s BTreeMap<String, String>, &'s [(i64, f64)])>,
        power: impl IntoIterator<Item = (&'s BTreeMap<String, String>, &'s [(i64, f64)])>,
        cfg: &PrometheusConfig,
    ) {
        let merge = |series: &mut dyn Iterator<Item = (&'s BTreeMap<String, String>, &'s [(i64, f64)])>| {
            let mut by_gpu: BTreeMap<&'s str, Vec<(i64, f64)>> = BTreeMap::new();
            for (labels, samples) in series {
                let Some(uuid) = labels.get("UUID").or_else(|| labels.get("uuid")) else { continue };
                by_gpu.entry(uuid.as_str()).or_default().extend(samples.iter().filter_map(|&(t, v)| sane(v).map(|v| (t, v))));
            }
            for v in by_gpu.values_mut() {
                v.sort_by_key(|s| s.0);
                v.dedup_by_key(|s| s.0);
            }
            by_gpu
        };
        let energy = merge(&mut energy.into_iter());
        let power = merge(&mut power.into_iter());
        let lookback = cfg.lookback_secs as i64 * 1000;
        let (from, step, cells) = (self.from, self.step, self.cells as i64);
        let cell_of = |t: i64| (t - from).div_euclid(step);
        for (uuid, samples) in energy {
            let Some(counters) = self.energy.get_mut(uuid) else { continue };
            let watts = power.get(uuid);
            // The power read at `t` (or last before it), if any.
            let power_at = |t: i64| {
                let w = watts?;
                let i = w.partition_point(|s| s.0 <= t);
                (i > 0).then(|| w[i - 1].1)
            };
            for w in samples.windows(2) {
                let ((t0, e0), (t1, e1)) = (w[0], w[1]);
                if e1 < e0 || t1 <= t0 || t1 - t0 > lookback {
                    continue;
                }
                let mid = t0 + (t1 - t0) / 2;
                let (p0, p1) = match (power_at(t0), power_at(t1)) {
                    (Some(a), Some(b)) if a >= 0.0 && b >= 0.0 && a + b > 0.0 => (a, b),
                    _ => (1.0, 1.0),
                };
                let total = p0 * (mid - t0) as f64 + p1 * (t1 - mid) as f64;
                for c in (cell_of(t0) + 1).max(0)..=cell_of(t1).min(cells) {
                    let at = from + c * step;
                    let used = p0 * (at.min(mid) - t0) as f64 + p1 * (at - mid).max(0) as f64;
                    counters[c as usize] = Some(e0 + (e1 - e0) * used / total);
                }
            }
        }
    }

    /// The energy counters across holes, after every [`fill`](Self::fill), for the
    /// `__unmeasured__` rows: a physical GPU's counter is one series whatever labels its samples
    /// came under (a pod change starts a new label set, a MIG GPU repeats it on every instance),
    /// so the samples of all its energy series are merged in time order, and a step without a
    /// counter value takes the one interpolated between the samples either side, at most
    /// `max(lookback, 1 h)` apart (or further where the rise is a power the GPU could draw) and
    /// never across a decrease (a reset). The energy of an
    /// exporter outage is so kept, on its unmeasured rows and the steps its last sample stands
    /// over. Where [`align_counters`](Self::align_counters) read a step's counter (two scrapes
    /// at most a lookback apart) it is kept: read at each step's start with the power
    /// standing then (a plain linear interpolation across holder changes moved energy between
    /// pods and the unallocated row: +1.0% on `__unallocated__` with 57 s scrapes on a 30 s
    /// step, against +0.3% this way).
    ///
    /// Also each step's energy by the raw readings alone (`counter_steps`): the readings'
    /// deltas under the same rule, linear between consecutive readings, for the steps they
    /// cover whole.
    pub fn fill_counters<'s>(&mut self, series: impl IntoIterator<Item = (&'s BTreeMap<String, String>, &'s [(i64, f64)])>, cfg: &PrometheusConfig) {
        let mut by_gpu: BTreeMap<&str, Vec<(i64, f64)>> = BTreeMap::new();
        for (labels, samples) in series {
            let Some(uuid) = labels.get("UUID").or_else(|| labels.get("uuid")) else { continue };
            by_gpu.entry(uuid.as_str()).or_default().extend(samples.iter().filter_map(|&(t, v)| sane(v).map(|v| (t, v))));
        }
        let gap_max = (cfg.lookback_secs as i64 * 1000).max(COUNTER_GAP_MAX_MS);
        let (from, step, cells) = (self.from, self.step, self.cells as i64);
        let cell_of = |t: i64| (t - from).div_euclid(step);
        let most_power = self.most_power();
        for (uuid, mut samples) in by_gpu {
            let Some(mut counters) = self.energy.get(uuid).cloned() else { continue };
            samples.sort_by_key(|s| s.0);
            samples.dedup_by_key(|s| s.0);
            // A longer gap (an exporter down for hours) is spanned too where the counter's rise
            // is one the GPU could have drawn: at most 1.5 x the most power it was seen to draw.
            // A reset inside such a gap that climbed back past the last value can only make
            // the delta smaller than what was used, never larger.
            let plausible = |dt_ms: i64, delta_mj: f64| most_power.get(uuid).is_some_and(|w| delta_mj / dt_ms as f64 <= w * LONG_GAP_POWER_FACTOR);
            // The counter's own energy per step (mJ) and the part of the step its readings cover.
            let mut raw = vec![0.0f64; self.cells];
            let mut covered = vec![0i64; self.cells];
            for w in samples.windows(2) {
                let ((t0, v0), (t1, v1)) = (w[0], w[1]);
                if v1 < v0 || t1 <= t0 || (t1 - t0 > gap_max && !plausible(t1 - t0, v1 - v0)) {
                    continue;
                }
                for c in cell_of(t0).max(0)..=cell_of(t1 - 1).min(cells - 1) {
                    let start = from + c * step;
                    let part = (t1.min(start + step) - t0.max(start)).max(0);
                    raw[c as usize] += (v1 - v0) * part as f64 / (t1 - t0) as f64;
                    covered[c as usize] += part;
                }
                for c in (cell_of(t0) + 1).max(0)..cell_of(t1).min(cells + 1) {
                    let at = from + c * step;
                    if counters[c as usize].is_none() {
                        counters[c as usize] = Some(v0 + (v1 - v0) * (at - t0) as f64 / (t1 - t0) as f64);
                    }
                }
            }
            self.spanning.insert(uuid.to_string(), counters);
            let steps = raw.iter().zip(&covered).map(|(mj, &ms)| if ms == step { (mj / 1000.0) as f32 } else { f32::NAN }).collect();
            self.counter_steps.insert(uuid.to_string(), steps);
        }
    }
}
