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
//!   to idle (the unit as its instance id only: the SQL sums per pod, and a month of 10,000
//!   GPUs has ~1.8 M holdings, whose UUIDs would be 70 MB of text nobody reads);
//! - `idle_runs`: every idle run of at least `min_secs`, with its start and GPU-us, and the
//!   runs a step short of it: the grid measures a run's length to a step, so a run within a step
//!   of the minimum either side is in or out by where its first and last scrapes fell. The SQL
//!   counts the first kind and states both as the idle figure's band (`Run::kept`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, Int16Array, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::domain::window::Window;
use crate::lake::intern::Interner;
use crate::lake::layout::Lake;
use crate::lake::rollup::idle::{self, IdleDay, Key, Run, COLUMNS, ROLLUP_MIN_RUN_SECS, ROLLUP_THRESHOLD_PCT};
pub use crate::lake::rollup::idle::{IdleRule, IdleScanError};
use crate::lake::scan::ScanError;
use crate::lake::schema::{ts_type, Table};

pub const HOLDING_TABLE: &str = "idle_holding";
pub const RUNS_TABLE: &str = "idle_runs";

/// The columns both tables start with: the pod and the GPU unit it held.
fn unit_fields() -> Vec<Field> {
    vec![
        Field::new("namespace", DataType::Utf8, true),
        Field::new("pod", DataType::Utf8, false),
        Field::new("gpu_model", DataType::Utf8, false),
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
    with_unit_fields(&[("start", ts_type()), ("steps", DataType::Int64), ("secs", DataType::Int64), ("gpu_us", DataType::Int64)])
}

/// The two tables, as record batches of `holding_schema()` and `runs_schema()`.
pub struct IdleScan {
    pub holding: RecordBatch,
    pub runs: RecordBatch,
    /// GPU rows read (inside the window, with a pod), or counted by the rollups.
    pub rows: u64,
    /// Days answered by their stored rollup.
    pub rollup_days: usize,
}

/// A window's holding, merged day after day.
struct Holding {
    key: Key,
    model: u32,
    has_gi: bool,
    held_us: i64,
    steps: i64,
    idle_steps: i64,
    drops: i64,
    prev_idle: bool,
    open: Option<Run>,
}

struct ClosedRun {
    holding: usize,
    start: i64,
    steps: i64,
    secs: i64,
    gpu_us: i64,
}

/// Merges closed days, in time order, into the window's holdings and its runs of at least
/// `min_secs` or a step short of it (`Run::kept`): the same as one pass over every row (a run that crosses midnight is one run; a
/// day opening idle after one that closed idle is no new drop). A day is dropped once merged,
/// so memory follows the window's holdings, not its days.
struct Merger {
    min_secs: i64,
    holdings: Vec<Holding>,
    index: HashMap<Key, usize>,
    runs: Vec<ClosedRun>,
}

impl Merger {
    fn new(min_secs: i64) -> Merger {
        Merger { min_secs, holdings: Vec::new(), index: HashMap::new(), runs: Vec::new() }
    }

    fn emit(&mut self, holding: usize, run: Run) {
        if run.kept(self.min_secs) {
            self.runs.push(ClosedRun { holding, start: run.start, steps: run.steps, secs: run.secs, gpu_us: run.gpu_us });
        }
    }

    fn add(&mut self, mut day: IdleDay) {
        day.close();
        let mut at: Vec<usize> = Vec::with_capacity(day.holdings.len());
        for d in &day.holdings {
            let holdings = &mut self.holdings;
            let h = *self.index.entry(d.key).or_insert_with(|| {
                holdings.push(Holding {
                    key: d.key,
                    model: d.model,
                    has_gi: d.has_gi,
                    held_us: 0,
                    steps: 0,
                    idle_steps: 0,
                    drops: 0,
                    prev_idle: false,
                    open: None,
                });
                holdings.len() - 1
            });
            at.push(h);
            let g = &mut self.holdings[h];
            g.held_us += d.held_us;
            g.steps += d.steps;
            g.idle_steps += d.idle_steps;
            g.drops += d.drops - i64::from(g.prev_idle && d.first_idle);
            let mut closed = None;
            if d.first_idle {
                let lead = d.lead.expect("a day opening idle has a lead run");
                let run = match g.open.take() {
                    Some(open) => open.then(lead),
                    None => lead,
                };
                if d.all_idle {
                    g.open = Some(run);
                } else {
                    closed = Some(run);
                }
            } else if let Some(open) = g.open.take() {
                closed = Some(open);
            }
            if !d.all_idle {
                g.open = d.trail;
            }
            g.prev_idle = d.last_idle;
            if let Some(run) = closed {
                self.emit(h, run);
            }
        }
        for (h, run) in day.interior {
            self.emit(at[h], run);
        }
    }

    fn finish(mut self, strings: &Interner) -> (RecordBatch, RecordBatch) {
        for h in 0..self.holdings.len() {
            if let Some(run) = self.holdings[h].open.take() {
                self.emit(h, run);
            }
        }
        (holding_batch(&self.holdings, strings), runs_batch(&self.runs, &self.holdings, strings))
    }
}

/// The allocated-but-idle tables of `window` under `rule`: each whole day from its stored idle
/// rollups where they are current and were folded at this threshold (and keep runs as short as
/// `rule.min_secs`), the other days from their samples (on every core), merged in time order.
/// Only rows of `cluster` where one is given (a null cluster is `default`).
pub fn scan(lake: &Lake, window: &Window, rule: IdleRule, cluster: Option<&str>) -> Result<IdleScan, IdleScanError> {
    let (first, last) = window.date_bounds();
    let (start_ms, end_ms) = (window.start.timestamp_millis(), window.end.timestamp_millis());
    let strings = Mutex::new(Interner::default());
    // The rollups keep runs of at least ROLLUP_MIN_RUN_SECS; a run a step short of
    // `rule.min_secs` is at least that long when `min_secs` is twice it (a step under a minute
    // leaves over a minute; a longer step makes no shorter run).
    let rollup_usable = rule.util_threshold_pct == ROLLUP_THRESHOLD_PCT && rule.min_secs >= 2 * ROLLUP_MIN_RUN_SECS;
    // (date, its samples file, whether its rollups are current: footers only) in date order.
    let mut days: Vec<(chrono::NaiveDate, std::path::PathBuf, bool)> = Vec::new();
    for path in crate::lake::scan::day_files(lake, Table::GpuSamples, first, last)? {
        let date = super::rolled::date_of(&path).ok_or_else(|| IdleScanError::Scan(ScanError::NotADay { path: path.clone() }))?;
        let day_ms = date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp_millis();
        let whole = start_ms <= day_ms && end_ms >= day_ms + 86_400_000;
        let stored = whole && rollup_usable && crate::lake::rollup::kinds_current(lake, &[idle::HOLDINGS, idle::STRETCHES], date, &path);
        days.push((date, path, stored));
    }
    // The days without current rollups, from their samples on every core.
    let raw: Vec<std::path::PathBuf> = days.iter().filter(|(_, _, stored)| !stored).map(|(_, p, _)| p.clone()).collect();
    let mut folded = fold_days(lake, &raw, rule, start_ms, end_ms, cluster, &strings)?;
    // Then every day in date order, each from its rollup (read here, dropped once merged) or
    // its fold.
    let mut merger = Merger::new(rule.min_secs);
    let (mut rows, mut rollup_days) = (0u64, 0usize);
    for (date, path, stored) in days {
        let day = match stored.then(|| read_rollup(lake, date, &path, &strings, cluster, rule.min_secs)).flatten() {
            Some(day) => {
                rollup_days += 1;
                Some(day)
            }
            // A rollup that could not be read after all: the day's samples.
            None if stored => fold_days(lake, std::slice::from_ref(&path), rule, start_ms, end_ms, cluster, &strings)?.remove(&path),
            None => folded.remove(&path),
        };
        if let Some(day) = day {
            rows += day.rows;
            merger.add(day);
        }
    }
    let strings = strings.into_inner().expect("interner lock");
    let (holding, runs) = merger.finish(&strings);
    Ok(IdleScan { holding, runs, rows, rollup_days })
}

/// The days of `files` folded from their samples (on every core), by file.
fn fold_days(
    lake: &Lake,
    files: &[std::path::PathBuf],
    rule: IdleRule,
    start_ms: i64,
    end_ms: i64,
    cluster: Option<&str>,
    strings: &Mutex<Interner>,
) -> Result<HashMap<std::path::PathBuf, IdleDay>, IdleScanError> {
    if files.is_empty() {
        return Ok(HashMap::new());
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Each file's batches arrive in order on one thread; a day per file.
    let parts = crate::lake::scan::fold_files(lake, files, &COLUMNS, threads, Vec::new, |folded: &mut Vec<(std::path::PathBuf, IdleDay)>, path, b| {
        if folded.last().is_none_or(|(p, _)| p != path) {
            folded.push((path.to_path_buf(), IdleDay::new(rule)));
        }
        let (_, day) = folded.last_mut().expect("a day to fold into");
        day.add(strings, path, &b, start_ms, end_ms, cluster)
    })?;
    Ok(parts.into_iter().flatten().collect())
}

fn label_columns<'a>(keys: impl Iterator<Item = (&'a Key, u32)> + Clone, strings: &Interner) -> Vec<ArrayRef> {
    // Each column sized exactly before it is filled: no doubling of a month's worth of text.
    let column = |id: &dyn Fn(&Key, u32) -> u32| -> ArrayRef {
        let (rows, bytes) = keys.clone().fold((0, 0), |(n, b), (k, m)| (n + 1, b + strings.name(id(k, m)).map_or(0, str::len)));
        let mut out = arrow::array::StringBuilder::with_capacity(rows, bytes);
        for (k, m) in keys.clone() {
            out.append_option(strings.name(id(k, m)));
        }
        Arc::new(out.finish())
    };
    vec![column(&|k, _| k.ns), column(&|k, _| k.pod), column(&|_, m| m)]
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
    cols.push(Arc::new(runs.iter().map(|r| r.secs).collect::<Int64Array>()));
    cols.push(Arc::new(runs.iter().map(|r| r.gpu_us).collect::<Int64Array>()));
    RecordBatch::try_new(runs_schema(), cols).expect("run columns match their schema")
}

/// The day from its idle rollups, where both are current for `samples` (the day's file).
fn read_rollup(lake: &Lake, date: chrono::NaiveDate, samples: &Path, strings: &Mutex<Interner>, cluster: Option<&str>, min_secs: i64) -> Option<IdleDay> {
    use crate::lake::rollup::{read_kind, Rollup};
    let (Rollup::Current(holdings), Rollup::Current(stretches)) =
        (read_kind(lake, idle::HOLDINGS, date, samples), read_kind(lake, idle::STRETCHES, date, samples))
    else {
        return None;
    };
    match IdleDay::from_batches(&holdings, &stretches, strings, cluster, min_secs) {
        Ok(day) => Some(day),
        Err(why) => {
            tracing::warn!("not using the idle rollups of {date}, reading its samples: {why}");
            None
        }
    }
}
