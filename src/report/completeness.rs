//! Completeness: per day and source, the share of expected data present in the lake, and
//! the gaps the collector recorded. `run` exits with "data incomplete" when a source falls
//! under `run.min_completeness_pct` for the month.
//!
//! - `dcgm`: expected = the unit-steps each GPU (or MIG instance) existed that day: while DCGM
//!   reported it or its node's capacity named it (rows of `__unmeasured__` included), so an
//!   autoscaled node or a replaced board is expected only while it was there; present =
//!   measured GPU rows. A day collected only in part is also expected, at its edges' pool, for
//!   the steps it lacks; a day with no rows at all is measured against the largest pool of the
//!   window.
//! - `util`: expected as `dcgm`; present = GPU rows that carry a utilisation value (a missing,
//!   NaN or Inf utilisation is stored as null: the row is measured time, not utilisation).
//!   Averages of utilisation leave such rows out; this says how many there were.
//! - `kube`: expected = steps in the day; present = steps not covered by a recorded
//!   kube-state-metrics gap (the union over metrics); none on a day that was never collected
//!   (no GPU row and no recorded gap).

use std::collections::BTreeMap;

use arrow::array::RecordBatch;
use chrono::{Duration, NaiveDate, NaiveTime};
use datafusion::prelude::SessionContext;
use serde_json::{Map, Value};

use super::columns;
use super::render::{Cell, Report};
use super::{ReportError, Result};
use crate::domain::money::round_ratio;
use crate::domain::units::US_PER_HOUR;
use crate::domain::window::Window;
use crate::engine::run_query;
use crate::lake::rollup::Counts;
use crate::queries::Queries;

/// DCGM's GPU rows, those with a utilisation, those with energy, and kube-state-metrics' steps.
pub const SOURCES: [&str; 4] = ["dcgm", "util", "energy", "kube"];

/// One day of one source.
#[derive(Debug, Clone, PartialEq)]
pub struct DayCompleteness {
    pub date: NaiveDate,
    pub source: &'static str,
    pub expected: i64,
    pub present: i64,
    pub gap_ms: i64,
}

#[derive(Debug, Clone)]
pub struct Completeness {
    pub window: Window,
    pub step_s: i64,
    pub days: Vec<DayCompleteness>,
    /// GPU time no sample covered, per node (GPU-us, first and last step), most first.
    pub unmeasured: Vec<(String, i64, i64, i64)>,
    /// Nodes with two GPUs at one index at the same time (two nodes under one name: clusters
    /// mixed in the lake, `queries/mixed_nodes.sql`), with how many indexes.
    pub mixed_nodes: Vec<(String, i64)>,
}

fn shape(detail: impl Into<String>) -> ReportError {
    ReportError::Shape { report: "completeness", detail: detail.into() }
}

fn col_i64(b: &RecordBatch, name: &str) -> Result<Vec<i64>> {
    Ok(columns::ints("completeness", b, name)?.into_iter().map(|v| v.unwrap_or(0)).collect())
}

fn col_str(b: &RecordBatch, name: &str) -> Result<Vec<Option<String>>> {
    columns::strs("completeness", b, name)
}

fn col_ts(b: &RecordBatch, name: &str) -> Result<Vec<i64>> {
    Ok(columns::millis("completeness", b, name)?.into_iter().map(|v| v.unwrap_or(0)).collect())
}

/// Total length of the union of `[s, e)` intervals.
fn union_ms(mut intervals: Vec<(i64, i64)>) -> i64 {
    intervals.sort();
    let mut total = 0;
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in intervals {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// The completeness counts of day files (missing ones skipped) over `[start_ms, end_ms)`, each
/// folded on its own (`lake::rollup::DayCounts`, as the writer counts a day for its rollup).
async fn fold_days(
    lake: std::sync::Arc<crate::lake::Lake>,
    files: Vec<std::path::PathBuf>,
    start_ms: i64,
    end_ms: i64,
    cluster: Option<String>,
    threads: usize,
) -> Result<Vec<(String, crate::lake::rollup::Counts)>> {
    use crate::lake::rollup::DayCounts;
    let counted = tokio::task::spawn_blocking(move || -> std::result::Result<Vec<(String, crate::lake::rollup::Counts)>, crate::lake::rollup::BucketError> {
        let table = crate::lake::Table::GpuSamples;
        let files = lake.existing(&lake.table_dir(table), files).map_err(|source| crate::lake::scan::ScanError::List {
            table: table.name(),
            lake: lake.root().to_path_buf(),
            source,
        })?;
        let strings = std::sync::Mutex::new(crate::lake::intern::Interner::default());
        let parts = crate::lake::scan::fold_files(
            &lake,
            &files,
            &DayCounts::columns(),
            threads,
            Vec::new,
            |days: &mut Vec<(std::path::PathBuf, DayCounts)>, path, b| {
                if days.last().is_none_or(|(p, _)| p != path) {
                    days.push((path.to_path_buf(), DayCounts::default()));
                }
                days.last_mut().expect("a day to count into").1.add(&strings, path, &b, start_ms, end_ms)
            },
        )?;
        let strings = strings.into_inner().expect("interner lock");
        Ok(parts
            .into_iter()
            .flatten()
            .filter_map(|(path, counts)| {
                let date = crate::lake::passes::rolled::date_of(&path)?;
                Some((date.format("%Y-%m-%d").to_string(), counts.finish(&strings).of(cluster.as_deref())))
            })
            .collect())
    })
    .await
    .map_err(|source| ReportError::PassStopped { report: "completeness", pass: "the count of day files", source })??;
    Ok(counted)
}

/// Measures `window` up to `now` (later steps are not expected yet); `step_s` is the expected
/// grid where a day has no rows to tell it; `util_metrics` the metrics whose recorded gaps are
/// the utilisation's.
pub async fn compute(ctx: &SessionContext, queries: &Queries, window: &Window, step_s: u32, util_metrics: &[&str], now_ms: i64) -> Result<Completeness> {
    let (first, last) = window.date_bounds();
    let (ws, we) = (window.start.timestamp_millis(), window.end.timestamp_millis().min(now_ms).max(window.start.timestamp_millis()));
    let params = columns::window_params(window);
    let sql = queries.get("completeness")?;
    // A day at a time: the GROUP BY over split steps then holds a day's groups, not a month's.
    // A month's spills under the fair memory pool, and DataFusion 55 can fail a hash aggregate
    // that spilled after it grew past its share ("Decreasing allocation after spilling should
    // succeed"); the days are independent rows of the result anyway.
    // A whole day with a current GPU rollup answers from the counts kept in its footer (the
    // same numbers, counted by the writer); other days (cut by the window, no current rollup)
    // are counted by the same fold over their samples, on every core; an override of the SQL
    // runs on every day.
    let lake = crate::engine::session_lake(ctx).filter(|_| !queries.is_overridden("completeness"));
    let mut to_fold: Vec<std::path::PathBuf> = Vec::new();
    let cluster = crate::engine::session_cluster(ctx);
    let mut seen: BTreeMap<String, Counts> = BTreeMap::new();
    let mut per_day = Vec::new();
    for day in window.pieces(1) {
        let date = day.start.date_naive();
        let whole = day.start.time() == NaiveTime::MIN && day.end == (date + Duration::days(1)).and_time(NaiveTime::MIN).and_utc();
        if let Some(lake) = lake.as_ref() {
            let stored = if whole { crate::lake::rollup::day_counts(lake, date, &lake.partition_file(crate::lake::Table::GpuSamples, date)) } else { None };
            match stored {
                Some(stored) => {
                    let c = stored.of(cluster.as_deref());
                    if c.units > 0 {
                        seen.insert(date.format("%Y-%m-%d").to_string(), c);
                    }
                }
                None => to_fold.push(lake.partition_file(crate::lake::Table::GpuSamples, date)),
            }
            continue;
        }
        per_day.extend(run_query(ctx, "completeness", &sql, columns::window_params(&day)).await?);
    }
    if let Some(lake) = lake.filter(|_| !to_fold.is_empty()) {
        let threads = ctx.state().config().target_partitions();
        for (date, c) in fold_days(lake, to_fold, ws, window.end.timestamp_millis(), cluster.clone(), threads).await? {
            if c.units > 0 {
                seen.insert(date, c);
            }
        }
    }
    for b in &per_day {
        let (dates, rows, util_rows, units, steps_s) =
            (col_str(b, "date")?, col_i64(b, "gpu_rows")?, col_i64(b, "util_rows")?, col_i64(b, "units")?, col_i64(b, "step_s")?);
        let energy_rows = col_i64(b, "energy_rows")?;
        let (unit_steps, first, last) = (col_i64(b, "unit_steps")?, col_ts(b, "first_ts")?, col_ts(b, "last_ts")?);
        let (at_first, at_last) = (col_i64(b, "units_at_first")?, col_i64(b, "units_at_last")?);
        for i in 0..b.num_rows() {
            let d = dates[i].clone().ok_or_else(|| shape("null date"))?;
            let c = Counts {
                gpu_rows: rows[i],
                util_rows: util_rows[i],
                energy_rows: energy_rows[i],
                units: units[i],
                unit_steps: unit_steps[i],
                step_s: steps_s[i],
                first_ms: first[i],
                last_ms: last[i],
                units_at_first: at_first[i],
                units_at_last: at_last[i],
            };
            seen.insert(d, c);
        }
    }
    let mut unmeasured = Vec::new();
    for b in &run_query(ctx, "unmeasured", &queries.get("unmeasured")?, params.clone()).await? {
        let (node, us, first, last) = (col_str(b, "node")?, col_i64(b, "gpu_us")?, col_ts(b, "first_ts")?, col_ts(b, "last_ts")?);
        for i in 0..b.num_rows() {
            unmeasured.push((node[i].clone().unwrap_or_default(), us[i], first[i], last[i]));
        }
    }
    let mut mixed_nodes = Vec::new();
    for b in &run_query(ctx, "mixed_nodes", &queries.get("mixed_nodes")?, params.clone()).await? {
        let (node, indexes) = (col_str(b, "node")?, col_i64(b, "gpu_indexes")?);
        for i in 0..b.num_rows() {
            mixed_nodes.push((node[i].clone().unwrap_or_default(), indexes[i]));
        }
    }
    if !mixed_nodes.is_empty() {
        tracing::warn!("{}", mixed_nodes_note(&mixed_nodes));
    }
    let sql = queries.get("gaps")?;
    let gap_batches = run_query(ctx, "gaps", &sql, params[..2].to_vec()).await?;
    let mut gaps: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for b in &gap_batches {
        let (src, metric, s, e) = (col_str(b, "source")?, col_str(b, "metric")?, col_ts(b, "gap_start")?, col_ts(b, "gap_end")?);
        for i in 0..b.num_rows() {
            let source = src[i].clone().unwrap_or_default();
            // The collector records a window with no utilisation as `gpu_util|engine_active`.
            if source == "dcgm" && metric[i].as_deref().is_some_and(|m| m.split('|').any(|part| util_metrics.contains(&part))) {
                gaps.entry("util".into()).or_default().push((s[i], e[i]));
            }
            gaps.entry(source).or_default().push((s[i], e[i]));
        }
    }

    let step = seen.values().map(|v| v.step_s).filter(|s| *s > 0).min().unwrap_or(step_s as i64).max(1);
    let pool = seen.values().map(|v| v.units).max().unwrap_or(0);
    let mut days = Vec::new();
    let mut d = first;
    while d <= last {
        let ds = d.and_time(NaiveTime::MIN).and_utc().timestamp_millis().max(ws);
        let de = (d + Duration::days(1)).and_time(NaiveTime::MIN).and_utc().timestamp_millis().min(we).max(ds);
        let steps_expected = (de - ds) / (step * 1000);
        let key = d.format("%Y-%m-%d").to_string();
        let clip = |source: &str| -> i64 {
            let list = gaps
                .get(source)
                .map(|g| {
                    g.iter()
                        .filter_map(|&(s, e)| {
                            let (s, e) = (s.max(ds), e.min(de));
                            (s < e).then_some((s, e))
                        })
                        .collect()
                })
                .unwrap_or_default();
            union_ms(list)
        };
        let (rows, util_rows, energy_rows, expected) = match seen.get(&key) {
            Some(c) => (c.gpu_rows, c.util_rows, c.energy_rows, expected_unit_steps(c, ds, de, step * 1000)),
            None => (0, 0, 0, pool * steps_expected),
        };
        let dcgm_gap = clip("dcgm");
        days.push(DayCompleteness { date: d, source: "dcgm", expected, present: rows, gap_ms: dcgm_gap });
        days.push(DayCompleteness { date: d, source: "util", expected, present: util_rows, gap_ms: clip("util") });
        // Energy missing while DCGM answered (NaN, Inf, blanks) is no recorded gap: only
        // DCGM's own gaps are.
        days.push(DayCompleteness { date: d, source: "energy", expected, present: energy_rows, gap_ms: dcgm_gap });
        let kube_gap = clip("kube");
        let kube_missing = (kube_gap + step * 1000 - 1) / (step * 1000);
        // A day with no GPU row and no recorded gap of any source was never collected: its
        // kube-state-metrics are missing too, not whole.
        let collected = seen.contains_key(&key) || gaps.values().flatten().any(|&(s, e)| s < de && e > ds);
        let kube_present = if collected { (steps_expected - kube_missing).max(0) } else { 0 };
        days.push(DayCompleteness { date: d, source: "kube", expected: steps_expected, present: kube_present, gap_ms: kube_gap });
        d += Duration::days(1);
    }
    Ok(Completeness { window: *window, step_s: step, days, unmeasured, mixed_nodes })
}

/// What the lake's nodes with two GPUs at one index at once say.
fn mixed_nodes_note(mixed: &[(String, i64)]) -> String {
    let list: Vec<String> = mixed.iter().take(10).map(|(n, k)| format!("{n} ({k} GPU indexes)")).collect();
    format!(
        "{} nodes hold two GPUs at one index at the same time: {}{}. Two nodes under one name: several clusters collected as one (set prometheus.cluster_label, then collect the window again with --replace), or an exporter without the gpu label",
        mixed.len(),
        list.join(", "),
        if mixed.len() > 10 { ", ..." } else { "" }
    )
}

/// The unit-steps of `[ds, de)` the pool held, by a day's counts: each (unit, step) with a row,
/// and where the rows start after `ds` or end before `de` (a collect that has not reached the
/// day's end, or started late), the units at that edge for every step the rows lack.
fn expected_unit_steps(c: &Counts, ds: i64, de: i64, step_ms: i64) -> i64 {
    let head = ((c.first_ms - ds) / step_ms).max(0);
    let tail = ((de - (c.last_ms + step_ms)) / step_ms).max(0);
    c.unit_steps + c.units_at_first * head + c.units_at_last * tail
}

impl Completeness {
    /// (expected, present) over the window for `source`.
    pub fn totals(&self, source: &str) -> (i64, i64) {
        self.days.iter().filter(|d| d.source == source).fold((0, 0), |(e, p), d| (e + d.expected, p + d.present))
    }

    /// Percent present for `source` over the window, in hundredths (10000 = 100.00%).
    pub fn pct_centi(&self, source: &str) -> i128 {
        let (e, p) = self.totals(source);
        if e == 0 {
            0
        } else {
            round_ratio(p as i128 * 100, e as i128, 2)
        }
    }

    /// The sources under `threshold_pct` over the window: `dcgm 52.31% (1500 of 2868)`, the
    /// expected being the GPU-steps that existed; for DCGM, the nodes whose GPUs existed
    /// without samples, most first: `dcgm 97.99% (58800 of 60000; without samples: gpu-3
    /// 16.00 GPU-h 10:00-12:00)`.
    pub fn short_sources(&self, threshold_pct: f64) -> Vec<String> {
        let threshold = (threshold_pct * 100.0).round() as i128;
        SOURCES
            .iter()
            .filter(|s| self.pct_centi(s) < threshold)
            .map(|s| {
                let (e, p) = self.totals(s);
                let lacking = match *s {
                    "dcgm" => self.lacking_samples(3),
                    // Their power and energy were missing, NaN, Inf, a DCGM blank or impossible.
                    "energy" => "; the other GPU-steps have no energy reading and bill no energy or power cost".to_string(),
                    _ => String::new(),
                };
                format!("{s} {}% ({p} of {e}{lacking})", crate::domain::money::format_units(self.pct_centi(s), 2))
            })
            .collect()
    }

    /// "; without samples: NODE H GPU-h FROM-TO, ..." for the first `n` nodes whose GPUs
    /// existed without a sample (`__unmeasured__`), or nothing.
    fn lacking_samples(&self, n: usize) -> String {
        if self.unmeasured.is_empty() {
            return String::new();
        }
        let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).map_or(String::new(), |t| t.format("%Y-%m-%dT%H:%MZ").to_string());
        let step_ms = self.step_s * 1000;
        let list: Vec<String> = self
            .unmeasured
            .iter()
            .take(n)
            .map(|(node, us, a, b)| {
                format!("{node} {} GPU-h {} to {}", crate::domain::money::format_units(round_ratio(*us as i128, US_PER_HOUR, 2), 2), at(*a), at(*b + step_ms))
            })
            .collect();
        let more = self.unmeasured.len().saturating_sub(n);
        format!("; without samples: {}{}", list.join(", "), if more > 0 { format!(" and {more} more nodes") } else { String::new() })
    }

    /// Why the window's reports are made from incomplete data, if they are: a source under
    /// `threshold_pct` of what the pool should have given (a missing day, an unreadable day, a
    /// collect killed before it published, a metric that came back empty).
    pub fn verdict(&self, threshold_pct: f64) -> Option<String> {
        let short = self.short_sources(threshold_pct);
        (!short.is_empty()).then(|| {
            format!("{} for {} is under run.min_completeness_pct = {threshold_pct}% of the GPU-steps that existed", short.join(", "), self.window.label())
        })
    }

    pub fn to_report(&self) -> Report {
        let dec = |units: i128| Cell::Dec { units, decimals: 2 };
        let pct = |present: i64, expected: i64| if expected == 0 { Cell::Null } else { dec(round_ratio(present as i128 * 100, expected as i128, 2)) };
        let rows = self
            .days
            .iter()
            .map(|d| {
                vec![
                    Cell::Str(d.date.format("%Y-%m-%d").to_string()),
                    Cell::Str(d.source.to_string()),
                    Cell::Str(
                        match d.source {
                            "dcgm" => "GPU rows",
                            "util" => "GPU rows with utilisation",
                            "energy" => "GPU rows with energy",
                            _ => "steps",
                        }
                        .to_string(),
                    ),
                    Cell::Int(d.expected),
                    Cell::Int(d.present),
                    pct(d.present, d.expected),
                    dec(round_ratio(d.gap_ms as i128, 60_000, 2)),
                ]
            })
            .collect();
        let mut notes = Vec::new();
        let mut meta = Map::new();
        for s in SOURCES {
            let (e, p) = self.totals(s);
            let gap: i64 = self.days.iter().filter(|d| d.source == s).map(|d| d.gap_ms).sum();
            notes.push(format!(
                "{s}: {p} of {e} expected present ({}%), {} minutes of recorded gaps",
                crate::domain::money::format_units(self.pct_centi(s), 2),
                crate::domain::money::format_units(round_ratio(gap as i128, 60_000, 2), 2)
            ));
            let mut m = Map::new();
            m.insert("expected".into(), Value::from(e));
            m.insert("present".into(), Value::from(p));
            m.insert("gap_ms".into(), Value::from(gap));
            meta.insert(s.to_string(), Value::Object(m));
        }
        if !self.unmeasured.is_empty() {
            let total: i64 = self.unmeasured.iter().map(|u| u.1).sum();
            let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).map_or(String::new(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
            let list: Vec<String> = self
                .unmeasured
                .iter()
                .take(10)
                .map(|(n, us, a, b)| {
                    format!("{n} {} GPU-h ({} to {})", crate::domain::money::format_units(round_ratio(*us as i128, US_PER_HOUR, 2), 2), at(*a), at(*b))
                })
                .collect();
            notes.push(format!(
                "dcgm: {} GPU-hours of the pool had no sample, even within the lookback ({}): {}{}",
                crate::domain::money::format_units(round_ratio(total as i128, US_PER_HOUR, 2), 2),
                crate::domain::units::UNMEASURED,
                list.join("; "),
                if self.unmeasured.len() > 10 { format!("; and {} more nodes", self.unmeasured.len() - 10) } else { String::new() }
            ));
            let mut m = Map::new();
            for (n, us, _, _) in &self.unmeasured {
                m.insert(n.clone(), Value::from(*us));
            }
            meta.insert("unmeasured_gpu_us".into(), Value::Object(m));
        }
        if !self.mixed_nodes.is_empty() {
            notes.push(mixed_nodes_note(&self.mixed_nodes));
            meta.insert("mixed_nodes".into(), Value::Array(self.mixed_nodes.iter().map(|(n, _)| Value::String(n.clone())).collect()));
        }
        notes.push(format!("window {} to {}; step {} s", self.window.start.to_rfc3339(), self.window.end.to_rfc3339(), self.step_s));
        meta.insert("window_start".into(), Value::String(self.window.start.to_rfc3339()));
        meta.insert("window_end".into(), Value::String(self.window.end.to_rfc3339()));
        Report {
            name: "completeness".into(),
            title: format!("Data completeness {}", self.window.label()),
            columns: ["date", "source", "unit", "expected", "present", "present_pct", "gap_minutes"].map(String::from).to_vec(),
            rows,
            total: None,
            notes,
            meta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{expected_unit_steps, union_ms, Counts};

    /// 23 unit-steps existed between 00:00 and 00:05 (30 s steps; the rows' own count), two
    /// units at each edge. Measured to 00:05 nothing more is expected; to 00:06 the two units
    /// standing at the last row are expected for the two steps not collected yet, and from
    /// 23:59 before (a window starting earlier than the rows) for the two steps before them.
    #[test]
    fn a_day_is_expected_where_it_existed_and_where_it_was_not_collected() {
        let c = Counts {
            gpu_rows: 21,
            util_rows: 21,
            energy_rows: 21,
            units: 3,
            unit_steps: 23,
            step_s: 30,
            first_ms: 0,
            last_ms: 270_000,
            units_at_first: 2,
            units_at_last: 2,
        };
        assert_eq!(expected_unit_steps(&c, 0, 300_000, 30_000), 23);
        assert_eq!(expected_unit_steps(&c, 0, 360_000, 30_000), 27);
        assert_eq!(expected_unit_steps(&c, -60_000, 300_000, 30_000), 27);
    }

    #[test]
    fn overlapping_gaps_count_once() {
        assert_eq!(union_ms(vec![]), 0);
        assert_eq!(union_ms(vec![(0, 10), (5, 20), (30, 40)]), 30);
        assert_eq!(union_ms(vec![(30, 40), (0, 10), (10, 15)]), 25);
    }
}
