//! The monthly chargeback: GPU-hours, utilisation, energy, power, GPU, CPU and memory cost,
//! carbon, the idle and shared-namespace spread, per namespace, team or cost centre; the
//! `__unallocated__` row; and the conservation line (rows sum to the cluster total, checked
//! against an independent scan).
//!
//! Everything is summed from `queries/chargeback.sql`'s detail rows (namespace x GPU model x
//! MIG profile x day), which the by-model report and the FOCUS export use too, so all three
//! agree to the unit.

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use serde_json::{Map, Value};

use super::columns::{decimals, ints, strs, window_params};
use super::money::{apportion, format_units, round_ratio};
use super::render::{Cell, Report};
use super::{ReportError, Result};
use crate::config::{Config, CostBasis, SpreadPolicy};
use crate::engine::run_query;
use crate::queries::Queries;
use crate::timewin::Window;

const R: &str = "chargeback";

/// GPU-microseconds per GPU-hour, millijoules per kWh.
pub const US_PER_HOUR: i128 = 3_600_000_000;
pub const MJ_PER_KWH: i128 = 3_600_000_000;
/// Money is kept as DECIMAL(38, 12) of (price per hour x microseconds) or (price per kWh x
/// millijoules): one currency unit is this many raw units.
pub const MONEY_SCALE: u32 = 12;
pub const RAW_PER_UNIT: i128 = 3_600_000_000 * 1_000_000_000_000;

pub const UNALLOCATED: &str = "__unallocated__";
/// GPU time of the pool no sample covered (the lake's rows of that namespace).
pub use crate::lake::schema::UNMEASURED;
/// The table `queries/pod_run_days.sql`'s result is handed to `queries/chargeback.sql` as.
pub const POD_RUN_DAYS: &str = "pod_run_days";
pub const UNASSIGNED: &str = "__unassigned__";

/// How the chargeback's rows are keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ChargeBy {
    /// One row per cluster and namespace (a namespace name in two clusters is two rows).
    #[default]
    Namespace,
    Team,
    CostCentre,
    /// One row per cluster (`prometheus.cluster_label`).
    Cluster,
}

impl ChargeBy {
    pub fn column(self) -> &'static str {
        match self {
            ChargeBy::Namespace => "namespace",
            ChargeBy::Team => "team",
            ChargeBy::CostCentre => "cost_centre",
            ChargeBy::Cluster => "cluster",
        }
    }
}

/// Exact quantities: integers, and money in raw units (see `RAW_PER_UNIT`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quantities {
    pub gpu_us: i64,
    pub energy_mj: i64,
    pub util_gpu_us: i64,
    /// The GPU time `util_gpu_us` was measured over: rows with a utilisation value.
    pub util_known_gpu_us: i64,
    pub gpu_cost: i128,
    pub power_cost: i128,
    pub carbon_mg: i128,
    pub unpriced_gpu_us: i64,
    pub request_based_gpu_us: i64,
    pub core_us: i64,
    pub cpu_cost: i128,
    pub gib_us: i64,
    pub memory_cost: i128,
}

impl Quantities {
    pub fn add(&mut self, o: &Quantities) {
        self.gpu_us += o.gpu_us;
        self.energy_mj += o.energy_mj;
        self.util_gpu_us += o.util_gpu_us;
        self.util_known_gpu_us += o.util_known_gpu_us;
        self.gpu_cost += o.gpu_cost;
        self.power_cost += o.power_cost;
        self.carbon_mg += o.carbon_mg;
        self.unpriced_gpu_us += o.unpriced_gpu_us;
        self.request_based_gpu_us += o.request_based_gpu_us;
        self.core_us += o.core_us;
        self.cpu_cost += o.cpu_cost;
        self.gib_us += o.gib_us;
        self.memory_cost += o.memory_cost;
    }

    /// GPU, CPU and memory at cloud prices.
    pub fn cloud_cost(&self) -> i128 {
        self.gpu_cost + self.cpu_cost + self.memory_cost
    }

    pub fn basis_cost(&self, basis: CostBasis) -> i128 {
        match basis {
            CostBasis::Cloud => self.cloud_cost(),
            CostBasis::Power => self.power_cost,
        }
    }
}

/// One detail row of `queries/chargeback.sql`.
#[derive(Debug, Clone, PartialEq)]
pub struct DetailRow {
    /// The cluster (`prometheus.cluster_label`); node and namespace names are per cluster.
    pub cluster: String,
    pub namespace: String,
    /// None on CPU / memory rows.
    pub gpu_model: Option<String>,
    pub mig_profile: Option<String>,
    /// UTC day, YYYY-MM-DD.
    pub date: String,
    pub q: Quantities,
}

/// Team and cost centre of a namespace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owner {
    pub team: Option<String>,
    pub cost_centre: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Chargeback {
    pub window: Window,
    pub detail: Vec<DetailRow>,
    pub owners: BTreeMap<String, Owner>,
    pub cluster_gpu_us: i64,
    pub cluster_energy_mj: i64,
    pub cluster_rows: i64,
    pub cluster_gpus: i64,
}

/// A namespace's totals after the idle / shared spread.
#[derive(Debug, Clone)]
pub struct NamespaceCharge {
    pub cluster: String,
    pub namespace: String,
    pub owner: Owner,
    pub q: Quantities,
    /// Raw money moved onto (positive) or off (negative) this row by the spread policies.
    pub spread: i128,
}

impl NamespaceCharge {
    pub fn total(&self, basis: CostBasis) -> i128 {
        self.q.basis_cost(basis) + self.spread
    }
}

fn shape(detail: impl Into<String>) -> ReportError {
    ReportError::Shape { report: R, detail: detail.into() }
}

/// Average utilisation (percent, 2 decimals) of utilisation-weighted GPU time over the GPU time
/// that had a utilisation value; no such time is no figure.
fn avg_util(util_gpu_us: i128, known_gpu_us: i128) -> Cell {
    if known_gpu_us > 0 {
        Cell::Dec { units: round_ratio(util_gpu_us, known_gpu_us, 2), decimals: 2 }
    } else {
        Cell::Null
    }
}

fn raw(v: (i128, u32)) -> Result<i128> {
    if v.1 > MONEY_SCALE {
        return Err(shape(format!("money at scale {} (expected at most {MONEY_SCALE})", v.1)));
    }
    Ok(v.0 * 10i128.pow(MONEY_SCALE - v.1))
}

/// Days per piece of the chargeback's step 1: the pass and its pricing run a week at a time, so
/// their memory follows a week of 15-minute buckets, however long the window.
const STEP1_DAYS: i64 = 7;

/// `window` cut at UTC midnights into pieces of at most `STEP1_DAYS` days (whole days, so
/// no day's rows are split between pieces).
fn step1_pieces(window: &Window) -> Vec<Window> {
    let mut pieces = Vec::new();
    let mut start = window.start;
    while start < window.end {
        let next = (start.date_naive() + chrono::Duration::days(STEP1_DAYS)).and_time(chrono::NaiveTime::MIN).and_utc();
        let end = next.min(window.end);
        pieces.push(Window { start, end });
        start = end;
    }
    pieces
}

/// Bucket rows gathered before they are priced: the week pieces' sums are priced together up
/// to about this many rows (~120 MB), so a month of a thousand GPUs is priced in one query
/// (one plan, not five) while a larger fleet's memory stays bounded.
const PRICE_BATCH_ROWS: usize = 1_000_000;

/// Step 1's pricing of gathered bucket rows: `chargeback_grain.sql` and `cluster_totals.sql`
/// over them as the table `gpu_buckets`; the priced rows, their schema and the (GPU-us, mJ,
/// rows) totals.
async fn price_buckets(
    ctx: &SessionContext,
    queries: &Queries,
    window: &Window,
    batches: Vec<arrow::array::RecordBatch>,
    threads: usize,
) -> Result<(datafusion::arrow::datatypes::SchemaRef, Vec<arrow::array::RecordBatch>, (i64, i64, i64))> {
    // The batches dealt round-robin over the session's partitions.
    let mut partitions: Vec<Vec<arrow::array::RecordBatch>> = vec![Vec::new(); threads.max(1)];
    for (i, b) in batches.into_iter().enumerate() {
        partitions[i % threads.max(1)].push(b);
    }
    crate::engine::register_batches(ctx, super::gpu_buckets::TABLE, super::gpu_buckets::schema(), partitions)?;
    let priced = crate::engine::run_query_schema(ctx, "chargeback_grain", &queries.get("chargeback_grain")?, window_params(window)).await;
    let totals = match priced {
        Ok(_) => run_query(ctx, "cluster_totals", &queries.get("cluster_totals")?, vec![]).await.map(Some),
        Err(_) => Ok(None),
    };
    let _ = ctx.deregister_table(super::gpu_buckets::TABLE);
    let (schema, priced) = priced?;
    let totals = totals?.unwrap_or_default();
    let t = totals.first().filter(|b| b.num_rows() == 1).ok_or_else(|| shape("cluster_totals returned no row"))?;
    let one = |name| ints("cluster_totals", t, name).map(|v| v[0].unwrap_or(0));
    Ok((schema, priced, (one("gpu_us")?, one("energy_mj")?, one("rows")?)))
}

/// Runs the detail SQL, the teams lookup and the independent cluster-total scan for `window`.
pub async fn compute(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<Chargeback> {
    // Step 1: gpu_samples summed per 15-minute bucket (the lake's rollups, or a pass over the
    // samples of days without a current one) a week at a time, priced in SQL and totalled for
    // the conservation line in batches of up to PRICE_BATCH_ROWS bucket rows (its rows are per
    // day, so the batches only add up); step 2 reads the (small) priced result as a table.
    let t = std::time::Instant::now();
    let lake = crate::engine::session_lake(ctx).ok_or_else(|| shape("the session has no lake to scan"))?;
    let threads = ctx.state().config().target_partitions();
    let mut schema = None;
    let mut grain = Vec::new();
    // (GPU-us, mJ, rows) of the window, summed over the batches by `cluster_totals.sql`.
    let mut cluster = (0i64, 0i64, 0i64);
    let pieces = step1_pieces(window);
    let only_cluster = crate::engine::session_cluster(ctx);
    let mut gathered: Vec<arrow::array::RecordBatch> = Vec::new();
    let mut gathered_from = window.start;
    for (i, piece) in pieces.iter().enumerate() {
        let (lake, scan_window) = (lake.clone(), *piece);
        let buckets = tokio::task::spawn_blocking(move || super::gpu_buckets::scan(&lake, &scan_window, threads))
            .await
            .map_err(|e| shape(format!("the GPU row pass stopped: {e}")))??;
        tracing::debug!(
            "gpu_buckets {}: {} rows into {} buckets ({} days from rollups, samples read for {:?}) at {:.2}s",
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
                    gathered.push(of_cluster(&b, c)?);
                }
            }
            None => gathered.extend(buckets.batches),
        }
        let rows: usize = gathered.iter().map(|b| b.num_rows()).sum();
        if rows < PRICE_BATCH_ROWS && i + 1 < pieces.len() {
            continue;
        }
        let priced_window = Window { start: gathered_from, end: piece.end };
        let (s, batches, totals) = price_buckets(ctx, queries, &priced_window, std::mem::take(&mut gathered), threads).await?;
        tracing::debug!("priced {} bucket rows of {} at {:.2}s", rows, priced_window.label(), t.elapsed().as_secs_f64());
        gathered_from = piece.end;
        schema.get_or_insert(s);
        grain.extend(batches);
        cluster = (cluster.0 + totals.0, cluster.1 + totals.1, cluster.2 + totals.2);
    }
    let schema = schema.ok_or_else(|| shape("an empty window"))?;
    let grain_rows: usize = grain.iter().map(|b| b.num_rows()).sum();
    crate::engine::register_batches(ctx, "chargeback_grain", schema, vec![grain])?;
    tracing::debug!("chargeback_grain: {} rows in {:.2}s", grain_rows, t.elapsed().as_secs_f64());
    let t = std::time::Instant::now();
    // The pods' running time per day, read three times by the detail SQL: computed once.
    let (s, runs) = crate::engine::run_query_schema(ctx, "pod_run_days", &queries.get("pod_run_days")?, window_params(window)).await?;
    crate::engine::register_batches(ctx, POD_RUN_DAYS, s, vec![runs])?;
    let batches = run_query(ctx, R, &queries.get(R)?, window_params(window)).await;
    tracing::debug!("chargeback: detail rows in {:.2}s", t.elapsed().as_secs_f64());
    let _ = ctx.deregister_table("chargeback_grain");
    let _ = ctx.deregister_table(POD_RUN_DAYS);
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
                cluster: cluster[i].clone().unwrap_or_else(|| crate::lake::schema::DEFAULT_CLUSTER.to_string()),
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
    detail.sort_by(|a, b| (&a.cluster, &a.namespace, &a.gpu_model, &a.mig_profile, &a.date).cmp(&(&b.cluster, &b.namespace, &b.gpu_model, &b.mig_profile, &b.date)));

    let mut owners = BTreeMap::new();
    for b in &run_query(ctx, "namespace_owners", &queries.get("namespace_owners")?, vec![]).await? {
        let (ns, team, cc) = (strs(R, b, "namespace")?, strs(R, b, "team")?, strs(R, b, "cost_centre")?);
        for i in 0..b.num_rows() {
            if let Some(ns) = ns[i].clone() {
                owners.insert(ns, Owner { team: team[i].clone(), cost_centre: cc[i].clone() });
            }
        }
    }

    let gpus = run_query(ctx, "cluster_gpus", &queries.get("cluster_gpus")?, window_params(window)).await?;
    let g = gpus.first().filter(|b| b.num_rows() == 1).ok_or_else(|| shape("cluster_gpus returned no row"))?;
    let cluster_gpus = ints("cluster_gpus", g, "gpus")?[0].unwrap_or(0);
    Ok(Chargeback {
        window: *window,
        detail,
        owners,
        cluster_gpu_us: cluster.0,
        cluster_energy_mj: cluster.1,
        cluster_rows: cluster.2,
        cluster_gpus,
    })
}

/// The bucket rows of `b` in `cluster` (`--cluster`).
fn of_cluster(b: &arrow::array::RecordBatch, cluster: &str) -> Result<arrow::array::RecordBatch> {
    let names = arrow::compute::cast(b.column_by_name("cluster").ok_or_else(|| shape("gpu_buckets without cluster"))?, &arrow::datatypes::DataType::Utf8)
        .map_err(|e| shape(e.to_string()))?;
    let keep: arrow::array::BooleanArray = names.as_any().downcast_ref::<arrow::array::StringArray>().ok_or_else(|| shape("cluster as text"))?.iter().map(|n| Some(n == Some(cluster))).collect();
    arrow::compute::filter_record_batch(b, &keep).map_err(|e| shape(e.to_string()))
}

/// Splits `amount` over `weights` exactly (largest remainder, ties to the earlier index).
/// Weights must be non-negative with a positive sum, and small enough that amount % sum x
/// weight fits in i128 (weights in cents or 1e-4 GPU-hours are).
pub fn split(amount: i128, weights: &[i128]) -> Vec<i128> {
    let sum: i128 = weights.iter().sum();
    assert!(sum > 0, "split needs a positive weight");
    let (q, r) = (amount.div_euclid(sum), amount.rem_euclid(sum));
    let mut parts: Vec<i128> = weights.iter().map(|w| q * w + (r * w) / sum).collect();
    let mut rems: Vec<(i128, usize)> = weights.iter().enumerate().map(|(i, w)| ((r * w) % sum, i)).collect();
    rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut short = amount - parts.iter().sum::<i128>();
    let mut k = 0;
    while short > 0 {
        parts[rems[k % rems.len()].1] += 1;
        short -= 1;
        k += 1;
    }
    parts
}

impl Chargeback {
    pub fn rows_gpu_us(&self) -> i64 {
        self.detail.iter().map(|r| r.q.gpu_us).sum()
    }

    pub fn rows_energy_mj(&self) -> i64 {
        self.detail.iter().map(|r| r.q.energy_mj).sum()
    }

    pub fn gpu_us_conserved(&self) -> bool {
        self.rows_gpu_us() == self.cluster_gpu_us
    }

    pub fn energy_conserved(&self) -> bool {
        self.rows_energy_mj() == self.cluster_energy_mj
    }

    pub fn owner(&self, config: &Config, namespace: &str) -> Owner {
        if let Some(entry) = config.teams.get(namespace) {
            return Owner { team: Some(entry.team().to_string()), cost_centre: entry.cost_centre().map(str::to_string) };
        }
        self.owners.get(namespace).cloned().unwrap_or_default()
    }

    /// Per cluster and namespace, with `__unallocated__` and shared namespaces spread by the
    /// config's policies within each cluster (a cluster's idle GPUs are its namespaces' to
    /// carry). Money moved is exact: the rows' totals sum to the clusters' basis cost.
    pub fn namespaces(&self, config: &Config) -> Vec<NamespaceCharge> {
        let mut by_cluster: BTreeMap<&str, BTreeMap<&str, Quantities>> = BTreeMap::new();
        for r in &self.detail {
            by_cluster.entry(&r.cluster).or_default().entry(&r.namespace).or_default().add(&r.q);
        }
        let mut out = Vec::new();
        for (cluster, by_ns) in by_cluster {
            out.extend(self.spread_in_cluster(config, cluster, by_ns));
        }
        out
    }

    fn spread_in_cluster(&self, config: &Config, cluster: &str, by_ns: BTreeMap<&str, Quantities>) -> Vec<NamespaceCharge> {
        let mut rows: Vec<NamespaceCharge> = by_ns
            .into_iter()
            .map(|(ns, q)| NamespaceCharge { cluster: cluster.to_string(), namespace: ns.to_string(), owner: self.owner(config, ns), q, spread: 0 })
            .collect();
        for policy in [config.shared_policy(), config.idle_policy()] {
            if let SpreadPolicy::Owner(owner) = policy {
                if !rows.iter().any(|r| r.namespace == owner) {
                    let o = self.owner(config, &owner);
                    rows.push(NamespaceCharge { cluster: cluster.to_string(), namespace: owner, owner: o, q: Quantities::default(), spread: 0 });
                }
            }
        }
        rows.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        let basis = config.pricing.basis;
        let shared: Vec<&str> = config.pricing.shared_namespaces.iter().map(String::as_str).collect();
        let donors_shared: Vec<usize> = rows.iter().enumerate().filter(|(_, r)| shared.contains(&r.namespace.as_str())).map(|(i, _)| i).collect();
        spread(&mut rows, &donors_shared, &config.shared_policy(), basis, &shared);
        let donors_idle: Vec<usize> = rows.iter().enumerate().filter(|(_, r)| r.namespace == UNALLOCATED).map(|(i, _)| i).collect();
        spread(&mut rows, &donors_idle, &config.idle_policy(), basis, &shared);
        rows
    }

    pub fn to_report(&self, config: &Config, by: ChargeBy) -> Report {
        let basis = config.pricing.basis;
        let namespaces = self.namespaces(config);
        // Group (after the spread, which is defined per cluster and namespace). By namespace the
        // key is the namespace and its cluster (sorted by namespace, then cluster).
        let mut groups: BTreeMap<(String, String), (Owner, Quantities, i128, Vec<String>)> = BTreeMap::new();
        for r in &namespaces {
            let key = match by {
                ChargeBy::Namespace => (r.namespace.clone(), r.cluster.clone()),
                ChargeBy::Cluster => (r.cluster.clone(), String::new()),
                _ if r.namespace == UNALLOCATED || r.namespace == UNMEASURED => (r.namespace.clone(), String::new()),
                ChargeBy::Team => (r.owner.team.clone().unwrap_or_else(|| UNASSIGNED.into()), String::new()),
                ChargeBy::CostCentre => (r.owner.cost_centre.clone().unwrap_or_else(|| UNASSIGNED.into()), String::new()),
            };
            let g = groups.entry(key).or_insert_with(|| (r.owner.clone(), Quantities::default(), 0, Vec::new()));
            g.1.add(&r.q);
            g.2 += r.spread;
            if !g.3.contains(&r.namespace) {
                g.3.push(r.namespace.clone());
            }
        }
        let keys: Vec<&(String, String)> = groups.keys().collect();
        let vals: Vec<&(Owner, Quantities, i128, Vec<String>)> = groups.values().collect();
        let col = |f: &dyn Fn(&Quantities, i128) -> i128| -> Vec<i128> { vals.iter().map(|(_, q, s, _)| f(q, *s)).collect() };

        let gpu_us = col(&|q, _| q.gpu_us as i128);
        let (hours, hours_total) = apportion(&gpu_us, US_PER_HOUR, 4);
        let (kwh, kwh_total) = apportion(&col(&|q, _| q.energy_mj as i128), MJ_PER_KWH, 4);
        let money = |v: Vec<i128>| apportion(&v, RAW_PER_UNIT, 2);
        let (power, power_total) = money(col(&|q, _| q.power_cost));
        let (gpu_c, gpu_total) = money(col(&|q, _| q.gpu_cost));
        let (cpu_c, cpu_total) = money(col(&|q, _| q.cpu_cost));
        let (mem_c, mem_total) = money(col(&|q, _| q.memory_cost));
        let (cloud, cloud_total) = money(col(&|q, _| q.cloud_cost()));
        let (spread_c, spread_total) = money(col(&|_, s| s));
        let (total, total_total) = money(col(&|q, s| q.basis_cost(basis) + s));
        // kg = mg / 1e6, at 3 decimals.
        let (carbon, carbon_total) = apportion(&col(&|q, _| q.carbon_mg), RAW_PER_UNIT * 1_000, 3);
        let (req_h, req_total) = apportion(&col(&|q, _| q.request_based_gpu_us as i128), US_PER_HOUR, 4);
        let share_basis: i128 = gpu_us.iter().sum::<i128>().max(1);
        let (share, share_total) = apportion(&gpu_us.iter().map(|g| g * 100).collect::<Vec<_>>(), share_basis, 2);
        let carbon_on = config.pricing.power.carbon_g_per_kwh.is_some();

        let dec = |units: i128, decimals: u32| Cell::Dec { units, decimals };
        let opt = |v: &Option<String>| v.clone().map_or(Cell::Null, Cell::Str);
        let mut rows = Vec::with_capacity(keys.len());
        for (i, key) in keys.iter().enumerate() {
            let (owner, q, _, members) = vals[i];
            // Over the GPU time with a utilisation value: none (a row of unmeasured time, CPU only) is no figure, not 0%.
            let util = avg_util(q.util_gpu_us as i128, q.util_known_gpu_us as i128);
            let mut row = vec![Cell::Str(key.0.clone())];
            match by {
                ChargeBy::Namespace => row.extend([opt(&owner.team), opt(&owner.cost_centre)]),
                _ => row.push(Cell::Str(members.join(" "))),
            }
            row.extend([
                dec(hours[i], 4),
                util,
                dec(kwh[i], 4),
                dec(power[i], 2),
                dec(gpu_c[i], 2),
                dec(cpu_c[i], 2),
                dec(mem_c[i], 2),
                dec(cloud[i], 2),
                if carbon_on { dec(carbon[i], 3) } else { Cell::Null },
                dec(spread_c[i], 2),
                dec(total[i], 2),
                dec(share[i], 2),
                Cell::Str(if q.request_based_gpu_us > 0 { "yes" } else { "no" }.into()),
                dec(req_h[i], 4),
            ]);
            if by == ChargeBy::Namespace {
                row.push(Cell::Str(key.1.clone()));
            }
            rows.push(row);
        }
        let util_all: i128 = vals.iter().map(|(_, q, _, _)| q.util_gpu_us as i128).sum();
        let util_known_all: i128 = vals.iter().map(|(_, q, _, _)| q.util_known_gpu_us as i128).sum();
        let mut total_row = vec![Cell::Str("total".into())];
        match by {
            ChargeBy::Namespace => total_row.extend([Cell::Null, Cell::Null]),
            _ => total_row.push(Cell::Null),
        }
        total_row.extend([
            dec(hours_total, 4),
            avg_util(util_all, util_known_all),
            dec(kwh_total, 4),
            dec(power_total, 2),
            dec(gpu_total, 2),
            dec(cpu_total, 2),
            dec(mem_total, 2),
            dec(cloud_total, 2),
            if carbon_on { dec(carbon_total, 3) } else { Cell::Null },
            dec(spread_total, 2),
            dec(total_total, 2),
            dec(share_total, 2),
            Cell::Str(if req_total > 0 { "yes" } else { "no" }.into()),
            dec(req_total, 4),
        ]);
        if by == ChargeBy::Namespace {
            total_row.push(Cell::Null);
        }

        let mut columns = vec![by.column().to_string()];
        match by {
            ChargeBy::Namespace => columns.extend(["team", "cost_centre"].map(String::from)),
            _ => columns.push("namespaces".into()),
        }
        columns.extend(
            [
                "gpu_hours", "avg_util_pct", "energy_kwh", "power_cost", "gpu_cost", "cpu_cost", "memory_cost", "cloud_cost", "carbon_kg",
                "idle_cost", "total_cost", "share_pct", "request_based", "request_based_gpu_hours",
            ]
            .map(String::from),
        );
        // The cluster of each namespace row: last, so the columns before keep their places.
        if by == ChargeBy::Namespace {
            columns.push("cluster".into());
        }

        let notes = self.notes(config, &namespaces, hours_total, kwh_total, total_total, req_total);
        Report {
            name: R.into(),
            title: match by {
                ChargeBy::Namespace => format!("GPU chargeback {}", self.window.label()),
                ChargeBy::Team => format!("GPU chargeback by team {}", self.window.label()),
                ChargeBy::CostCentre => format!("GPU chargeback by cost centre {}", self.window.label()),
                ChargeBy::Cluster => format!("GPU chargeback by cluster {}", self.window.label()),
            },
            columns,
            rows,
            total: Some(total_row),
            notes,
            meta: self.meta(config, &namespaces),
        }
    }

    fn notes(&self, config: &Config, namespaces: &[NamespaceCharge], hours_total: i128, kwh_total: i128, total_total: i128, req_total: i128) -> Vec<String> {
        let currency = &config.pricing.currency;
        let basis = config.pricing.basis;
        let check = |ok: bool| if ok { "OK" } else { "MISMATCH" };
        let cluster_hours = round_ratio(self.cluster_gpu_us as i128, US_PER_HOUR, 4);
        let cluster_kwh = round_ratio(self.cluster_energy_mj as i128, MJ_PER_KWH, 4);
        let basis_direct: i128 = namespaces.iter().map(|r| r.q.basis_cost(basis)).sum();
        let rows_total: i128 = namespaces.iter().map(|r| r.total(basis)).sum();
        let mut notes = vec![
            format!(
                "conservation: GPU-hours rows {} = cluster {} ({} GPU-us vs {}) {}; energy rows {} kWh = cluster {} kWh ({} mJ vs {}) {}; total_cost rows {} = cluster {} {currency} {}",
                format_units(hours_total, 4),
                format_units(cluster_hours, 4),
                self.rows_gpu_us(),
                self.cluster_gpu_us,
                check(self.gpu_us_conserved()),
                format_units(kwh_total, 4),
                format_units(cluster_kwh, 4),
                self.rows_energy_mj(),
                self.cluster_energy_mj,
                check(self.energy_conserved()),
                format_units(total_total, 2),
                format_units(round_ratio(basis_direct, RAW_PER_UNIT, 2), 2),
                check(rows_total == basis_direct),
            ),
            format!(
                "window {} to {}; {} GPUs, {} samples; total_cost = {} cost in {currency}; power: tariff in {}, PUE {}; unallocated: {}; shared namespaces ({}): {}",
                self.window.start.to_rfc3339(),
                self.window.end.to_rfc3339(),
                self.cluster_gpus,
                self.cluster_rows,
                match basis {
                    CostBasis::Cloud => "cloud (GPU + CPU + memory)",
                    CostBasis::Power => "power",
                },
                config.pricing.power.timezone,
                config.pricing.power.pue,
                config.idle_policy().label(),
                if config.pricing.shared_namespaces.is_empty() { "none".to_string() } else { config.pricing.shared_namespaces.join(", ") },
                config.shared_policy().label(),
            ),
        ];
        let unpriced: i64 = self.detail.iter().map(|r| r.q.unpriced_gpu_us).sum();
        if unpriced > 0 {
            notes.push(format!(
                "warning: {} GPU-hours ran on GPU models with no [[pricing.gpu]] entry and carry no GPU cost",
                format_units(round_ratio(unpriced as i128, US_PER_HOUR, 4), 4)
            ));
        }
        let unmeasured: i64 = self.detail.iter().filter(|r| r.namespace == UNMEASURED).map(|r| r.q.gpu_us).sum();
        if unmeasured > 0 {
            notes.push(format!(
                "unmeasured: {} GPU-hours of the pool had no DCGM sample, even within prometheus.lookback_secs (an exporter down, a node without one): row {UNMEASURED} at list price; `report completeness` says where",
                format_units(round_ratio(unmeasured as i128, US_PER_HOUR, 4), 4)
            ));
        }
        if req_total > 0 {
            notes.push(format!(
                "request-based: {} GPU-hours were attributed from kube-state-metrics requests x running time, on nodes whose DCGM exporter reported no pods or where no sample covered a pod bound there (rows marked request_based)",
                format_units(req_total, 4)
            ));
        }
        notes
    }

    fn meta(&self, config: &Config, namespaces: &[NamespaceCharge]) -> Map<String, Value> {
        let basis = config.pricing.basis;
        let mut meta = Map::new();
        meta.insert("window_start".into(), Value::String(self.window.start.to_rfc3339()));
        meta.insert("window_end".into(), Value::String(self.window.end.to_rfc3339()));
        meta.insert("currency".into(), Value::String(config.pricing.currency.clone()));
        let basis_direct: i128 = namespaces.iter().map(|r| r.q.basis_cost(basis)).sum();
        let rows_total: i128 = namespaces.iter().map(|r| r.total(basis)).sum();
        let mut cons = Map::new();
        cons.insert("rows_gpu_us".into(), Value::from(self.rows_gpu_us()));
        cons.insert("cluster_gpu_us".into(), Value::from(self.cluster_gpu_us));
        cons.insert("rows_energy_mj".into(), Value::from(self.rows_energy_mj()));
        cons.insert("cluster_energy_mj".into(), Value::from(self.cluster_energy_mj));
        cons.insert("gpu_hours_conserved".into(), Value::Bool(self.gpu_us_conserved()));
        cons.insert("energy_conserved".into(), Value::Bool(self.energy_conserved()));
        cons.insert("cost_conserved".into(), Value::Bool(rows_total == basis_direct));
        meta.insert("conservation".into(), Value::Object(cons));
        meta.insert("idle_policy".into(), Value::String(config.idle_policy().label()));
        meta.insert("request_based".into(), Value::Bool(self.detail.iter().any(|r| r.q.request_based_gpu_us > 0)));
        meta
    }
}

/// Moves each donor's basis cost onto the receivers `policy` names. Proportional weights are
/// the receivers' own basis cost (in cents), else their GPU time; donors, `__unallocated__`,
/// `__unmeasured__` and shared namespaces never receive. An owner must already have a row.
fn spread(rows: &mut [NamespaceCharge], donors: &[usize], policy: &SpreadPolicy, basis: CostBasis, shared: &[&str]) {
    let receivers: Vec<usize> = match policy {
        SpreadPolicy::Separate => return,
        SpreadPolicy::Owner(owner) => rows.iter().position(|r| &r.namespace == owner).into_iter().collect(),
        SpreadPolicy::Proportional => rows
            .iter()
            .enumerate()
            .filter(|(i, r)| !donors.contains(i) && r.namespace != UNALLOCATED && r.namespace != UNMEASURED && !shared.contains(&r.namespace.as_str()))
            .map(|(i, _)| i)
            .collect(),
    };
    if receivers.is_empty() {
        return;
    }
    let cents: Vec<i128> = receivers.iter().map(|&i| round_ratio(rows[i].q.basis_cost(basis).max(0), RAW_PER_UNIT, 2)).collect();
    let weights = if receivers.len() == 1 {
        vec![1]
    } else if cents.iter().sum::<i128>() > 0 {
        cents
    } else {
        receivers.iter().map(|&i| (rows[i].q.gpu_us as i128) / 360_000).collect()
    };
    if weights.iter().sum::<i128>() <= 0 {
        return;
    }
    for &d in donors {
        let give = rows[d].total(basis);
        if give == 0 {
            continue;
        }
        rows[d].spread -= give;
        for (k, part) in split(give, &weights).into_iter().enumerate() {
            rows[receivers[k]].spread += part;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_exact_and_proportional() {
        let parts = split(1_000_003, &[1, 1, 1]);
        assert_eq!(parts.iter().sum::<i128>(), 1_000_003);
        assert_eq!(parts, vec![333_335, 333_334, 333_334]);
        let parts = split(-10, &[3, 1]);
        assert_eq!(parts.iter().sum::<i128>(), -10);
        assert_eq!(parts, vec![-7, -3]);
        let big = RAW_PER_UNIT * 123_456;
        let parts = split(big, &[500_000_00, 250_000_00, 1]);
        assert_eq!(parts.iter().sum::<i128>(), big);
    }
}

#[cfg(test)]
mod step1_tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn step1_pieces_are_whole_days_covering_the_window() {
        let month = Window::month("2026-10", Utc::now()).unwrap();
        let pieces = step1_pieces(&month);
        let starts: Vec<u32> = pieces.iter().map(|p| chrono::Datelike::day(&p.start)).collect();
        assert_eq!(starts, vec![1, 8, 15, 22, 29]);
        assert_eq!(pieces.last().unwrap().end, month.end);
        let odd = Window::new(Utc.with_ymd_and_hms(2026, 10, 3, 13, 0, 0).unwrap(), Utc.with_ymd_and_hms(2026, 10, 11, 2, 0, 0).unwrap()).unwrap();
        let p = step1_pieces(&odd);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].start, p[0].end), (odd.start, Utc.with_ymd_and_hms(2026, 10, 10, 0, 0, 0).unwrap()));
        assert_eq!((p[1].start, p[1].end), (Utc.with_ymd_and_hms(2026, 10, 10, 0, 0, 0).unwrap(), odd.end));
        for w in p.windows(2) {
            assert_eq!(w[0].end, w[1].start, "no gap, no overlap");
        }
    }
}
