//! `gpuledger plan`: the recorded month replayed under proposed splits of the pool.
//!
//! `recorded` turns the lake's pods, inventory, quotas and pending samples into a replay's
//! input; `model` is the replay (kube-scheduler, quota admission, preemption); `scenario`
//! reads what a scenario changes; `metrics` states a timeline (recorded or replayed) as waits,
//! GPU-hours, pending demand, energy and cost (priced by `prices`); `optimize` searches
//! quotas; `output` writes it all as
//! reports. The baseline is the recorded month replayed with its recorded settings, and every
//! plan report states how close it came to what was recorded (its calibration).

pub mod metrics;
pub mod model;
pub mod optimize;
pub mod output;
pub mod prices;
pub mod recorded;
pub mod scenario;
mod setup;
mod state;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use datafusion::prelude::SessionContext;

use crate::config::Config;
use crate::domain::window::Window;
use crate::engine::{run_query, str_param};
use crate::queries::Queries;
use crate::report::columns::{floats, ints, strs, window_params};
use crate::report::{Report, ReportError};
use metrics::Summary;
use model::Setup;
use recorded::{PodRow, PoolRow, Recorded};
use scenario::{Goals, ScenarioError};

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("plan")]
    Report(#[from] ReportError),
    #[error("plan")]
    Engine(#[from] crate::engine::EngineError),
    #[error("plan")]
    Query(#[from] crate::queries::QueryError),
    #[error("plan {window}: the lake holds no pool (nodes) for the window; collect it first")]
    NoPool { window: String },
    #[error("plan {window}: the lake holds clusters {clusters}: choose one with --cluster")]
    Clusters { window: String, clusters: String },
    #[error("plan: --cluster {0:?} has no nodes in the window")]
    UnknownCluster(String),
}

impl crate::exit::ExitStatus for PlanError {
    fn exit_code(&self) -> Option<u8> {
        match self {
            PlanError::Scenario(ScenarioError::Read { .. }) => None,
            PlanError::Scenario(_) | PlanError::Clusters { .. } | PlanError::UnknownCluster(_) => Some(crate::exit::USAGE),
            _ => None,
        }
    }
}

pub type Result<T, E = PlanError> = std::result::Result<T, E>;

/// What a plan is asked.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub cluster: Option<String>,
    pub scenario_files: Vec<PathBuf>,
    pub optimize: bool,
    pub max_replays: usize,
}

/// One replayed scenario and what it came to.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub name: String,
    pub setup: Setup,
    pub summary: Summary,
    pub replay_ms: f64,
    pub passes: u64,
}

/// A finished plan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub window: Window,
    pub recorded: Recorded,
    /// What was recorded, stated as the replays are.
    pub recorded_summary: Summary,
    /// The baseline first, then each scenario, then the optimiser's proposal.
    pub scenarios: Vec<Replayed>,
    pub goals: Goals,
    pub optimized: Option<Optimized>,
}

#[derive(Debug, Clone)]
pub struct Optimized {
    pub score: optimize::Score,
    pub baseline_score: optimize::Score,
    pub replays: usize,
    pub seconds: f64,
}

/// Reads the recorded month from the lake.
pub async fn load(
    ctx: &SessionContext,
    queries: &Queries,
    config: &Config,
    window: &Window,
    cluster: Option<&str>,
    shared: &crate::report::Shared,
) -> Result<Recorded> {
    let label = window.label();
    let mut params = window_params(window);
    params.push(str_param(cluster.unwrap_or("").to_string()));
    let r = "plan";
    let mut pool = Vec::new();
    let mut clusters = std::collections::BTreeSet::new();
    for b in &run_query(ctx, "plan_pool", &queries.get("plan_pool")?, params.clone()).await? {
        let (cl, node, uuid, model, profile) =
            (strs(r, b, "cluster")?, strs(r, b, "node")?, strs(r, b, "gpu_uuid")?, strs(r, b, "gpu_model")?, strs(r, b, "mig_profile")?);
        let (replicas, first, last) = (ints(r, b, "replicas")?, ints(r, b, "first_ms")?, ints(r, b, "last_ms")?);
        let share = floats(r, b, "share")?;
        for i in 0..b.num_rows() {
            clusters.insert(cl[i].clone().unwrap_or_default());
            pool.push(PoolRow {
                node: node[i].clone().unwrap_or_default(),
                gpu_uuid: uuid[i].clone().unwrap_or_default(),
                model: model[i].clone().unwrap_or_default(),
                mig_profile: profile[i].clone(),
                share: share[i].unwrap_or(1.0),
                replicas: replicas[i].unwrap_or(1).max(1) as u32,
                first_seen: first[i].unwrap_or(window.start.timestamp_millis()),
                last_seen: last[i].unwrap_or(window.end.timestamp_millis()),
            });
        }
    }
    if pool.is_empty() {
        return Err(match cluster {
            Some(c) => PlanError::UnknownCluster(c.to_string()),
            None => PlanError::NoPool { window: label },
        });
    }
    if clusters.len() > 1 {
        return Err(PlanError::Clusters { window: label, clusters: clusters.into_iter().collect::<Vec<_>>().join(", ") });
    }
    // The pods, a batch at a time as the query returns them (a month of 10,000 GPUs has over
    // a million): each batch decoded and dropped, the labels that repeat (namespace, node,
    // class, resource, reason) shared rather than copied per pod; sorted here, once all are in.
    let mut pods = Vec::new();
    let mut labels = recorded::Labels::default();
    let (mut stream, _) =
        crate::engine::stream_query(ctx, "plan_pods", &queries.get("plan_pods")?, datafusion::common::ParamValues::from(params.clone())).await?;
    while let Some(b) = futures::StreamExt::next(&mut stream).await {
        let b = b.map_err(|e| crate::engine::query_error(ctx, "plan_pods", e))?;
        let text = |name| crate::report::columns::texts(r, &b, name);
        let (ns, pod, uid, node, class, res, reason) =
            (text("namespace")?, text("pod")?, text("uid")?, text("node")?, text("priority_class")?, text("gpu_resource")?, text("termination_reason")?);
        let (created, scheduled, started, finished, count) =
            (ints(r, &b, "created_ms")?, ints(r, &b, "scheduled_ms")?, ints(r, &b, "started_ms")?, ints(r, &b, "finished_ms")?, ints(r, &b, "gpu_request")?);
        fn value(a: &arrow::array::StringArray, i: usize) -> Option<&str> {
            arrow::array::Array::is_valid(a, i).then(|| a.value(i))
        }
        pods.reserve(b.num_rows());
        for i in 0..b.num_rows() {
            pods.push(PodRow {
                namespace: labels.get(value(&ns, i).unwrap_or_default()),
                pod: value(&pod, i).unwrap_or_default().to_string(),
                uid: value(&uid, i).unwrap_or_default().to_string(),
                node: value(&node, i).map(|n| labels.get(n)),
                priority_class: labels.get(value(&class, i).unwrap_or_default()),
                created: created[i].unwrap_or(0),
                scheduled: scheduled[i],
                started: started[i],
                finished: finished[i],
                resource: labels.get(value(&res, i).unwrap_or("nvidia.com/gpu")),
                count: count[i].unwrap_or(1).clamp(1, u32::MAX as i64) as u32,
                reason: value(&reason, i).map(|n| labels.get(n)),
            });
        }
    }
    pods.sort_by(|a, b| (a.created, &*a.namespace, &a.pod, &a.uid).cmp(&(b.created, &*b.namespace, &b.pod, &b.uid)));
    let mut pending = Vec::new();
    let mut quotas = BTreeMap::new();
    // The recorded pending demand, from the pending rollups (or the window's rows).
    crate::report::rolled::register::<crate::lake::rollup::PendingSums>(ctx, "plan_recorded", crate::lake::rollup::PENDING_BUCKETS, window).await?;
    let recorded = match queries.get("plan_recorded") {
        Ok(sql) => run_query(ctx, "plan_recorded", &sql, params.clone()).await.map_err(PlanError::from),
        Err(e) => Err(PlanError::from(e)),
    };
    crate::report::rolled::deregister(ctx, crate::lake::rollup::PENDING_BUCKETS);
    for b in &recorded? {
        let (ns, hour, gpu_s, hard) = (strs(r, b, "namespace")?, ints(r, b, "hour_ms")?, ints(r, b, "pending_gpu_s")?, ints(r, b, "hard")?);
        for i in 0..b.num_rows() {
            let n = ns[i].clone().unwrap_or_default();
            match (hour[i], hard[i]) {
                (Some(h), _) => pending.push((n, h, gpu_s[i].unwrap_or(0))),
                (None, Some(q)) => {
                    quotas.insert(n, q.clamp(0, u32::MAX as i64) as u32);
                }
                _ => {}
            }
        }
    }
    let mut teams = BTreeMap::new();
    for b in &run_query(ctx, "plan_teams", &queries.get("plan_teams")?, vec![]).await? {
        let (ns, team, source) = (strs(r, b, "namespace")?, strs(r, b, "team")?, strs(r, b, "source")?);
        for i in 0..b.num_rows() {
            let (Some(n), Some(t)) = (ns[i].clone(), team[i].clone()) else { continue };
            // The config's row wins over the labels'.
            if source[i].as_deref() == Some("config") || !teams.contains_key(&n) {
                teams.insert(n, t);
            }
        }
    }
    // What the chargeback charged for the window: each namespace's energy per GPU-hour on each
    // model (the replay's power prices) and its cost (the calibration's).
    let charged = prices::Charged::from_chargeback(&*shared.chargeback(ctx, queries, window).await?, cluster);
    let step = config.prometheus.step_secs.max(1) as i64 * 1000;
    // The queries' buffers are free now; the jobs and timeline built next are large blocks of
    // their own, which would not reuse them.
    crate::limits::release_freed_memory();
    Ok(recorded::build(recorded::Inputs {
        from: window.start.timestamp_millis(),
        to: window.end.timestamp_millis(),
        step,
        pods,
        pool,
        pending,
        quotas,
        teams,
        charged,
        config,
    }))
}

/// Replays `setup` and states what came of it.
pub fn run_scenario(name: &str, setup: Setup, recorded: &Recorded, config: &Config) -> Replayed {
    let t = Instant::now();
    let outcome = model::replay(&setup, &recorded.jobs);
    let replay_ms = t.elapsed().as_secs_f64() * 1000.0;
    let (prices, filled) = prices::Prices::new(config, &setup, &recorded.charged);
    if !filled.is_empty() && name != "baseline" {
        tracing::info!("plan: scenario {name:?}: no energy charged for {}; filled in as stated", filled.join("; "));
    }
    let summary = metrics::summarize_outcome(&setup, &outcome, &prices);
    tracing::info!("plan: scenario {name:?} replayed in {replay_ms:.0} ms ({} binding passes, {} pods)", outcome.passes, outcome.pods.len());
    Replayed { name: name.to_string(), setup, summary, replay_ms, passes: outcome.passes }
}

/// The baseline, every scenario of the request's files, and the optimiser's proposal.
pub fn plan(window: &Window, mut recorded: Recorded, config: &Config, request: &Request) -> Result<Plan> {
    // The recorded timeline is only summed: freed here, before the replays hold their own
    // (1.26 M pods each at 10,000 GPUs).
    let recorded_pods = std::mem::take(&mut recorded.pods);
    let recorded_summary = metrics::summarize(&recorded.setup, &recorded_pods, &recorded.pending_gpu_s, &recorded.pending_by_hour, &recorded.prices);
    drop(recorded_pods);
    crate::limits::release_freed_memory();
    let mut scenarios = vec![run_scenario("baseline", recorded.setup.clone(), &recorded, config)];
    let mut goals = None;
    for path in &request.scenario_files {
        let file = scenario::load(path)?;
        let origin = path.display().to_string();
        for (i, spec) in file.scenario.iter().enumerate() {
            if scenarios.iter().any(|s| s.name == spec.name) {
                return Err(
                    ScenarioError::Invalid { path: origin, key: format!("scenario[{i}].name"), message: format!("{:?} is named twice", spec.name) }.into()
                );
            }
            let setup = scenario::apply(&recorded.setup, spec, i, &recorded.teams, &origin)?;
            scenarios.push(run_scenario(&spec.name, setup, &recorded, config));
        }
        if file.goals.is_some() {
            goals = file.goals;
        }
    }
    let goals = goals.unwrap_or_default();
    let mut optimized = None;
    if request.optimize {
        let t = Instant::now();
        let base = &recorded.setup;
        let pool = scenario::pool_gpus(base);
        let bad = |key: String, message: String| ScenarioError::Invalid { path: "goals".into(), key, message };
        let mut floor = vec![0u32; base.namespaces.len()];
        for (key, amount) in &goals.guaranteed {
            let gpus = amount.gpus(pool).map_err(|e| bad(format!("goals.guaranteed.{key}"), e))?;
            let i = base
                .namespaces
                .iter()
                .position(|n| n == key)
                .ok_or_else(|| bad(format!("goals.guaranteed.{key}"), format!("no namespace {key:?} in the month")))?;
            floor[i] = gpus;
        }
        // The namespaces whose quotas are searched: those with a quota or whole-GPU demand.
        let tunable: Vec<usize> = (0..base.namespaces.len())
            .filter(|&i| base.quota[i].is_some() || recorded.jobs.iter().any(|j| j.ns == i && j.resource == model::GPU_RESOURCE))
            .collect();
        let recorded_total: u32 = tunable.iter().map(|&i| base.quota[i].unwrap_or(0).max(floor[i])).sum();
        let max_total = match &goals.max_quota_total {
            Some(a) => a.gpus(pool).map_err(|e| bad("goals.max_quota_total".into(), e))?,
            None => recorded_total,
        };
        let fast = optimize::fast_namespaces(base, &recorded.jobs, &goals.fast_classes);
        let goal = optimize::Goal { max_p95_wait_min: goals.max_p95_wait_minutes, fast, floor, max_total };
        let found = optimize::search(base, &recorded.jobs, &recorded.prices, &goal, &tunable, request.max_replays.max(3));
        let seconds = t.elapsed().as_secs_f64();
        tracing::info!("plan: the search ran {} replays in {seconds:.1} s", found.replays);
        scenarios.push(run_scenario("optimized", found.setup, &recorded, config));
        optimized = Some(Optimized { score: found.score, baseline_score: found.baseline_score, replays: found.replays, seconds });
    }
    Ok(Plan { window: *window, recorded, recorded_summary, scenarios, goals, optimized })
}

/// Loads the month, plans and shapes the reports; the chargeback comes from (and stays in)
/// `shared`, for the month's other reports.
pub async fn build(
    ctx: &SessionContext,
    queries: &Queries,
    config: &Config,
    window: &Window,
    request: &Request,
    shared: &crate::report::Shared,
) -> Result<Vec<Report>> {
    let recorded = load(ctx, queries, config, window, request.cluster.as_deref(), shared).await?;
    let window = *window;
    let plan = plan(&window, recorded, config, request)?;
    Ok(output::reports(&plan, config))
}
