//! Idle resources: where GPU money buys nothing. Sections, top offenders first:
//! - `idle`: allocated-but-idle GPU-hours per pod (utilisation under `idle.util_threshold_pct`
//!   for at least `idle.min_minutes` at a stretch) and what they cost;
//! - `idle_namespaces`: the same per namespace;
//! - `idle_by_key`, by a key of each pod (`--by workload`, `queue`, `label:KEY`, ...): the same
//!   per value of the key (pods without one are `__unattributed__`), with the per-pod rows
//!   naming each pod's value;
//! - `idle_unallocated`: GPU-hours no pod held, per node and model, at list price;
//! - `idle_zombie`: framebuffer held with no pod and 0 % utilisation (a process outliving its
//!   pod), per GPU;
//! - `idle_starved`: data-starved jobs, whose utilisation keeps dropping to idle and back:
//!   10-60 % of their steps idle, in at least 3 separate drops.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use arrow::array::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::chargeback::{pod_values, ChargeBy, UNATTRIBUTED};
use super::columns::{decimals, ints, millis, money_from_us, rfc3339, strs, texts, window_params};
use super::render::{Cell, Report};
use super::{ReportError, Result};
use crate::config::Config;
use crate::domain::money::round_ratio;
use crate::domain::window::Window;
use crate::engine::{run_query, session_lake};
use crate::lake::passes::idle_runs::{self, IdleRule};
use crate::lake::rollup::UnallocatedUnits;
use crate::lake::rollup::{self};
use crate::queries::Queries;

use crate::domain::units::US_PER_HOUR;
/// A data-starved job: this share of its steps idle (percent) ...
pub const STARVED_IDLE_PCT: (i128, i128) = (10, 60);
/// ... in at least this many separate drops, over at least this many steps.
pub const STARVED_MIN_DROPS: i64 = 3;
pub const STARVED_MIN_STEPS: i64 = 20;

fn hours(us: i64) -> Cell {
    Cell::Dec { units: round_ratio(us as i128, US_PER_HOUR, 4), decimals: 4 }
}

fn money(units: i128) -> Cell {
    Cell::Dec { units, decimals: 2 }
}

fn pct(num: i64, den: i64) -> Cell {
    if den > 0 {
        Cell::Dec { units: round_ratio(num as i128 * 100, den as i128, 2), decimals: 2 }
    } else {
        Cell::Null
    }
}

struct PodIdle {
    ns: String,
    pod: String,
    /// Its value of a key of each pod (`--by`), else empty.
    key: String,
    model: String,
    held: i64,
    steps: i64,
    idle_steps: i64,
    drops: i64,
    idle: i64,
    runs: i64,
    cost: i128,
    /// GPU-us of counted runs within a step of the minimum, and of runs a step short of it.
    edge_in: i64,
    edge_out: i64,
}

/// A namespace's sums over its pods: idle, held, cost, and the band's two edges.
#[derive(Default)]
struct NamespaceIdle {
    idle: i64,
    held: i64,
    cost: i128,
    edge_in: i64,
    edge_out: i64,
}

impl NamespaceIdle {
    /// idle and held GPU-hours, idle %, idle cost, and the band's low and high.
    fn cells(&self) -> Vec<Cell> {
        vec![hours(self.idle), hours(self.held), pct(self.idle, self.held), money(self.cost), hours(self.idle - self.edge_in), hours(self.idle + self.edge_out)]
    }

    fn add(&mut self, idle: i64, held: i64, cost: i128, edge_in: i64, edge_out: i64) {
        self.idle += idle;
        self.held += held;
        self.cost += cost;
        self.edge_in += edge_in;
        self.edge_out += edge_out;
    }
}

impl PodIdle {
    /// A data-starved job: its utilisation keeps dropping to idle and back.
    fn starved(&self) -> bool {
        let share = if self.steps > 0 { self.idle_steps as i128 * 100 / self.steps as i128 } else { 0 };
        self.steps >= STARVED_MIN_STEPS && self.drops >= STARVED_MIN_DROPS && share >= STARVED_IDLE_PCT.0 && share <= STARVED_IDLE_PCT.1
    }
}

/// `queries/idle_pods.sql` over the tables of one streaming pass (`idle_runs`).
pub async fn pod_idle(ctx: &SessionContext, queries: &Queries, window: &Window, rule: IdleRule, params: Vec<ScalarValue>) -> Result<Vec<RecordBatch>> {
    const R: &str = "idle_pods";
    let shape = |detail: String| ReportError::Shape { report: R, detail };
    let lake = session_lake(ctx).ok_or_else(|| shape("the session has no lake to scan".into()))?;
    let w = *window;
    let cluster = crate::engine::session_cluster(ctx);
    let t = std::time::Instant::now();
    let found = tokio::task::spawn_blocking(move || idle_runs::scan(&lake, &w, rule, cluster.as_deref()))
        .await
        .map_err(|source| ReportError::PassStopped { report: R, pass: "the idle scan", source })??;
    tracing::debug!(
        "idle scan: {} rows ({} days from rollups), {} holdings, {} runs in {:.2}s",
        found.rows,
        found.rollup_days,
        found.holding.num_rows(),
        found.runs.num_rows(),
        t.elapsed().as_secs_f64()
    );
    let register = |name: &str, batch: RecordBatch| -> Result<()> {
        crate::engine::register_batches(ctx, name, batch.schema(), vec![vec![batch]])?;
        Ok(())
    };
    register(idle_runs::HOLDING_TABLE, found.holding)?;
    register(idle_runs::RUNS_TABLE, found.runs)?;
    let result = run_query(ctx, R, &queries.get(R)?, params).await;
    let _ = ctx.deregister_table(idle_runs::HOLDING_TABLE);
    let _ = ctx.deregister_table(idle_runs::RUNS_TABLE);
    Ok(result?)
}

pub async fn build(ctx: &SessionContext, queries: &Queries, config: &Config, window: &Window, by: &ChargeBy) -> Result<Vec<Report>> {
    let mut params = window_params(window);
    params.push(ScalarValue::Float64(Some(config.idle.util_threshold_pct)));
    params.push(ScalarValue::Int64(Some(config.idle.min_minutes as i64 * 60)));
    params.push(ScalarValue::Float64(Some(config.idle.zombie_mem_mib)));
    let label = window.label();
    let currency = &config.pricing.currency;

    let rule = IdleRule { util_threshold_pct: config.idle.util_threshold_pct, min_secs: config.idle.min_minutes as i64 * 60 };
    let pod_rows = pod_idle(ctx, queries, window, rule, params.clone()).await?;
    // By a key of each pod: each pod's value (idle rows name no cluster: a pod name in two
    // clusters' namespaces of one name takes the first cluster's value).
    let per_pod = by.is_per_pod();
    let mut values: HashMap<(String, String), String> = HashMap::new();
    if per_pod {
        let mut all: Vec<_> = pod_values(ctx, queries, window, by).await?.values.into_iter().collect();
        all.sort();
        for ((_, ns, pod), v) in all {
            values.entry((ns, pod)).or_insert(v);
        }
    }
    let mut by_key: BTreeMap<String, (NamespaceIdle, BTreeSet<String>)> = BTreeMap::new();
    let (mut pods_keyed, mut pods_unkeyed) = (0usize, 0usize);
    // A month of 10,000 GPUs has over a million pods: each row is summed into its namespace,
    // and only the pods a section lists (idle at all, or starved) are kept.
    let mut pods = Vec::new();
    let mut by_ns: BTreeMap<String, NamespaceIdle> = BTreeMap::new();
    for b in &pod_rows {
        let r = "idle_pods";
        let (ns, pod, model) = (texts(r, b, "namespace")?, texts(r, b, "pod")?, texts(r, b, "gpu_model")?);
        let (held, steps, idle_steps, drops, idle, runs) = (
            ints(r, b, "held_gpu_us")?,
            ints(r, b, "steps")?,
            ints(r, b, "idle_steps")?,
            ints(r, b, "drops")?,
            ints(r, b, "idle_gpu_us")?,
            ints(r, b, "idle_runs")?,
        );
        let cost = decimals(r, b, "idle_cost_us")?;
        let (edge_in, edge_out) = (ints(r, b, "edge_in_gpu_us")?, ints(r, b, "edge_out_gpu_us")?);
        let text = |a: &arrow::array::StringArray, i: usize| if arrow::array::Array::is_valid(a, i) { a.value(i).to_string() } else { String::new() };
        for i in 0..b.num_rows() {
            let (held, idle, cost) = (held[i].unwrap_or(0), idle[i].unwrap_or(0), money_from_us(cost[i]));
            let (edge_in, edge_out) = (edge_in[i].unwrap_or(0), edge_out[i].unwrap_or(0));
            let namespace = if arrow::array::Array::is_valid(&ns, i) { ns.value(i) } else { "" };
            if !by_ns.contains_key(namespace) {
                by_ns.insert(namespace.to_string(), NamespaceIdle::default());
            }
            let e = by_ns.get_mut(namespace).expect("inserted above");
            e.add(idle, held, cost, edge_in, edge_out);
            let key = match per_pod {
                true => {
                    let v = values.get(&(namespace.to_string(), text(&pod, i)));
                    match v {
                        Some(_) => pods_keyed += 1,
                        None => pods_unkeyed += 1,
                    }
                    let k = v.cloned().unwrap_or_else(|| UNATTRIBUTED.to_string());
                    let g = by_key.entry(k.clone()).or_default();
                    g.0.add(idle, held, cost, edge_in, edge_out);
                    g.1.insert(namespace.to_string());
                    k
                }
                false => String::new(),
            };
            let p = PodIdle {
                ns: String::new(),
                pod: String::new(),
                key,
                model: String::new(),
                held,
                steps: steps[i].unwrap_or(0),
                idle_steps: idle_steps[i].unwrap_or(0),
                drops: drops[i].unwrap_or(0),
                idle,
                runs: runs[i].unwrap_or(0),
                cost,
                edge_in,
                edge_out,
            };
            if p.idle > 0 || p.starved() {
                pods.push(PodIdle { ns: text(&ns, i), pod: text(&pod, i), model: text(&model, i), ..p });
            }
        }
    }

    let mut offenders: Vec<&PodIdle> = pods.iter().filter(|p| p.idle > 0).collect();
    offenders.sort_by(|a, b| b.idle.cmp(&a.idle).then(a.ns.cmp(&b.ns)).then(a.pod.cmp(&b.pod)).then(a.model.cmp(&b.model)));
    let (idle_total, cost_total): (i64, i128) = offenders.iter().fold((0, 0), |(h, c), p| (h + p.idle, c + p.cost));
    let (edge_in_total, edge_out_total) = by_ns.values().fold((0, 0), |(a, b), n| (a + n.edge_in, b + n.edge_out));
    let band_note = format!(
        "idle_gpu_hours_low / _high: the band at the lake's step. A run's length is measured to a step, so a run within a step of {} minutes is in or out by where its first and last scrapes fell: low leaves out the counted runs within a step of the minimum ({} GPU-h in the window), high adds the runs a step short of it ({} GPU-h)",
        config.idle.min_minutes,
        hours(edge_in_total).text(),
        hours(edge_out_total).text()
    );
    let mut idle = Report {
        name: "idle".into(),
        title: format!("Allocated but idle GPUs {label}"),
        columns: [
            "namespace",
            "pod",
            "gpu_model",
            "idle_gpu_hours",
            "held_gpu_hours",
            "idle_pct",
            "idle_runs",
            "idle_cost",
            "idle_gpu_hours_low",
            "idle_gpu_hours_high",
        ]
        .map(String::from)
        .to_vec(),
        rows: offenders
            .iter()
            .map(|p| {
                vec![
                    Cell::Str(p.ns.clone()),
                    Cell::Str(p.pod.clone()),
                    Cell::Str(p.model.clone()),
                    hours(p.idle),
                    hours(p.held),
                    pct(p.idle, p.held),
                    Cell::Int(p.runs),
                    money(p.cost),
                    hours(p.idle - p.edge_in),
                    hours(p.idle + p.edge_out),
                ]
            })
            .collect(),
        total: Some(vec![
            Cell::Str("total".into()),
            Cell::Null,
            Cell::Null,
            hours(idle_total),
            Cell::Null,
            Cell::Null,
            Cell::Null,
            money(cost_total),
            Cell::Null,
            Cell::Null,
        ]),
        notes: vec![
            format!(
                "idle: utilisation under {}% for at least {} minutes at a stretch; cost at the GPU model's list price in {currency}",
                config.idle.util_threshold_pct, config.idle.min_minutes
            ),
            band_note.clone(),
        ],
        meta: Map::new(),
    };

    // By a key of each pod: the pods' rows name their value, after the pod.
    if per_pod {
        idle.columns.insert(2, by.column());
        for (row, p) in idle.rows.iter_mut().zip(&offenders) {
            row.insert(2, Cell::Str(p.key.clone()));
        }
        if let Some(t) = idle.total.as_mut() {
            t.insert(2, Cell::Null);
        }
    }
    let by_key_section = per_pod.then(|| {
        let mut rows: Vec<(String, (NamespaceIdle, BTreeSet<String>))> = by_key.into_iter().collect();
        rows.sort_by(|a, b| b.1 .0.idle.cmp(&a.1 .0.idle).then(a.0.cmp(&b.0)));
        let total = rows.iter().fold(NamespaceIdle::default(), |mut t, (_, (n, _))| {
            t.add(n.idle, n.held, n.cost, n.edge_in, n.edge_out);
            t
        });
        Report {
            name: "idle_by_key".into(),
            title: format!("Allocated but idle GPU time by {} {label}", by.words()),
            columns: [by.column().as_str(), "namespaces", "idle_gpu_hours", "held_gpu_hours", "idle_pct", "idle_cost", "idle_gpu_hours_low", "idle_gpu_hours_high"]
                .map(String::from)
                .to_vec(),
            rows: rows
                .iter()
                .map(|(k, (n, namespaces))| [vec![Cell::Str(k.clone()), Cell::Str(namespaces.iter().cloned().collect::<Vec<_>>().join(", "))], n.cells()].concat())
                .collect(),
            total: Some([vec![Cell::Str("total".into()), Cell::Null], total.cells()].concat()),
            notes: vec![
                format!(
                    "by {by}: {pods_keyed} pods that held a GPU with a value, {pods_unkeyed} without ({UNATTRIBUTED}); a pod's idle and held GPU time is its value's"
                ),
                band_note.clone(),
            ],
            meta: Map::new(),
        }
    });

    let mut ns_rows: Vec<(String, NamespaceIdle)> = by_ns.into_iter().collect();
    ns_rows.sort_by(|a, b| b.1.idle.cmp(&a.1.idle).then(a.0.cmp(&b.0)));
    let namespaces = Report {
        name: "idle_namespaces".into(),
        title: format!("Allocated but idle GPU time per namespace {label}"),
        columns: ["namespace", "idle_gpu_hours", "held_gpu_hours", "idle_pct", "idle_cost", "idle_gpu_hours_low", "idle_gpu_hours_high"]
            .map(String::from)
            .to_vec(),
        rows: ns_rows.iter().map(|(ns, n)| [vec![Cell::Str(ns.to_string())], n.cells()].concat()).collect(),
        total: None,
        notes: vec![band_note],
        meta: Map::new(),
    };

    let mut unalloc_rows = Vec::new();
    let (mut un_total, mut un_cost) = (0i64, 0i128);
    // Unallocated GPUs and zombie memory: both from the GPU time no pod held, per unit and
    // bucket (the lake's rollups, or the window's rows).
    super::rolled::register::<UnallocatedUnits>(ctx, "idle_unallocated", rollup::UNALLOCATED_UNITS, window).await?;
    let unallocated = run_query(ctx, "idle_unallocated", &queries.get("idle_unallocated")?, params.clone()).await;
    let zombie = match &unallocated {
        Ok(_) => run_query(ctx, "idle_zombie", &queries.get("idle_zombie")?, params).await,
        Err(_) => Ok(Vec::new()),
    };
    super::rolled::deregister(ctx, rollup::UNALLOCATED_UNITS);
    let (unallocated, zombie) = (unallocated?, zombie?);
    for b in &unallocated {
        let r = "idle_unallocated";
        let (node, model, units, us, cost) =
            (strs(r, b, "node")?, strs(r, b, "gpu_model")?, ints(r, b, "units")?, ints(r, b, "gpu_us")?, decimals(r, b, "cost_us")?);
        for i in 0..b.num_rows() {
            let (u, c) = (us[i].unwrap_or(0), money_from_us(cost[i]));
            un_total += u;
            un_cost += c;
            let node_hours = units[i].unwrap_or(0) * window.seconds() * 1_000_000;
            unalloc_rows.push(vec![
                Cell::Str(node[i].clone().unwrap_or_default()),
                Cell::Str(model[i].clone().unwrap_or_default()),
                hours(u),
                pct(u, node_hours),
                money(c),
            ]);
        }
    }
    let unallocated = Report {
        name: "idle_unallocated".into(),
        title: format!("Unallocated GPUs {label}"),
        columns: ["node", "gpu_model", "unallocated_gpu_hours", "unallocated_pct", "list_cost"].map(String::from).to_vec(),
        rows: unalloc_rows,
        total: Some(vec![Cell::Str("total".into()), Cell::Null, hours(un_total), Cell::Null, money(un_cost)]),
        notes: vec!["unallocated_pct: of the GPU time of the node's units that reported in the window".into()],
        meta: Map::new(),
    };

    let mut zombie_rows = Vec::new();
    for b in &zombie {
        let r = "idle_zombie";
        let (node, uuid, gi, model, profile) =
            (strs(r, b, "node")?, strs(r, b, "gpu_uuid")?, ints(r, b, "gpu_instance_id")?, strs(r, b, "gpu_model")?, strs(r, b, "mig_profile")?);
        let (us, mem, first, last) = (ints(r, b, "gpu_us")?, ints(r, b, "max_mem_mib")?, millis(r, b, "first_seen")?, millis(r, b, "last_seen")?);
        for i in 0..b.num_rows() {
            zombie_rows.push(vec![
                Cell::Str(node[i].clone().unwrap_or_default()),
                Cell::Str(uuid[i].clone().unwrap_or_default()),
                gi[i].map_or(Cell::Null, Cell::Int),
                Cell::Str(model[i].clone().unwrap_or_default()),
                profile[i].clone().map_or(Cell::Null, Cell::Str),
                hours(us[i].unwrap_or(0)),
                Cell::Int(mem[i].unwrap_or(0)),
                first[i].map_or(Cell::Null, |t| Cell::Str(rfc3339(t))),
                last[i].map_or(Cell::Null, |t| Cell::Str(rfc3339(t))),
            ]);
        }
    }
    let zombie = Report {
        name: "idle_zombie".into(),
        title: format!("Zombie GPU memory {label}"),
        columns: ["node", "gpu_uuid", "gpu_instance_id", "gpu_model", "mig_profile", "zombie_gpu_hours", "max_mem_mib", "first_seen", "last_seen"]
            .map(String::from)
            .to_vec(),
        rows: zombie_rows,
        total: None,
        notes: vec![format!("framebuffer over {} MiB used with no pod and 0% utilisation: a process that outlived its pod", config.idle.zombie_mem_mib)],
        meta: Map::new(),
    };

    let mut starved: Vec<&PodIdle> = pods.iter().filter(|p| p.starved()).collect();
    starved.sort_by(|a, b| (b.idle_steps * 1000 / b.steps.max(1)).cmp(&(a.idle_steps * 1000 / a.steps.max(1))).then(a.ns.cmp(&b.ns)).then(a.pod.cmp(&b.pod)));
    let starved = Report {
        name: "idle_starved".into(),
        title: format!("Data-starved jobs {label}"),
        columns: ["namespace", "pod", "gpu_model", "held_gpu_hours", "idle_steps_pct", "drops", "drops_per_hour"].map(String::from).to_vec(),
        rows: starved
            .iter()
            .map(|p| {
                vec![
                    Cell::Str(p.ns.clone()),
                    Cell::Str(p.pod.clone()),
                    Cell::Str(p.model.clone()),
                    hours(p.held),
                    pct(p.idle_steps, p.steps),
                    Cell::Int(p.drops),
                    Cell::Dec { units: round_ratio(p.drops as i128 * US_PER_HOUR, p.held.max(1) as i128, 2), decimals: 2 },
                ]
            })
            .collect(),
        total: None,
        notes: vec![format!(
            "pods with {}-{}% of their steps under {}% utilisation, in at least {} separate drops: the GPU waits for data",
            STARVED_IDLE_PCT.0, STARVED_IDLE_PCT.1, config.idle.util_threshold_pct, STARVED_MIN_DROPS
        )],
        meta: Map::new(),
    };
    Ok([Some(idle), Some(namespaces), by_key_section, Some(unallocated), Some(zombie), Some(starved)].into_iter().flatten().collect())
}
