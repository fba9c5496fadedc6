//! The idle rollups of a `gpu_samples` day: `idle_holdings` (per GPU unit and pod, the day's
//! allocated-but-idle counters and the idle runs cut by its edges) and `idle_stretches` (the
//! runs inside it), one fold (`IdleDay`) written as two files, and read back by the idle pass
//! (`lake::passes::idle_runs`), which merges days into a window's runs.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{
    Array, ArrayRef, DictionaryArray, Float32Array, Float64Array, Int16Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};

use super::kind::{DayFold, DayRollup, FoldError, Kind, RollupKind, Summed};
use crate::lake::intern::{label_column, row_id, typed_column, Interner, NULL_ID};
use crate::lake::scan::ScanError;
use crate::lake::schema::{ts_type, Table};

/// The `gpu_samples` columns the fold reads.
pub const COLUMNS: [&str; 10] = ["ts", "step_s", "gpu_uuid", "gpu_instance_id", "gpu_model", "namespace", "pod", "share", "util_pct", "cluster"];

/// Per GPU unit and pod, the day's counters and edge runs.
pub const HOLDINGS: Kind = &RollupKind {
    name: "idle_holdings",
    source: Table::GpuSamples,
    // Folded at ROLLUP_THRESHOLD_PCT, runs from ROLLUP_MIN_RUN_SECS (bump on change).
    version: 1,
    schema: day_holdings_schema,
};

/// The runs inside the day of at least ROLLUP_MIN_RUN_SECS.
pub const STRETCHES: Kind = &RollupKind { name: "idle_stretches", source: Table::GpuSamples, version: 1, schema: day_stretches_schema };

#[derive(Debug, thiserror::Error)]
pub enum IdleScanError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error("{path}: column {column}")]
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

#[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
pub(crate) struct Key {
    pub(crate) gpu: u32,
    pub(crate) gi: i16,
    pub(crate) ns: u32,
    pub(crate) pod: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) start: i64,
    pub(crate) steps: i64,
    pub(crate) secs: i64,
    pub(crate) gpu_us: i64,
}

impl Run {
    pub(crate) fn then(self, next: Run) -> Run {
        Run { start: self.start, steps: self.steps + next.steps, secs: self.secs + next.secs, gpu_us: self.gpu_us + next.gpu_us }
    }

    /// Whether the run is kept for a rule of `min_secs`: it counts (its steps add up to at least
    /// `min_secs`), or it is short of that by at most its mean step (`secs / steps`), the grid's
    /// resolution. `queries/idle_pods.sql` tells the two apart with the same integer arithmetic.
    pub(crate) fn kept(&self, min_secs: i64) -> bool {
        self.secs >= min_secs || self.secs * self.steps + self.secs >= min_secs * self.steps
    }

    /// `kept`, or (without `edges`) only a run of at least `min_secs`.
    pub(crate) fn kept_by(&self, min_secs: i64, edges: bool) -> bool {
        if edges {
            self.kept(min_secs)
        } else {
            self.secs >= min_secs
        }
    }
}

/// One holding (GPU unit and pod) within one day: its counters as if the day stood alone, and
/// the idle runs cut by the day's edges (`lead`: the run the day opens with, `trail`: the run
/// still open at its end; one run covering the whole day is `lead` with `all_idle`), which the
/// merge joins to the neighbouring days'.
#[derive(Debug, Clone)]
pub(crate) struct DayHolding {
    pub(crate) key: Key,
    pub(crate) cluster: u32,
    pub(crate) model: u32,
    pub(crate) has_gi: bool,
    pub(crate) held_us: i64,
    pub(crate) steps: i64,
    pub(crate) idle_steps: i64,
    /// Busy-to-idle steps, the day's first step counting as one when idle.
    pub(crate) drops: i64,
    pub(crate) first_idle: bool,
    pub(crate) last_idle: bool,
    pub(crate) all_idle: bool,
    pub(crate) lead: Option<Run>,
    pub(crate) trail: Option<Run>,
    // While folding: the last row's time and the open run (and whether it opened the day).
    pub(crate) last_ts: i64,
    pub(crate) open: Option<Run>,
    pub(crate) open_is_lead: bool,
}

/// One day's (or a day's part of a window) idle summary: per holding its counters and edge
/// runs, and the runs inside the day of at least `min_secs`. Folded from the day's rows in file
/// order (each holding's rows in time order); written by the lake's writer as the day's idle
/// rollups (`idle_holdings`, `idle_stretches`) and merged day after day into a window's tables.
pub struct IdleDay {
    pub(crate) threshold_pct: f64,
    pub(crate) min_secs: i64,
    /// Whether runs a step short of `min_secs` are kept (a report's fold), or only runs of at
    /// least `min_secs` (the stored rollup, whose shortest is `ROLLUP_MIN_RUN_SECS`).
    pub(crate) edges: bool,
    pub(crate) holdings: Vec<DayHolding>,
    pub(crate) index: HashMap<Key, usize>,
    pub(crate) interior: Vec<(usize, Run)>,
    /// Rows folded in.
    pub rows: u64,
}

/// The threshold the stored idle rollups are folded at (`idle.util_threshold_pct`'s default); a
/// report at another threshold reads the samples.
pub const ROLLUP_THRESHOLD_PCT: f64 = 5.0;
/// Runs inside a day shorter than this are not stored (a report asking for shorter runs, with
/// `idle.min_minutes` = 0, reads the samples).
pub const ROLLUP_MIN_RUN_SECS: i64 = 60;

impl IdleDay {
    /// A report's day under `rule`: its runs of at least `rule.min_secs` and those a step short.
    pub fn new(rule: IdleRule) -> IdleDay {
        IdleDay {
            threshold_pct: rule.util_threshold_pct,
            min_secs: rule.min_secs,
            edges: true,
            holdings: Vec::new(),
            index: HashMap::new(),
            interior: Vec::new(),
            rows: 0,
        }
    }

    /// The day as the rollups store it.
    pub fn for_rollup() -> IdleDay {
        IdleDay { edges: false, ..IdleDay::new(IdleRule { util_threshold_pct: ROLLUP_THRESHOLD_PCT, min_secs: ROLLUP_MIN_RUN_SECS }) }
    }

    /// Folds the rows of `b` (from `path`) with a pod, `ts` in `[start_ms, end_ms)` and, where
    /// `cluster` is given, of that cluster (a null cluster is `default`).
    pub fn add(
        &mut self,
        strings: &Mutex<Interner>,
        path: &Path,
        b: &RecordBatch,
        start_ms: i64,
        end_ms: i64,
        cluster: Option<&str>,
    ) -> Result<(), IdleScanError> {
        let p = path.display().to_string();
        let cols = Columns::of(b, &p)?;
        let (gpu_ids, model_ids, ns_ids, pod_ids, cluster_ids, default_cluster) = {
            let mut s = strings.lock().expect("interner lock");
            (
                s.map_values(&cols.gpu),
                s.map_values(&cols.model),
                s.map_values(&cols.ns),
                s.map_values(&cols.pod),
                s.map_values(&cols.cluster),
                s.id(crate::domain::units::DEFAULT_CLUSTER),
            )
        };
        let wanted = cluster.map(|c| strings.lock().expect("interner lock").id(c));
        let mut cached: Option<(Key, usize)> = None;
        for i in 0..b.num_rows() {
            if cols.pod.is_null(i) {
                continue;
            }
            let pod = pod_ids[cols.pod.keys().value(i) as usize];
            if pod == NULL_ID {
                continue;
            }
            let ts = cols.ts.value(i);
            if ts < start_ms || ts >= end_ms {
                continue;
            }
            let c = match row_id(&cols.cluster, &cluster_ids, i) {
                NULL_ID => default_cluster,
                id => id,
            };
            if wanted.is_some_and(|w| w != c) {
                continue;
            }
            self.rows += 1;
            let key =
                Key { gpu: row_id(&cols.gpu, &gpu_ids, i), gi: if cols.gi.is_null(i) { -1 } else { cols.gi.value(i) }, ns: row_id(&cols.ns, &ns_ids, i), pod };
            let h = match cached {
                Some((k, h)) if k == key => h,
                _ => {
                    let h = *self.index.entry(key).or_insert_with(|| {
                        self.holdings.push(DayHolding {
                            key,
                            cluster: c,
                            model: model_ids[cols.model.keys().value(i) as usize],
                            has_gi: !cols.gi.is_null(i),
                            held_us: 0,
                            steps: 0,
                            idle_steps: 0,
                            drops: 0,
                            first_idle: false,
                            last_idle: false,
                            all_idle: false,
                            lead: None,
                            trail: None,
                            last_ts: i64::MIN,
                            open: None,
                            open_is_lead: false,
                        });
                        self.holdings.len() - 1
                    });
                    cached = Some((key, h));
                    h
                }
            };
            let step_s = cols.step.value(i) as i64;
            // As the SQL: ROUND(share * step_s * 1e6), half away from zero.
            let gpu_us = (cols.share.value(i) * step_s as f64 * 1_000_000.0).round() as i64;
            let util = if cols.util.is_null(i) { 0.0 } else { cols.util.value(i) as f64 };
            let idle = util < self.threshold_pct;
            let hold = &mut self.holdings[h];
            if ts < hold.last_ts {
                let s = strings.lock().expect("interner lock");
                return Err(IdleScanError::Unordered {
                    path: p,
                    gpu: s.name(key.gpu).unwrap_or("").to_string(),
                    pod: s.name(key.pod).unwrap_or("").to_string(),
                    earlier: hold.last_ts,
                    later: ts,
                });
            }
            let first = hold.steps == 0;
            hold.last_ts = ts;
            hold.held_us += gpu_us;
            hold.steps += 1;
            if first {
                hold.first_idle = idle;
            }
            if idle {
                hold.idle_steps += 1;
                if !hold.last_idle || first {
                    hold.drops += 1;
                }
                let step = Run { start: ts, steps: 1, secs: step_s, gpu_us };
                hold.open = Some(match hold.open {
                    Some(run) => run.then(step),
                    None => {
                        hold.open_is_lead = first;
                        step
                    }
                });
            } else if let Some(run) = hold.open.take() {
                if hold.open_is_lead {
                    hold.lead = Some(run);
                } else if run.kept_by(self.min_secs, self.edges) {
                    self.interior.push((h, run));
                }
            }
            hold.last_idle = idle;
        }
        Ok(())
    }

    /// Closes the runs still open at the day's end (call once, after the last `add`).
    pub(crate) fn close(&mut self) {
        for h in &mut self.holdings {
            if let Some(run) = h.open.take() {
                if h.open_is_lead {
                    h.lead = Some(run);
                    h.all_idle = true;
                } else {
                    h.trail = Some(run);
                }
            }
        }
    }
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

// ---------------------------------------------------------------------------------------------
// The day as stored: `idle_holdings` (a row per holding) and `idle_stretches` (the runs inside
// the day of at least ROLLUP_MIN_RUN_SECS).

fn label_field(name: &str, nullable: bool) -> Field {
    Field::new(name, crate::lake::schema::label_type(), nullable)
}

pub fn day_holdings_schema() -> SchemaRef {
    let run = |p: &str| -> Vec<Field> {
        vec![
            Field::new(format!("{p}_start"), ts_type(), true),
            Field::new(format!("{p}_steps"), DataType::Int64, true),
            Field::new(format!("{p}_secs"), DataType::Int64, true),
            Field::new(format!("{p}_gpu_us"), DataType::Int64, true),
        ]
    };
    let mut fields = vec![
        label_field("cluster", false),
        label_field("namespace", true),
        label_field("pod", false),
        label_field("gpu_model", false),
        label_field("gpu_uuid", false),
        Field::new("gpu_instance_id", DataType::Int16, true),
        Field::new("held_us", DataType::Int64, false),
        Field::new("steps", DataType::Int64, false),
        Field::new("idle_steps", DataType::Int64, false),
        Field::new("drops", DataType::Int64, false),
        Field::new("first_idle", DataType::Boolean, false),
        Field::new("last_idle", DataType::Boolean, false),
        Field::new("all_idle", DataType::Boolean, false),
    ];
    fields.extend(run("lead"));
    fields.extend(run("trail"));
    Arc::new(Schema::new(fields))
}

pub fn day_stretches_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        label_field("cluster", false),
        label_field("namespace", true),
        label_field("pod", false),
        label_field("gpu_uuid", false),
        Field::new("gpu_instance_id", DataType::Int16, true),
        Field::new("start", ts_type(), false),
        Field::new("steps", DataType::Int64, false),
        Field::new("secs", DataType::Int64, false),
        Field::new("gpu_us", DataType::Int64, false),
    ]))
}

fn dict_of(names: &ArrayRef, ids: impl Iterator<Item = u32>) -> ArrayRef {
    let keys: arrow::array::Int32Array = ids.map(|id| (id != NULL_ID).then_some(id as i32)).collect();
    Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::clone(names)).expect("label ids index the names"))
}

impl IdleDay {
    /// The closed day as its two rollup batches (`day_holdings_schema`, `day_stretches_schema`).
    pub fn to_batches(mut self, strings: &Interner) -> (RecordBatch, RecordBatch) {
        self.close();
        let names: ArrayRef = Arc::new((0..strings.len() as u32).map(|id| strings.name(id)).collect::<StringArray>());
        let hs = &self.holdings;
        let gi = |h: &DayHolding| h.has_gi.then_some(h.key.gi);
        let run_cols = |pick: &dyn Fn(&DayHolding) -> Option<Run>| -> Vec<ArrayRef> {
            vec![
                Arc::new(TimestampMillisecondArray::from(hs.iter().map(|h| pick(h).map(|r| r.start)).collect::<Vec<_>>()).with_timezone("UTC")),
                Arc::new(hs.iter().map(|h| pick(h).map(|r| r.steps)).collect::<Int64Array>()),
                Arc::new(hs.iter().map(|h| pick(h).map(|r| r.secs)).collect::<Int64Array>()),
                Arc::new(hs.iter().map(|h| pick(h).map(|r| r.gpu_us)).collect::<Int64Array>()),
            ]
        };
        let mut cols: Vec<ArrayRef> = vec![
            dict_of(&names, hs.iter().map(|h| h.cluster)),
            dict_of(&names, hs.iter().map(|h| h.key.ns)),
            dict_of(&names, hs.iter().map(|h| h.key.pod)),
            dict_of(&names, hs.iter().map(|h| h.model)),
            dict_of(&names, hs.iter().map(|h| h.key.gpu)),
            Arc::new(hs.iter().map(gi).collect::<Int16Array>()),
            Arc::new(hs.iter().map(|h| h.held_us).collect::<Int64Array>()),
            Arc::new(hs.iter().map(|h| h.steps).collect::<Int64Array>()),
            Arc::new(hs.iter().map(|h| h.idle_steps).collect::<Int64Array>()),
            Arc::new(hs.iter().map(|h| h.drops).collect::<Int64Array>()),
            Arc::new(hs.iter().map(|h| Some(h.first_idle)).collect::<arrow::array::BooleanArray>()),
            Arc::new(hs.iter().map(|h| Some(h.last_idle)).collect::<arrow::array::BooleanArray>()),
            Arc::new(hs.iter().map(|h| Some(h.all_idle)).collect::<arrow::array::BooleanArray>()),
        ];
        cols.extend(run_cols(&|h| h.lead));
        cols.extend(run_cols(&|h| h.trail));
        let holdings = RecordBatch::try_new(day_holdings_schema(), cols).expect("day holding columns match their schema");
        let rs = &self.interior;
        let of = |h: usize| &hs[h];
        let stretches = RecordBatch::try_new(
            day_stretches_schema(),
            vec![
                dict_of(&names, rs.iter().map(|(h, _)| of(*h).cluster)),
                dict_of(&names, rs.iter().map(|(h, _)| of(*h).key.ns)),
                dict_of(&names, rs.iter().map(|(h, _)| of(*h).key.pod)),
                dict_of(&names, rs.iter().map(|(h, _)| of(*h).key.gpu)),
                Arc::new(rs.iter().map(|(h, _)| gi(of(*h))).collect::<Int16Array>()),
                Arc::new(TimestampMillisecondArray::from(rs.iter().map(|(_, r)| r.start).collect::<Vec<_>>()).with_timezone("UTC")),
                Arc::new(rs.iter().map(|(_, r)| r.steps).collect::<Int64Array>()),
                Arc::new(rs.iter().map(|(_, r)| r.secs).collect::<Int64Array>()),
                Arc::new(rs.iter().map(|(_, r)| r.gpu_us).collect::<Int64Array>()),
            ],
        )
        .expect("day stretch columns match their schema");
        (holdings, stretches)
    }

    /// A day back from its two rollup batches (label ids from `strings`), only `cluster`'s
    /// holdings where one is given, runs inside the day kept under a rule of `min_secs`.
    pub(crate) fn from_batches(
        holdings: &[RecordBatch],
        stretches: &[RecordBatch],
        strings: &Mutex<Interner>,
        cluster: Option<&str>,
        min_secs: i64,
    ) -> Result<IdleDay, String> {
        let mut day = IdleDay::new(IdleRule { util_threshold_pct: ROLLUP_THRESHOLD_PCT, min_secs });
        let mut s = strings.lock().expect("interner lock");
        let wanted = cluster.map(|c| s.id(c));
        let col = |b: &RecordBatch, name: &str| -> Result<ArrayRef, String> { b.column_by_name(name).cloned().ok_or_else(|| format!("no column {name}")) };
        let ints = |b: &RecordBatch, name: &str| -> Result<Int64Array, String> {
            col(b, name)?.as_any().downcast_ref::<Int64Array>().cloned().ok_or_else(|| format!("{name} is not Int64"))
        };
        let bools = |b: &RecordBatch, name: &str| -> Result<arrow::array::BooleanArray, String> {
            col(b, name)?.as_any().downcast_ref::<arrow::array::BooleanArray>().cloned().ok_or_else(|| format!("{name} is not Boolean"))
        };
        let tss = |b: &RecordBatch, name: &str| -> Result<TimestampMillisecondArray, String> {
            col(b, name)?.as_any().downcast_ref::<TimestampMillisecondArray>().cloned().ok_or_else(|| format!("{name} is not a timestamp"))
        };
        let labels = |s: &mut Interner, b: &RecordBatch, name: &str| -> Result<Vec<u32>, String> {
            let d = label_column(b, name).map_err(|e| format!("{name}: {e}"))?;
            let ids = s.map_values(&d);
            Ok((0..b.num_rows()).map(|i| row_id(&d, &ids, i)).collect())
        };
        let run = |start: &TimestampMillisecondArray, steps: &Int64Array, secs: &Int64Array, us: &Int64Array, i: usize| {
            start.is_valid(i).then(|| Run { start: start.value(i), steps: steps.value(i), secs: secs.value(i), gpu_us: us.value(i) })
        };
        for b in holdings {
            let (c, ns, pod, model, gpu) = (
                labels(&mut s, b, "cluster")?,
                labels(&mut s, b, "namespace")?,
                labels(&mut s, b, "pod")?,
                labels(&mut s, b, "gpu_model")?,
                labels(&mut s, b, "gpu_uuid")?,
            );
            let gi = col(b, "gpu_instance_id")?.as_any().downcast_ref::<Int16Array>().cloned().ok_or("gpu_instance_id is not Int16")?;
            let (held, steps, idle_steps, drops) = (ints(b, "held_us")?, ints(b, "steps")?, ints(b, "idle_steps")?, ints(b, "drops")?);
            let (first_idle, last_idle, all_idle) = (bools(b, "first_idle")?, bools(b, "last_idle")?, bools(b, "all_idle")?);
            let (ls, lst, lse, lus) = (tss(b, "lead_start")?, ints(b, "lead_steps")?, ints(b, "lead_secs")?, ints(b, "lead_gpu_us")?);
            let (ts_, tst, tse, tus) = (tss(b, "trail_start")?, ints(b, "trail_steps")?, ints(b, "trail_secs")?, ints(b, "trail_gpu_us")?);
            for i in 0..b.num_rows() {
                if wanted.is_some_and(|w| w != c[i]) {
                    continue;
                }
                let key = Key { gpu: gpu[i], gi: if gi.is_null(i) { -1 } else { gi.value(i) }, ns: ns[i], pod: pod[i] };
                day.rows += steps.value(i) as u64;
                day.index.insert(key, day.holdings.len());
                day.holdings.push(DayHolding {
                    key,
                    cluster: c[i],
                    model: model[i],
                    has_gi: gi.is_valid(i),
                    held_us: held.value(i),
                    steps: steps.value(i),
                    idle_steps: idle_steps.value(i),
                    drops: drops.value(i),
                    first_idle: first_idle.value(i),
                    last_idle: last_idle.value(i),
                    all_idle: all_idle.value(i),
                    lead: run(&ls, &lst, &lse, &lus, i),
                    trail: run(&ts_, &tst, &tse, &tus, i),
                    last_ts: i64::MIN,
                    open: None,
                    open_is_lead: false,
                });
            }
        }
        for b in stretches {
            let (c, ns, pod, gpu) = (labels(&mut s, b, "cluster")?, labels(&mut s, b, "namespace")?, labels(&mut s, b, "pod")?, labels(&mut s, b, "gpu_uuid")?);
            let gi = col(b, "gpu_instance_id")?.as_any().downcast_ref::<Int16Array>().cloned().ok_or("gpu_instance_id is not Int16")?;
            let (start, steps, secs, us) = (tss(b, "start")?, ints(b, "steps")?, ints(b, "secs")?, ints(b, "gpu_us")?);
            for i in 0..b.num_rows() {
                let run = Run { start: start.value(i), steps: steps.value(i), secs: secs.value(i), gpu_us: us.value(i) };
                if wanted.is_some_and(|w| w != c[i]) || !run.kept_by(day.min_secs, day.edges) {
                    continue;
                }
                let key = Key { gpu: gpu[i], gi: if gi.is_null(i) { -1 } else { gi.value(i) }, ns: ns[i], pod: pod[i] };
                let h = *day.index.get(&key).ok_or("a stretch of no holding")?;
                day.interior.push((h, run));
            }
        }
        Ok(day)
    }
}

impl Default for IdleDay {
    fn default() -> Self {
        IdleDay::for_rollup()
    }
}

impl DayFold for IdleDay {
    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch) -> Result<(), FoldError> {
        Ok(IdleDay::add(self, strings, path, b, i64::MIN, i64::MAX, None)?)
    }

    fn finish(self: Box<Self>, strings: &Interner) -> Summed {
        let (holdings, stretches) = self.to_batches(strings);
        vec![(HOLDINGS, holdings, vec![]), (STRETCHES, stretches, vec![])]
    }
}

impl From<IdleScanError> for FoldError {
    fn from(e: IdleScanError) -> FoldError {
        FoldError::new(e)
    }
}

fn columns() -> Vec<&'static str> {
    COLUMNS.to_vec()
}

fn fold() -> Box<dyn DayFold> {
    Box::new(IdleDay::for_rollup())
}

/// Its day: one fold, written as two files.
pub const ROLLUP: DayRollup = DayRollup { kinds: &[HOLDINGS, STRETCHES], columns, fold };
