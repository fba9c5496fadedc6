//! The `pending_buckets` rollup: `pending_samples` per cluster, namespace, priority class, GPU
//! resource and 15-minute bucket: pending pod-microseconds and GPU-microseconds (the queue's
//! hourly demand and the quota review's pending GPU-seconds). The same sums one level finer, per
//! pod too (`PendingSums<true>`), are the `pending_pod_buckets` rollup
//! (`pending_pod_buckets.rs`): the queue's pending demand by a key of each pod.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::kind::{DayRollup, Kind, RollupKind};
use super::sums::{bucket_of, cluster_id, columns_of, dict, ids, labels, names, rank, typed, whole_day, BucketError, DaySums};
use crate::lake::intern::{row_id, Interner, NULL_ID};
use crate::lake::schema::{label_type, ts_type, Table};

pub const KIND: Kind = &RollupKind {
    name: "pending_buckets",
    source: Table::PendingSamples,
    // 2: a HAMi pod's GPU-us weighted by its share (`gpu_share_pct`).
    version: 2,
    schema: pending_schema,
};

/// Its day: the sums over the whole day.
pub const ROLLUP: DayRollup = DayRollup { kinds: &[KIND], columns: columns_of::<PendingSums>, fold: whole_day::<PendingSums> };

#[derive(Hash, PartialEq, Eq, Clone, Copy)]
struct PendingKey {
    cluster: u32,
    ns: u32,
    /// The pod's id in the per-pod sums (`POD`), else always `NULL_ID`.
    pod: u32,
    pc: u32,
    resource: u32,
    bucket: i64,
}

/// `pending_samples` summed per cluster, namespace, priority class, GPU resource and bucket;
/// with `POD`, per pod too (the `pending_pod_buckets` rollup).
#[derive(Default)]
pub struct PendingSums<const POD: bool = false> {
    groups: HashMap<PendingKey, [i64; 3]>,
    /// Pending rows folded in.
    pub rows: u64,
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

/// `pending_schema()` with the pod after the namespace: the `pending_pod_buckets` rollup's.
pub fn pending_pod_schema() -> SchemaRef {
    let mut fields: Vec<Arc<Field>> = pending_schema().fields().iter().cloned().collect();
    fields.insert(2, Arc::new(Field::new("pod", label_type(), true)));
    Arc::new(Schema::new(fields))
}

/// The `pending_samples` columns the sums read (the pod's too with `POD`).
pub const COLUMNS: [&str; 8] = ["ts", "step_s", "cluster", "namespace", "priority_class", "gpu_resource", "gpu_request", "gpu_share_pct"];

impl DaySums for PendingSums<false> {
    const KIND: Kind = KIND;
    const COLUMNS: &'static [&'static str] = &COLUMNS;

    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        PendingSums::add(self, strings, path, b, start_ms, end_ms)
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn finish(parts: &[Self], strings: &Interner) -> RecordBatch {
        PendingSums::finish(parts, strings)
    }
}

impl<const POD: bool> PendingSums<POD> {
    /// Folds the rows of `b` (from `path`, for messages) with `ts` in `[start_ms, end_ms)`.
    pub fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        let (cluster, ns, pc, res) = (dict(b, path, "cluster")?, dict(b, path, "namespace")?, dict(b, path, "priority_class")?, dict(b, path, "gpu_resource")?);
        let pod = if POD { Some(dict(b, path, "pod")?) } else { None };
        let (m, default) = match &pod {
            Some(pod) => ids(strings, &[&cluster, &ns, &pc, &res, pod]),
            None => ids(strings, &[&cluster, &ns, &pc, &res]),
        };
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
                pod: pod.as_ref().map_or(NULL_ID, |p| row_id(p, &m[4], i)),
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

    /// The groups of `parts` (folded from disjoint days) as one batch of `pending_schema()` (with
    /// `POD`, `pending_pod_schema()`), sorted by the labels' text, then the bucket.
    pub fn finish(parts: &[Self], strings: &Interner) -> RecordBatch {
        let mut all: BTreeMap<PendingKey, [i64; 3]> = BTreeMap::new();
        for p in parts {
            for (k, v) in &p.groups {
                let e = all.entry(*k).or_default();
                (0..3).for_each(|i| e[i] += v[i]);
            }
        }
        let r = rank(strings);
        let mut rows: Vec<(PendingKey, [i64; 3])> = all.into_iter().collect();
        rows.sort_by_key(|(k, _)| (r(k.cluster), r(k.ns), r(k.pod), r(k.pc), r(k.resource), k.bucket));
        let names = names(strings);
        let mut columns: Vec<ArrayRef> = vec![
            labels(&names, rows.iter().map(|(k, _)| k.cluster)),
            labels(&names, rows.iter().map(|(k, _)| k.ns)),
            labels(&names, rows.iter().map(|(k, _)| k.pc)),
            labels(&names, rows.iter().map(|(k, _)| k.resource)),
            Arc::new(crate::lake::schema::ts_array(rows.iter().map(|(k, _)| k.bucket).collect())),
            Arc::new(rows.iter().map(|(_, v)| v[0]).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|(_, v)| v[1]).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|(_, v)| v[2]).collect::<Int64Array>()),
        ];
        if POD {
            columns.insert(2, labels(&names, rows.iter().map(|(k, _)| k.pod)));
            return RecordBatch::try_new(pending_pod_schema(), columns).expect("pending pod columns match their schema");
        }
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
        (self.cluster, self.ns, self.pod, self.pc, self.resource, self.bucket).cmp(&(o.cluster, o.ns, o.pod, o.pc, o.resource, o.bucket))
    }
}
