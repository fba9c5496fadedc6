//! The session every query runs in: its memory pool, spill limit, result caps, time limit,
//! engine (local or Ballista) and, for a lake, every table, price table and view registered.

use std::sync::Arc;
use std::time::Duration;

use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

use super::error::{EngineError, Result};
use super::register::{limit_to_cluster, limit_to_namespaces, register_config_tables, register_lake_table, register_views};
use crate::config::Config;
use crate::distributed::{Engine, Scratch};
use crate::lake::{Lake, Table};

/// Builds the session every query runs in.
#[derive(Debug, Clone)]
pub struct SessionBuilder {
    memory_limit: Option<usize>,
    /// Disk a query may spill to; `None`: no spilling.
    spill_limit: Option<u64>,
    result_limits: crate::limits::ResultLimits,
    target_partitions: usize,
    engine: Engine,
    query_timeout: Option<Duration>,
    cluster: Option<String>,
    /// Only these namespaces' rows (a `serve` user's scope).
    namespaces: Option<Vec<String>>,
}

/// The one cluster a session's lake tables show (`--cluster`), carried in its config.
#[derive(Debug, Clone)]
struct ClusterFilter(String);

/// The cluster a session is limited to (`report --cluster`), for the passes that read the
/// lake's files themselves.
pub fn session_cluster(ctx: &SessionContext) -> Option<String> {
    ctx.state().config().get_extension::<ClusterFilter>().map(|c| c.0.clone())
}

/// How long a session's queries may take, and where they run (for the message when one does not
/// finish); carried in the session's config.
#[derive(Debug, Clone)]
pub(super) struct QueryLimit {
    pub(super) timeout: Duration,
    pub(super) engine: Engine,
}

impl Default for SessionBuilder {
    fn default() -> Self {
        SessionBuilder {
            memory_limit: Some(1 << 30),
            spill_limit: Some(4 << 30),
            result_limits: crate::limits::ResultLimits::default(),
            target_partitions: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2),
            engine: Engine::Local,
            query_timeout: Some(Duration::from_secs(3600)),
            cluster: None,
            namespaces: None,
        }
    }
}

impl SessionBuilder {
    /// The config's limits and time-out; the engine is the caller's to set (`engine`), parsed
    /// from `engine.url` or `--engine` where a bad URL is a usage error, never a fallback.
    pub fn from_config(config: &Config) -> Self {
        let memory_limit = config.engine.memory_limit.limit();
        let query_timeout = Some(config.engine.query_timeout_secs).filter(|s| *s > 0).map(Duration::from_secs);
        let spill_limit = config.engine.spill_limit.limit().map(|b| b as u64);
        let result_limits =
            crate::limits::ResultLimits { rows: config.engine.max_result_rows, bytes: config.engine.max_result_bytes.limit().map_or(u64::MAX, |b| b as u64) };
        SessionBuilder { memory_limit, spill_limit, result_limits, query_timeout, ..SessionBuilder::default() }
    }

    /// The caps on a result (`engine.max_result_rows`, `engine.max_result_bytes`).
    pub fn result_limits(&self) -> crate::limits::ResultLimits {
        self.result_limits
    }

    /// Where the SQL runs (`distributed`).
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }

    pub fn memory_limit(mut self, bytes: Option<usize>) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Only this cluster's rows in every lake table (`--cluster`): each table becomes a view of
    /// its rows whose `cluster` is `name` (a row from before the column is in `default`).
    pub fn cluster(mut self, name: Option<String>) -> Self {
        self.cluster = name;
        self
    }

    /// Only these namespaces' rows (a `serve` user's scope): every table with a `namespace`
    /// column (the lake's and `teams_config`, so the `teams` view too) becomes a view of their
    /// rows, under its own name and no other; the views over them follow. Tables without one
    /// (nodes, gaps, capacity, prices) stay whole.
    pub fn namespaces(mut self, namespaces: Option<Vec<String>>) -> Self {
        self.namespaces = namespaces;
        self
    }

    pub fn target_partitions(mut self, n: usize) -> Self {
        self.target_partitions = n.max(1);
        self
    }

    /// A session with the lake's tables and the config's price tables registered.
    pub async fn build(&self, lake: &Lake, config: &Config) -> Result<SessionContext> {
        check_published(lake)?;
        let ctx = self.session(Some(lake))?;
        #[cfg(feature = "ballista")]
        let ctx = crate::distributed::connect(ctx, &self.engine).await?;
        for table in Table::ALL {
            register_lake_table(&ctx, lake, table).await?;
            if let Some(namespaces) = self.namespaces.as_deref().filter(|_| table.schema().column_with_name("namespace").is_some()) {
                limit_to_namespaces(&ctx, table.name(), namespaces).await?;
            }
            if let Some(cluster) = &self.cluster {
                limit_to_cluster(&ctx, table, cluster).await?;
            }
        }
        register_config_tables(&ctx, lake, config)?;
        if let Some(namespaces) = &self.namespaces {
            limit_to_namespaces(&ctx, "teams_config", namespaces).await?;
        }
        register_views(&ctx).await?;
        Ok(ctx)
    }

    /// A session with nothing registered.
    pub fn bare(&self) -> Result<SessionContext> {
        self.session(None)
    }

    /// `base` (its tables, views, functions and settings) with a memory pool and spill space of
    /// its own, and `keep` held for as long as anything runs in it: `serve` gives each statement
    /// the engine's limits, and keeps the lake snapshot it reads until its last row is sent.
    pub fn fresh_runtime<T: Send + Sync + 'static>(&self, base: &SessionContext, keep: Arc<T>) -> Result<SessionContext> {
        let state = base.state();
        let config = state.config().clone().with_extension(keep);
        let lake = session_lake(base);
        let runtime = self.runtime(lake.as_deref())?;
        let state = datafusion::execution::session_state::SessionStateBuilder::new_from_existing(state).with_config(config).with_runtime_env(runtime).build();
        Ok(SessionContext::new_with_state(state))
    }

    /// The memory pool, the spill space and, for a lake on S3, its object store.
    fn runtime(&self, lake: Option<&Lake>) -> Result<Arc<datafusion::execution::runtime_env::RuntimeEnv>> {
        let mut runtime = RuntimeEnvBuilder::new();
        if let Some(bytes) = self.memory_limit {
            runtime = runtime.with_memory_pool(Arc::new(FairSpillPool::new(bytes)));
        }
        // Spill files count against engine.spill_limit: a query that would fill the disk fails.
        use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
        runtime = runtime.with_disk_manager_builder(match self.spill_limit {
            Some(bytes) => DiskManagerBuilder::default().with_max_temp_directory_size(bytes),
            None => DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled),
        });
        let runtime = runtime.build_arc().map_err(EngineError::Runtime)?;
        #[cfg(feature = "s3")]
        if let Some(crate::lake::store::Store::S3(s3)) = lake.map(|l| l.store()) {
            let (url, store) = s3.datafusion_store()?;
            runtime.register_object_store(&url, store);
        }
        #[cfg(not(feature = "s3"))]
        let _ = lake;
        Ok(runtime)
    }

    fn session(&self, lake: Option<&Lake>) -> Result<SessionContext> {
        let mut config = SessionConfig::new()
            .with_target_partitions(self.target_partitions)
            .with_information_schema(true)
            // Late materialisation (row filters inside the Parquet decoder) costs more than it
            // saves on the rollups, whose filters keep whole days: measured on a month of 1,024
            // GPUs, the chargeback takes 6.4 s without it and 6.9 s with it. Row groups and pages
            // are still pruned by their statistics.
            .set_bool("datafusion.execution.parquet.pushdown_filters", false);
        if let Some(timeout) = self.query_timeout {
            config = config.with_extension(Arc::new(QueryLimit { timeout, engine: self.engine.clone() }));
        }
        if let Some(cluster) = &self.cluster {
            config = config.with_extension(Arc::new(ClusterFilter(cluster.clone())));
        }
        if let Some(lake) = lake {
            config = config.with_extension(Arc::new(lake.clone()));
            if !self.engine.is_local() {
                config = config.with_extension(Arc::new(Scratch::new(lake)));
            }
        }
        config = config.with_extension(Arc::new(self.result_limits));
        let runtime = self.runtime(lake)?;
        let mut state = datafusion::execution::session_state::SessionStateBuilder::new().with_config(config).with_runtime_env(runtime).with_default_features();
        if self.engine.is_local() {
            // A stopped statement's joins stop within a slice of their work (`preempt`).
            state = state.with_physical_optimizer_rule(Arc::new(super::preempt::PreemptibleJoins));
        }
        let ctx = SessionContext::new_with_state(state.build());
        // A value `repeat` builds is outside the memory pool: bound it to a quarter of it (the
        // in-process engine; a Ballista executor has its own functions).
        if self.engine.is_local() {
            let pool = self.memory_limit.map_or(1 << 30, |b| b as u64);
            ctx.register_udf(crate::limits::bounded_repeat(pool / 4));
        }
        Ok(ctx)
    }
}

/// The caps on an ad hoc query's result in this session.
pub fn session_result_limits(ctx: &SessionContext) -> crate::limits::ResultLimits {
    ctx.state().config().get_extension::<crate::limits::ResultLimits>().map(|l| *l).unwrap_or_default()
}

/// The lake a session was built on (for the passes that stream its files themselves).
pub fn session_lake(ctx: &SessionContext) -> Option<Arc<Lake>> {
    ctx.state().config().get_extension::<Lake>()
}

/// The lake as its writers recorded it (`lake::published`), or the error naming every day file
/// that is not: a session never reads a half-published day as fewer rows. (`serve` checks the
/// lake itself before it snapshots it, and keeps its last view while the check fails.)
pub fn check_published(lake: &Lake) -> Result<()> {
    let findings = crate::lake::published::Published::check(lake)?;
    let (Some(first), Some(last)) = (findings.first(), findings.last()) else { return Ok(()) };
    let dates: std::collections::BTreeSet<chrono::NaiveDate> = findings.iter().map(|f| f.date).collect();
    let mut listed: Vec<String> = findings.iter().take(10).map(|f| f.to_string()).collect();
    if findings.len() > 10 {
        listed.push(format!("and {} more", findings.len() - 10));
    }
    Err(EngineError::NotAsPublished {
        record: crate::lake::published::Published::path(lake).display().to_string(),
        findings: listed.join("; "),
        first: first.date.to_string(),
        next: (last.date + chrono::Days::new(1)).to_string(),
        accept: dates.iter().map(|d| format!(" --accept {d}")).collect(),
    })
}
