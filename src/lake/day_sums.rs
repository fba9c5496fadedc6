//! The sums kept with each day file besides the chargeback's 15-minute GPU buckets (`buckets`),
//! so that a month's reports read days, not samples:
//! - `PendingSums`: `pending_samples` per cluster, namespace, priority class, GPU resource and
//!   15-minute bucket: pending pod-microseconds and GPU-microseconds (the queue's hourly demand
//!   and the quota review's pending GPU-seconds);
//! - `NamespaceGpus`: per cluster, namespace and 15-minute bucket, the seconds the namespace held
//!   each number of whole GPUs at once (the quota review's histogram: its shares at a step summed
//!   and rounded up, MIG slices left out);
//! - `UnallocatedUnits`: GPU time no pod held per GPU unit and bucket, split by the framebuffer
//!   use of rows with no utilisation (the idle report's unallocated GPUs and zombie memory);
//! - `DayCounts`: the day's measured unit-steps, those with a utilisation value, the units seen
//!   and the smallest step (the completeness report's row of the day), per cluster and in all.
//!
//! Each folds batches of rows inside a window (`add`), so the same code sums a day as the
//! writer publishes it (the stored rollup) and the days a report reads from their samples (no
//! current rollup, or a window edge inside a bucket): the two cannot differ. The same questions
//! in plain SQL over the samples are in `benches/sql/` (the tests' oracles).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{
    Array, ArrayRef, DictionaryArray, Float32Array, Float64Array, Int16Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};

use super::buckets::{dict, typed, BucketError, BucketSums, BUCKET_MS};
use super::intern::{row_id, Interner, NULL_ID};
use super::schema::{label_type, ts_type};
use crate::domain::units::{DEFAULT_CLUSTER, UNMEASURED};

/// Sums of rows folded batch by batch (one per thread, label ids from a shared interner) and
/// finished as one sorted batch: the same table whichever thread read which file.
pub trait DaySums: Default + Send {
    /// The source columns `add` reads.
    const COLUMNS: &'static [&'static str];
    /// Folds the rows of `b` (from `path`, for messages) with `ts` in `[start_ms, end_ms)`.
    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError>;
    /// Source rows folded in.
    fn rows(&self) -> u64;
    /// The parts' groups (folded from disjoint days) as one batch of the rollup's schema.
    fn finish(parts: &[Self], strings: &Interner) -> RecordBatch;
    /// Source rows a finished batch stands for.
    fn rows_of(batch: &RecordBatch) -> u64 {
        batch.column_by_name("n").and_then(|c| c.as_any().downcast_ref::<Int64Array>()).map_or(0, |n| n.values().iter().sum::<i64>() as u64)
    }
}

impl DaySums for BucketSums {
    const COLUMNS: &'static [&'static str] = &super::buckets::COLUMNS;
    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        BucketSums::add(self, strings, path, b, start_ms, end_ms)
    }
    fn rows(&self) -> u64 {
        self.rows
    }
    fn finish(parts: &[Self], strings: &Interner) -> RecordBatch {
        BucketSums::finish(parts, strings)
    }
}

/// Global ids of a batch's label column, and the id of the default cluster for a null cluster.
fn ids(strings: &Mutex<Interner>, cols: &[&DictionaryArray<Int32Type>]) -> (Vec<Vec<u32>>, u32) {
    let mut s = strings.lock().expect("interner lock");
    (cols.iter().map(|c| s.map_values(c)).collect(), s.id(DEFAULT_CLUSTER))
}

fn cluster_id(dict: &DictionaryArray<Int32Type>, ids: &[u32], row: usize, default: u32) -> u32 {
    match row_id(dict, ids, row) {
        NULL_ID => default,
        id => id,
    }
}

fn bucket_of(ts: i64) -> i64 {
    ts.div_euclid(BUCKET_MS) * BUCKET_MS
}

/// Labels as dictionaries over the interner's names (ids are the keys).
fn labels(names: &ArrayRef, ids: impl Iterator<Item = u32>) -> ArrayRef {
    let keys: Int32Array = ids.map(|id| (id != NULL_ID).then_some(id as i32)).collect();
    Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::clone(names)).expect("label ids index the names"))
}

fn names(strings: &Interner) -> ArrayRef {
    Arc::new((0..strings.len() as u32).map(|id| strings.name(id)).collect::<StringArray>())
}

fn rank(strings: &Interner) -> impl Fn(u32) -> u32 {
    let ranks = strings.ranks();
    move |id: u32| if id == NULL_ID { 0 } else { ranks[id as usize] }
}

// ---------------------------------------------------------------------------------------------
// Pending demand.

#[derive(Hash, PartialEq, Eq, Clone, Copy)]
struct PendingKey {
    cluster: u32,
    ns: u32,
    pc: u32,
    resource: u32,
    bucket: i64,
}

/// `pending_samples` summed per cluster, namespace, priority class, GPU resource and bucket.
#[derive(Default)]
pub struct PendingSums {
    groups: HashMap<PendingKey, [i64; 3]>,
    rows: u64,
}

/// A pending row's GPU-microseconds asked for: its GPUs (a HAMi pod's vGPUs, each its
/// `gpu_share_pct` of a GPU) over its step, rounded to the microsecond (exact for whole
/// percents).
fn pending_gpu_us(request: i32, share_pct: Option<f64>, us: i64) -> i64 {
    match share_pct {
        Some(pct) => (f64::from(request) * us as f64 * pct / 100.0).round() as i64,
        None => i64::from(request) * us,
    }
}

/// The pending rollup's columns: `pod_us` = SUM(step_s x 1e6), `gpu_us` = SUM(gpu_request x
/// (gpu_share_pct / 100, 1 where null) x step_s x 1e6, rounded per row) (divided by the
/// bucket's length, the average pending pods and GPUs asked for), `n` the rows.
pub fn pending_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("cluster", label_type(), false),
        Field::new("namespace", label_type(), true),
        Field::new("priority_class", label_type(), true),
        Field::new("gpu_resource", label_type(), true),
        Field::new("bucket", ts_type(), false),
        Field::new("pod_us", DataType::Int64, false),
        Field::new("gpu_us", DataType::Int64, false),
        Field::new("n", DataType::Int64, false),
    ]))
}

impl DaySums for PendingSums {
    const COLUMNS: &'static [&'static str] = &["ts", "step_s", "cluster", "namespace", "priority_class", "gpu_resource", "gpu_request", "gpu_share_pct"];

    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        let (cluster, ns, pc, res) = (dict(b, path, "cluster")?, dict(b, path, "namespace")?, dict(b, path, "priority_class")?, dict(b, path, "gpu_resource")?);
        let (m, default) = ids(strings, &[&cluster, &ns, &pc, &res]);
        let ts = typed::<TimestampMillisecondArray>(b, path, "ts")?;
        let step = typed::<Int32Array>(b, path, "step_s")?;
        let request = typed::<Int32Array>(b, path, "gpu_request")?;
        let share = typed::<Float64Array>(b, path, "gpu_share_pct")?;
        for i in 0..b.num_rows() {
            let t = ts.value(i);
            if t < start_ms || t >= end_ms {
                continue;
            }
            self.rows += 1;
            let key = PendingKey {
                cluster: cluster_id(&cluster, &m[0], i, default),
                ns: row_id(&ns, &m[1], i),
                pc: row_id(&pc, &m[2], i),
                resource: row_id(&res, &m[3], i),
                bucket: bucket_of(t),
            };
            let us = i64::from(step.value(i)) * 1_000_000;
            let g = self.groups.entry(key).or_default();
            g[0] += us;
            g[1] += pending_gpu_us(request.value(i), share.is_valid(i).then(|| share.value(i)), us);
            g[2] += 1;
        }
        Ok(())
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn finish(parts: &[Self], strings: &Interner) -> RecordBatch {
        let mut all: BTreeMap<PendingKey, [i64; 3]> = BTreeMap::new();
        for p in parts {
            for (k, v) in &p.groups {
                let e = all.entry(*k).or_default();
                (0..3).for_each(|i| e[i] += v[i]);
            }
        }
        let r = rank(strings);
        let mut rows: Vec<(PendingKey, [i64; 3])> = all.into_iter().collect();
        rows.sort_by_key(|(k, _)| (r(k.cluster), r(k.ns), r(k.pc), r(k.resource), k.bucket));
        let names = names(strings);
        let columns: Vec<ArrayRef> = vec![
            labels(&names, rows.iter().map(|(k, _)| k.cluster)),
            labels(&names, rows.iter().map(|(k, _)| k.ns)),
            labels(&names, rows.iter().map(|(k, _)| k.pc)),
            labels(&names, rows.iter().map(|(k, _)| k.resource)),
            Arc::new(super::schema::ts_array(rows.iter().map(|(k, _)| k.bucket).collect())),
            Arc::new(rows.iter().map(|(_, v)| v[0]).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|(_, v)| v[1]).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|(_, v)| v[2]).collect::<Int64Array>()),
        ];
        RecordBatch::try_new(pending_schema(), columns).expect("pending columns match their schema")
    }
}

impl PartialOrd for PendingKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for PendingKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.cluster, self.ns, self.pc, self.resource, self.bucket).cmp(&(o.cluster, o.ns, o.pc, o.resource, o.bucket))
    }
}

// ---------------------------------------------------------------------------------------------
// Whole GPUs held per namespace.

/// Rounding slack when a step's shares are summed: 0.999999 and 1.0000001 are one GPU.
const SHARE_SLACK: f64 = 0.000001;

/// Per cluster, namespace and step of the whole-GPU rows folded in: the shares summed and the
/// step's length; `finish` rounds each step up to whole GPUs and sums the seconds per bucket.
#[derive(Default)]
pub struct NamespaceGpus {
    steps: HashMap<(u32, u32, i64), (f64, i32)>,
    rows: u64,
}

/// The histogram rollup's columns: seconds the namespace held `gpus` whole GPUs at once within
/// the bucket, and `n` the steps.
pub fn namespace_gpus_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("cluster", label_type(), false),
        Field::new("namespace", label_type(), false),
        Field::new("bucket", ts_type(), false),
        Field::new("gpus", DataType::Int64, false),
        Field::new("seconds", DataType::Int64, false),
        Field::new("n", DataType::Int64, false),
    ]))
}

impl DaySums for NamespaceGpus {
    const COLUMNS: &'static [&'static str] = &["ts", "step_s", "cluster", "namespace", "mig_profile", "share"];

    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        let (cluster, ns, profile) = (dict(b, path, "cluster")?, dict(b, path, "namespace")?, dict(b, path, "mig_profile")?);
        let (m, default) = ids(strings, &[&cluster, &ns]);
        let unmeasured = strings.lock().expect("interner lock").id(UNMEASURED);
        let ts = typed::<TimestampMillisecondArray>(b, path, "ts")?;
        let step = typed::<Int32Array>(b, path, "step_s")?;
        let share = typed::<Float64Array>(b, path, "share")?;
        for i in 0..b.num_rows() {
            let t = ts.value(i);
            if t < start_ms || t >= end_ms || profile.is_valid(i) {
                continue;
            }
            let n = row_id(&ns, &m[1], i);
            if n == NULL_ID || n == unmeasured {
                continue;
            }
            self.rows += 1;
            let e = self.steps.entry((cluster_id(&cluster, &m[0], i, default), n, t)).or_insert((0.0, i32::MAX));
            e.0 += share.value(i);
            e.1 = e.1.min(step.value(i));
        }
        Ok(())
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn finish(parts: &[Self], strings: &Interner) -> RecordBatch {
        // (cluster, namespace, bucket, gpus) -> (seconds, steps)
        let mut hist: HashMap<(u32, u32, i64, i64), (i64, i64)> = HashMap::new();
        for p in parts {
            for (&(c, n, t), &(sum, step)) in &p.steps {
                let gpus = (sum - SHARE_SLACK).ceil() as i64;
                let e = hist.entry((c, n, bucket_of(t), gpus)).or_default();
                e.0 += i64::from(step);
                e.1 += 1;
            }
        }
        let r = rank(strings);
        let mut rows: Vec<((u32, u32, i64, i64), (i64, i64))> = hist.into_iter().collect();
        rows.sort_by_key(|((c, n, b, g), _)| (r(*c), r(*n), *b, *g));
        let names = names(strings);
        let columns: Vec<ArrayRef> = vec![
            labels(&names, rows.iter().map(|(k, _)| k.0)),
            labels(&names, rows.iter().map(|(k, _)| k.1)),
            Arc::new(super::schema::ts_array(rows.iter().map(|(k, _)| k.2).collect())),
            Arc::new(rows.iter().map(|(k, _)| k.3).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|(_, v)| v.0).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|(_, v)| v.1).collect::<Int64Array>()),
        ];
        RecordBatch::try_new(namespace_gpus_schema(), columns).expect("histogram columns match their schema")
    }

    fn rows_of(_batch: &RecordBatch) -> u64 {
        0
    }
}

// ---------------------------------------------------------------------------------------------
// The completeness report's counts of a day.

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

// ---------------------------------------------------------------------------------------------
// GPU time no pod held, per unit.

#[derive(Hash, PartialEq, Eq, Clone, Copy)]
struct UnitKey {
    cluster: u32,
    node: u32,
    model: u32,
    uuid: u32,
    gi: Option<i16>,
    profile: u32,
    bucket: i64,
    /// The row's framebuffer use where it is a zombie candidate (no utilisation, or 0 %).
    zombie_mem: Option<u32>,
}

#[derive(Clone, Copy)]
struct UnitSums {
    n: i64,
    gpu_us: i64,
    first: i64,
    last: i64,
}

/// `gpu_samples` rows no pod held (`namespace` null; not `__unmeasured__` pool time) summed per
/// GPU unit and bucket, and within it per framebuffer value of the rows with no or 0 %
/// utilisation: the idle report's unallocated GPU-hours (priced per unit and day) and zombie
/// memory (rows over `idle.zombie_mem_mib`, whatever it is set to).
#[derive(Default)]
pub struct UnallocatedUnits {
    groups: HashMap<UnitKey, UnitSums>,
    rows: u64,
}

pub fn unallocated_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("cluster", label_type(), false),
        Field::new("node", label_type(), false),
        Field::new("gpu_model", label_type(), false),
        Field::new("gpu_uuid", label_type(), false),
        Field::new("gpu_instance_id", DataType::Int16, true),
        Field::new("mig_profile", label_type(), true),
        Field::new("bucket", ts_type(), false),
        // The rows' mem_used_mib where utilisation was null or 0 (zombie candidates), else null.
        Field::new("zombie_mem_mib", DataType::Float32, true),
        Field::new("n", DataType::Int64, false),
        // SUM(ROUND(share x step_s x 1e6)), as gpu_time's gpu_us.
        Field::new("gpu_us", DataType::Int64, false),
        Field::new("first_ts", ts_type(), false),
        Field::new("last_ts", ts_type(), false),
    ]))
}

impl DaySums for UnallocatedUnits {
    const COLUMNS: &'static [&'static str] =
        &["ts", "step_s", "cluster", "node", "gpu_model", "gpu_uuid", "gpu_instance_id", "mig_profile", "namespace", "share", "util_pct", "mem_used_mib"];

    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        let (cluster, node, model, uuid, profile, ns) = (
            dict(b, path, "cluster")?,
            dict(b, path, "node")?,
            dict(b, path, "gpu_model")?,
            dict(b, path, "gpu_uuid")?,
            dict(b, path, "mig_profile")?,
            dict(b, path, "namespace")?,
        );
        let (m, default) = ids(strings, &[&cluster, &node, &model, &uuid, &profile]);
        let ts = typed::<TimestampMillisecondArray>(b, path, "ts")?;
        let step = typed::<Int32Array>(b, path, "step_s")?;
        let gi = typed::<Int16Array>(b, path, "gpu_instance_id")?;
        let share = typed::<Float64Array>(b, path, "share")?;
        let util = typed::<Float32Array>(b, path, "util_pct")?;
        let mem = typed::<Float32Array>(b, path, "mem_used_mib")?;
        for i in 0..b.num_rows() {
            let t = ts.value(i);
            if t < start_ms || t >= end_ms || ns.is_valid(i) {
                continue;
            }
            self.rows += 1;
            let zombie = (util.is_null(i) || util.value(i) == 0.0) && mem.is_valid(i);
            let key = UnitKey {
                cluster: cluster_id(&cluster, &m[0], i, default),
                node: row_id(&node, &m[1], i),
                model: row_id(&model, &m[2], i),
                uuid: row_id(&uuid, &m[3], i),
                gi: gi.is_valid(i).then(|| gi.value(i)),
                profile: row_id(&profile, &m[4], i),
                bucket: bucket_of(t),
                zombie_mem: zombie.then(|| mem.value(i).to_bits()),
            };
            // As the SQL: ROUND(share * step_s * 1e6), half away from zero.
            let us = (share.value(i) * f64::from(step.value(i)) * 1_000_000.0).round() as i64;
            let g = self.groups.entry(key).or_insert(UnitSums { n: 0, gpu_us: 0, first: t, last: t });
            g.n += 1;
            g.gpu_us += us;
            g.first = g.first.min(t);
            g.last = g.last.max(t);
        }
        Ok(())
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn finish(parts: &[Self], strings: &Interner) -> RecordBatch {
        let mut all: HashMap<UnitKey, UnitSums> = HashMap::new();
        for p in parts {
            for (k, v) in &p.groups {
                all.entry(*k)
                    .and_modify(|g| {
                        g.n += v.n;
                        g.gpu_us += v.gpu_us;
                        g.first = g.first.min(v.first);
                        g.last = g.last.max(v.last);
                    })
                    .or_insert(*v);
            }
        }
        let r = rank(strings);
        let mut rows: Vec<(UnitKey, UnitSums)> = all.into_iter().collect();
        rows.sort_by(|(a, _), (b, _)| {
            (r(a.cluster), r(a.node), r(a.model), r(a.uuid), a.gi, r(a.profile), a.bucket)
                .cmp(&(r(b.cluster), r(b.node), r(b.model), r(b.uuid), b.gi, r(b.profile), b.bucket))
                .then(a.zombie_mem.map(f32::from_bits).partial_cmp(&b.zombie_mem.map(f32::from_bits)).unwrap_or(std::cmp::Ordering::Equal))
                .then(a.zombie_mem.cmp(&b.zombie_mem))
        });
        let names = names(strings);
        let columns: Vec<ArrayRef> = vec![
            labels(&names, rows.iter().map(|(k, _)| k.cluster)),
            labels(&names, rows.iter().map(|(k, _)| k.node)),
            labels(&names, rows.iter().map(|(k, _)| k.model)),
            labels(&names, rows.iter().map(|(k, _)| k.uuid)),
            Arc::new(rows.iter().map(|(k, _)| k.gi).collect::<Int16Array>()),
            labels(&names, rows.iter().map(|(k, _)| k.profile)),
            Arc::new(super::schema::ts_array(rows.iter().map(|(k, _)| k.bucket).collect())),
            Arc::new(rows.iter().map(|(k, _)| k.zombie_mem.map(f32::from_bits)).collect::<Float32Array>()),
            Arc::new(rows.iter().map(|(_, v)| v.n).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|(_, v)| v.gpu_us).collect::<Int64Array>()),
            Arc::new(super::schema::ts_array(rows.iter().map(|(_, v)| v.first).collect())),
            Arc::new(super::schema::ts_array(rows.iter().map(|(_, v)| v.last).collect())),
        ];
        RecordBatch::try_new(unallocated_schema(), columns).expect("unallocated columns match their schema")
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
