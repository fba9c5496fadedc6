//! `gpuledger collect`: DCGM and pod-lifecycle history from Prometheus into the lake.
//!
//! A run takes the lake's lock, fetches the whole window (every query, chunked, a bounded
//! number in flight) before it touches the lake, then merges each affected day into its
//! file (rows inside the window are replaced, rows outside kept) and publishes it
//! atomically, and only then advances the checkpoints. A failed fetch leaves the lake and
//! the checkpoints as they were; a run killed while publishing is repaired by running it
//! again, because every write is an idempotent replace.

pub mod dcgm;
pub mod kube;
pub mod labels;
pub mod prometheus;
pub mod state;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::{DataType, Int32Type, TimestampMillisecondType};
use chrono::{DateTime, NaiveDate, Utc};
use futures::{StreamExt, TryStreamExt};

use crate::config::PrometheusConfig;
use crate::lake::reader::read_partition;
use crate::lake::rows::{NodeRow, NodesBuilder};
use crate::domain::units::UNMEASURED;
use crate::lake::{write_partition, Lake, Table, WriteError};
use crate::progress::{Progress, ProgressMode};
use dcgm::DcgmGrid;
use crate::domain::dcgm_field::Field;
use kube::{KubeMetric, KubeState};
use prometheus::{fmt_ms, PromClient, PromError, Series};
use state::{Checkpoints, LakeLock, StateError};

pub const SOURCES: [&str; 2] = ["dcgm", "kube"];
const DAY_MS: i64 = 86_400_000;

/// `#[error(transparent)]` hides the carried error from the chain: answer for it.
impl crate::exit::ExitStatus for CollectError {
    fn exit_code(&self) -> Option<u8> {
        match self {
            CollectError::State(s) => crate::exit::ExitStatus::exit_code(s),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error(transparent)]
    Prometheus(#[from] PromError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("merging {table} for {date}: {message}")]
    Merge { table: &'static str, date: NaiveDate, message: String },
    #[error(
        "re-collecting {window} would replace what the lake holds with less: {losses}. Prometheus returned less than the lake has (its retention passed? a metric renamed or mistyped in [prometheus.metrics]? a wrong tenant header?); the lake is unchanged. Run collect with --replace to replace it anyway"
    )]
    WouldLose { window: String, losses: String },
    #[error(
        "the window {window} starts before what Prometheus still keeps: {server} keeps {retention} (storageRetention), samples from about {horizon} on. What it has dropped cannot be collected again, and the lake keeps its copy as it is; nothing was fetched. Collect from {next} or later (collect --from {next}), or raise the server's --storage.tsdb.retention.time"
    )]
    BeyondRetention { window: String, server: String, retention: String, horizon: String, next: String },
}

pub type Result<T, E = CollectError> = std::result::Result<T, E>;

/// What a finished run did.
#[derive(Debug, Clone, Default)]
pub struct CollectSummary {
    pub from: i64,
    pub to: i64,
    pub queries: usize,
    pub samples: u64,
    pub gpu_rows: usize,
    pub pods: usize,
    pub gaps: usize,
    /// GPU-seconds of the pool no sample covered (rows of namespace `__unmeasured__`).
    pub unmeasured_gpu_s: f64,
    pub fetch_secs: f64,
    /// Summed over concurrent queries: waiting on Prometheus, and decoding its JSON.
    pub prometheus_secs: f64,
    pub decode_secs: f64,
    pub assemble_secs: f64,
    pub write_secs: f64,
}

/// One query of a run.
#[derive(Debug, Clone)]
enum Job {
    Dcgm(Field),
    Kube(KubeMetric),
}

/// The window to collect: explicit, or from the checkpoint (or `initial_days` back) to now
/// minus the lag; both ends on the step grid.
pub fn resolve_window(
    lake: &Lake,
    cfg: &PrometheusConfig,
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<(i64, i64)> {
    let step = cfg.step_secs as i64 * 1000;
    let to_ms = to.map_or(now.timestamp_millis() - cfg.lag_secs as i64 * 1000, |t| t.timestamp_millis());
    let from_ms = match from {
        Some(f) => f.timestamp_millis(),
        None => {
            let cps = Checkpoints::load(lake)?;
            match SOURCES.iter().filter_map(|s| cps.get(s)).min() {
                Some(t) => t.timestamp_millis(),
                None => (now.timestamp_millis() - cfg.initial_days as i64 * DAY_MS).div_euclid(DAY_MS) * DAY_MS,
            }
        }
    };
    Ok((from_ms.div_euclid(step) * step, to_ms.div_euclid(step) * step))
}

/// Measured GPU rows of a day's part of the window, and how many carry each metric: what a
/// re-collect must not shrink.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Held {
    rows: u64,
    util: u64,
    memory: u64,
    energy: u64,
}

impl Held {
    fn add(&mut self, b: &RecordBatch, w0: i64, w1: i64) {
        let ts = b.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
        let ns = arrow::compute::cast(b.column_by_name("namespace").expect("namespace"), &DataType::Utf8).expect("cast to utf8");
        let ns = ns.as_string::<i32>();
        let (util, mem, energy) = (b.column_by_name("util_pct").expect("util"), b.column_by_name("mem_used_mib").expect("mem"), b.column_by_name("energy_j").expect("energy"));
        for i in 0..b.num_rows() {
            let t = ts.value(i);
            if t < w0 || t >= w1 || (ns.is_valid(i) && ns.value(i) == UNMEASURED) {
                continue;
            }
            self.rows += 1;
            self.util += u64::from(util.is_valid(i));
            self.memory += u64::from(mem.is_valid(i));
            self.energy += u64::from(energy.is_valid(i));
        }
    }

    /// What `new` lacks of `self`, as words; None when nothing.
    fn lost_in(&self, new: &Held) -> Option<String> {
        let parts: Vec<String> = [("GPU rows", self.rows, new.rows), ("utilisation values", self.util, new.util), ("memory values", self.memory, new.memory), ("energy values", self.energy, new.energy)]
            .iter()
            .filter(|(_, old, new)| new < old)
            .map(|(what, old, new)| format!("{what} {old} -> {new}"))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// The measured rows the lake holds for `date` within `[w0, w1)` (nothing where no file).
fn held_in_lake(lake: &Lake, date: NaiveDate, w0: i64, w1: i64) -> Result<Held> {
    let mut held = Held::default();
    let columns = ["ts", "namespace", "util_pct", "mem_used_mib", "energy_j"];
    let scan = crate::lake::scan::OrderedScan::start(lake, Table::GpuSamples, date, date, &columns)
        .map_err(|e| CollectError::Merge { table: Table::GpuSamples.name(), date, message: e.to_string() })?;
    for batch in scan {
        let (_, b) = batch.map_err(|e| CollectError::Merge { table: Table::GpuSamples.name(), date, message: e.to_string() })?;
        held.add(&b, w0, w1);
    }
    Ok(held)
}

/// A window that starts before the server's retention horizon (now minus its
/// `storageRetention`) is refused before anything is fetched: what the server has dropped would
/// come back as nothing, and the lake is then the only copy. Servers that do not state a
/// retention (Thanos Query, Mimir) are not asked twice; the loss guard still holds there.
async fn refuse_beyond_retention(client: &PromClient, from: i64, to: i64, step: i64, now_ms: i64) -> Result<()> {
    let Some((keep, text)) = client.retention().await else {
        return Ok(());
    };
    let horizon = now_ms - keep.as_millis().min(i64::MAX as u128) as i64;
    if from >= horizon {
        return Ok(());
    }
    // The first step boundary after the horizon, so the suggested window is on the lake grid.
    let next = horizon.div_euclid(step) * step + step;
    Err(CollectError::BeyondRetention {
        window: format!("{} to {}", fmt_ms(from), fmt_ms(to)),
        server: client.display_base().to_string(),
        retention: text,
        horizon: fmt_ms(horizon),
        next: fmt_ms(next),
    })
}

/// Runs one collection over `[from, to)`. Where the lake already holds some of the window, the
/// new rows replace it only if they are not less (fewer measured GPU rows, or fewer rows with a
/// metric), unless `replace`: otherwise the run fails before writing anything.
pub async fn collect(lake: &Lake, cfg: &PrometheusConfig, from: i64, to: i64, progress: ProgressMode, replace: bool) -> Result<CollectSummary> {
    let _lock = LakeLock::acquire(lake, "collect")?;
    let removed = lake.clean_orphans().map_err(|source| WriteError::Io { path: lake.root().to_path_buf(), source })?;
    if removed > 0 {
        tracing::warn!("removed {removed} temp files left by an interrupted writer");
    }
    let mut summary = CollectSummary { from, to, ..CollectSummary::default() };
    if from >= to {
        tracing::info!("nothing to collect: window {} to {} is empty", fmt_ms(from), fmt_ms(to));
        return Ok(summary);
    }
    let client = PromClient::new(cfg)?;
    let step = cfg.step_secs as i64 * 1000;
    tracing::info!("collecting {} to {} from {}", fmt_ms(from), fmt_ms(to), client.display_base());
    refuse_beyond_retention(&client, from, to, step, Utc::now().timestamp_millis()).await?;

    // 1. Fetch everything first: nothing is written unless every query succeeded.
    let t0 = std::time::Instant::now();
    let chunk = cfg.chunk_secs as i64 * 1000;
    let mut tasks: Vec<(Job, i64, i64)> = Vec::new();
    let mut c = from;
    while c < to {
        let end = (c + chunk).min(to);
        for f in Field::ALL {
            // energy needs the counter one step past the window to price its last step
            let e = if f == Field::Energy && end == to { end + step } else { end };
            tasks.push((Job::Dcgm(f), c, e));
        }
        for m in KubeMetric::ALL {
            tasks.push((Job::Kube(m), c, end));
        }
        c = end;
    }
    summary.queries = tasks.len();
    let bar = Progress::new(progress, "queries", tasks.len() as u64);
    let client = Arc::new(client);
    let results: Vec<(Job, i64, i64, Vec<Series>)> = futures::stream::iter(tasks.into_iter().map(|(job, s, e)| {
        let client = Arc::clone(&client);
        let selector = match &job {
            Job::Dcgm(f) => cfg.metrics.of(*f).to_string(),
            Job::Kube(m) => m.selector(cfg),
        };
        // The first DCGM chunk reaches one lookback back: a step at the window's start with no
        // scrape of its own takes the sample before it, as Prometheus would.
        let query_start = if matches!(job, Job::Dcgm(_)) && s == from { s - cfg.lookback_secs as i64 * 1000 } else { s };
        let bar = &bar;
        async move {
            let series = client.range_vector(&selector, query_start, e).await?;
            bar.inc(&selector);
            Ok::<_, PromError>((job, s, e, series))
        }
    }))
    .buffer_unordered(cfg.concurrency)
    .try_collect() // the first failure stops the run; queries in flight are dropped
    .await?;
    bar.finish();
    summary.fetch_secs = t0.elapsed().as_secs_f64();
    summary.prometheus_secs = client.stats.http_secs();
    summary.decode_secs = client.stats.decode_secs();
    let t_assemble = std::time::Instant::now();

    // 2. Assemble in a fixed order (responses arrive in any order), an HA pair's copies of each
    // series folded into one.
    let mut results = results;
    let mut replica_copies = 0usize;
    for r in &mut results {
        summary.samples += r.3.iter().map(|x| x.samples.len() as u64).sum::<u64>();
        let (series, copies) = labels::collapse_replicas(std::mem::take(&mut r.3), &cfg.replica_labels);
        r.3 = series;
        replica_copies += copies;
    }
    if replica_copies > 0 {
        tracing::info!(
            "{replica_copies} series came twice or more, differing only in a replica label ({}): each read as one series (prometheus.replica_labels)",
            cfg.replica_labels.join(", ")
        );
    }
    results.sort_by_key(|(job, s, _, _)| (*s, job_order(job)));
    let mut clusters = Vec::new();
    for (name, part) in by_cluster(results, cfg) {
        let c = assemble(&name, &part, cfg, from, to);
        summary.pods += c.kube.pods_seen();
        summary.gaps += c.gaps.len();
        clusters.push(c);
    }
    if clusters.len() > 1 {
        tracing::info!(
            "{} clusters by label {}: {} (prometheus.cluster_label); each read on its own, rows kept apart by the lake's cluster column",
            clusters.len(),
            cfg.cluster_label.as_deref().unwrap_or(""),
            clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
        );
    }

    summary.assemble_secs = t_assemble.elapsed().as_secs_f64();

    // 3. The GPU rows of each day, checked against what the lake holds of the window: a
    // re-collect never replaces history with less unless told to. (Each day's rows are built
    // again to publish them: holding a long window's rows would double the run's memory.)
    let t1 = std::time::Instant::now();
    let day0 = from.div_euclid(DAY_MS) * DAY_MS;
    let mut days: Vec<(NaiveDate, i64, usize, usize, i64, i64)> = Vec::new();
    let mut losses = Vec::new();
    let mut d = day0;
    while d < to {
        let date = DateTime::from_timestamp_millis(d).expect("valid").date_naive();
        let (c0, c1) = (((d.max(from) - from) / step) as usize, ((((d + DAY_MS).min(to)) - from) / step) as usize);
        let (w0, w1) = (d.max(from), (d + DAY_MS).min(to));
        // A day the lake holds no measured row of cannot lose any: its rows are built once, to publish.
        let old = held_in_lake(lake, date, w0, w1)?;
        if old.rows > 0 {
            let gpu = gpu_batch(&clusters, c0, c1);
            let mut new = Held::default();
            new.add(&gpu, w0, w1);
            if let Some(lost) = old.lost_in(&new) {
                losses.push(format!("{date}: {lost}"));
            }
        }
        days.push((date, d, c0, c1, w0, w1));
        d += DAY_MS;
    }
    if !losses.is_empty() {
        if !replace {
            return Err(CollectError::WouldLose { window: format!("{} to {}", fmt_ms(from), fmt_ms(to)), losses: losses.join("; ") });
        }
        tracing::warn!("--replace: the lake's rows of {} to {} are replaced with less: {}", fmt_ms(from), fmt_ms(to), losses.join("; "));
    }

    // 4. Publish day by day, merging with what the lake holds outside the window.
    let mut unmeasured: BTreeMap<String, f64> = BTreeMap::new();
    for (date, d, c0, c1, w0, w1) in days {
        let gpu = gpu_batch(&clusters, c0, c1);
        summary.gpu_rows += gpu.num_rows();
        for (node, gpu_s) in unmeasured_gpu_seconds(&gpu, cfg.cluster_label.is_some()) {
            *unmeasured.entry(node).or_default() += gpu_s;
        }
        let gpu = merge_window(lake, Table::GpuSamples, date, "ts", w0, w1, gpu)?;
        write_partition(lake, Table::GpuSamples, date, &gpu)?;
        write_partition(lake, Table::Nodes, date, &nodes_of(&gpu))?;
        let each = |table: Table, f: &dyn Fn(&ClusterRows) -> RecordBatch| per_cluster(table, &clusters, f);
        let pending = merge_window(lake, Table::PendingSamples, date, "ts", w0, w1, each(Table::PendingSamples, &|c| c.kube.pending_batch(w0, w1)))?;
        write_partition(lake, Table::PendingSamples, date, &pending)?;
        let quotas = merge_window(lake, Table::Quotas, date, "ts", w0, w1, each(Table::Quotas, &|c| c.kube.quotas_batch(w0, w1)))?;
        write_partition(lake, Table::Quotas, date, &quotas)?;
        for table in [Table::NodeCapacity, Table::KueuePending] {
            let b = merge_window(lake, table, date, "ts", w0, w1, each(table, &|c| c.kube.gauge_batch(table, w0, w1)))?;
            write_partition(lake, table, date, &b)?;
        }
        let b = merge_window(lake, Table::NamespaceLabels, date, "ts", w0, w1, each(Table::NamespaceLabels, &|c| c.kube.namespace_labels_batch(w0, w1)))?;
        write_partition(lake, Table::NamespaceLabels, date, &b)?;
        let day_gaps = each(Table::Gaps, &|c| {
            let day: Vec<_> = c.gaps.iter().filter(|g| g.2 >= d && g.2 < d + DAY_MS).cloned().collect();
            gaps_batch(&day)
        });
        let g = merge_window(lake, Table::Gaps, date, "gap_start", w0, w1, day_gaps)?;
        write_partition(lake, Table::Gaps, date, &g)?;
    }
    let mut pods: BTreeMap<NaiveDate, Vec<RecordBatch>> = BTreeMap::new();
    for c in &clusters {
        for (date, batch) in c.kube.pods_by_day() {
            pods.entry(date).or_default().push(crate::lake::rows::with_cluster(batch, &c.name));
        }
    }
    for (date, batches) in pods {
        let batch = concat_batches(&Table::Pods.schema(), &batches).map_err(merge_err(Table::Pods, date))?;
        let merged = merge_pods(lake, date, batch)?;
        write_partition(lake, Table::Pods, date, &merged)?;
    }
    summary.write_secs = t1.elapsed().as_secs_f64();
    if !unmeasured.is_empty() {
        let total: f64 = unmeasured.values().sum();
        let mut worst: Vec<(&String, &f64)> = unmeasured.iter().collect();
        worst.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = worst.iter().take(10).map(|(n, s)| format!("{n} {:.2}", *s / 3600.0)).collect();
        tracing::warn!(
            "{:.2} GPU-hours of the pool had no sample, even within prometheus.lookback_secs = {} (an exporter down, missed scrapes): row {UNMEASURED}; GPU-hours by node: {}{}",
            total / 3600.0,
            cfg.lookback_secs,
            list.join(", "),
            if worst.len() > 10 { format!(" and {} more nodes", worst.len() - 10) } else { String::new() }
        );
    }
    summary.unmeasured_gpu_s = unmeasured.values().fold(0.0, |a, b| a + b);

    // 5. Only now advance the checkpoints.
    let mut cps = Checkpoints::load(lake)?;
    let to_t = DateTime::from_timestamp_millis(to).expect("valid");
    for s in SOURCES {
        if cps.get(s).is_none_or(|t| t < to_t) {
            cps.set(s, to_t);
        }
    }
    cps.save(lake)?;
    Ok(summary)
}

/// One cluster's assembled window: its GPU grid, kube-state-metrics and gaps.
struct ClusterRows {
    name: String,
    grid: DcgmGrid,
    kube: KubeState,
    gaps: Vec<(&'static str, String, i64, i64)>,
}

type Fetched = (Job, i64, i64, Vec<Series>);

/// The fetched series split by cluster (`prometheus.cluster_label`; `cluster_name` where unset
/// or a series lacks it), every query of the run present in each cluster's part (an empty
/// answer there is a gap of that cluster). Sorted by cluster name.
fn by_cluster(results: Vec<Fetched>, cfg: &PrometheusConfig) -> BTreeMap<String, Vec<Fetched>> {
    let Some(label) = cfg.cluster_label.as_deref() else {
        return BTreeMap::from([(cfg.cluster_name.clone(), results)]);
    };
    let name_of = |s: &Series| s.labels.get(label).filter(|v| !v.is_empty()).cloned();
    let mut names = std::collections::BTreeSet::new();
    let mut unlabelled = 0usize;
    for s in results.iter().flat_map(|r| &r.3) {
        match name_of(s) {
            Some(n) => {
                names.insert(n);
            }
            None => unlabelled += 1,
        }
    }
    if unlabelled > 0 {
        tracing::warn!(
            "{unlabelled} series carry no {label} label (prometheus.cluster_label): read as cluster {} (prometheus.cluster_name)",
            cfg.cluster_name
        );
    }
    if unlabelled > 0 || names.is_empty() {
        names.insert(cfg.cluster_name.clone());
    }
    let mut out: BTreeMap<String, Vec<Fetched>> = names.iter().map(|n| (n.clone(), Vec::with_capacity(results.len()))).collect();
    for (job, s, e, series) in results {
        let mut split: BTreeMap<&str, Vec<Series>> = BTreeMap::new();
        for x in series {
            let name = name_of(&x).unwrap_or_else(|| cfg.cluster_name.clone());
            let key = names.get(name.as_str()).expect("every cluster name collected").as_str();
            split.entry(key).or_default().push(x);
        }
        for (name, part) in out.iter_mut() {
            part.push((job.clone(), s, e, split.remove(name.as_str()).unwrap_or_default()));
        }
    }
    out
}

/// "cluster NAME: " where the run reads several clusters, else nothing (log prefixes).
fn in_cluster(name: &str, cfg: &PrometheusConfig) -> String {
    if cfg.cluster_label.is_some() { format!("cluster {name}: ") } else { String::new() }
}

/// Every cluster's GPU rows of cells `[c0, c1)`, each with its cluster.
fn gpu_batch(clusters: &[ClusterRows], c0: usize, c1: usize) -> RecordBatch {
    per_cluster(Table::GpuSamples, clusters, &|c| c.grid.batch(c0, c1))
}

/// `rows` of each cluster, with its cluster, as one batch of `table`.
fn per_cluster(table: Table, clusters: &[ClusterRows], rows: &dyn Fn(&ClusterRows) -> RecordBatch) -> RecordBatch {
    let batches: Vec<RecordBatch> = clusters.iter().map(|c| crate::lake::rows::with_cluster(rows(c), &c.name)).collect();
    concat_batches(&table.schema(), &batches).expect("batches of one table")
}

/// Assembles one cluster's fetched series onto the window's grid: DCGM cells (the lookback,
/// counters, the pool from kube-state-metrics' capacity), pods, and the gaps.
fn assemble(name: &str, results: &[Fetched], cfg: &PrometheusConfig, from: i64, to: i64) -> ClusterRows {
    let step = cfg.step_secs as i64 * 1000;
    let chunk = cfg.chunk_secs as i64 * 1000;
    let mut grid = DcgmGrid::new(from, to, cfg.step_secs);
    let mut kube = KubeState::new(from, to, cfg.step_secs);
    let mut gaps: Vec<(&'static str, String, i64, i64)> = Vec::new();
    let mut util_chunks: BTreeMap<i64, usize> = BTreeMap::new();
    for (job, s, e, series) in results {
        match job {
            Job::Dcgm(f) => {
                if matches!(f, Field::Util | Field::EngineActive) {
                    *util_chunks.entry(*s).or_default() += series.len();
                } else if matches!(f, Field::Power | Field::FbUsed) && series.is_empty() {
                    gaps.push(("dcgm", cfg.metrics.of(*f).to_string(), *s, (*e).min(to)));
                }
                grid.add(*f, series, cfg);
            }
            Job::Kube(m) => {
                if matches!(m, KubeMetric::Info | KubeMetric::Phase) && series.is_empty() {
                    gaps.push(("kube", m.selector(cfg), *s, *e));
                }
                kube.add(*m, series, cfg);
            }
        }
    }
    // Prometheus' lookback on the grid: each DCGM series, its chunks joined, stands over the
    // steps its scrapes miss (a longer scrape interval than the step, a missed scrape).
    let mut by_series: BTreeMap<(Field, &BTreeMap<String, String>), Vec<&[(i64, f64)]>> = BTreeMap::new();
    for (job, _, _, series) in results {
        if let Job::Dcgm(f) = job {
            for x in series {
                by_series.entry((*f, &x.labels)).or_default().push(&x.samples);
            }
        }
    }
    // Each series' chunks joined once: its own scrape interval, then the fill.
    let joined: Vec<(Field, &BTreeMap<String, String>, Vec<(i64, f64)>)> =
        by_series.into_iter().map(|((f, labels), parts)| (f, labels, parts.concat())).collect();
    let mut intervals: BTreeMap<Field, Vec<i64>> = BTreeMap::new();
    for (f, _, samples) in &joined {
        if let Some(g) = dcgm::median_gap(samples) {
            intervals.entry(*f).or_default().push(g);
        }
    }
    let typical: BTreeMap<Field, i64> = intervals
        .into_iter()
        .map(|(f, mut gaps)| {
            let mid = gaps.len() / 2;
            (f, *gaps.select_nth_unstable(mid).1)
        })
        .collect();
    let mut filled = 0usize;
    for (f, labels, samples) in &joined {
        filled += grid.fill(*f, labels, samples, cfg, typical.get(f).copied().unwrap_or(step));
    }
    let series_of = |field: Field| joined.iter().filter(move |(f, _, _)| *f == field).map(|(_, l, s)| (*l, s.as_slice()));
    grid.align_counters(series_of(Field::Energy), series_of(Field::Power), cfg);
    grid.fill_counters(series_of(Field::Energy), cfg);
    log_conventions(name, &joined, cfg);
    if let Some(util) = typical.get(&Field::Util).or_else(|| typical.get(&Field::EngineActive)) {
        tracing::info!(
            "{}DCGM scrape interval {:.0} s (median over series), lake step {} s; {filled} GPU-steps without a scrape of their own took the last sample within prometheus.lookback_secs = {}",
            in_cluster(name, cfg),
            *util as f64 / 1000.0,
            cfg.step_secs,
            cfg.lookback_secs
        );
    }
    drop(joined);
    let pool = grid.set_pool(kube.gpu_capacity(cfg.lookback_secs as i64 * 1000));
    if pool.names_disagree {
        tracing::warn!(
            "{}kube_node_status_capacity's node names share none with DCGM's ({}): the pool is the GPUs DCGM reported, GPU time of nodes without a DCGM exporter is not counted",
            in_cluster(name, cfg),
            cfg.labels.node.join(", ")
        );
    }
    for (node, gpus) in &pool.without_dcgm {
        tracing::warn!(
            "{}node {node}: kube-state-metrics reports up to {gpus} GPUs (nvidia.com/gpu) but no DCGM series names it: is dcgm-exporter running there? Its GPU time is {UNMEASURED}, model {}",
            in_cluster(name, cfg),
            crate::domain::units::UNKNOWN_MODEL
        );
    }
    for (s, n) in util_chunks {
        if n == 0 {
            gaps.push(("dcgm", format!("{}|{}", cfg.metrics.gpu_util, cfg.metrics.engine_active), s, (s + chunk).min(to)));
        }
    }
    gaps.sort();
    if grid.cells_seen() == 0 {
        tracing::warn!("{}no DCGM samples at all in {} to {}: is the DCGM exporter scraped?", in_cluster(name, cfg), fmt_ms(from), fmt_ms(to));
    }
    ClusterRows { name: name.to_string(), grid, kube, gaps }

}

/// Logs once per run how the DCGM series name their workload, per node: the conventions in use,
/// and the nodes that changed from one to another inside the window (a ServiceMonitor's
/// `honorLabels` flipped, a second exporter's ServiceMonitor).
fn log_conventions(cluster: &str, joined: &[(Field, &BTreeMap<String, String>, Vec<(i64, f64)>)], cfg: &PrometheusConfig) {
    let prefix = in_cluster(cluster, cfg);
    let workload = labels::WorkloadLabels::new(&cfg.labels);
    let node_pick = labels::LabelPick::plain(&cfg.labels.node);
    // node -> convention -> (first, last) sample time
    let mut seen: BTreeMap<&str, BTreeMap<labels::Convention, (i64, i64)>> = BTreeMap::new();
    let mut nodes: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for (f, l, samples) in joined {
        if !matches!(f, Field::Util | Field::EngineActive) || samples.is_empty() {
            continue;
        }
        let node = node_pick.get(l).unwrap_or("");
        nodes.insert(node);
        let Some(conv) = workload.convention(l) else { continue };
        let e = seen.entry(node).or_default().entry(conv).or_insert((i64::MAX, i64::MIN));
        e.0 = e.0.min(samples[0].0);
        e.1 = e.1.max(samples[samples.len() - 1].0);
    }
    let mut by_conv: BTreeMap<labels::Convention, usize> = BTreeMap::new();
    let mut mixed = Vec::new();
    for (node, convs) in &seen {
        for c in convs.keys() {
            *by_conv.entry(*c).or_default() += 1;
        }
        if convs.contains_key(&labels::Convention::Exported) && convs.contains_key(&labels::Convention::Plain) {
            let span = |c| convs.get(&c).map_or(String::new(), |&(a, b): &(i64, i64)| format!("{} to {}", fmt_ms(a), fmt_ms(b)));
            mixed.push(format!("{node} (exported_* {}, plain {})", span(labels::Convention::Exported), span(labels::Convention::Plain)));
        }
    }
    if !by_conv.is_empty() {
        let list: Vec<String> = by_conv.iter().map(|(c, n)| format!("{} on {n} nodes", c.label())).collect();
        tracing::info!("{prefix}DCGM workload labels, read per series: {}", list.join("; "));
    }
    let unmapped: Vec<&str> = nodes.iter().filter(|n| !seen.get(**n).is_some_and(|c| c.contains_key(&labels::Convention::Exported) || c.contains_key(&labels::Convention::Plain))).copied().collect();
    if !unmapped.is_empty() {
        tracing::warn!(
            "{prefix}{} nodes have DCGM series but none names a pod (idle the whole window, or an exporter without the pod mapping? prometheus.labels.pod): the chargeback gives their GPU time to the pods kube-state-metrics shows there, requests x running time: {}{}",
            unmapped.len(),
            unmapped.iter().take(10).copied().collect::<Vec<_>>().join(", "),
            if unmapped.len() > 10 { ", ..." } else { "" }
        );
    }
    if !mixed.is_empty() {
        tracing::info!(
            "{prefix}{} nodes changed label convention inside the window (a ServiceMonitor's honorLabels?), each series read by its own labels: {}",
            mixed.len(),
            mixed.iter().take(10).cloned().collect::<Vec<_>>().join("; ")
        );
    }
}

/// GPU-seconds of namespace `__unmeasured__` per node in a batch of GPU rows.
/// Nodes are named `cluster/node` where `qualified` (several clusters).
fn unmeasured_gpu_seconds(gpu: &RecordBatch, qualified: bool) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let ns = arrow::compute::cast(gpu.column_by_name("namespace").expect("namespace"), &DataType::Utf8).expect("cast to utf8");
    let node = arrow::compute::cast(gpu.column_by_name("node").expect("node"), &DataType::Utf8).expect("cast to utf8");
    let cluster = arrow::compute::cast(gpu.column_by_name("cluster").expect("cluster"), &DataType::Utf8).expect("cast to utf8");
    let (ns, node, cluster) = (ns.as_string::<i32>(), node.as_string::<i32>(), cluster.as_string::<i32>());
    let share = gpu.column_by_name("share").expect("share").as_primitive::<arrow::datatypes::Float64Type>();
    let step = gpu.column_by_name("step_s").expect("step_s").as_primitive::<Int32Type>();
    for i in 0..gpu.num_rows() {
        if ns.is_valid(i) && ns.value(i) == UNMEASURED {
            let name = if qualified && cluster.is_valid(i) { format!("{}/{}", cluster.value(i), node.value(i)) } else { node.value(i).to_string() };
            *out.entry(name).or_insert(0.0) += share.value(i) * step.value(i) as f64;
        }
    }
    out
}

fn job_order(job: &Job) -> (u8, u8) {
    match job {
        Job::Dcgm(f) => (0, *f as u8),
        Job::Kube(m) => (1, *m as u8),
    }
}

fn merge_err(table: Table, date: NaiveDate) -> impl Fn(arrow::error::ArrowError) -> CollectError {
    move |e| CollectError::Merge { table: table.name(), date, message: e.to_string() }
}

/// The day's existing rows with `column` outside `[w0, w1)`, plus `new`.
fn merge_window(lake: &Lake, table: Table, date: NaiveDate, column: &str, w0: i64, w1: i64, new: RecordBatch) -> Result<RecordBatch> {
    let Some(old) = read_partition(lake, table, date)? else { return Ok(new) };
    let ts = old.column_by_name(column).expect("time column").as_primitive::<TimestampMillisecondType>();
    let keep: BooleanArray = ts.iter().map(|t| Some(t.is_none_or(|t| t < w0 || t >= w1))).collect();
    let kept = filter_record_batch(&old, &keep).map_err(merge_err(table, date))?;
    concat_batches(&table.schema(), [&kept, &new]).map_err(merge_err(table, date))
}

/// The day's existing pods whose uid is not in `new`, plus `new`.
fn merge_pods(lake: &Lake, date: NaiveDate, new: RecordBatch) -> Result<RecordBatch> {
    let Some(old) = read_partition(lake, Table::Pods, date)? else { return Ok(new) };
    let new_uids: std::collections::BTreeSet<String> =
        new.column_by_name("uid").expect("uid").as_string::<i32>().iter().flatten().map(str::to_string).collect();
    let uids = old.column_by_name("uid").expect("uid").as_string::<i32>();
    let keep: BooleanArray = uids.iter().map(|u| Some(u.is_none_or(|u| !new_uids.contains(u)))).collect();
    let kept = filter_record_batch(&old, &keep).map_err(merge_err(Table::Pods, date))?;
    concat_batches(&Table::Pods.schema(), [&kept, &new]).map_err(merge_err(Table::Pods, date))
}

/// The day's inventory, derived from its GPU rows: first and last sample per unit.
fn nodes_of(gpu: &RecordBatch) -> RecordBatch {
    let str_col = |name: &str| arrow::compute::cast(gpu.column_by_name(name).expect("column"), &DataType::Utf8).expect("cast to utf8");
    let (node, uuid, model, mig, cluster) = (str_col("node"), str_col("gpu_uuid"), str_col("gpu_model"), str_col("mig_profile"), str_col("cluster"));
    let (node, uuid, model, mig, cluster) =
        (node.as_string::<i32>(), uuid.as_string::<i32>(), model.as_string::<i32>(), mig.as_string::<i32>(), cluster.as_string::<i32>());
    let gi = gpu.column_by_name("gpu_instance_id").expect("gi").as_primitive::<arrow::datatypes::Int16Type>();
    let idx = gpu.column_by_name("gpu_index").expect("idx").as_primitive::<arrow::datatypes::Int16Type>();
    let share = gpu.column_by_name("share").expect("share").as_primitive::<arrow::datatypes::Float64Type>();
    let total = gpu.column_by_name("mem_total_mib").expect("mem_total").as_primitive::<arrow::datatypes::Float32Type>();
    let ts = gpu.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
    type Key = (Option<String>, String, String, Option<i16>);
    let mut units: BTreeMap<Key, (i16, String, Option<String>, f64, Option<f32>, i64, i64)> = BTreeMap::new();
    for i in 0..gpu.num_rows() {
        let key = (cluster.is_valid(i).then(|| cluster.value(i).to_string()), node.value(i).to_string(), uuid.value(i).to_string(), gi.is_valid(i).then(|| gi.value(i)));
        let t = ts.value(i);
        let e = units.entry(key).or_insert_with(|| {
            (idx.value(i), model.value(i).to_string(), mig.is_valid(i).then(|| mig.value(i).to_string()), 0.0, None, t, t)
        });
        // a time-sliced GPU has several rows per step; its unit share is their sum per step
        if t == e.5 {
            e.3 += share.value(i);
        }
        if total.is_valid(i) {
            e.4 = Some(total.value(i));
        }
        e.5 = e.5.min(t);
        e.6 = e.6.max(t);
    }
    let mut by_cluster: BTreeMap<&Option<String>, NodesBuilder> = BTreeMap::new();
    for ((c, n, u, g), (i, m, p, s, fb, first, last)) in &units {
        let rows = by_cluster.entry(c).or_insert_with(NodesBuilder::new);
        rows.push(&NodeRow {
            node: n,
            gpu_uuid: u,
            gpu_index: *i,
            gpu_model: m,
            mig_profile: p.as_deref(),
            gpu_instance_id: *g,
            share: *s,
            mem_total_mib: *fb,
            first_seen: *first,
            last_seen: *last,
        });
    }
    let batches: Vec<RecordBatch> = by_cluster
        .into_iter()
        .map(|(c, rows)| match c {
            Some(c) => crate::lake::rows::with_cluster(rows.finish(), c),
            None => rows.finish(),
        })
        .collect();
    if batches.is_empty() {
        return NodesBuilder::new().finish();
    }
    concat_batches(&Table::Nodes.schema(), &batches).expect("batches of one table")
}

fn gaps_batch(gaps: &[(&'static str, String, i64, i64)]) -> RecordBatch {
    let src: arrow::array::DictionaryArray<Int32Type> = gaps.iter().map(|g| g.0).collect();
    let metric: arrow::array::DictionaryArray<Int32Type> = gaps.iter().map(|g| g.1.as_str()).collect();
    let start = arrow::array::TimestampMillisecondArray::from(gaps.iter().map(|g| g.2).collect::<Vec<_>>()).with_timezone("UTC");
    let end = arrow::array::TimestampMillisecondArray::from(gaps.iter().map(|g| g.3).collect::<Vec<_>>()).with_timezone("UTC");
    let reason: arrow::array::DictionaryArray<Int32Type> = gaps.iter().map(|_| "no data").collect();
    crate::lake::rows::table_batch(Table::Gaps, vec![Arc::new(src), Arc::new(metric), Arc::new(start), Arc::new(end), Arc::new(reason)])
}
