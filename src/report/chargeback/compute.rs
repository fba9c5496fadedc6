//! Running the chargeback's queries: step 1 (pricing the 15-minute sums) a week at a time,
//! then `queries/chargeback.sql` over its grain, decoded into detail rows.

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;

use super::consts::{MONEY_SCALE, POD_RUN_DAYS, R, STEP2_PARTS};
use super::model::*;
use crate::domain::window::Window;
use crate::engine::str_param;
use crate::engine::{run_query, QueryTask};
use crate::lake::passes::gpu_buckets::GpuBuckets;
use crate::queries::Queries;
use crate::report::columns::{decimals, floats, ints, strs, window_params};
use crate::report::{ReportError, Result};

fn shape(detail: impl Into<String>) -> ReportError {
    ReportError::Shape { report: R, detail: detail.into() }
}

/// A DECIMAL money value of the SQL in raw units (`MONEY_SCALE`).
pub(super) fn raw(v: (i128, u32)) -> Result<i128> {
    if v.1 > MONEY_SCALE {
        return Err(shape(format!("money at scale {} (expected at most {MONEY_SCALE})", v.1)));
    }
    Ok(v.0 * 10i128.pow(MONEY_SCALE - v.1))
}

/// Days per piece of the chargeback's step 1: the pass and its pricing run a week at a time, so
/// their memory follows a week of 15-minute buckets, however long the window.
const STEP1_DAYS: i64 = 7;

/// Bucket rows gathered before they are priced: the week pieces' sums are priced together up
/// to about this many rows (~120 MB), so a month of a thousand GPUs is priced in one query
/// (one plan, not five) while a larger fleet's memory stays bounded.
const PRICE_BATCH_ROWS: usize = 1_000_000;

/// Step 1's pricing of gathered bucket rows: `chargeback_grain.sql` over them as the table
/// `gpu_buckets`; the priced rows and their schema, and with `totals` the (GPU-us, mJ, rows)
/// totals of `cluster_totals.sql` over the same rows (the conservation line's side).
pub(super) async fn price_buckets(
    ctx: &SessionContext,
    queries: &Queries,
    window: &Window,
    batches: Vec<arrow::array::RecordBatch>,
    threads: usize,
    totals: bool,
) -> Result<(datafusion::arrow::datatypes::SchemaRef, Vec<arrow::array::RecordBatch>, (i64, i64, i64))> {
    crate::report::gpu_buckets::register(ctx, batches, threads).await?;
    let priced = crate::engine::run_query_schema(ctx, "chargeback_grain", &queries.get("chargeback_grain")?, window_params(window)).await;
    let summed = match (&priced, totals) {
        (Ok(_), true) => run_query(ctx, "cluster_totals", &queries.get("cluster_totals")?, vec![]).await.map(Some),
        _ => Ok(None),
    };
    crate::report::gpu_buckets::deregister(ctx);
    let (schema, priced) = priced?;
    let Some(summed) = summed? else { return Ok((schema, priced, (0, 0, 0))) };
    let t = summed.first().filter(|b| b.num_rows() == 1).ok_or_else(|| shape("cluster_totals returned no row"))?;
    let one = |name| ints("cluster_totals", t, name).map(|v| v[0].unwrap_or(0));
    Ok((schema, priced, (one("gpu_us")?, one("energy_mj")?, one("rows")?)))
}

/// Which sums step 1 prices: `gpu_sample`'s rows summed per namespace (`namespace_buckets`) or
/// per pod (the rows by a key of each pod), as the table `gpu_buckets`' schema.
pub(super) type Step1Sums = fn(&crate::lake::Lake, &Window, usize) -> Result<GpuBuckets>;

/// The namespaces' sums: the `gpu_buckets` rollups, or a pass over the samples of days without one.
fn namespace_buckets(lake: &crate::lake::Lake, window: &Window, threads: usize) -> Result<GpuBuckets> {
    Ok(crate::lake::passes::gpu_buckets::scan(lake, window, threads)?)
}

/// Step 1: the sums `scan` makes a week at a time (`what` names them in the log), priced in SQL (`price_buckets`) and, with
/// `totals`, totalled for the conservation line, in batches of up to PRICE_BATCH_ROWS bucket rows
/// (its rows are per day, so the batches only add up): the priced rows, their schema and the
/// (GPU-us, mJ, rows) totals.
pub(super) async fn step1(
    ctx: &SessionContext,
    queries: &Queries,
    window: &Window,
    (what, scan): (&'static str, Step1Sums),
    totals: bool,
) -> Result<(datafusion::arrow::datatypes::SchemaRef, Vec<arrow::array::RecordBatch>, (i64, i64, i64))> {
    let t = std::time::Instant::now();
    let lake = crate::engine::session_lake(ctx).ok_or_else(|| shape("the session has no lake to scan"))?;
    let threads = ctx.state().config().target_partitions();
    let mut schema = None;
    let mut grain = Vec::new();
    // (GPU-us, mJ, rows) of the window, summed over the batches by `cluster_totals.sql`.
    let mut cluster = (0i64, 0i64, 0i64);
    let pieces = window.pieces(STEP1_DAYS);
    let only_cluster = crate::engine::session_cluster(ctx);
    // Buckets a day's tariff prices alike are merged before pricing (`tariff_classes`), unless
    // an override of the SQL that reads them might read the bucket itself.
    let classes = if queries.is_overridden("chargeback_grain") || queries.is_overridden("cluster_totals") {
        None
    } else {
        super::tariff_classes::TariffClasses::of_session(ctx).await.map(std::sync::Arc::new)
    };
    if let Some(c) = &classes {
        tracing::debug!("step 1: buckets merged into {} tariff classes (day x tariff values) before pricing", c.classes);
    }
    let mut gathered: Vec<arrow::array::RecordBatch> = Vec::new();
    let mut gathered_from = window.start;
    for (i, piece) in pieces.iter().enumerate() {
        let (lake, scan_window, classes) = (lake.clone(), *piece, classes.clone());
        let buckets = tokio::task::spawn_blocking(move || -> Result<_> {
            let mut buckets = scan(&lake, &scan_window, threads)?;
            if let Some(classes) = classes {
                buckets.batches =
                    buckets.batches.iter().map(|b| classes.merge(b)).collect::<Result<_, _>>().map_err(|source| ReportError::Arrow { report: R, source })?;
            }
            Ok(buckets)
        })
        .await
        .map_err(|source| ReportError::PassStopped { report: R, pass: "the GPU row pass", source })??;
        tracing::debug!(
            "{} {}: {} rows into {} buckets ({} days from rollups, samples read for {:?}) at {:.2}s",
            what,
            piece.label(),
            buckets.rows,
            buckets.batches.iter().map(|b| b.num_rows()).sum::<usize>(),
            buckets.rollup_days,
            buckets.scanned_days,
            t.elapsed().as_secs_f64()
        );
        match &only_cluster {
            Some(c) => {
                for b in buckets.batches {
                    gathered.push(crate::report::gpu_buckets::of_cluster(&b, c, R)?);
                }
            }
            None => gathered.extend(buckets.batches),
        }
        let rows: usize = gathered.iter().map(|b| b.num_rows()).sum();
        if rows < PRICE_BATCH_ROWS && i + 1 < pieces.len() {
            continue;
        }
        let priced_window = Window { start: gathered_from, end: piece.end };
        let (s, batches, summed) = price_buckets(ctx, queries, &priced_window, std::mem::take(&mut gathered), threads, totals).await?;
        tracing::debug!("priced {} bucket rows of {} at {:.2}s", rows, priced_window.label(), t.elapsed().as_secs_f64());
        gathered_from = piece.end;
        schema.get_or_insert(s);
        grain.extend(batches);
        cluster = (cluster.0 + summed.0, cluster.1 + summed.1, cluster.2 + summed.2);
    }
    let schema = schema.ok_or_else(|| shape("an empty window"))?;
    Ok((schema, grain, cluster))
}

/// Runs the detail SQL, the teams lookup and the independent cluster-total scan for `window`.
pub async fn compute(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<Chargeback> {
    // Step 1: gpu_samples summed per 15-minute bucket (the lake's rollups, or a pass over the
    // samples of days without a current one) a week at a time, priced in SQL and totalled for
    // the conservation line in batches of up to PRICE_BATCH_ROWS bucket rows (its rows are per
    // day, so the batches only add up); step 2 reads the (small) priced result as a table.
    let t = std::time::Instant::now();
    // The queries that do not read step 1's result run beside it, each on a task of its own:
    // on two cores they are planned while step 1 reads and prices.
    let runs_task = QueryTask::spawn(ctx, "pod_run_days", queries.get("pod_run_days")?, window_params(window));
    let owners_task = QueryTask::spawn(ctx, "namespace_owners", queries.get("namespace_owners")?, vec![]);
    let gpus_task = QueryTask::spawn(ctx, "cluster_gpus", queries.get("cluster_gpus")?, window_params(window));
    let days = window.whole_days();
    let counters_task = match days {
        Some((first, last)) => {
            Some(QueryTask::spawn(ctx, "energy_counters", queries.get("energy_counters")?, vec![str_param(day(first)), str_param(day(last))]))
        }
        None => None,
    };
    let (schema, grain, cluster) = step1(ctx, queries, window, ("gpu_buckets", namespace_buckets), true).await?;
    let grain_rows: usize = grain.iter().map(|b| b.num_rows()).sum();
    crate::engine::register_batches(ctx, "chargeback_grain", schema, vec![grain])?;
    tracing::debug!("chargeback_grain: {} rows in {:.2}s", grain_rows, t.elapsed().as_secs_f64());
    let t = std::time::Instant::now();
    // The pods' running time per day, read three times by the detail SQL: computed once.
    let (s, runs) = runs_task.join().await?;
    crate::engine::register_batches(ctx, POD_RUN_DAYS, s, vec![runs])?;
    // The fallback's and the claims' rows (both usually none), side by side, then the detail.
    let parts = STEP2_PARTS.map(|name| queries.get(name).map(|sql| QueryTask::spawn(ctx, name, sql, window_params(window))));
    for (name, task) in STEP2_PARTS.into_iter().zip(parts) {
        let (s, rows) = task?.join().await?;
        crate::engine::register_batches(ctx, name, s, vec![rows])?;
    }
    let batches = run_query(ctx, R, &queries.get(R)?, window_params(window)).await;
    tracing::debug!("chargeback: detail rows in {:.2}s", t.elapsed().as_secs_f64());
    for table in ["chargeback_grain", POD_RUN_DAYS].into_iter().chain(STEP2_PARTS) {
        let _ = ctx.deregister_table(table);
    }
    let mut detail = Vec::new();
    for b in &batches? {
        let (ns, model, profile, date) = (strs(R, b, "namespace")?, strs(R, b, "gpu_model")?, strs(R, b, "mig_profile")?, strs(R, b, "date")?);
        let cluster = strs(R, b, "cluster")?;
        let int = |name| ints(R, b, name);
        let (gpu_us, energy, util, unpriced, req, core, gib) =
            (int("gpu_us")?, int("energy_mj")?, int("util_gpu_us")?, int("unpriced_gpu_us")?, int("request_based_gpu_us")?, int("core_us")?, int("gib_us")?);
        let util_known = int("util_known_gpu_us")?;
        let dec = |name| decimals(R, b, name);
        let (gpu_cost, power, carbon, cpu, mem) = (dec("gpu_cost_us")?, dec("power_cost_mj")?, dec("carbon_mg")?, dec("cpu_cost_us")?, dec("mem_cost_us")?);
        for i in 0..b.num_rows() {
            detail.push(DetailRow {
                cluster: cluster[i].clone().unwrap_or_else(|| crate::domain::units::DEFAULT_CLUSTER.to_string()),
                namespace: ns[i].clone().ok_or_else(|| shape("null namespace"))?,
                gpu_model: model[i].clone(),
                mig_profile: profile[i].clone(),
                date: date[i].clone().ok_or_else(|| shape("null date"))?,
                q: Quantities {
                    gpu_us: gpu_us[i].unwrap_or(0),
                    energy_mj: energy[i].unwrap_or(0),
                    util_gpu_us: util[i].unwrap_or(0),
                    util_known_gpu_us: util_known[i].unwrap_or(0),
                    gpu_cost: raw(gpu_cost[i])?,
                    power_cost: raw(power[i])?,
                    carbon_mg: raw(carbon[i])?,
                    unpriced_gpu_us: unpriced[i].unwrap_or(0),
                    request_based_gpu_us: req[i].unwrap_or(0),
                    core_us: core[i].unwrap_or(0),
                    cpu_cost: raw(cpu[i])?,
                    gib_us: gib[i].unwrap_or(0),
                    memory_cost: raw(mem[i])?,
                },
            });
        }
    }
    if let Some(only) = crate::engine::session_cluster(ctx) {
        detail.retain(|r| r.cluster == only);
    }
    detail.sort_by(|a, b| {
        (&a.cluster, &a.namespace, &a.gpu_model, &a.mig_profile, &a.date).cmp(&(&b.cluster, &b.namespace, &b.gpu_model, &b.mig_profile, &b.date))
    });

    let mut owners = BTreeMap::new();
    for b in &owners_task.join().await?.1 {
        let (ns, team, cc) = (strs(R, b, "namespace")?, strs(R, b, "team")?, strs(R, b, "cost_centre")?);
        for i in 0..b.num_rows() {
            if let Some(ns) = ns[i].clone() {
                owners.insert(ns, Owner { team: team[i].clone(), cost_centre: cc[i].clone() });
            }
        }
    }

    let gpus = gpus_task.join().await?.1;
    let g = gpus.first().filter(|b| b.num_rows() == 1).ok_or_else(|| shape("cluster_gpus returned no row"))?;
    let cluster_gpus = ints("cluster_gpus", g, "gpus")?[0].unwrap_or(0);
    let counters = match (counters_task, days) {
        (Some(task), Some((first, last))) => Some(counter_check(&task.join().await?.1, first, last)?),
        _ => None,
    };
    Ok(Chargeback { window: *window, detail, owners, cluster_gpu_us: cluster.0, cluster_energy_mj: cluster.1, cluster_rows: cluster.2, cluster_gpus, counters })
}

/// A `date` partition's name.
fn day(d: chrono::NaiveDate) -> String {
    d.format("%Y-%m-%d").to_string()
}

/// `energy_counters.sql`'s rows (per day and GPU) summed into the check.
fn counter_check(batches: &[arrow::array::RecordBatch], first: chrono::NaiveDate, last: chrono::NaiveDate) -> Result<CounterCheck> {
    const Q: &str = "energy_counters";
    let mut check = CounterCheck { days: (last - first).num_days() + 1, first_day: day(first), last_day: day(last), ..CounterCheck::default() };
    let mut recorded = std::collections::BTreeSet::new();
    // Per GPU: (rows' energy on counted steps, counter's delta), mJ.
    let mut gpus: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    // Whole joules summed (the lake keeps energy to 1 J): exact in mJ.
    let mj = |j: Option<f64>| j.map_or(0, |j| (j * 1000.0).round() as i64);
    for b in batches {
        let (date, node, uuid) = (strs(Q, b, "date")?, strs(Q, b, "node")?, strs(Q, b, "gpu_uuid")?);
        let (rows, energy, delta) = (floats(Q, b, "rows_energy_j")?, floats(Q, b, "counter_energy_j")?, floats(Q, b, "counter_delta_j")?);
        for i in 0..b.num_rows() {
            if rows[i].is_some() {
                recorded.insert(date[i].clone().unwrap_or_default());
            }
            check.rows_energy_mj += mj(rows[i]);
            check.counter_energy_mj += mj(energy[i]);
            check.counter_delta_mj += mj(delta[i]);
            if delta[i].is_some() {
                let g = gpus.entry(format!("{} {}", node[i].as_deref().unwrap_or(""), uuid[i].as_deref().unwrap_or(""))).or_default();
                *g = (g.0 + mj(energy[i]), g.1 + mj(delta[i]));
            }
        }
    }
    check.days_recorded = recorded.len() as i64;
    let mut worst: Vec<(String, i64, i64)> = gpus.into_iter().filter(|(_, (r, c))| r != c).map(|(g, (r, c))| (g, r, c)).collect();
    worst.sort_by(|a, b| (b.1 - b.2).abs().cmp(&(a.1 - a.2).abs()).then_with(|| a.0.cmp(&b.0)));
    worst.truncate(COUNTER_WORST);
    check.worst = worst;
    Ok(check)
}
