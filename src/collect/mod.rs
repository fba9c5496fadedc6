//! `gpuledger collect`: DCGM and pod-lifecycle history from Prometheus into the lake.
//!
//! A run takes the lake's lock, fetches the whole window (every query, chunked, a bounded
//! number in flight) before it touches the lake, then merges each affected day into its
//! file (rows inside the window are replaced, rows outside kept) and publishes it
//! atomically, and only then advances the checkpoints. A failed fetch leaves the lake and
//! the checkpoints as they were; a run killed while publishing is repaired by running it
//! again, because every write is an idempotent replace.

mod assemble;
pub mod dcgm;
mod error;
mod guards;
pub mod hami;
mod job;
pub mod kube;
pub mod labels;
mod merge;
pub mod prometheus;
pub mod state;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use chrono::{DateTime, NaiveDate, Utc};
use futures::{StreamExt, TryStreamExt};

use crate::config::{PrometheusConfig, SharingConfig};
use crate::domain::dcgm_field::Field;
use crate::domain::units::UNMEASURED;
use crate::lake::published::Published;
use crate::lake::{write_partition, Lake, Table, WriteError};
use crate::progress::{Progress, ProgressMode};
use assemble::{assemble, by_cluster, gaps_batch, gpu_batch, nodes_of, per_cluster, unmeasured_gpu_seconds, ClusterRows};
pub use error::{CollectError, MergeSource, Result};
use guards::{held_in_lake, refuse_beyond_retention, rows_in_lake, Held};
use hami::HamiMetric;
use job::Job;
use kube::KubeMetric;
use merge::{merge_by_uid, merge_window};
use prometheus::{fmt_ms, PromClient, PromError, Series};
use state::{Checkpoints, LakeLock};

pub const SOURCES: [&str; 2] = ["dcgm", "kube"];
const DAY_MS: i64 = 86_400_000;

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

/// The window to collect: explicit, or from the checkpoint (or `initial_days` back) to now
/// minus the lag; both ends on the step grid.
pub fn resolve_window(lake: &Lake, cfg: &PrometheusConfig, from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Result<(i64, i64)> {
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

/// Records `days` as published with their files as they are now, after a loss that cannot be
/// collected again (a day file deleted, a collect stopped mid-day, Prometheus's retention past);
/// returns what differed from the record, which the caller states. Under the lake's lock.
pub fn accept(lake: &Lake, days: &[NaiveDate]) -> Result<Vec<crate::lake::published::Finding>> {
    let _lock = LakeLock::acquire(lake, "collect --accept")?;
    // A day's rollups may be of its files before a writer stopped: dropped, the reports read
    // the accepted files themselves.
    for &date in days {
        for table in crate::lake::rollup::SOURCES {
            crate::lake::rollup::remove(lake, table, date)?;
        }
    }
    Ok(Published::record(lake, days.iter().copied())?)
}

/// Runs one collection over `[from, to)`. Where the lake already holds some of the window, the
/// new rows replace it only if they are not less (fewer measured GPU rows, or fewer rows with a
/// metric), unless `replace`: otherwise the run fails before writing anything. `sharing`: how a
/// GPU a sharing layer splits is divided among its holders.
pub async fn collect(
    lake: &Lake,
    cfg: &PrometheusConfig,
    sharing: &SharingConfig,
    from: i64,
    to: i64,
    progress: ProgressMode,
    replace: bool,
) -> Result<CollectSummary> {
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
        for m in HamiMetric::ALL {
            tasks.push((Job::Hami(m), c, end));
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
            Job::Hami(m) => m.name(cfg).to_string(),
        };
        // The first DCGM chunk reaches one lookback back: a step at the window's start with no
        // scrape of its own takes the sample before it, as Prometheus would.
        let query_start = if matches!(job, Job::Dcgm(_) | Job::Hami(_)) && s == from { s - cfg.lookback_secs as i64 * 1000 } else { s };
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
        let c = assemble(&name, &part, cfg, sharing, from, to);
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
        // kube-state-metrics' and Kueue's tables alike: their queries can come back empty
        // while DCGM's do not (their retention passed, a job renamed).
        for table in KUBE_TABLES {
            let old = rows_in_lake(lake, table, date, w0, w1)?;
            if old > 0 {
                let new = per_cluster(table, &clusters, &|c| kube_batch(c, table, w0, w1)).num_rows() as u64;
                if new < old {
                    losses.push(format!("{date}: {} rows {old} -> {new}", table.name()));
                }
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

    // 4. Publish day by day, merging with what the lake holds outside the window; each day
    // recorded as published once all its files are written (`lake::published`), so a run
    // stopped between two of a day's files leaves a day the record names, not one that reads
    // as fewer rows. Pods go into the day they were created, which may lie before the window.
    let mut pods: BTreeMap<NaiveDate, Vec<(Table, RecordBatch)>> = BTreeMap::new();
    for c in &clusters {
        let named = |table: Table, batch: RecordBatch| (table, crate::lake::rows::with_cluster(batch, &c.name));
        for (date, batch) in c.kube.pods_by_day() {
            pods.entry(date).or_default().push(named(Table::Pods, batch));
        }
        for (date, [owners, labels]) in c.kube.owners_and_labels_by_day() {
            pods.entry(date).or_default().extend([named(Table::PodOwners, owners), named(Table::PodLabels, labels)]);
        }
        for (why, n) in c.kube.inferred_workloads() {
            let of = if clusters.len() > 1 { format!(" of cluster {}", c.name) } else { String::new() };
            tracing::info!("the workloads of {n} GPU pods{of} inferred: {why}");
        }
    }
    // A day's pods, their owners and their labels, each merged by uid with the day's file.
    let write_pods = |date: NaiveDate, pods: &mut BTreeMap<NaiveDate, Vec<(Table, RecordBatch)>>| -> Result<()> {
        let Some(rows) = pods.remove(&date) else { return Ok(()) };
        for table in [Table::Pods, Table::PodOwners, Table::PodLabels] {
            let batches: Vec<&RecordBatch> = rows.iter().filter(|(t, _)| *t == table).map(|(_, b)| b).collect();
            let batch = concat_batches(&table.schema(), batches).map_err(|e| CollectError::Merge { table: table.name(), date, source: e.into() })?;
            let merged = merge_by_uid(lake, table, date, batch)?;
            write_partition(lake, table, date, &merged)?;
        }
        Ok(())
    };
    let mut unmeasured: BTreeMap<String, f64> = BTreeMap::new();
    for (date, d, c0, c1, w0, w1) in days {
        Published::begin(lake, date)?;
        let gpu = gpu_batch(&clusters, c0, c1);
        summary.gpu_rows += gpu.num_rows();
        for (node, gpu_s) in unmeasured_gpu_seconds(&gpu, cfg.cluster_label.is_some()) {
            *unmeasured.entry(node).or_default() += gpu_s;
        }
        // The day's first file: where it cannot be written (a full disk), the day is as it was.
        let first = merge_window(lake, Table::GpuSamples, date, "ts", w0, w1, gpu)
            .and_then(|gpu| Ok(write_partition(lake, Table::GpuSamples, date, &gpu).map(|_| gpu)?));
        let gpu = match first {
            Ok(gpu) => gpu,
            Err(e) => {
                if Published::abandon(lake, date)? {
                    tracing::warn!("{date}: nothing of the day was replaced; it stays as it was published");
                }
                return Err(e);
            }
        };
        write_partition(lake, Table::Nodes, date, &nodes_of(&gpu))?;
        let each = |table: Table, f: &dyn Fn(&ClusterRows) -> RecordBatch| per_cluster(table, &clusters, f);
        for table in KUBE_TABLES {
            let b = merge_window(lake, table, date, "ts", w0, w1, each(table, &|c| kube_batch(c, table, w0, w1)))?;
            write_partition(lake, table, date, &b)?;
        }
        let day_gaps = each(Table::Gaps, &|c| {
            let day: Vec<_> = c.gaps.iter().filter(|g| g.2 >= d && g.2 < d + DAY_MS).cloned().collect();
            gaps_batch(&day)
        });
        let g = merge_window(lake, Table::Gaps, date, "gap_start", w0, w1, day_gaps)?;
        write_partition(lake, Table::Gaps, date, &g)?;
        write_pods(date, &mut pods)?;
        Published::record(lake, [date])?;
    }
    for date in pods.keys().copied().collect::<Vec<_>>() {
        Published::begin(lake, date)?;
        write_pods(date, &mut pods)?;
        Published::record(lake, [date])?;
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

/// The tables of kube-state-metrics' and Kueue's series on the step grid, in the order a day
/// writes them.
const KUBE_TABLES: [Table; 6] = [Table::PendingSamples, Table::Quotas, Table::NodeCapacity, Table::KueuePending, Table::NamespaceLabels, Table::QueueQuotas];

/// One cluster's rows of a [`KUBE_TABLES`] table in `[w0, w1)`.
fn kube_batch(c: &ClusterRows, table: Table, w0: i64, w1: i64) -> RecordBatch {
    match table {
        Table::PendingSamples => c.kube.pending_batch(w0, w1),
        Table::Quotas => c.kube.quotas_batch(w0, w1),
        Table::NamespaceLabels => c.kube.namespace_labels_batch(w0, w1),
        Table::QueueQuotas => c.kube.queue_quotas_batch(w0, w1),
        _ => c.kube.gauge_batch(table, w0, w1),
    }
}

fn job_order(job: &Job) -> (u8, u8) {
    match job {
        Job::Dcgm(f) => (0, *f as u8),
        Job::Kube(m) => (1, *m as u8),
        Job::Hami(m) => (2, *m as u8),
    }
}
