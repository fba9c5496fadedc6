//! The completeness report's counts of a day: kept in the `gpu_buckets` rollup's metadata,
//! and folded from the samples for a day without a current one.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;

use arrow::array::{Array, Float32Array, Float64Array, Int16Array, Int32Array, RecordBatch, TimestampMillisecondArray};

use super::sums::{cluster_id, dict, ids, typed, BucketError};
use crate::domain::units::{DEFAULT_CLUSTER, UNMEASURED};
use crate::lake::intern::{row_id, Interner};

/// One day's completeness counts (as `queries/completeness.sql` computes them for a day).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Measured unit-steps: a whole GPU's row at share 1 is one, the parts of a step split
    /// between holders (and MIG instances, time-sliced pods) count once per (unit, step).
    pub gpu_rows: i64,
    /// Of those, the ones with a utilisation value.
    pub util_rows: i64,
    /// Of those, the ones with an energy value (a counter delta, or power x step): the rest
    /// (no reading, NaN, Inf, a blank) bill no energy, and say so in completeness.
    #[serde(default)]
    pub energy_rows: i64,
    /// GPUs or MIG instances with any row (`__unmeasured__` ones included).
    pub units: i64,
    /// Unit-steps the pool held: every (unit, step) with a row, measured or `__unmeasured__`
    /// (a GPU exists while DCGM reports it or its node's capacity names it: an autoscaled node's
    /// GPUs before it joined or after it left, a replaced board's old UUID after the swap, have
    /// no rows). What `gpu_rows` is measured against.
    pub unit_steps: i64,
    /// The smallest step of any row.
    pub step_s: i64,
    /// The day's first and last row time (ms) and how many units have a row at each: a day
    /// collected only in part (a collect that has not reached the day's end yet, or started
    /// late) is measured against the pool at its edge for the steps it lacks.
    pub first_ms: i64,
    pub last_ms: i64,
    pub units_at_first: i64,
    pub units_at_last: i64,
}

#[derive(Default)]
struct CountsAcc {
    whole: i64,
    whole_util: i64,
    whole_energy: i64,
    /// Whole-GPU rows of `__unmeasured__`: unit-steps that existed without a sample.
    whole_unmeasured: i64,
    /// Per (unit, step) of the rows under share 1: `SPLIT_*` bits.
    split: HashMap<(u32, i16, i64), u8>,
    /// Each unit's first and last row time.
    units: HashMap<(u32, i16), (i64, i64)>,
    step_s: Option<i32>,
}

impl CountsAcc {
    fn counts(&self) -> Counts {
        let count = |bit: u8| self.split.values().filter(|b| **b & bit != 0).count() as i64;
        let first_ms = self.units.values().map(|u| u.0).min().unwrap_or(0);
        let last_ms = self.units.values().map(|u| u.1).max().unwrap_or(0);
        Counts {
            gpu_rows: self.whole + count(SPLIT_MEASURED),
            util_rows: self.whole_util + count(SPLIT_UTIL),
            energy_rows: self.whole_energy + count(SPLIT_ENERGY),
            units: self.units.len() as i64,
            unit_steps: self.whole + self.whole_unmeasured + self.split.len() as i64,
            step_s: self.step_s.map_or(0, i64::from),
            first_ms,
            last_ms,
            units_at_first: self.units.values().filter(|u| u.0 == first_ms).count() as i64,
            units_at_last: self.units.values().filter(|u| u.1 == last_ms).count() as i64,
        }
    }
}

/// A split unit-step has a measured row.
const SPLIT_MEASURED: u8 = 1;
/// A split unit-step has a measured row with a utilisation value.
const SPLIT_UTIL: u8 = 2;
/// A split unit-step has a measured row with an energy value.
const SPLIT_ENERGY: u8 = 4;

/// A day's `Counts` in all and per cluster (`--cluster`), folded from its rows.
#[derive(Default)]
pub struct DayCounts {
    all: CountsAcc,
    by_cluster: HashMap<u32, CountsAcc>,
}

/// A day's counts as stored in its GPU rollup's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct StoredCounts {
    pub all: Counts,
    pub by_cluster: BTreeMap<String, Counts>,
}

impl StoredCounts {
    /// The counts of `cluster`, or of every cluster.
    pub fn of(&self, cluster: Option<&str>) -> Counts {
        match cluster {
            None => self.all,
            Some(c) => self.by_cluster.get(c).copied().unwrap_or_default(),
        }
    }
}

impl DayCounts {
    pub const COLUMNS: [&'static str; 7] = ["ts", "step_s", "cluster", "gpu_uuid", "gpu_instance_id", "namespace", "share"];
    const ALSO: [&'static str; 2] = ["util_pct", "energy_j"];

    /// Every column `add` reads.
    pub fn columns() -> Vec<&'static str> {
        Self::COLUMNS.iter().chain(Self::ALSO.iter()).copied().collect()
    }

    /// Folds the rows of `b` (from `path`, for messages) with `ts` in `[start_ms, end_ms)`.
    pub fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        let (cluster, uuid, ns) = (dict(b, path, "cluster")?, dict(b, path, "gpu_uuid")?, dict(b, path, "namespace")?);
        let (m, default) = ids(strings, &[&cluster, &uuid, &ns]);
        let unmeasured = strings.lock().expect("interner lock").id(UNMEASURED);
        let ts = typed::<TimestampMillisecondArray>(b, path, "ts")?;
        let step = typed::<Int32Array>(b, path, "step_s")?;
        let inst = typed::<Int16Array>(b, path, "gpu_instance_id")?;
        let share = typed::<Float64Array>(b, path, "share")?;
        let util = typed::<Float32Array>(b, path, "util_pct")?;
        let energy = typed::<Float64Array>(b, path, "energy_j")?;
        let DayCounts { all, by_cluster } = self;
        // Rows are sorted by cluster, node, GPU and instance: a unit's rows come together, so
        // its span is kept here and put in the maps once per unit, not per row.
        let mut span: Option<(u32, (u32, i16), i64, i64)> = None;
        fn keep(all: &mut CountsAcc, by_cluster: &mut HashMap<u32, CountsAcc>, span: Option<(u32, (u32, i16), i64, i64)>) {
            let Some((c, unit, first, last)) = span else { return };
            for acc in [all, by_cluster.entry(c).or_default()] {
                let e = acc.units.entry(unit).or_insert((first, last));
                (e.0, e.1) = (e.0.min(first), e.1.max(last));
            }
        }
        let mut per: Option<(u32, &mut CountsAcc)> = None;
        for i in 0..b.num_rows() {
            let t = ts.value(i);
            if t < start_ms || t >= end_ms {
                continue;
            }
            let c = cluster_id(&cluster, &m[0], i, default);
            let unit = (row_id(&uuid, &m[1], i), if inst.is_null(i) { i16::MIN } else { inst.value(i) });
            let measured = row_id(&ns, &m[2], i) != unmeasured;
            let (s, has_util, has_energy) = (step.value(i), util.is_valid(i), energy.is_valid(i));
            let whole = share.value(i) >= 1.0;
            match span.as_mut() {
                Some(x) if x.0 == c && x.1 == unit => (x.2, x.3) = (x.2.min(t), x.3.max(t)),
                _ => {
                    per = None;
                    keep(all, by_cluster, span.replace((c, unit, t, t)));
                }
            }
            if per.as_ref().is_none_or(|(pc, _)| *pc != c) {
                per = Some((c, by_cluster.entry(c).or_default()));
            }
            let cluster_acc = &mut *per.as_mut().expect("the row's cluster").1;
            for acc in [&mut *all, cluster_acc] {
                acc.step_s = Some(acc.step_s.map_or(s, |m| m.min(s)));
                match (whole, measured) {
                    (true, true) => {
                        acc.whole += 1;
                        acc.whole_util += i64::from(has_util);
                        acc.whole_energy += i64::from(has_energy);
                    }
                    (true, false) => acc.whole_unmeasured += 1,
                    (false, _) => {
                        let bits =
                            if measured { SPLIT_MEASURED | if has_util { SPLIT_UTIL } else { 0 } | if has_energy { SPLIT_ENERGY } else { 0 } } else { 0 };
                        *acc.split.entry((unit.0, unit.1, t)).or_default() |= bits;
                    }
                }
            }
        }
        keep(all, by_cluster, span);
        Ok(())
    }

    pub fn finish(&self, strings: &Interner) -> StoredCounts {
        StoredCounts {
            all: self.all.counts(),
            by_cluster: self.by_cluster.iter().map(|(c, acc)| (strings.name(*c).unwrap_or(DEFAULT_CLUSTER).to_string(), acc.counts())).collect(),
        }
    }
}

#[cfg(test)]
mod counts_tests {
    use super::*;
    use crate::lake::rows::{GpuSampleRow, GpuSamplesBuilder};

    /// Three GPUs over ten 30 s steps: A measured throughout; B on a node that joined at step 3
    /// and left after step 5; C measured but for steps 4 and 5, `__unmeasured__` there (its
    /// exporter down while its node's capacity still named it). B's missing steps are not
    /// expected (it did not exist); C's are. A has no energy at its first two steps.
    #[test]
    fn the_pool_is_what_existed() {
        let mut rows = GpuSamplesBuilder::new();
        let mut push = |uuid: &str, k: i64, ns: Option<&str>| {
            rows.push(&GpuSampleRow {
                ts: k * 30_000,
                step_s: 30,
                node: "n1",
                gpu_uuid: uuid,
                gpu_index: 0,
                gpu_model: "NVIDIA L4",
                mig_profile: None,
                gpu_instance_id: None,
                namespace: ns,
                pod: None,
                container: None,
                share: 1.0,
                util_pct: ns.filter(|n| *n != UNMEASURED).map(|_| 50.0),
                mem_used_mib: None,
                mem_total_mib: None,
                power_w: None,
                // A's first two steps read +Inf (stored as null): no energy there.
                energy_j: ns.filter(|n| *n != UNMEASURED && !(uuid == "GPU-A" && k < 2)).map(|_| 2100.0),
                temp_c: None,
                xid: None,
                counter_j: None,
            })
        };
        for k in 0..10 {
            push("GPU-A", k, Some("a"));
        }
        for k in 3..6 {
            push("GPU-B", k, Some("b"));
        }
        for k in 0..10 {
            push("GPU-C", k, Some(if (4..6).contains(&k) { UNMEASURED } else { "c" }));
        }
        let batch = crate::lake::rows::with_cluster(rows.finish(), "default");
        let strings = Mutex::new(Interner::default());
        let mut day = DayCounts::default();
        day.add(&strings, Path::new("day"), &batch, i64::MIN, i64::MAX).unwrap();
        let c = day.finish(&strings.into_inner().unwrap()).all;
        assert_eq!((c.gpu_rows, c.util_rows, c.energy_rows, c.units, c.unit_steps), (21, 21, 19, 3, 23), "{c:?}");
        assert_eq!((c.first_ms, c.last_ms, c.units_at_first, c.units_at_last), (0, 270_000, 2, 2), "{c:?}");
    }
}
