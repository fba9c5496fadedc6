//! The `gpu_buckets` rollup: `gpu_samples` summed per 15-minute bucket: the grain the chargeback prices at.
//!
//! Pricing needs the rows only per namespace, node, GPU model, MIG profile and 15-minute bucket
//! (prices change at UTC midnights, the tariff per bucket), plus the row's `share` and `step_s`
//! so every per-row rounding can be redone exactly as `n x` the rounded value. The sums are made
//! twice over: by the lake's writer, once per day file, as the stored rollup (`rollup`), and by
//! the chargeback's pass over day files that have no current rollup (`lake::passes::gpu_buckets`).
//! Both fold batches into `BucketSums` here, so they cannot differ. The same in SQL is
//! `benches/sql/gpu_buckets.sql` (DuckDB's side of the benchmark, and the tests' oracle).
//!
//! The same fold one level finer, per pod (`BucketSums<true>`), is the `pod_buckets` rollup
//! (`pod_buckets.rs`): the chargeback's rows by a key of each pod are priced from it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{
    Array, ArrayRef, Date32Array, DictionaryArray, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use parquet::file::metadata::KeyValue;

use super::day_counts::DayCounts;
use super::kind::{DayFold, DayRollup, FoldError, Kind, RollupKind, Summed, KEY_DAY_COUNTS};
use super::sums::{dict, typed, BucketError, DaySums, BUCKET_MS};
use crate::lake::intern::{row_id, Interner, NULL_ID};
use crate::lake::schema::{label_type, ts_type, Table};

const DAY_MS: i64 = 86_400_000;

/// The `gpu_samples` columns the sums read.
pub const COLUMNS: [&str; 10] = ["ts", "step_s", "cluster", "node", "gpu_model", "mig_profile", "namespace", "share", "util_pct", "energy_j"];

pub const KIND: Kind = &RollupKind {
    name: "gpu_buckets",
    source: Table::GpuSamples,
    // 4: the day's completeness counts in the metadata; 5: with the unit-steps that existed
    // (`Counts::unit_steps`); 6: with those that carry energy.
    version: 6,
    schema,
};

/// One row per group: the table the chargeback's pricing SQL reads as `gpu_buckets`, and the
/// rollup files' schema.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        // A row of a file from before the cluster column is in cluster `default`.
        Field::new("cluster", label_type(), false),
        Field::new("namespace", label_type(), true),
        Field::new("node", label_type(), false),
        Field::new("gpu_model", label_type(), false),
        Field::new("mig_profile", label_type(), true),
        Field::new("bucket", ts_type(), false),
        // The bucket's UTC day (prices change at UTC midnights): pricing groups by it.
        Field::new("day", DataType::Date32, false),
        Field::new("share", DataType::Float64, false),
        Field::new("step_s", DataType::Int32, false),
        Field::new("n", DataType::Int64, false),
        Field::new("energy_mj", DataType::Int64, false),
        Field::new("util_gpu_us", DataType::Int64, false),
        // Rows with a utilisation value (a null one, stored for NaN, Inf or none scraped, is
        // GPU time but not utilisation): averages divide by their GPU time, not by all of it.
        Field::new("util_n", DataType::Int64, false),
    ]))
}

/// `schema()` with the pod after the namespace: the `pod_buckets` rollup's.
pub fn pod_schema() -> SchemaRef {
    let mut fields: Vec<Arc<Field>> = schema().fields().iter().cloned().collect();
    fields.insert(2, Arc::new(Field::new("pod", label_type(), true)));
    Arc::new(Schema::new(fields))
}

#[derive(Hash, PartialEq, Eq, Clone, Copy)]
struct Key {
    cluster: u32,
    ns: u32,
    /// The pod's id in the per-pod sums (`POD`), else always `NULL_ID`.
    pod: u32,
    node: u32,
    model: u32,
    profile: u32,
    bucket: i64,
    share: u64,
    step_s: i32,
}

#[derive(Default, Clone, Copy)]
struct Sums {
    n: i64,
    energy_mj: i64,
    util_gpu_us: i64,
    util_n: i64,
}

/// Per-group sums of the rows folded in (one per thread; label ids from a shared `Interner`);
/// with `POD`, per pod too (the `pod_buckets` rollup).
#[derive(Default)]
pub struct BucketSums<const POD: bool = false> {
    index: HashMap<Key, usize>,
    keys: Vec<Key>,
    sums: Vec<Sums>,
    /// GPU rows folded in.
    pub rows: u64,
}

impl<const POD: bool> BucketSums<POD> {
    /// Folds the rows of `b` (from `path`, for messages) with `ts` in `[start_ms, end_ms)`.
    pub fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        let (node, model, profile, ns) = (dict(b, path, "node")?, dict(b, path, "gpu_model")?, dict(b, path, "mig_profile")?, dict(b, path, "namespace")?);
        let cluster = dict(b, path, "cluster")?;
        let pod = if POD { Some(dict(b, path, "pod")?) } else { None };
        let (node_ids, model_ids, profile_ids, ns_ids, cluster_ids, pod_ids, default_cluster) = {
            let mut s = strings.lock().expect("interner lock");
            (
                s.map_values(&node),
                s.map_values(&model),
                s.map_values(&profile),
                s.map_values(&ns),
                s.map_values(&cluster),
                pod.as_ref().map(|p| s.map_values(p)),
                s.id(crate::domain::units::DEFAULT_CLUSTER),
            )
        };
        let ts = typed::<TimestampMillisecondArray>(b, path, "ts")?;
        let step = typed::<Int32Array>(b, path, "step_s")?;
        let share = typed::<Float64Array>(b, path, "share")?;
        let util = typed::<Float32Array>(b, path, "util_pct")?;
        let energy = typed::<Float64Array>(b, path, "energy_j")?;
        // Rows of a GPU are consecutive and in time order, so a group repeats ~30 times in a row.
        let mut cached: Option<(Key, usize)> = None;
        for i in 0..b.num_rows() {
            let t = ts.value(i);
            if t < start_ms || t >= end_ms {
                continue;
            }
            self.rows += 1;
            let share_v = share.value(i);
            let step_s = step.value(i);
            let key = Key {
                cluster: match row_id(&cluster, &cluster_ids, i) {
                    NULL_ID => default_cluster,
                    id => id,
                },
                ns: row_id(&ns, &ns_ids, i),
                pod: match (&pod, &pod_ids) {
                    (Some(p), Some(ids)) => row_id(p, ids, i),
                    _ => NULL_ID,
                },
                node: row_id(&node, &node_ids, i),
                model: row_id(&model, &model_ids, i),
                profile: row_id(&profile, &profile_ids, i),
                bucket: t.div_euclid(BUCKET_MS) * BUCKET_MS,
                share: share_v.to_bits(),
                step_s,
            };
            let at = match cached {
                Some((k, at)) if k == key => at,
                _ => {
                    let at = *self.index.entry(key).or_insert_with(|| {
                        self.keys.push(key);
                        self.sums.push(Sums::default());
                        self.keys.len() - 1
                    });
                    cached = Some((key, at));
                    at
                }
            };
            // As the SQL: ROUND(COALESCE(energy_j, 0) * 1000) and
            // ROUND(COALESCE(util_pct, 0) * share * step_s * 1e6), half away from zero.
            let e = if energy.is_null(i) { 0.0 } else { energy.value(i) };
            let u = if util.is_null(i) { 0.0 } else { util.value(i) as f64 };
            let s = &mut self.sums[at];
            s.n += 1;
            s.util_n += i64::from(util.is_valid(i));
            s.energy_mj += (e * 1000.0).round() as i64;
            s.util_gpu_us += (u * share_v * step_s as f64 * 1_000_000.0).round() as i64;
        }
        Ok(())
    }

    /// The groups of `parts` (folded from disjoint days, so disjoint groups) as one batch of
    /// `schema()`, sorted by the labels' text (nulls first), bucket, share and step: the same
    /// table every run, whatever thread read which file.
    pub fn finish(parts: &[BucketSums<POD>], strings: &Interner) -> RecordBatch {
        let mut all: Vec<(Key, Sums)> = parts.iter().flat_map(|g| g.keys.iter().copied().zip(g.sums.iter().copied())).collect();
        let rank = strings.ranks();
        let r = |id: u32| if id == NULL_ID { 0 } else { rank[id as usize] };
        all.sort_by_key(|(k, _)| (r(k.cluster), r(k.ns), r(k.pod), r(k.node), r(k.model), r(k.profile), k.bucket, k.share, k.step_s));
        // Labels as dictionaries over the interner's names (ids are the keys): the pricing joins
        // then carry 4-byte keys, not strings, through every row they copy.
        let names: ArrayRef = Arc::new((0..strings.len() as u32).map(|id| strings.name(id)).collect::<StringArray>());
        let col_str = |f: &dyn Fn(&Key) -> u32| -> ArrayRef {
            let keys: Int32Array = all.iter().map(|(k, _)| f(k)).map(|id| (id != NULL_ID).then_some(id as i32)).collect();
            Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::clone(&names)).expect("label ids index the names"))
        };
        let mut columns: Vec<ArrayRef> = vec![
            col_str(&|k| k.cluster),
            col_str(&|k| k.ns),
            col_str(&|k| k.node),
            col_str(&|k| k.model),
            col_str(&|k| k.profile),
            Arc::new(TimestampMillisecondArray::from(all.iter().map(|(k, _)| k.bucket).collect::<Vec<_>>()).with_timezone("UTC")),
            Arc::new(Date32Array::from(all.iter().map(|(k, _)| k.bucket.div_euclid(DAY_MS) as i32).collect::<Vec<_>>())),
            Arc::new(all.iter().map(|(k, _)| f64::from_bits(k.share)).collect::<Float64Array>()),
            Arc::new(all.iter().map(|(k, _)| k.step_s).collect::<Int32Array>()),
            Arc::new(all.iter().map(|(_, s)| s.n).collect::<Int64Array>()),
            Arc::new(all.iter().map(|(_, s)| s.energy_mj).collect::<Int64Array>()),
            Arc::new(all.iter().map(|(_, s)| s.util_gpu_us).collect::<Int64Array>()),
            Arc::new(all.iter().map(|(_, s)| s.util_n).collect::<Int64Array>()),
        ];
        if POD {
            // After the namespace, as `pod_buckets::schema()` has it.
            columns.insert(2, col_str(&|k| k.pod));
            return RecordBatch::try_new(pod_schema(), columns).expect("pod bucket columns match their schema");
        }
        RecordBatch::try_new(schema(), columns).expect("bucket columns match their schema")
    }
}

/// The sums of one whole batch of `gpu_samples` rows (a day file as the writer publishes it).
pub fn sum_batch(path: &Path, batch: &RecordBatch) -> Result<RecordBatch, BucketError> {
    let strings = Mutex::new(Interner::default());
    let mut sums = BucketSums::<false>::default();
    sums.add(&strings, path, batch, i64::MIN, i64::MAX)?;
    Ok(BucketSums::finish(&[sums], &strings.into_inner().expect("interner lock")))
}

impl DaySums for BucketSums<false> {
    const KIND: Kind = KIND;
    const COLUMNS: &'static [&'static str] = &COLUMNS;
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

/// A day of `gpu_samples` as the writer keeps it: its buckets, with the day's completeness
/// counts in the file's key/value metadata.
#[derive(Default)]
pub struct Day {
    buckets: BucketSums<false>,
    counts: DayCounts,
}

impl DayFold for Day {
    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch) -> Result<(), FoldError> {
        self.buckets.add(strings, path, b, i64::MIN, i64::MAX)?;
        Ok(self.counts.add(strings, path, b, i64::MIN, i64::MAX)?)
    }

    fn finish(self: Box<Self>, strings: &Interner) -> Summed {
        let stored = serde_json::to_string(&self.counts.finish(strings)).expect("counts serialise");
        vec![(KIND, BucketSums::finish(&[self.buckets], strings), vec![KeyValue::new(KEY_DAY_COUNTS.into(), stored)])]
    }
}

/// The source columns the day's fold reads.
fn columns() -> Vec<&'static str> {
    let mut out = COLUMNS.to_vec();
    out.extend(DayCounts::columns().into_iter().filter(|c| !COLUMNS.contains(c)));
    out
}

fn fold() -> Box<dyn DayFold> {
    Box::<Day>::default()
}

/// Its day: the buckets, and the completeness counts in the file's metadata.
pub const ROLLUP: DayRollup = DayRollup { kinds: &[KIND], columns, fold };
