//! Allocated-but-idle runs found in one streaming pass over `gpu_samples`.
//!
//! The question is sequential: per GPU (or MIG instance) and pod, the maximal stretches of
//! steps under the utilisation threshold. In SQL that is the gaps-and-islands method (two
//! `ROW_NUMBER`s and a `LAG` over every row, then a hash aggregate over the islands): at a month
//! of 1,024 GPUs (89 M rows) it needs several GiB or fails in the engine's 1 GiB pool
//! (`benches/sql/idle_pods_windowed.sql` keeps that formulation; the tests check this pass
//! against it). The day files are sorted by node, GPU, instance and time, so here each
//! (GPU, instance, namespace, pod) keeps a few counters and its open run while the files stream
//! by: memory grows with the pods, not the rows.
//!
//! The result is two small tables that `queries/idle_pods.sql` prices and sums:
//! - `idle_holding`: per GPU unit and pod, GPU-us held, steps, idle steps and drops from busy
//!   to idle;
//! - `idle_runs`: every idle run of at least `min_secs`, with its start and GPU-us.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, DictionaryArray, Float32Array, Float64Array, Int16Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};

use crate::lake::intern::{label_column, row_id, typed_column, Interner, NULL_ID};
use crate::lake::scan::{OrderedScan, ScanError};
use crate::lake::schema::ts_type;
use crate::lake::{Lake, Table};
use crate::domain::window::Window;

pub const HOLDING_TABLE: &str = "idle_holding";
pub const RUNS_TABLE: &str = "idle_runs";

const COLUMNS: [&str; 10] = ["ts", "step_s", "gpu_uuid", "gpu_instance_id", "gpu_model", "namespace", "pod", "share", "util_pct", "cluster"];

#[derive(Debug, thiserror::Error)]
pub enum IdleScanError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error("{path}: column {column}: {source}")]
    Column { path: String, column: &'static str, source: crate::lake::intern::ColumnError },
    #[error("{path}: rows of GPU {gpu} pod {pod} are not in time order ({later} after {earlier}); gpuledger's writer sorts every day file by node, GPU and time: was this file written by something else?")]
    Unordered { path: String, gpu: String, pod: String, earlier: i64, later: i64 },
}

/// What the pass looks for.
#[derive(Debug, Clone, Copy)]
pub struct IdleRule {
    /// A step is idle when utilisation (missing = 0) is under this, percent.
    pub util_threshold_pct: f64,
    /// An idle run counts when its steps add up to at least this many seconds.
    pub min_secs: i64,
}

/// The columns both tables start with: the pod and the GPU unit it held.
fn unit_fields() -> Vec<Field> {
    vec![
        Field::new("namespace", DataType::Utf8, true),
        Field::new("pod", DataType::Utf8, false),
        Field::new("gpu_model", DataType::Utf8, false),
        Field::new("gpu_uuid", DataType::Utf8, false),
        Field::new("gpu_instance_id", DataType::Int16, true),
    ]
}

fn with_unit_fields(rest: &[(&str, DataType)]) -> SchemaRef {
    let mut fields = unit_fields();
    fields.extend(rest.iter().map(|(name, t)| Field::new(*name, t.clone(), false)));
    Arc::new(Schema::new(fields))
}

pub fn holding_schema() -> SchemaRef {
    with_unit_fields(&[("held_gpu_us", DataType::Int64), ("steps", DataType::Int64), ("idle_steps", DataType::Int64), ("drops", DataType::Int64)])
}

pub fn runs_schema() -> SchemaRef {
    with_unit_fields(&[("start", ts_type()), ("steps", DataType::Int64), ("gpu_us", DataType::Int64)])
}

/// The two tables, as record batches of `holding_schema()` and `runs_schema()`.
pub struct IdleScan {
    pub holding: RecordBatch,
    pub runs: RecordBatch,
    /// GPU rows read (inside the window, with a pod).
    pub rows: u64,
}

#[derive(Hash, PartialEq, Eq, Clone, Copy)]
struct Key {
    gpu: u32,
    gi: i16,
    ns: u32,
    pod: u32,
}

struct OpenRun {
    start: i64,
    steps: i64,
    secs: i64,
    gpu_us: i64,
}

struct Holding {
    key: Key,
    model: u32,
    has_gi: bool,
    held_us: i64,
    steps: i64,
    idle_steps: i64,
    drops: i64,
    prev_idle: bool,
    last_ts: i64,
    run: Option<OpenRun>,
}

struct ClosedRun {
    holding: usize,
    start: i64,
    steps: i64,
    gpu_us: i64,
}

/// One pass over `gpu_samples` in `window`.
/// Only rows of `cluster` where one is given (a null cluster is `default`).
pub fn scan(lake: &Lake, window: &Window, rule: IdleRule, cluster: Option<&str>) -> Result<IdleScan, IdleScanError> {
    let (first, last) = window.date_bounds();
    let (start_ms, end_ms) = (window.start.timestamp_millis(), window.end.timestamp_millis());
    let mut strings = Interner::default();
    let mut holdings: Vec<Holding> = Vec::new();
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut runs: Vec<ClosedRun> = Vec::new();
    let mut rows = 0u64;

    for item in OrderedScan::start(lake, Table::GpuSamples, first, last, &COLUMNS)? {
        let (path, batch) = item?;
        let p = path.display().to_string();
        let cols = Columns::of(&batch, &p)?;
        let gpu_ids = strings.map_values(&cols.gpu);
        let model_ids = strings.map_values(&cols.model);
        let ns_ids = strings.map_values(&cols.ns);
        let pod_ids = strings.map_values(&cols.pod);
        // Per dictionary value of the batch's clusters: whether its rows are read.
        let wanted: Option<(Vec<bool>, bool)> = cluster.map(|c| {
            let names = cols.cluster.values().as_any().downcast_ref::<arrow::array::StringArray>().map(|v| v.iter().map(|n| n == Some(c)).collect()).unwrap_or_default();
            (names, c == crate::domain::units::DEFAULT_CLUSTER)
        });
        let mut cached: Option<(Key, usize)> = None;
        for i in 0..batch.num_rows() {
            if cols.pod.is_null(i) {
                continue;
            }
            if let Some((names, null_wanted)) = &wanted {
                let keep = if cols.cluster.is_null(i) { *null_wanted } else { names.get(cols.cluster.keys().value(i) as usize).copied().unwrap_or(false) };
                if !keep {
                    continue;
                }
            }
            let pod = pod_ids[cols.pod.keys().value(i) as usize];
            if pod == NULL_ID {
                continue;
            }
            let ts = cols.ts.value(i);
            if ts < start_ms || ts >= end_ms {
                continue;
            }
            rows += 1;
            let key = Key {
                gpu: row_id(&cols.gpu, &gpu_ids, i),
                gi: if cols.gi.is_null(i) { -1 } else { cols.gi.value(i) },
                ns: row_id(&cols.ns, &ns_ids, i),
                pod,
            };
            let h = match cached {
                Some((k, h)) if k == key => h,
                _ => {
                    let h = *index.entry(key).or_insert_with(|| {
                        holdings.push(Holding {
                            key,
                            model: model_ids[cols.model.keys().value(i) as usize],
                            has_gi: !cols.gi.is_null(i),
                            held_us: 0,
                            steps: 0,
                            idle_steps: 0,
                            drops: 0,
                            prev_idle: false,
                            last_ts: i64::MIN,
                            run: None,
                        });
                        holdings.len() - 1
                    });
                    cached = Some((key, h));
                    h
                }
            };
            let step_s = cols.step.value(i) as i64;
            // As the SQL: ROUND(share * step_s * 1e6), half away from zero.
            let gpu_us = (cols.share.value(i) * step_s as f64 * 1_000_000.0).round() as i64;
            let util = if cols.util.is_null(i) { 0.0 } else { cols.util.value(i) as f64 };
            let idle = util < rule.util_threshold_pct;
            let hold = &mut holdings[h];
            if ts < hold.last_ts {
                return Err(IdleScanError::Unordered {
                    path: p,
                    gpu: strings.name(key.gpu).unwrap_or("").to_string(),
                    pod: strings.name(key.pod).unwrap_or("").to_string(),
                    earlier: hold.last_ts,
                    later: ts,
                });
            }
            hold.last_ts = ts;
            hold.held_us += gpu_us;
            hold.steps += 1;
            if idle {
                hold.idle_steps += 1;
                if !hold.prev_idle {
                    hold.drops += 1;
                }
                let run = hold.run.get_or_insert(OpenRun { start: ts, steps: 0, secs: 0, gpu_us: 0 });
                run.steps += 1;
                run.secs += step_s;
                run.gpu_us += gpu_us;
            } else if let Some(run) = hold.run.take() {
                if run.secs >= rule.min_secs {
                    runs.push(ClosedRun { holding: h, start: run.start, steps: run.steps, gpu_us: run.gpu_us });
                }
            }
            hold.prev_idle = idle;
        }
    }
    for (h, hold) in holdings.iter_mut().enumerate() {
        if let Some(run) = hold.run.take() {
            if run.secs >= rule.min_secs {
                runs.push(ClosedRun { holding: h, start: run.start, steps: run.steps, gpu_us: run.gpu_us });
            }
        }
    }
    Ok(IdleScan { holding: holding_batch(&holdings, &strings), runs: runs_batch(&runs, &holdings, &strings), rows })
}

struct Columns<'a> {
    ts: &'a TimestampMillisecondArray,
    step: &'a Int32Array,
    gpu: DictionaryArray<Int32Type>,
    gi: &'a Int16Array,
    model: DictionaryArray<Int32Type>,
    ns: DictionaryArray<Int32Type>,
    pod: DictionaryArray<Int32Type>,
    share: &'a Float64Array,
    util: &'a Float32Array,
    cluster: DictionaryArray<Int32Type>,
}

impl<'a> Columns<'a> {
    fn of(b: &'a RecordBatch, path: &str) -> Result<Columns<'a>, IdleScanError> {
        fn typed<'b, T: 'static>(b: &'b RecordBatch, path: &str, name: &'static str) -> Result<&'b T, IdleScanError> {
            typed_column(b, name).map_err(|source| IdleScanError::Column { path: path.into(), column: name, source })
        }
        fn dict(b: &RecordBatch, path: &str, name: &'static str) -> Result<DictionaryArray<Int32Type>, IdleScanError> {
            label_column(b, name).map_err(|source| IdleScanError::Column { path: path.into(), column: name, source })
        }
        Ok(Columns {
            ts: typed(b, path, "ts")?,
            step: typed(b, path, "step_s")?,
            gpu: dict(b, path, "gpu_uuid")?,
            gi: typed(b, path, "gpu_instance_id")?,
            model: dict(b, path, "gpu_model")?,
            ns: dict(b, path, "namespace")?,
            pod: dict(b, path, "pod")?,
            share: typed(b, path, "share")?,
            util: typed(b, path, "util_pct")?,
            cluster: dict(b, path, "cluster")?,
        })
    }
}

fn label_columns<'a>(keys: impl Iterator<Item = (&'a Key, u32)> + Clone, strings: &Interner) -> Vec<ArrayRef> {
    let ns: StringArray = keys.clone().map(|(k, _)| strings.name(k.ns)).collect();
    let pod: StringArray = keys.clone().map(|(k, _)| strings.name(k.pod)).collect();
    let model: StringArray = keys.clone().map(|(_, m)| strings.name(m)).collect();
    let gpu: StringArray = keys.map(|(k, _)| strings.name(k.gpu)).collect();
    vec![Arc::new(ns), Arc::new(pod), Arc::new(model), Arc::new(gpu)]
}

fn holding_batch(holdings: &[Holding], strings: &Interner) -> RecordBatch {
    let mut cols = label_columns(holdings.iter().map(|h| (&h.key, h.model)), strings);
    cols.push(Arc::new(holdings.iter().map(|h| h.has_gi.then_some(h.key.gi)).collect::<Int16Array>()));
    cols.push(Arc::new(holdings.iter().map(|h| h.held_us).collect::<Int64Array>()));
    cols.push(Arc::new(holdings.iter().map(|h| h.steps).collect::<Int64Array>()));
    cols.push(Arc::new(holdings.iter().map(|h| h.idle_steps).collect::<Int64Array>()));
    cols.push(Arc::new(holdings.iter().map(|h| h.drops).collect::<Int64Array>()));
    RecordBatch::try_new(holding_schema(), cols).expect("holding columns match their schema")
}

fn runs_batch(runs: &[ClosedRun], holdings: &[Holding], strings: &Interner) -> RecordBatch {
    fn of<'h>(r: &ClosedRun, holdings: &'h [Holding]) -> &'h Holding {
        &holdings[r.holding]
    }
    let mut cols = label_columns(runs.iter().map(|r| (&of(r, holdings).key, of(r, holdings).model)), strings);
    cols.push(Arc::new(runs.iter().map(|r| of(r, holdings).has_gi.then_some(of(r, holdings).key.gi)).collect::<Int16Array>()));
    cols.push(Arc::new(TimestampMillisecondArray::from(runs.iter().map(|r| r.start).collect::<Vec<_>>()).with_timezone("UTC")));
    cols.push(Arc::new(runs.iter().map(|r| r.steps).collect::<Int64Array>()));
    cols.push(Arc::new(runs.iter().map(|r| r.gpu_us).collect::<Int64Array>()));
    RecordBatch::try_new(runs_schema(), cols).expect("run columns match their schema")
}
