//! The config's sections as typed values, as serde reads them from TOML.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::NaiveDate;
use serde::Deserialize;

use crate::domain::dcgm_field::Field;
pub use crate::domain::size::MemorySize;
use crate::domain::tariff_time::TimeBand;

/// Which cost `total_cost` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CostBasis {
    #[default]
    Cloud,
    Power,
}

impl CostBasis {
    /// Its name in config (`pricing.basis`) and in the reports' notes.
    pub fn name(self) -> &'static str {
        match self {
            CostBasis::Cloud => "cloud",
            CostBasis::Power => "power",
        }
    }

    /// Of a power-priced and a cloud-priced figure, the one this basis charges.
    pub fn pick<T>(self, power: T, cloud: T) -> T {
        match self {
            CostBasis::Power => power,
            CostBasis::Cloud => cloud,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub lake: LakeConfig,
    pub prometheus: PrometheusConfig,
    pub pricing: PricingConfig,
    pub engine: EngineConfig,
    pub queries: QueriesConfig,
    pub run: RunConfig,
    pub idle: IdleConfig,
    pub focus: FocusConfig,
    pub plan: PlanConfig,
    pub serve: ServeConfig,
    pub sharing: SharingConfig,
    /// namespace -> GPU quota, for namespaces without a ResourceQuota.
    pub quotas: BTreeMap<String, u32>,
    /// namespace -> team, or `{ team, cost_centre }`; wins over namespace labels.
    pub teams: BTreeMap<String, TeamEntry>,
}

/// One `[teams]` entry: `ns = "team"` or `ns = { team = "...", cost_centre = "..." }`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum TeamEntry {
    Team(String),
    Full {
        team: String,
        #[serde(default)]
        cost_centre: Option<String>,
    },
}

impl TeamEntry {
    pub fn team(&self) -> &str {
        match self {
            TeamEntry::Team(t) | TeamEntry::Full { team: t, .. } => t,
        }
    }

    pub fn cost_centre(&self) -> Option<&str> {
        match self {
            TeamEntry::Team(_) => None,
            TeamEntry::Full { cost_centre, .. } => cost_centre.as_deref(),
        }
    }
}

/// Where the cost of a row that no tenant asked for (unallocated GPU time, a shared
/// namespace) goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SpreadPolicy {
    /// Stays on its own row.
    #[default]
    Separate,
    /// Spread over the tenant namespaces in proportion to their cost.
    Proportional,
    /// Charged to one namespace.
    Owner(String),
}

/// `pricing.idle_policy` read as a [`SpreadPolicy`]; an error names the key.
fn idle_policy<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<SpreadPolicy, D::Error> {
    spread_policy(d, "pricing.idle_policy")
}

/// `pricing.shared_policy` read as a [`SpreadPolicy`]; an error names the key.
fn shared_policy<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<SpreadPolicy, D::Error> {
    spread_policy(d, "pricing.shared_policy")
}

fn spread_policy<'de, D: serde::Deserializer<'de>>(d: D, key: &str) -> std::result::Result<SpreadPolicy, D::Error> {
    let text = String::deserialize(d)?;
    SpreadPolicy::parse(&text).map_err(|m| serde::de::Error::custom(format!("{key} {m}")))
}

impl SpreadPolicy {
    pub fn parse(text: &str) -> std::result::Result<SpreadPolicy, String> {
        match text.trim() {
            "separate" => Ok(SpreadPolicy::Separate),
            "proportional" => Ok(SpreadPolicy::Proportional),
            t => match t.strip_prefix("owner:") {
                Some(ns) if !ns.trim().is_empty() => Ok(SpreadPolicy::Owner(ns.trim().to_string())),
                _ => Err(format!("must be \"separate\", \"proportional\" or \"owner:<namespace>\", got {text:?}")),
            },
        }
    }

    pub fn label(&self) -> String {
        match self {
            SpreadPolicy::Separate => "separate".into(),
            SpreadPolicy::Proportional => "proportional".into(),
            SpreadPolicy::Owner(ns) => format!("owner:{ns}"),
        }
    }
}

/// The FinOps FOCUS export's fixed columns: who provides and bills the GPU pool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FocusConfig {
    pub provider_name: String,
    pub publisher_name: String,
    pub invoice_issuer_name: String,
    pub billing_account_id: String,
    pub billing_account_name: String,
    /// `x_Cluster` and the prefix of every `ResourceId`.
    pub cluster: String,
}

/// `gpuledger run`, the cron job.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Reports go to `<reports_dir>/<YYYY-MM>/`.
    pub reports_dir: PathBuf,
    /// Collect from Prometheus before reporting (`--no-collect` turns it off for one run).
    pub collect: bool,
    /// Exit 3 ("data incomplete") when a source has less than this share of its expected
    /// samples for the month; 0 turns the check off.
    pub min_completeness_pct: f64,
    /// Print the month's page to `report.pdf` beside it where a Chromium is installed.
    pub pdf: bool,
}

/// `gpuledger serve`: the lake over the PostgreSQL wire protocol, read-only.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Address to listen on (`--listen`); loopback by default.
    pub listen: String,
    /// One `user:password` line per user (`--users`; a mounted Secret). Required.
    pub users_file: Option<PathBuf>,
    /// PEM certificate chain and private key (PKCS#8, PKCS#1 or SEC1) for TLS; both or neither.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Connections served at once; one more is refused with SQLSTATE 53300.
    pub max_connections: usize,
    /// The longest a statement may run (a client's `SET statement_timeout` may lower it, never
    /// raise it); 0 takes `engine.query_timeout_secs`.
    pub statement_timeout_secs: u64,
    /// `optional`: TLS for clients that ask for it (with `tls_cert`/`tls_key`), plain text for
    /// the rest; `required`: a plain-text connection is refused before it logs in.
    pub tls: TlsMode,
    /// Seconds a connection has to log in (SSL negotiation, startup and SCRAM); one that says
    /// nothing for longer is closed, and its connection slot freed.
    pub login_timeout_secs: u64,
}

/// Whether `serve` also serves plain text (`serve.tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    #[default]
    Optional,
    Required,
}

/// `gpuledger plan`: what the lake does not record about the scheduler.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlanConfig {
    /// PriorityClass name -> its value and preemption policy. Pods of a class not named here
    /// replay at value 0 without preempting (and the plan report says so).
    pub priority_classes: BTreeMap<String, PriorityClassEntry>,
    /// Scenario files `run` replays each month beside the baseline (docs/planning.md).
    pub scenarios: Vec<PathBuf>,
}

/// A PriorityClass: `value`, and `preempts` (`preemptionPolicy: PreemptLowerPriority`, the
/// Kubernetes default) or not (`Never`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PriorityClassEntry {
    pub value: i64,
    #[serde(default = "preempts_by_default")]
    pub preempts: bool,
}

fn preempts_by_default() -> bool {
    true
}

/// How a GPU a sharing layer splits is divided among its holders.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SharingConfig {
    /// A HAMi vGPU's part of its GPU: `cores`, `memory` or `max` (the larger).
    pub hami_share: crate::domain::gpu_resource::HamiShare,
}

/// The idle report's thresholds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdleConfig {
    /// A held GPU under this utilisation (percent) is idle ...
    pub util_threshold_pct: f64,
    /// ... when it stays under it for at least this long.
    pub min_minutes: u32,
    /// Framebuffer (MiB) held with no pod and 0 % utilisation that counts as zombie memory.
    pub zombie_mem_mib: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LakeConfig {
    /// A local folder, or `s3://bucket/prefix` for S3-compatible object storage.
    pub path: PathBuf,
    /// Settings for an `s3://` lake (credentials come from the environment or `credentials_file`).
    pub s3: S3Config,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct S3Config {
    /// The S3 API's address for S3-compatible stores (MinIO, Ceph, R2, ...); AWS when absent.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Path-style requests (`endpoint/bucket/key`), which most S3-compatible stores need.
    pub path_style: bool,
    /// Allow a plain-HTTP endpoint.
    pub allow_http: bool,
    /// An AWS shared-credentials file (`[profile]` with `aws_access_key_id`, ...); without it the
    /// environment's `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` are used.
    pub credentials_file: Option<PathBuf>,
    /// The profile to read from `credentials_file` (default `default`).
    pub profile: Option<String>,
    /// The lake lock's lease: a holder renews it every third of this; a crashed holder's lock
    /// is taken over once it has run out.
    pub lock_ttl_secs: u64,
    /// Retries of a failed request (with exponential backoff) before the job fails.
    pub retries: usize,
    /// No retry starts later than this many seconds after a request's first try.
    pub retry_timeout_secs: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrometheusConfig {
    /// Base URL, with any path prefix (`https://mimir.example/prometheus`).
    pub url: String,
    /// The lake's sample grid.
    pub step_secs: u32,
    /// How long a sample stands when its series has no next one (Prometheus' lookback delta):
    /// a step with no scrape inside takes the last sample this recent. A series that ends stops
    /// at its last sample plus its own scrape interval.
    pub lookback_secs: u32,
    /// Labels that tell the replicas of an HA pair apart (Thanos Query without deduplication, a
    /// Mimir tenant fed by two Prometheis): series that differ only in these are one series.
    pub replica_labels: Vec<String>,
    /// The label that names the cluster of a series where one Prometheus, Thanos or Mimir holds
    /// several (an external label such as `cluster`): rows are kept per cluster (the lake's
    /// `cluster` column), so node and namespace names repeating across clusters stay apart.
    pub cluster_label: Option<String>,
    /// The cluster of every row where `cluster_label` is unset, and of series that lack it.
    pub cluster_name: String,
    /// `collect` without `--to` stops at now minus this much (data still arriving).
    pub lag_secs: u64,
    /// First `collect` without a checkpoint starts this many days back (UTC midnight).
    pub initial_days: u32,
    /// Length of one range query.
    pub chunk_secs: u64,
    pub timeout_secs: u64,
    /// Retries on connection errors, timeouts, 429 and 5xx.
    pub retries: u32,
    /// First retry delay; doubles each time, with jitter.
    pub backoff_ms: u64,
    /// Queries in flight at once.
    pub concurrency: usize,
    pub bearer_token_file: Option<PathBuf>,
    /// Name of an environment variable holding a bearer token.
    pub bearer_token_env: Option<String>,
    pub basic_auth_user: Option<String>,
    pub basic_auth_password_file: Option<PathBuf>,
    /// PEM file of extra CA certificates.
    pub ca_file: Option<PathBuf>,
    /// Extra request headers, e.g. `{ "X-Scope-OrgID" = "tenant-1" }` for Mimir/Cortex.
    pub headers: BTreeMap<String, String>,
    pub metrics: MetricNames,
    pub labels: LabelNames,
}

/// Metric names, defaulting to what dcgm-exporter and kube-state-metrics export.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricNames {
    pub gpu_util: String,
    pub engine_active: String,
    pub fb_used: String,
    pub fb_free: String,
    pub power: String,
    pub energy: String,
    pub temp: String,
    pub xid: String,
    pub pod_info: String,
    pub pod_created: String,
    pub pod_scheduled_time: String,
    pub pod_start_time: String,
    pub pod_completion_time: String,
    pub pod_phase: String,
    pub pod_requests: String,
    pub pod_status_reason: String,
    pub pod_last_terminated_reason: String,
    pub pod_labels: String,
    pub resourcequota: String,
    pub node_capacity: String,
    pub kueue_pending: String,
    pub namespace_labels: String,
    /// kube-state-metrics 2.20's pod-to-ResourceClaim link (DRA).
    pub pod_resourceclaim_info: String,
    /// Who owns each pod and the hops above it (kube-state-metrics; `deployment_owner` from
    /// 2.18), the pods' annotations (with an allowlist), and KubeRay's RayCluster owner kinds.
    pub pod_owner: String,
    pub replicaset_owner: String,
    pub job_owner: String,
    pub deployment_owner: String,
    pub pod_annotations: String,
    pub kuberay_cluster_info: String,
    /// The schedulers' queue series: Kueue's ClusterQueues (their cohorts; with
    /// `enableClusterQueueResources`, quota, borrowing limit, admitted usage and pending demand),
    /// Volcano's queues (scalar resources, in thousandths), KAI's queues (GPUs).
    pub kueue_cluster_queue_info: String,
    pub kueue_nominal_quota: String,
    pub kueue_borrowing_limit: String,
    pub kueue_resource_usage: String,
    pub kueue_resource_pending: String,
    pub volcano_deserved: String,
    pub volcano_capacity: String,
    pub volcano_allocated: String,
    pub volcano_request: String,
    pub kai_deserved_gpus: String,
    pub kai_allocated_gpus: String,
    /// HAMi's scheduler: each container's allocated cores (percent) and memory (bytes) per
    /// device, and each device's memory limit; its vGPU monitor: each container's part of the
    /// device's utilisation (0-100).
    pub hami_core_allocated: String,
    pub hami_memory_allocated: String,
    pub hami_memory_limit: String,
    pub hami_container_util: String,
    /// The vGPU monitor's seconds since each container last launched a kernel (idle-but-held).
    pub hami_last_kernel: String,
}

impl MetricNames {
    /// The configured metric name of a DCGM field.
    pub fn of(&self, field: Field) -> &str {
        match field {
            Field::Util => &self.gpu_util,
            Field::EngineActive => &self.engine_active,
            Field::FbUsed => &self.fb_used,
            Field::FbFree => &self.fb_free,
            Field::Power => &self.power,
            Field::Energy => &self.energy,
            Field::Temp => &self.temp,
            Field::Xid => &self.xid,
        }
    }
}

/// Label names to look for, in order of preference. `exported_*` labels (a ServiceMonitor
/// without `honorLabels`) win whenever a response carries them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LabelNames {
    pub node: Vec<String>,
    pub namespace: Vec<String>,
    pub pod: Vec<String>,
    pub container: Vec<String>,
    /// Pod-name prefixes of the DCGM exporter itself: on a series without `exported_*`
    /// labels, a plain `pod` starting with one of these names the scrape target (a
    /// ServiceMonitor without `honorLabels`), not a workload.
    pub exporter_pods: Vec<String>,
    /// kube_pod_labels labels that name the pod's team, first match wins.
    pub team: Vec<String>,
    /// kube_namespace_labels labels that name a namespace's team, first match wins.
    pub namespace_team: Vec<String>,
    /// kube_namespace_labels labels that name a namespace's cost centre.
    pub namespace_cost_centre: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PricingConfig {
    pub currency: String,
    pub basis: CostBasis,
    /// `separate | proportional | owner:<namespace>`: where `__unallocated__` cost goes.
    #[serde(deserialize_with = "idle_policy")]
    pub idle_policy: SpreadPolicy,
    /// Namespaces run for everyone (e.g. kube-system); their cost is spread by `shared_policy`.
    pub shared_namespaces: Vec<String>,
    #[serde(deserialize_with = "shared_policy")]
    pub shared_policy: SpreadPolicy,
    pub power: PowerPricing,
    pub gpu: Vec<GpuPrice>,
    /// Price per CPU core-hour requested, with dates; none = CPU is not charged.
    pub cpu: Vec<RatePrice>,
    /// Price per GiB-hour of memory requested, with dates; none = memory is not charged.
    pub memory: Vec<RatePrice>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PowerPricing {
    /// The flat rate, and the rate at times no tariff band covers.
    pub price_per_kwh: f64,
    pub pue: f64,
    pub effective_from: NaiveDate,
    /// Grid carbon intensity, g CO2e per kWh; none = no carbon column.
    pub carbon_g_per_kwh: Option<f64>,
    /// IANA time zone the tariff bands' hours and days are in.
    pub timezone: String,
    /// Time-of-use bands; the rows with the latest `effective_from` on or before an instant
    /// form the tariff then, and the first band matching the local hour and weekday wins.
    pub tariff: Vec<TariffBand>,
    /// `timezone` and `tariff` as typed values, resolved once when the config is loaded (every
    /// error naming its key); what the pricing reads.
    #[serde(skip)]
    pub resolved: ResolvedTariff,
}

/// The tariff's time zone and bands, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedTariff {
    pub timezone: chrono_tz::Tz,
    /// In config order.
    pub bands: Vec<TimeBand>,
}

impl Default for ResolvedTariff {
    fn default() -> Self {
        ResolvedTariff { timezone: chrono_tz::UTC, bands: Vec::new() }
    }
}

/// One time-of-use band: `hours = "22:00-06:00"` (local, may wrap midnight), on `days`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TariffBand {
    pub name: String,
    pub price_per_kwh: f64,
    #[serde(default = "all_day")]
    pub hours: String,
    #[serde(default = "all_days")]
    pub days: Vec<String>,
    #[serde(default = "epoch_date")]
    pub effective_from: NaiveDate,
}

fn all_day() -> String {
    "00:00-24:00".into()
}

fn all_days() -> Vec<String> {
    ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].map(String::from).to_vec()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuPrice {
    /// DCGM `modelName`, e.g. "NVIDIA H100 80GB HBM3".
    pub model: String,
    /// A MIG profile (e.g. "3g.40gb"): the price is then per hour of that instance. Without
    /// one, MIG instances of the model pay the GPU price times their share.
    #[serde(default)]
    pub mig_profile: Option<String>,
    pub price_per_hour: f64,
    #[serde(default = "epoch_date")]
    pub effective_from: NaiveDate,
}

/// A dated rate (CPU core-hour, memory GiB-hour).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatePrice {
    pub price_per_hour: f64,
    #[serde(default = "epoch_date")]
    pub effective_from: NaiveDate,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// DataFusion memory pool, e.g. "1G", "512M"; "0" for unbounded.
    #[serde(deserialize_with = "memory_limit")]
    pub memory_limit: MemorySize,
    /// Where the SQL runs: `local` (default), `ballista://HOST:PORT`, `ballista://standalone`.
    pub url: Option<String>,
    /// A query that has not finished after this many seconds fails (0: no limit). A Ballista job
    /// with no executor to run it waits for one forever; a cron job must not.
    pub query_timeout_secs: u64,
    /// Most disk a query may spill to (sorts, joins and aggregates over the memory limit), e.g.
    /// "4G"; "0" for no spilling at all.
    #[serde(deserialize_with = "spill_limit")]
    pub spill_limit: MemorySize,
    /// Most rows an ad hoc query (`query`) may return.
    pub max_result_rows: u64,
    /// Most bytes (Arrow's in-memory size) an ad hoc query (`query`) may return, e.g. "256M"
    /// (never unbounded: a result is always bounded).
    #[serde(deserialize_with = "max_result_bytes")]
    pub max_result_bytes: MemorySize,
}

/// `engine.memory_limit` read as a [`MemorySize`]; an error names the key.
fn memory_limit<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<MemorySize, D::Error> {
    memory_size(d, "engine.memory_limit")
}

/// `engine.spill_limit` read as a [`MemorySize`]; an error names the key.
fn spill_limit<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<MemorySize, D::Error> {
    memory_size(d, "engine.spill_limit")
}

/// `engine.max_result_bytes` read as a bounded [`MemorySize`]; an error names the key.
fn max_result_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<MemorySize, D::Error> {
    let size = memory_size(d, "engine.max_result_bytes")?;
    if size.limit().is_none() {
        return Err(serde::de::Error::custom("engine.max_result_bytes must be a size such as 256M (a result is always bounded)"));
    }
    Ok(size)
}

fn memory_size<'de, D: serde::Deserializer<'de>>(d: D, key: &str) -> std::result::Result<MemorySize, D::Error> {
    let text = String::deserialize(d)?;
    MemorySize::parse(&text).map_err(|m| serde::de::Error::custom(format!("{key}: {m}")))
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct QueriesConfig {
    /// A folder whose `*.sql` files replace the built-in rollup queries of the same name.
    pub dir: Option<PathBuf>,
}

pub(super) fn epoch_date() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date")
}

impl Config {
    pub fn team_of(&self, namespace: &str) -> Option<&str> {
        self.teams.get(namespace).map(TeamEntry::team)
    }

    pub fn idle_policy(&self) -> SpreadPolicy {
        self.pricing.idle_policy.clone()
    }

    pub fn shared_policy(&self) -> SpreadPolicy {
        self.pricing.shared_policy.clone()
    }
}
