//! The `namespace_gpus` rollup: per cluster, namespace and 15-minute bucket, the seconds the
//! namespace held each number of whole GPUs at once (the quota review's histogram: its shares at
//! a step summed and rounded up, MIG slices left out).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::kind::{DayRollup, Kind, RollupKind};
use super::sums::{bucket_of, cluster_id, columns_of, dict, ids, labels, names, rank, typed, whole_day, BucketError, DaySums};
use crate::domain::units::UNMEASURED;
use crate::lake::intern::{row_id, Interner, NULL_ID};
use crate::lake::schema::{label_type, ts_type, Table};

pub const KIND: Kind = &RollupKind {
    name: "namespace_gpus",
    source: Table::GpuSamples,
    // Bump on a change of meaning.
    version: 1,
    schema: namespace_gpus_schema,
};

/// Its day: the sums over the whole day.
pub const ROLLUP: DayRollup = DayRollup { kinds: &[KIND], columns: columns_of::<NamespaceGpus>, fold: whole_day::<NamespaceGpus> };

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
    const KIND: Kind = KIND;
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
            Arc::new(crate::lake::schema::ts_array(rows.iter().map(|(k, _)| k.2).collect())),
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
