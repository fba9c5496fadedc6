//! `gpuledger.toml`: loaded once, validated with errors that name the key, then passed on as
//! typed values (parse, then trust).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::Deserialize;

use crate::collect::dcgm::Field;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("parsing config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config {path}: key `{key}`: {message}")]
    Invalid { path: String, key: String, message: String },
}

pub type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// Which cost `total_cost` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CostBasis {
    #[default]
    Cloud,
    Power,
}

#[derive(Debug, Clone, Deserialize)]
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
    /// namespace -> GPU quota, for namespaces without a ResourceQuota.
    pub quotas: BTreeMap<String, u32>,
    /// namespace -> team, or `{ team, cost_centre }`; wins over namespace labels.
    pub teams: BTreeMap<String, TeamEntry>,
    /// How `report chargeback` keys its rows; set by `--by`, not a config key.
    #[serde(skip)]
    pub chargeback_by: crate::report::chargeback::ChargeBy,
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

impl Default for FocusConfig {
    fn default() -> Self {
        FocusConfig {
            provider_name: "Internal GPU platform".into(),
            publisher_name: "Internal GPU platform".into(),
            invoice_issuer_name: "Internal GPU platform".into(),
            billing_account_id: "gpu-pool".into(),
            billing_account_name: "Shared GPU pool".into(),
            cluster: "default".into(),
        }
    }
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

impl Default for IdleConfig {
    fn default() -> Self {
        IdleConfig { util_threshold_pct: 5.0, min_minutes: 30, zombie_mem_mib: 1024.0 }
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig { reports_dir: PathBuf::from("reports"), collect: true, min_completeness_pct: 99.0 }
    }
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

impl Default for S3Config {
    fn default() -> Self {
        S3Config { endpoint: None, region: None, path_style: false, allow_http: false, credentials_file: None, profile: None, lock_ttl_secs: 300, retries: 4, retry_timeout_secs: 30 }
    }
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
}

impl Default for MetricNames {
    fn default() -> Self {
        MetricNames {
            gpu_util: Field::Util.default_name().into(),
            engine_active: Field::EngineActive.default_name().into(),
            fb_used: Field::FbUsed.default_name().into(),
            fb_free: Field::FbFree.default_name().into(),
            power: Field::Power.default_name().into(),
            energy: Field::Energy.default_name().into(),
            temp: Field::Temp.default_name().into(),
            xid: Field::Xid.default_name().into(),
            pod_info: "kube_pod_info".into(),
            pod_created: "kube_pod_created".into(),
            pod_scheduled_time: "kube_pod_status_scheduled_time".into(),
            pod_start_time: "kube_pod_start_time".into(),
            pod_completion_time: "kube_pod_completion_time".into(),
            pod_phase: "kube_pod_status_phase".into(),
            pod_requests: "kube_pod_container_resource_requests".into(),
            pod_status_reason: "kube_pod_status_reason".into(),
            pod_last_terminated_reason: "kube_pod_container_status_last_terminated_reason".into(),
            pod_labels: "kube_pod_labels".into(),
            resourcequota: "kube_resourcequota".into(),
            node_capacity: "kube_node_status_capacity".into(),
            kueue_pending: "kueue_pending_workloads".into(),
            namespace_labels: "kube_namespace_labels".into(),
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

impl Default for LabelNames {
    fn default() -> Self {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect();
        LabelNames {
            node: v(&["Hostname", "hostname", "kubernetes_node"]),
            namespace: v(&["namespace", "pod_namespace"]),
            pod: v(&["pod", "pod_name"]),
            container: v(&["container", "container_name"]),
            exporter_pods: v(&["nvidia-dcgm-exporter", "dcgm-exporter"]),
            team: v(&["label_team", "label_cost_center"]),
            namespace_team: v(&["label_team"]),
            namespace_cost_centre: v(&["label_cost_centre", "label_cost_center", "label_costcenter"]),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PricingConfig {
    pub currency: String,
    pub basis: CostBasis,
    /// `separate | proportional | owner:<namespace>`: where `__unallocated__` cost goes.
    pub idle_policy: String,
    /// Namespaces run for everyone (e.g. kube-system); their cost is spread by `shared_policy`.
    pub shared_namespaces: Vec<String>,
    pub shared_policy: String,
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
    pub memory_limit: String,
    /// Where the SQL runs: `local` (default), `ballista://HOST:PORT`, `ballista://standalone`.
    pub url: Option<String>,
    /// A query that has not finished after this many seconds fails (0: no limit). A Ballista job
    /// with no executor to run it waits for one forever; a cron job must not.
    pub query_timeout_secs: u64,
    /// Most disk a query may spill to (sorts, joins and aggregates over the memory limit), e.g.
    /// "4G"; "0" for no spilling at all.
    pub spill_limit: String,
    /// Most rows an ad hoc query (`query`, and `serve`) may return.
    pub max_result_rows: u64,
    /// Most bytes (Arrow's in-memory size) an ad hoc query may return, e.g. "256M".
    pub max_result_bytes: String,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct QueriesConfig {
    /// A folder whose `*.sql` files replace the built-in rollup queries of the same name.
    pub dir: Option<PathBuf>,
}

/// A Prometheus base URL that can work: http or https, a host, no spaces (the `--url` flags
/// are checked the same way as the config key).
pub fn check_prometheus_url(url: &str) -> std::result::Result<(), String> {
    let shown = crate::collect::prometheus::redact(url);
    let parsed = url::Url::parse(url).map_err(|e| format!("{shown:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("must start with http:// or https://, got {shown:?}"));
    }
    if parsed.host_str().is_none_or(str::is_empty) || url.chars().any(char::is_whitespace) {
        return Err(format!("{shown:?} has no valid host"));
    }
    Ok(())
}

fn epoch_date() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date")
}

impl Default for LakeConfig {
    fn default() -> Self {
        LakeConfig { path: PathBuf::from("lake"), s3: S3Config::default() }
    }
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            url: "http://127.0.0.1:9090".into(),
            step_secs: 30,
            lookback_secs: 300,
            replica_labels: ["prometheus_replica", "replica", "__replica__"].map(String::from).to_vec(),
            cluster_label: None,
            cluster_name: crate::lake::schema::DEFAULT_CLUSTER.to_string(),
            lag_secs: 300,
            initial_days: 7,
            chunk_secs: 6 * 3600,
            timeout_secs: 120,
            retries: 5,
            backoff_ms: 500,
            concurrency: 4,
            bearer_token_file: None,
            bearer_token_env: None,
            basic_auth_user: None,
            basic_auth_password_file: None,
            ca_file: None,
            headers: BTreeMap::new(),
            metrics: MetricNames::default(),
            labels: LabelNames::default(),
        }
    }
}

impl Default for PowerPricing {
    fn default() -> Self {
        PowerPricing {
            price_per_kwh: 0.12,
            pue: 1.3,
            effective_from: epoch_date(),
            carbon_g_per_kwh: None,
            timezone: "UTC".into(),
            tariff: Vec::new(),
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            memory_limit: "1G".into(),
            url: None,
            query_timeout_secs: 3600,
            spill_limit: "4G".into(),
            max_result_rows: 10_000_000,
            max_result_bytes: "256M".into(),
        }
    }
}

impl Default for PricingConfig {
    fn default() -> Self {
        PricingConfig {
            currency: "USD".into(),
            basis: CostBasis::Cloud,
            idle_policy: "separate".into(),
            shared_namespaces: Vec::new(),
            shared_policy: "separate".into(),
            power: PowerPricing::default(),
            gpu: default_gpu_prices(),
            cpu: Vec::new(),
            memory: Vec::new(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lake: LakeConfig::default(),
            prometheus: PrometheusConfig::default(),
            pricing: PricingConfig::default(),
            engine: EngineConfig::default(),
            queries: QueriesConfig::default(),
            run: RunConfig::default(),
            idle: IdleConfig::default(),
            focus: FocusConfig::default(),
            quotas: BTreeMap::new(),
            teams: BTreeMap::new(),
            chargeback_by: Default::default(),
        }
    }
}

/// Flat on-demand list prices per GPU-hour used when the config names none (and by the demo).
pub fn default_gpu_prices() -> Vec<GpuPrice> {
    [
        ("NVIDIA H100 80GB HBM3", 6.88),
        ("NVIDIA A100-SXM4-80GB", 3.67),
        ("NVIDIA L4", 0.80),
    ]
    .into_iter()
    .map(|(model, price)| GpuPrice { model: model.into(), mig_profile: None, price_per_hour: price, effective_from: epoch_date() })
    .collect()
}

impl Config {
    /// Loads `path`; a missing file is an error only when `required` (an explicit `--config`).
    pub fn load(path: &Path, required: bool) -> Result<Config> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let mut config = Config::parse(&text, &path.display().to_string())?;
                // Relative paths in a config file are relative to the file.
                let base = path.parent().unwrap_or(Path::new(""));
                if config.lake.path.is_relative() && !crate::lake::store::is_url(&config.lake.path) {
                    config.lake.path = base.join(&config.lake.path);
                }
                if config.run.reports_dir.is_relative() {
                    config.run.reports_dir = base.join(&config.run.reports_dir);
                }
                for p in [&mut config.queries.dir, &mut config.lake.s3.credentials_file, &mut config.prometheus.bearer_token_file, &mut config.prometheus.basic_auth_password_file, &mut config.prometheus.ca_file] {
                    if let Some(dir) = p.as_mut().filter(|d| d.is_relative()) {
                        *dir = base.join(&*dir);
                    }
                }
                Ok(config)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => Ok(Config::default()),
            Err(source) => Err(ConfigError::Read { path: path.to_path_buf(), source }),
        }
    }

    /// Parses and validates TOML text; `origin` names the source in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_string(),
            message: e.to_string().trim().replace('\n', " "),
        })?;
        config.validate(origin)?;
        Ok(config)
    }

    fn validate(&self, origin: &str) -> Result<()> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            path: origin.to_string(),
            key: key.to_string(),
            message,
        };
        if self.prometheus.step_secs == 0 || self.prometheus.step_secs > 3600 {
            return Err(invalid("prometheus.step_secs", format!("must be 1..=3600, got {}", self.prometheus.step_secs)));
        }
        check_prometheus_url(&self.prometheus.url).map_err(|m| invalid("prometheus.url", m))?;
        let pr = &self.prometheus;
        if pr.chunk_secs < pr.step_secs as u64 || pr.chunk_secs % pr.step_secs as u64 != 0 || pr.chunk_secs > 86_400 {
            return Err(invalid("prometheus.chunk_secs", format!("must be a multiple of step_secs, at most 86400, got {}", pr.chunk_secs)));
        }
        if pr.cluster_name.is_empty() {
            return Err(invalid("prometheus.cluster_name", "must not be empty".to_string()));
        }
        if pr.cluster_label.as_deref().is_some_and(|l| l.is_empty() || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')) {
            return Err(invalid("prometheus.cluster_label", format!("must be a Prometheus label name, got {:?}", pr.cluster_label.as_deref().unwrap_or(""))));
        }
        if pr.lookback_secs == 0 || pr.lookback_secs > 3600 {
            return Err(invalid("prometheus.lookback_secs", format!("must be 1..=3600, got {}", pr.lookback_secs)));
        }
        if 86_400 % pr.step_secs != 0 {
            return Err(invalid("prometheus.step_secs", format!("must divide a day (86400 s), got {}", pr.step_secs)));
        }
        if pr.concurrency == 0 || pr.concurrency > 64 {
            return Err(invalid("prometheus.concurrency", format!("must be 1..=64, got {}", pr.concurrency)));
        }
        if pr.timeout_secs == 0 {
            return Err(invalid("prometheus.timeout_secs", "must be at least 1".into()));
        }
        if pr.bearer_token_file.is_some() as u8 + pr.bearer_token_env.is_some() as u8 + pr.basic_auth_user.is_some() as u8 > 1 {
            return Err(invalid("prometheus", "set at most one of bearer_token_file, bearer_token_env, basic_auth_user".into()));
        }
        let p = &self.pricing.power;
        if !(p.price_per_kwh.is_finite() && p.price_per_kwh >= 0.0) {
            return Err(invalid("pricing.power.price_per_kwh", format!("must be a finite number >= 0, got {}", p.price_per_kwh)));
        }
        if !(p.pue.is_finite() && (1.0..=5.0).contains(&p.pue)) {
            return Err(invalid("pricing.power.pue", format!("must be between 1.0 and 5.0, got {}", p.pue)));
        }
        if !crate::report::money::is_iso4217(&self.pricing.currency) {
            return Err(invalid("pricing.currency", format!("must be an ISO 4217 code such as USD, got {:?}", self.pricing.currency)));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, g) in self.pricing.gpu.iter().enumerate() {
            let key = format!("pricing.gpu[{i}]");
            if g.model.trim().is_empty() {
                return Err(invalid(&format!("{key}.model"), "must not be empty".into()));
            }
            if !(g.price_per_hour.is_finite() && g.price_per_hour >= 0.0) {
                return Err(invalid(&format!("{key}.price_per_hour"), format!("must be a finite number >= 0, got {}", g.price_per_hour)));
            }
            if let Some(p) = &g.mig_profile {
                if crate::collect::dcgm::parse_mig_slices(p).is_none() {
                    return Err(invalid(&format!("{key}.mig_profile"), format!("must be a MIG profile such as \"3g.40gb\", got {p:?}")));
                }
            }
            if !seen.insert((g.model.clone(), g.mig_profile.clone(), g.effective_from)) {
                return Err(invalid(&key, format!("duplicate price for {:?} effective {}", g.model, g.effective_from)));
            }
        }
        for (name, rates) in [("pricing.cpu", &self.pricing.cpu), ("pricing.memory", &self.pricing.memory)] {
            let mut dates = std::collections::BTreeSet::new();
            for (i, r) in rates.iter().enumerate() {
                if !(r.price_per_hour.is_finite() && r.price_per_hour >= 0.0) {
                    return Err(invalid(&format!("{name}[{i}].price_per_hour"), format!("must be a finite number >= 0, got {}", r.price_per_hour)));
                }
                if !dates.insert(r.effective_from) {
                    return Err(invalid(&format!("{name}[{i}]"), format!("two rates effective {}", r.effective_from)));
                }
            }
        }
        if let Some(c) = p.carbon_g_per_kwh {
            if !(c.is_finite() && c >= 0.0) {
                return Err(invalid("pricing.power.carbon_g_per_kwh", format!("must be a number >= 0, got {c}")));
            }
        }
        crate::tariff::parse_timezone(&p.timezone).map_err(|m| invalid("pricing.power.timezone", m))?;
        for (i, band) in p.tariff.iter().enumerate() {
            let key = format!("pricing.power.tariff[{i}]");
            if !(band.price_per_kwh.is_finite() && band.price_per_kwh >= 0.0) {
                return Err(invalid(&format!("{key}.price_per_kwh"), format!("must be a finite number >= 0, got {}", band.price_per_kwh)));
            }
            crate::tariff::parse_hours(&band.hours).map_err(|m| invalid(&format!("{key}.hours"), m))?;
            crate::tariff::parse_days(&band.days).map_err(|m| invalid(&format!("{key}.days"), m))?;
            if band.name.trim().is_empty() {
                return Err(invalid(&format!("{key}.name"), "must not be empty".into()));
            }
        }
        if let Ok(Some((i, j, when))) = crate::tariff::first_overlap(&p.tariff) {
            return Err(invalid(
                &format!("pricing.power.tariff[{j}]"),
                format!(
                    "{:?} ({}/kWh) overlaps tariff[{i}] {:?} ({}/kWh) at {when} (both from {}): which price applies would depend on their order",
                    p.tariff[j].name, p.tariff[j].price_per_kwh, p.tariff[i].name, p.tariff[i].price_per_kwh, p.tariff[j].effective_from
                ),
            ));
        }
        SpreadPolicy::parse(&self.pricing.idle_policy).map_err(|m| invalid("pricing.idle_policy", m))?;
        SpreadPolicy::parse(&self.pricing.shared_policy).map_err(|m| invalid("pricing.shared_policy", m))?;
        for (i, ns) in self.pricing.shared_namespaces.iter().enumerate() {
            if ns.trim().is_empty() || ns == "__unallocated__" {
                return Err(invalid(&format!("pricing.shared_namespaces[{i}]"), format!("must name a namespace, got {ns:?}")));
            }
        }
        if let SpreadPolicy::Owner(owner) = self.idle_policy() {
            if self.pricing.shared_namespaces.contains(&owner) {
                return Err(invalid("pricing.idle_policy", format!("owner {owner:?} is itself a shared namespace")));
            }
        }
        if let SpreadPolicy::Owner(owner) = self.shared_policy() {
            if self.pricing.shared_namespaces.contains(&owner) {
                return Err(invalid("pricing.shared_policy", format!("owner {owner:?} is itself a shared namespace")));
            }
        }
        for (ns, entry) in &self.teams {
            if entry.team().trim().is_empty() {
                return Err(invalid(&format!("teams.{ns}"), "team must not be empty".into()));
            }
        }
        if !(self.run.min_completeness_pct.is_finite() && (0.0..=100.0).contains(&self.run.min_completeness_pct)) {
            return Err(invalid("run.min_completeness_pct", format!("must be between 0 and 100, got {}", self.run.min_completeness_pct)));
        }
        if !(self.idle.util_threshold_pct.is_finite() && self.idle.util_threshold_pct > 0.0 && self.idle.util_threshold_pct <= 100.0) {
            return Err(invalid("idle.util_threshold_pct", format!("must be above 0 and at most 100, got {}", self.idle.util_threshold_pct)));
        }
        if !(self.idle.zombie_mem_mib.is_finite() && self.idle.zombie_mem_mib >= 0.0) {
            return Err(invalid("idle.zombie_mem_mib", format!("must be a number >= 0, got {}", self.idle.zombie_mem_mib)));
        }
        crate::engine::parse_memory_limit(&self.engine.memory_limit)
            .map_err(|m| invalid("engine.memory_limit", m))?;
        crate::engine::parse_memory_limit(&self.engine.spill_limit).map_err(|m| invalid("engine.spill_limit", m))?;
        if crate::engine::parse_memory_limit(&self.engine.max_result_bytes).map_err(|m| invalid("engine.max_result_bytes", m))?.is_none() {
            return Err(invalid("engine.max_result_bytes", "must be a size such as 256M (a result is always bounded)".into()));
        }
        if self.engine.max_result_rows == 0 {
            return Err(invalid("engine.max_result_rows", "must be at least 1".into()));
        }
        Ok(())
    }

    pub fn team_of(&self, namespace: &str) -> Option<&str> {
        self.teams.get(namespace).map(TeamEntry::team)
    }

    /// Validated at load; a bad value falls back to the default.
    pub fn idle_policy(&self) -> SpreadPolicy {
        SpreadPolicy::parse(&self.pricing.idle_policy).unwrap_or_default()
    }

    pub fn shared_policy(&self) -> SpreadPolicy {
        SpreadPolicy::parse(&self.pricing.shared_policy).unwrap_or_default()
    }
}
