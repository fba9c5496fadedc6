//! Command-line types (clap) and nothing else.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::progress::ProgressMode;
use crate::report::{Format, ReportKind};

#[derive(Debug, Parser)]
#[command(name = "gpuledger", version, about = "GPU cost accounting and chargeback for shared Kubernetes GPU clusters", long_about = None, after_help = crate::exit::EXIT_CODES_HELP)]
pub struct Cli {
    /// Config file (TOML). A missing default file means built-in defaults.
    #[arg(long, global = true, env = "GPULEDGER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Lake directory, or s3://bucket/prefix; overrides `lake.path`.
    #[arg(long, global = true, env = "GPULEDGER_LAKE")]
    pub lake: Option<PathBuf>,
    /// Folder of `*.sql` files that replace built-in rollup queries of the same name.
    #[arg(long, global = true)]
    pub queries: Option<PathBuf>,
    /// Where the SQL runs: `local`, `ballista://HOST:PORT` or `ballista://standalone` (a build
    /// with the `ballista` feature); overrides `engine.url`.
    #[arg(long, global = true, env = "GPULEDGER_ENGINE")]
    pub engine: Option<String>,
    /// DataFusion memory pool, e.g. 512M or 2G (0 = unbounded); overrides `engine.memory_limit`.
    #[arg(long, global = true)]
    pub memory_limit: Option<String>,
    /// Reports and queries see only this cluster's rows (the lake's `cluster` column, from
    /// `prometheus.cluster_label`; `default` where none is configured).
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// Progress bar on a terminal, log lines otherwise.
    #[arg(long, global = true, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// More log output (-v, -vv); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Simulate a month of a 64-GPU cluster into DIR and run every report on it.
    Demo(DemoArgs),
    /// Simulate a shared GPU cluster: lake, ground-truth ledger, optional OpenMetrics.
    Simulate(SimulateArgs),
    /// Pull DCGM and pod history from Prometheus into the lake (default: checkpoint to now - lag).
    Collect(CollectArgs),
    /// Run one report over a window.
    Report(ReportArgs),
    /// Replay a recorded month under proposed splits of the pool, and find a better one.
    ///
    /// Scenarios change quotas, nodes, MIG layouts, priorities, preemption, borrowing and time
    /// windows; each gives predicted waits, GPU-hours and costs per namespace beside the
    /// baseline, whose calibration against what was recorded is stated (docs/planning.md).
    Plan(PlanArgs),
    /// The cron job: collect, then write every report for a month into <reports_dir>/<month>/.
    #[command(after_help = crate::exit::EXIT_CODES_HELP)]
    Run(RunArgs),
    /// Run read-only SQL on the lake (an interactive prompt on a terminal when no SQL is given).
    Query(QueryArgs),
    /// List the tables and views a query can use, with each column's meaning.
    Tables,
    /// Serve the lake, read-only, over the PostgreSQL wire protocol (BI tools, psql, drivers).
    ///
    /// Password logins (SCRAM-SHA-256) from a users file; TLS from PEM files; every write,
    /// COPY and SET of an engine option refused. Days the collector publishes while it runs
    /// show up without a restart (docs/bi.md).
    Serve(ServeArgs),
    /// Validate the config and reach every configured source; say what is wrong and where.
    Check,
    /// Bring the lake's rollups (15-minute sums of gpu_samples and pending_samples) up to date.
    ///
    /// For lakes written before rollups, or a crash between a day's samples and its rollup.
    /// Reports read the samples of days without a current rollup, so this only makes them faster.
    Rollup(RollupArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `gpuledger manpage > gpuledger.1`.
    Manpage,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Calendar month YYYY-MM, or `last` (the month before today, UTC).
    #[arg(long, default_value = "last")]
    pub month: String,
    /// Report on the lake as it is; do not collect first (overrides `run.collect`).
    #[arg(long)]
    pub no_collect: bool,
    /// Reports folder; overrides `run.reports_dir` (reports go to DIR/<month>/).
    #[arg(long)]
    pub reports_dir: Option<PathBuf>,
    /// Prometheus base URL; overrides `prometheus.url`.
    #[arg(long)]
    pub url: Option<String>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Output folder: DIR/lake, DIR/ledger.json, DIR/reports/<month>/.
    #[arg(long, default_value = "demo")]
    pub out: PathBuf,
    /// Month to simulate (YYYY-MM); default: the last full month.
    #[arg(long)]
    pub month: Option<String>,
    #[arg(long, default_value_t = 64)]
    pub gpus: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct RollupArgs {
    /// First day (YYYY-MM-DD, UTC); default: the lake's first.
    #[arg(long)]
    pub from: Option<chrono::NaiveDate>,
    /// Last day, inclusive (YYYY-MM-DD, UTC); default: the lake's last.
    #[arg(long)]
    pub to: Option<chrono::NaiveDate>,
    /// Rewrite every day's rollup, current or not.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Output folder: DIR/lake and DIR/ledger.json.
    #[arg(long)]
    pub out: PathBuf,
    /// GPUs in the pool (rounded up to nodes of 8).
    #[arg(long, default_value_t = 64)]
    pub gpus: usize,
    /// Days in the window.
    #[arg(long, default_value_t = 30)]
    pub days: u32,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// First day of the window (YYYY-MM-DD, UTC); default: the first of last month.
    #[arg(long)]
    pub start: Option<String>,
    /// Sample step in seconds.
    #[arg(long, default_value_t = 30)]
    pub step: u32,
    /// Days simulated before the window so it opens on a busy cluster.
    #[arg(long, default_value_t = 3)]
    pub warmup_days: u32,
    /// Also write the history as DCGM exporter + kube-state-metrics OpenMetrics text.
    #[arg(long)]
    pub openmetrics: Option<PathBuf>,
    /// Drive the workload from a real trace (the Alibaba GPU v2025 DLRM folder or file).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Replay real GPU utilisation as the pods' own: the Alibaba GenAI duty-cycle trace
    /// (`pod_gpu_duty_cycle_anon.csv.gz`, or its folder); each held GPU plays one container's
    /// series from a phase drawn from the seed.
    #[arg(long)]
    pub util_trace: Option<PathBuf>,
    /// Share the last node's last GPU by time-slicing, as N replicas (2-4) of nvidia.com/gpu.shared.
    #[arg(long, default_value_t = 0)]
    pub time_sliced: u32,
    /// With --openmetrics: where a MIG GPU's power, energy, temperature and XID are exported
    /// (repeated on each instance's series, or on the parent GPU's own series).
    #[arg(long, value_enum, default_value_t = crate::simulate::openmetrics::MigDeviceFields::Repeated)]
    pub mig_device_fields: crate::simulate::openmetrics::MigDeviceFields,
    /// With --openmetrics: seconds between scrapes of each node's dcgm-exporter (default: one
    /// scrape per step, on the step), independent of --step.
    #[arg(long)]
    pub scrape_interval: Option<f64>,
    /// With --openmetrics: each scrape lands up to this many seconds either side of its slot.
    #[arg(long, default_value_t = 0.0)]
    pub scrape_jitter: f64,
    /// With --openmetrics: percent of scrapes missed, in runs of 1 to 4 in a row.
    #[arg(long, default_value_t = 0.0)]
    pub missed_scrapes: f64,
    /// With --openmetrics: this many times a node's dcgm-exporter is down (no DCGM samples of
    /// its GPUs) for --outage-minutes, on nodes and at times drawn from the seed; the ledger
    /// lists them (`exporter_outages`).
    #[arg(long, default_value_t = 0)]
    pub exporter_outages: u32,
    #[arg(long, default_value_t = 20)]
    pub outage_minutes: u32,
    /// With --openmetrics: every series N times, differing only in `prometheus_replica`, as an
    /// HA pair behind Thanos Query without deduplication returns it (1-3).
    #[arg(long, default_value_t = 1)]
    pub prometheus_replicas: u32,
    /// With --openmetrics: the first N nodes' ServiceMonitor stops honouring the exporter's
    /// labels half-way through the window (their series then carry exported_namespace/pod).
    #[arg(long, default_value_t = 0)]
    pub honor_labels_flip: usize,
    /// One more L4 node that the cluster autoscaler adds at 06:00 UTC of the window's first day
    /// and removes at 18:00 (it takes only pods that end before it goes).
    #[arg(long)]
    pub autoscale: bool,
    /// The first whole GPU of the first node has its board replaced on the window's first day:
    /// out 12:00-12:30 UTC (its node's capacity one GPU less), then a new board, a new UUID.
    #[arg(long)]
    pub replace_gpu: bool,
    /// One more node of 4 H100s that HAMi shares: each GPU split into vGPU slots of 50, 25, 15
    /// and 10% of its cores, pods of servers, notebooks and batch jobs requesting `nvidia.com/gpu: 1` with
    /// the slot's `nvidia.com/gpucores` and `gpumem`, the node advertising 10 vGPUs per GPU, and
    /// DCGM naming no pod there (as dcgm-exporter does under HAMi).
    #[arg(long)]
    pub hami_node: bool,
    /// The first whole-GPU node and the first MIG node allocate their GPUs and MIG devices
    /// through DRA ResourceClaims (NVIDIA's DRA driver): their pods request no `nvidia.com/*`
    /// resource, kube-state-metrics shows `kube_pod_resourceclaim_info`, and dcgm-exporter adds
    /// the claim's `dra_*` labels to the pod's.
    #[arg(long)]
    pub dra_nodes: bool,
    /// With --openmetrics: a rolling update of the dcgm-exporter DaemonSet from 09:00 UTC of the
    /// window's first day: each node's exporter away 70 s, one node every 90 s, the new pod at
    /// a new address (`instance`).
    #[arg(long)]
    pub exporter_rollout: bool,
    /// With --openmetrics: the second node's exporter container restarts every this many hours
    /// (40 s without a scrape each time); 0: never. The ledger lists them with the outages.
    #[arg(long, default_value_t = 0)]
    pub exporter_restart_hours: u32,
    /// The cluster this simulation is: every lake row's `cluster`, and with --openmetrics a
    /// `cluster` label on every series (as Thanos or Mimir holding several clusters label them;
    /// read with `prometheus.cluster_label = "cluster"`). Default: `default`, no label.
    #[arg(long)]
    pub cluster: Option<String>,
}

#[derive(Debug, Args)]
pub struct CollectArgs {
    /// Window start: RFC 3339 or YYYY-MM-DD (UTC); default: the checkpoint.
    #[arg(long)]
    pub from: Option<String>,
    /// Window end (exclusive); default: now minus `prometheus.lag_secs`.
    #[arg(long)]
    pub to: Option<String>,
    /// Prometheus base URL; overrides `prometheus.url`.
    #[arg(long)]
    pub url: Option<String>,
    /// Replace the lake's rows of the window even where Prometheus returns less than the lake
    /// holds (fewer GPU rows, a metric gone); without it such a re-collect fails and keeps the lake.
    #[arg(long)]
    pub replace: bool,
    /// Fetch nothing: record the lake's files of day YYYY-MM-DD (repeatable) as published as
    /// they are now, after a loss that cannot be collected again (a day file deleted, a collect
    /// stopped mid-day, and Prometheus no longer holds the day). Reports refuse a day whose
    /// files are not as published until it is collected again or accepted.
    #[arg(long, value_name = "DAY", conflicts_with_all = ["from", "to", "url", "replace"])]
    pub accept: Vec<chrono::NaiveDate>,
}

#[derive(Debug, Args)]
pub struct WindowArgs {
    /// Calendar month YYYY-MM, or `last`.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    pub month: Option<String>,
    /// Window start: RFC 3339 or YYYY-MM-DD (UTC).
    #[arg(long, requires = "to")]
    pub from: Option<String>,
    /// Window end (exclusive).
    #[arg(long, requires = "from")]
    pub to: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[arg(value_enum)]
    pub kind: ReportKind,
    #[command(flatten)]
    pub window: WindowArgs,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Key the report's rows: namespace (and cluster), team, cost-centre, cluster, or per pod:
    /// workload, queue, cluster-queue, cohort, label:KEY, annotation:KEY. chargeback and focus
    /// take every key, chargeback-models, idle, queue and events namespace and the per-pod keys,
    /// the others namespace only (another key is refused, exit 2).
    #[arg(long, default_value = "namespace")]
    pub by: crate::domain::charge_by::ChargeBy,
    /// With `--format table`: every column. Without it the table leaves out columns that are
    /// empty or zero in every row, and the chargeback shows the ones that matter (key, team,
    /// GPU-hours, utilisation, kWh, power cost, cloud cost, total, share), naming the rest.
    #[arg(long)]
    pub wide: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    /// A TOML file of scenarios (`[[scenario]]`, and `[goals]` for --optimize); repeatable.
    /// See docs/planning.md.
    #[arg(long = "scenario", value_name = "FILE")]
    pub scenarios: Vec<PathBuf>,
    /// Search for quotas that meet the goals (the scenario file's [goals], else p95 wait of
    /// `high` pods under 10 minutes) by repeated replays; the best split is reported as `optimized`.
    #[arg(long)]
    pub optimize: bool,
    /// Most replays the search may run.
    #[arg(long, default_value_t = 150)]
    pub max_replays: usize,
    /// The cluster to plan, where the lake holds several.
    #[arg(long)]
    pub cluster: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write to this file (a folder for parquet: one file per section) instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on, e.g. 0.0.0.0:5432 (overrides `serve.listen`; default loopback).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// One `user:password` line per user (overrides `serve.users_file`).
    #[arg(long, value_name = "FILE")]
    pub users: Option<PathBuf>,
    /// PEM certificate chain for TLS (overrides `serve.tls_cert`; needs --tls-key).
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for TLS (overrides `serve.tls_key`).
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Connections served at once (overrides `serve.max_connections`).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Refuse plain-text connections (`serve.tls = "required"`; needs the TLS certificate and key).
    #[arg(long)]
    pub tls_required: bool,
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The SQL statement (read-only).
    #[arg(conflicts_with = "file")]
    pub sql: Option<String>,
    /// Read the SQL from a file (`-` for standard input).
    #[arg(short, long)]
    pub file: Option<PathBuf>,
    /// Bind a named parameter: `--param month=2026-10` makes `$month` the text '2026-10'.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}
