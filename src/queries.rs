//! The rollup SQL of `queries/*.sql`, compiled into the binary and overridable by a folder
//! (`[queries] dir` or `--queries DIR`) holding files of the same names.

use std::path::{Path, PathBuf};

/// (name, SQL) of every built-in query.
pub const BUILTIN: &[(&str, &str)] = &[
    ("chargeback_grain", include_str!("../queries/chargeback_grain.sql")),
    ("pod_run_days", include_str!("../queries/pod_run_days.sql")),
    ("chargeback_fallback", include_str!("../queries/chargeback_fallback.sql")),
    ("chargeback_claimed", include_str!("../queries/chargeback_claimed.sql")),
    ("chargeback", include_str!("../queries/chargeback.sql")),
    ("pod_key_values", include_str!("../queries/pod_key_values.sql")),
    ("namespace_owners", include_str!("../queries/namespace_owners.sql")),
    ("cluster_totals", include_str!("../queries/cluster_totals.sql")),
    ("cluster_gpus", include_str!("../queries/cluster_gpus.sql")),
    ("energy_counters", include_str!("../queries/energy_counters.sql")),
    ("completeness", include_str!("../queries/completeness.sql")),
    ("unmeasured", include_str!("../queries/unmeasured.sql")),
    ("mixed_nodes", include_str!("../queries/mixed_nodes.sql")),
    ("gaps", include_str!("../queries/gaps.sql")),
    ("events", include_str!("../queries/events.sql")),
    ("events_pods", include_str!("../queries/events_pods.sql")),
    ("heatmap", include_str!("../queries/heatmap.sql")),
    ("node_use", include_str!("../queries/node_use.sql")),
    ("inventory", include_str!("../queries/inventory.sql")),
    ("queue_waits", include_str!("../queries/queue_waits.sql")),
    ("queue_pending", include_str!("../queries/queue_pending.sql")),
    ("queue_pending_pods", include_str!("../queries/queue_pending_pods.sql")),
    ("kueue", include_str!("../queries/kueue.sql")),
    ("idle_pods", include_str!("../queries/idle_pods.sql")),
    ("idle_unallocated", include_str!("../queries/idle_unallocated.sql")),
    ("idle_zombie", include_str!("../queries/idle_zombie.sql")),
    ("quota_use", include_str!("../queries/quota_use.sql")),
    ("quota_limits", include_str!("../queries/quota_limits.sql")),
    ("queue_quota_steps", include_str!("../queries/queue_quota_steps.sql")),
    ("queue_pod_waits", include_str!("../queries/queue_pod_waits.sql")),
    ("daily_pool", include_str!("../queries/daily_pool.sql")),
    ("plan_pods", include_str!("../queries/plan_pods.sql")),
    ("plan_pool", include_str!("../queries/plan_pool.sql")),
    ("plan_recorded", include_str!("../queries/plan_recorded.sql")),
    ("plan_teams", include_str!("../queries/plan_teams.sql")),
];

/// The view over each batch of the chargeback's 15-minute sums (`gpu_buckets`), defined when
/// a batch is registered: their GPU time, as `gpu_time` defines it per row.
pub const BUCKET_VIEW: (&str, &str) = ("gpu_bucket_time", include_str!("../queries/views/gpu_bucket_time.sql"));

/// (name, SELECT) of the views every session has, in dependency order. Each file's header
/// comment documents the view and its columns (`gpuledger tables` prints it).
pub const VIEWS: &[(&str, &str)] = &[
    ("teams", include_str!("../queries/views/teams.sql")),
    ("gpu_time", include_str!("../queries/views/gpu_time.sql")),
    ("usage", include_str!("../queries/views/usage.sql")),
    ("pod_runs", include_str!("../queries/views/pod_runs.sql")),
    ("daily_usage", include_str!("../queries/views/daily_usage.sql")),
    ("pod_keys", include_str!("../queries/views/pod_keys.sql")),
];

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("no built-in query named {0:?}")]
    Unknown(String),
    #[error("reading override {path}")]
    Read { path: PathBuf, source: std::io::Error },
}

#[derive(Debug, Clone, Default)]
pub struct Queries {
    override_dir: Option<PathBuf>,
}

impl Queries {
    pub fn new(override_dir: Option<&Path>) -> Self {
        Queries { override_dir: override_dir.map(Path::to_path_buf) }
    }

    /// Whether the override folder has its own `<name>.sql` (a report then runs that SQL over
    /// the samples rather than answering from a rollup).
    pub fn is_overridden(&self, name: &str) -> bool {
        self.override_dir.as_ref().is_some_and(|d| d.join(format!("{name}.sql")).exists())
    }

    /// The SQL of `name`: the override folder's `<name>.sql` if present, else the built-in.
    pub fn get(&self, name: &str) -> Result<String, QueryError> {
        let builtin = BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, sql)| *sql);
        if let Some(dir) = &self.override_dir {
            let path = dir.join(format!("{name}.sql"));
            match std::fs::read_to_string(&path) {
                Ok(sql) => return Ok(sql),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(QueryError::Read { path, source }),
            }
        }
        builtin.map(str::to_string).ok_or_else(|| QueryError::Unknown(name.into()))
    }
}
