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
    /// namespace -> GPU quota, for namespaces without a ResourceQuota.
    pub quotas: BTreeMap<String, u32>,
    /// namespace -> team (cost centre)
    pub teams: BTreeMap<String, String>,
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
    pub path: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrometheusConfig {
    /// Base URL, with any path prefix (`https://mimir.example/prometheus`).
    pub url: String,
    /// The lake's sample grid.
    pub step_secs: u32,
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
    /// kube_pod_labels labels that name the pod's team, first match wins.
    pub team: Vec<String>,
}

impl Default for LabelNames {
    fn default() -> Self {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect();
        LabelNames {
            node: v(&["Hostname", "hostname", "kubernetes_node"]),
            namespace: v(&["namespace", "pod_namespace"]),
            pod: v(&["pod", "pod_name"]),
            container: v(&["container", "container_name"]),
            team: v(&["label_team", "label_cost_center"]),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PricingConfig {
    pub currency: String,
    pub basis: CostBasis,
    pub power: PowerPricing,
    pub gpu: Vec<GpuPrice>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PowerPricing {
    pub price_per_kwh: f64,
    pub pue: f64,
    pub effective_from: NaiveDate,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuPrice {
    /// DCGM `modelName`, e.g. "NVIDIA H100 80GB HBM3".
    pub model: String,
    pub price_per_hour: f64,
    #[serde(default = "epoch_date")]
    pub effective_from: NaiveDate,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// DataFusion memory pool, e.g. "1G", "512M"; "0" for unbounded.
    pub memory_limit: String,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct QueriesConfig {
    /// A folder whose `*.sql` files replace the built-in rollup queries of the same name.
    pub dir: Option<PathBuf>,
}

fn epoch_date() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date")
}

impl Default for LakeConfig {
    fn default() -> Self {
        LakeConfig { path: PathBuf::from("lake") }
    }
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            url: "http://127.0.0.1:9090".into(),
            step_secs: 30,
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
        PowerPricing { price_per_kwh: 0.12, pue: 1.3, effective_from: epoch_date() }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { memory_limit: "1G".into() }
    }
}

impl Default for PricingConfig {
    fn default() -> Self {
        PricingConfig {
            currency: "USD".into(),
            basis: CostBasis::Cloud,
            power: PowerPricing::default(),
            gpu: default_gpu_prices(),
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
            quotas: BTreeMap::new(),
            teams: BTreeMap::new(),
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
    .map(|(model, price)| GpuPrice { model: model.into(), price_per_hour: price, effective_from: epoch_date() })
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
                if config.lake.path.is_relative() {
                    config.lake.path = base.join(&config.lake.path);
                }
                if config.run.reports_dir.is_relative() {
                    config.run.reports_dir = base.join(&config.run.reports_dir);
                }
                for p in [&mut config.queries.dir, &mut config.prometheus.bearer_token_file, &mut config.prometheus.basic_auth_password_file, &mut config.prometheus.ca_file] {
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
        if !(self.prometheus.url.starts_with("http://") || self.prometheus.url.starts_with("https://")) {
            return Err(invalid("prometheus.url", format!("must start with http:// or https://, got {:?}", self.prometheus.url)));
        }
        let pr = &self.prometheus;
        if pr.chunk_secs < pr.step_secs as u64 || pr.chunk_secs % pr.step_secs as u64 != 0 || pr.chunk_secs > 86_400 {
            return Err(invalid("prometheus.chunk_secs", format!("must be a multiple of step_secs, at most 86400, got {}", pr.chunk_secs)));
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
        if self.pricing.currency.len() != 3 {
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
            if !seen.insert((g.model.clone(), g.effective_from)) {
                return Err(invalid(&key, format!("duplicate price for {:?} effective {}", g.model, g.effective_from)));
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
        Ok(())
    }

    pub fn team_of(&self, namespace: &str) -> Option<&str> {
        self.teams.get(namespace).map(String::as_str)
    }
}
