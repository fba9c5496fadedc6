//! The `unallocated_units` rollup: GPU time no pod held per GPU unit and bucket, split by the
//! framebuffer use of rows with no utilisation (the idle report's unallocated GPUs and zombie
//! memory).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, Float32Array, Float64Array, Int16Array, Int32Array, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::kind::{DayRollup, Kind, RollupKind};
use super::sums::{bucket_of, cluster_id, columns_of, dict, ids, labels, names, rank, typed, whole_day, BucketError, DaySums};
use crate::lake::intern::{row_id, Interner};
use crate::lake::schema::{label_type, ts_type, Table};

pub const KIND: Kind = &RollupKind {
    name: "unallocated_units",
    source: Table::GpuSamples,
    // Bump on a change of meaning.
    version: 1,
    schema: unallocated_schema,
};

/// Its day: the sums over the whole day.
pub const ROLLUP: DayRollup = DayRollup { kinds: &[KIND], columns: columns_of::<UnallocatedUnits>, fold: whole_day::<UnallocatedUnits> };

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
    const KIND: Kind = KIND;
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
            Arc::new(crate::lake::schema::ts_array(rows.iter().map(|(k, _)| k.bucket).collect())),
            Arc::new(rows.iter().map(|(k, _)| k.zombie_mem.map(f32::from_bits)).collect::<Float32Array>()),
            Arc::new(rows.iter().map(|(_, v)| v.n).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|(_, v)| v.gpu_us).collect::<Int64Array>()),
            Arc::new(crate::lake::schema::ts_array(rows.iter().map(|(_, v)| v.first).collect())),
            Arc::new(crate::lake::schema::ts_array(rows.iter().map(|(_, v)| v.last).collect())),
        ];
        RecordBatch::try_new(unallocated_schema(), columns).expect("unallocated columns match their schema")
    }
}
