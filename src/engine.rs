//! The one DataFusion session builder, used by every command and test: a bounded memory
//! pool, the lake's tables registered with their explicit schemas and `date` partitions,
//! and the config's price tables.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Decimal128Array, Float64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use chrono::{NaiveDate, NaiveTime};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};

use crate::config::Config;
use crate::distributed::{Engine, Scratch};
use crate::lake::{Lake, Table};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("registering table {table}: {source}")]
    Register { table: String, source: DataFusionError },
    #[error("query {query}: {source}")]
    Query { query: String, source: DataFusionError },
    #[error("engine setup: {0}")]
    Setup(String),
    #[error("query {query}: a lake file cannot be read: {file}; restore it, or re-collect its day (collect --from DAY --to NEXT_DAY)")]
    LakeFile { query: String, file: String, source: DataFusionError },
    #[error("query {query}: it spilled more than engine.spill_limit ({limit}) to disk; narrow the query (fewer rows before the sort, join or aggregate) or raise the key")]
    SpillLimit { query: String, limit: String },
    #[error("the lake's {table} holds Parquet files gpuledger did not write, which queries would read as its rows: {files}. Move them out of the lake")]
    StrayFiles { table: &'static str, files: String },
    #[error("query {query}: no result after {secs} s on {engine} (engine.query_timeout_secs){hint}")]
    Timeout { query: String, secs: u64, engine: String, hint: &'static str },
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Parses "1G", "512M", "64K", "1073741824" or "0" (unbounded) into bytes.
pub fn parse_memory_limit(text: &str) -> std::result::Result<Option<usize>, String> {
    let t = text.trim();
    if t.is_empty() || t == "0" {
        return Ok(None);
    }
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1usize << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: f64 = num.trim().parse().map_err(|_| format!("expected a size like 512M or 2G, got {text:?}"))?;
    if !(n.is_finite() && n > 0.0) {
        return Err(format!("expected a positive size, got {text:?}"));
    }
    Ok(Some((n * mult as f64) as usize))
}

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
struct QueryLimit {
    timeout: Duration,
    engine: Engine,
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
        }
    }
}

impl SessionBuilder {
    pub fn from_config(config: &Config) -> Self {
        let memory_limit = parse_memory_limit(&config.engine.memory_limit).unwrap_or(Some(1 << 30));
        let engine = config.engine.url.as_deref().map(Engine::parse).transpose().ok().flatten().unwrap_or_default();
        let query_timeout = Some(config.engine.query_timeout_secs).filter(|s| *s > 0).map(Duration::from_secs);
        let spill_limit = parse_memory_limit(&config.engine.spill_limit).unwrap_or(Some(4 << 30)).map(|b| b as u64);
        let result_limits = crate::limits::ResultLimits {
            rows: config.engine.max_result_rows,
            bytes: parse_memory_limit(&config.engine.max_result_bytes).ok().flatten().map_or(256 << 20, |b| b as u64),
        };
        SessionBuilder { memory_limit, spill_limit, result_limits, engine, query_timeout, ..SessionBuilder::default() }
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

    pub fn target_partitions(mut self, n: usize) -> Self {
        self.target_partitions = n.max(1);
        self
    }

    /// A session with the lake's tables and the config's price tables registered.
    pub async fn build(&self, lake: &Lake, config: &Config) -> Result<SessionContext> {
        let ctx = self.session(Some(lake))?;
        #[cfg(feature = "ballista")]
        let ctx = crate::distributed::connect(ctx, &self.engine).await.map_err(EngineError::Setup)?;
        for table in Table::ALL {
            register_lake_table(&ctx, lake, table).await?;
            if let Some(cluster) = &self.cluster {
                limit_to_cluster(&ctx, table, cluster).await?;
            }
        }
        register_price_tables(&ctx, lake, config)?;
        register_views(&ctx).await?;
        Ok(ctx)
    }

    /// A session with nothing registered.
    pub fn bare(&self) -> Result<SessionContext> {
        self.session(None)
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
        let runtime = runtime.build_arc().map_err(|e| EngineError::Setup(e.to_string()))?;
        #[cfg(feature = "s3")]
        if let Some(crate::lake::store::Store::S3(s3)) = lake.map(|l| l.store()) {
            let (url, store) = s3.datafusion_store().map_err(|e| EngineError::Setup(e.to_string()))?;
            runtime.register_object_store(&url, store);
        }
        let ctx = SessionContext::new_with_config_rt(config, runtime);
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

/// Replaces `table` with a view of its rows of `cluster`; the whole table stays as
/// `<table>_all_clusters`.
async fn limit_to_cluster(ctx: &SessionContext, table: Table, cluster: &str) -> Result<()> {
    let (name, all) = (table.name(), format!("{}_all_clusters", table.name()));
    let reg_err = |source| EngineError::Register { table: name.into(), source };
    let provider = ctx.deregister_table(name).map_err(reg_err)?.ok_or_else(|| setup(format!("{name} is not registered")))?;
    ctx.register_table(all.as_str(), provider).map_err(reg_err)?;
    let quoted = cluster.replace('\'', "''");
    let sql = format!(
        "CREATE VIEW {name} AS SELECT * FROM {all} WHERE COALESCE(CAST(cluster AS VARCHAR), '{}') = '{quoted}'",
        crate::lake::schema::DEFAULT_CLUSTER
    );
    ctx.sql(&sql).await.map_err(|e| setup(format!("limiting {name} to cluster {cluster}: {e}")))?;
    Ok(())
}

/// Registers `<lake>/<table>/` as a listing table with the explicit schema and a `date`
/// partition column; an absent folder (a first run) becomes an empty table.
async fn register_lake_table(ctx: &SessionContext, lake: &Lake, table: Table) -> Result<()> {
    let dir = lake.table_dir(table);
    // A folder that cannot be listed (permissions, an unreachable bucket) is an error, never
    // an empty table: a report on it would be silently empty.
    let days = lake.dates(table).map_err(|e| EngineError::Setup(format!("listing {}: {e}", dir.display())))?;
    if days.is_empty() {
        return register_batches(ctx, table.name(), with_date_column(table.schema()), vec![vec![]]);
    }
    let stray = lake.stray_files(table).map_err(|e| EngineError::Setup(format!("listing {}: {e}", dir.display())))?;
    if !stray.is_empty() {
        let mut files: Vec<String> = stray.iter().take(5).map(|p| p.display().to_string()).collect();
        if stray.len() > 5 {
            files.push(format!("and {} more", stray.len() - 5));
        }
        return Err(EngineError::StrayFiles { table: table.name(), files: files.join(", ") });
    }
    register_parquet_dir(ctx, lake, table.name(), &dir, table.schema(), &["date"])
}

/// Registers the Parquet files under `dir` (with `partition_cols` as Hive-style `name=value`
/// folders) as the external table `name`; a local folder by its absolute path, so that
/// executors of a cluster sharing the filesystem find it too.
fn register_parquet_dir(ctx: &SessionContext, lake: &Lake, name: &str, dir: &std::path::Path, schema: SchemaRef, partition_cols: &[&str]) -> Result<()> {
    let reg_err = |source| EngineError::Register { table: name.into(), source };
    let dir = if lake.is_local() { std::path::absolute(dir).map_err(|e| EngineError::Setup(format!("{}: {e}", dir.display())))? } else { dir.to_path_buf() };
    let url = ListingTableUrl::parse(format!("{}/", dir.display())).map_err(reg_err)?;
    let options = ListingOptions::new(Arc::new(ParquetFormat::default()))
        .with_file_extension(".parquet")
        .with_table_partition_cols(partition_cols.iter().map(|c| (c.to_string(), DataType::Utf8)).collect());
    let config = ListingTableConfig::new(url).with_listing_options(options).with_schema(schema);
    let provider = ListingTable::try_new(config).map_err(reg_err)?;
    ctx.register_table(name, Arc::new(provider)).map_err(reg_err)?;
    Ok(())
}

/// The views of `queries/views/` (the common joins: usage with team and price, pod runs,
/// daily usage), defined in every session.
async fn register_views(ctx: &SessionContext) -> Result<()> {
    for (name, sql) in crate::queries::VIEWS {
        let reg_err = |source| EngineError::Register { table: format!("view {name}"), source };
        ctx.sql(&format!("CREATE VIEW {name} AS\n{sql}")).await.map_err(reg_err)?;
    }
    Ok(())
}

fn with_date_column(schema: SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("date", DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// Money and rates as exact decimals: DECIMAL(18, 6).
pub const PRICE_PRECISION: u8 = 18;
pub const PRICE_SCALE: i8 = 6;

fn to_decimal(v: f64) -> i128 {
    (v * 10f64.powi(PRICE_SCALE as i32)).round() as i128
}

/// The config as tables, so every rollup is a join a finance user can read:
/// `gpu_prices`, `cpu_prices`, `memory_prices` (each row valid on `[effective_from,
/// effective_to)`, so a window spanning a change is priced piecewise), `tariff_bands` (as
/// configured), `power_tariff` (the tariff resolved onto 15-minute UTC buckets over the
/// lake's days) and `teams` (from the config).
fn register_price_tables(ctx: &SessionContext, lake: &Lake, config: &Config) -> Result<()> {
    register_gpu_prices(ctx, config)?;
    register_rates(ctx, "cpu_prices", "price_per_core_hour", &config.pricing.cpu)?;
    register_rates(ctx, "memory_prices", "price_per_gib_hour", &config.pricing.memory)?;
    register_tariff(ctx, lake, config)?;
    register_calendar(ctx, lake)?;
    register_teams(ctx, config)
}

/// `calendar(date, day_start, day_end)`: the UTC days from the lake's first to its last
/// partition, for cutting intervals (pod runs) at day boundaries.
fn register_calendar(ctx: &SessionContext, lake: &Lake) -> Result<()> {
    let mut first: Option<NaiveDate> = None;
    let mut last: Option<NaiveDate> = None;
    for table in Table::ALL {
        let days = lake.dates(table).unwrap_or_default();
        if let (Some(a), Some(b)) = (days.first(), days.last()) {
            first = Some(first.map_or(*a, |f| f.min(*a)));
            last = Some(last.map_or(*b, |l| l.max(*b)));
        }
    }
    let days: Vec<NaiveDate> = match (first, last) {
        (Some(a), Some(b)) => a.iter_days().take_while(|d| *d <= b).collect(),
        _ => Vec::new(),
    };
    let schema = Arc::new(Schema::new(vec![Field::new("date", DataType::Utf8, false), ts_field("day_start"), ts_field("day_end")]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(days.iter().map(|d| d.to_string()).collect::<Vec<_>>())),
            Arc::new(ts_array(days.iter().map(|d| day_ms(*d)).collect())),
            Arc::new(ts_array(days.iter().map(|d| day_ms(*d) + 86_400_000).collect())),
        ],
    )
    .map_err(setup)?;
    register_mem(ctx, "calendar", schema, batch)
}

/// The `effective_to` of the latest price: open-ended, but inside the nanosecond timestamp range
/// (year 2262) so that comparing it with a nanosecond bucket (`date_bin`) cannot overflow.
fn far_future() -> NaiveDate {
    NaiveDate::from_ymd_opt(2200, 1, 1).expect("valid date")
}

fn day_ms(d: NaiveDate) -> i64 {
    d.and_time(NaiveTime::MIN).and_utc().timestamp_millis()
}

fn ts_array(values: Vec<i64>) -> TimestampMillisecondArray {
    TimestampMillisecondArray::from(values).with_timezone("UTC")
}

fn dec_array(values: Vec<Option<f64>>) -> Result<Decimal128Array> {
    Decimal128Array::from(values.into_iter().map(|v| v.map(to_decimal)).collect::<Vec<_>>())
        .with_precision_and_scale(PRICE_PRECISION, PRICE_SCALE)
        .map_err(setup)
}

fn ts_field(name: &str) -> Field {
    Field::new(name, crate::lake::schema::ts_type(), false)
}

fn dec_type() -> DataType {
    DataType::Decimal128(PRICE_PRECISION, PRICE_SCALE)
}

fn register_gpu_prices(ctx: &SessionContext, config: &Config) -> Result<()> {
    let mut gpu = config.pricing.gpu.clone();
    gpu.sort_by(|a, b| (&a.model, &a.mig_profile, a.effective_from).cmp(&(&b.model, &b.mig_profile, b.effective_from)));
    let (mut models, mut profiles, mut prices, mut slice, mut from, mut to) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (i, p) in gpu.iter().enumerate() {
        let next = gpu
            .get(i + 1)
            .filter(|n| n.model == p.model && n.mig_profile == p.mig_profile)
            .map(|n| n.effective_from)
            .unwrap_or_else(far_future);
        models.push(p.model.clone());
        profiles.push(p.mig_profile.clone());
        prices.push(Some(p.price_per_hour));
        slice.push(p.mig_profile.as_deref().map_or(1.0, |m| crate::collect::dcgm::mig_share(m, &p.model)));
        from.push(day_ms(p.effective_from));
        to.push(day_ms(next));
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("model", DataType::Utf8, false),
        Field::new("mig_profile", DataType::Utf8, true),
        Field::new("price_per_hour", dec_type(), false),
        Field::new("slice_share", DataType::Float64, false),
        ts_field("effective_from"),
        ts_field("effective_to"),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(models)),
            Arc::new(StringArray::from(profiles)),
            Arc::new(dec_array(prices)?),
            Arc::new(Float64Array::from(slice)),
            Arc::new(ts_array(from)),
            Arc::new(ts_array(to)),
        ],
    )
    .map_err(setup)?;
    register_mem(ctx, "gpu_prices", schema, batch)
}

fn register_rates(ctx: &SessionContext, name: &str, column: &str, rates: &[crate::config::RatePrice]) -> Result<()> {
    let mut rates = rates.to_vec();
    rates.sort_by_key(|r| r.effective_from);
    let to: Vec<i64> = (0..rates.len()).map(|i| day_ms(rates.get(i + 1).map_or_else(far_future, |n| n.effective_from))).collect();
    let schema = Arc::new(Schema::new(vec![Field::new(column, dec_type(), false), ts_field("effective_from"), ts_field("effective_to")]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(dec_array(rates.iter().map(|r| Some(r.price_per_hour)).collect())?),
            Arc::new(ts_array(rates.iter().map(|r| day_ms(r.effective_from)).collect())),
            Arc::new(ts_array(to)),
        ],
    )
    .map_err(setup)?;
    register_mem(ctx, name, schema, batch)
}

fn register_tariff(ctx: &SessionContext, lake: &Lake, config: &Config) -> Result<()> {
    let p = &config.pricing.power;
    // The bands as configured, for people reading the tariff.
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("price_per_kwh", dec_type(), false),
        Field::new("hours", DataType::Utf8, false),
        Field::new("days", DataType::Utf8, false),
        Field::new("timezone", DataType::Utf8, false),
        Field::new("effective_from", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(p.tariff.iter().map(|b| b.name.clone()).collect::<Vec<_>>())),
            Arc::new(dec_array(p.tariff.iter().map(|b| Some(b.price_per_kwh)).collect())?),
            Arc::new(StringArray::from(p.tariff.iter().map(|b| b.hours.clone()).collect::<Vec<_>>())),
            Arc::new(StringArray::from(p.tariff.iter().map(|b| b.days.join(",")).collect::<Vec<_>>())),
            Arc::new(StringArray::from(vec![p.timezone.clone(); p.tariff.len()])),
            Arc::new(StringArray::from(p.tariff.iter().map(|b| b.effective_from.to_string()).collect::<Vec<_>>())),
        ],
    )
    .map_err(setup)?;
    register_mem(ctx, "tariff_bands", schema, batch)?;

    // The resolved grid over the days the lake holds GPU samples for.
    let tariff = crate::tariff::Tariff::from_config(p).map_err(setup)?;
    let days = lake.dates(Table::GpuSamples).unwrap_or_default();
    let grid = match (days.first(), days.last()) {
        (Some(first), Some(last)) => tariff.grid(day_ms(*first), day_ms(*last) + 86_400_000),
        _ => Vec::new(),
    };
    let n = grid.len();
    let schema = Arc::new(Schema::new(vec![
        ts_field("bucket_start"),
        ts_field("bucket_end"),
        Field::new("band", DataType::Utf8, false),
        Field::new("price_per_kwh", dec_type(), false),
        Field::new("pue", dec_type(), false),
        Field::new("carbon_g_per_kwh", dec_type(), true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(ts_array(grid.iter().map(|(t, _)| *t).collect())),
            Arc::new(ts_array(grid.iter().map(|(t, _)| t + crate::tariff::BUCKET_MS).collect())),
            Arc::new(StringArray::from(grid.iter().map(|(_, r)| r.band.clone()).collect::<Vec<_>>())),
            Arc::new(dec_array(grid.iter().map(|(_, r)| Some(r.price_per_kwh)).collect())?),
            Arc::new(dec_array(vec![Some(p.pue); n])?),
            Arc::new(dec_array(vec![p.carbon_g_per_kwh; n])?),
        ],
    )
    .map_err(setup)?;
    register_mem(ctx, "power_tariff", schema, batch)
}

fn register_teams(ctx: &SessionContext, config: &Config) -> Result<()> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("namespace", DataType::Utf8, false),
        Field::new("team", DataType::Utf8, false),
        Field::new("cost_centre", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(config.teams.keys().cloned().collect::<Vec<_>>())),
            Arc::new(StringArray::from(config.teams.values().map(|t| t.team().to_string()).collect::<Vec<_>>())),
            Arc::new(StringArray::from(config.teams.values().map(|t| t.cost_centre().map(str::to_string)).collect::<Vec<_>>())),
        ],
    )
    .map_err(setup)?;
    register_mem(ctx, "teams_config", schema, batch)
}

fn setup(e: impl std::fmt::Display) -> EngineError {
    EngineError::Setup(e.to_string())
}

fn register_mem(ctx: &SessionContext, name: &str, schema: SchemaRef, batch: RecordBatch) -> Result<()> {
    register_batches(ctx, name, schema, vec![vec![batch]])
}

/// Registers `partitions` as the table `name`, replacing any table of that name. In memory on
/// the local engine; on Ballista, whose executors cannot see this process's memory, written as
/// Parquet under the session's scratch folder and registered as an external table.
pub fn register_batches(ctx: &SessionContext, name: &str, schema: SchemaRef, partitions: Vec<Vec<RecordBatch>>) -> Result<()> {
    let reg_err = |source| EngineError::Register { table: name.into(), source };
    let _ = ctx.deregister_table(name);
    let Some(scratch) = ctx.state().config().get_extension::<Scratch>() else {
        let table = MemTable::try_new(schema, partitions).map_err(reg_err)?;
        ctx.register_table(name, Arc::new(table)).map_err(reg_err)?;
        return Ok(());
    };
    let dir = scratch.table_dir(name);
    let file = dir.join("part-0.parquet");
    let write_err = |e: std::io::Error| EngineError::Setup(format!("writing table {name} to {}: {e}", file.display()));
    scratch
        .lake()
        .publish(&file, |out| {
            let mut w = parquet::arrow::ArrowWriter::try_new(out, Arc::clone(&schema), None).map_err(std::io::Error::other)?;
            for batch in partitions.iter().flatten() {
                w.write(batch).map_err(std::io::Error::other)?;
            }
            w.close().map(|_| ()).map_err(std::io::Error::other)
        })
        .map_err(write_err)?;
    register_parquet_dir(ctx, scratch.lake(), name, &dir, schema, &[])
}

/// Runs `sql` with positional parameters (`$1`, `$2`, ...) bound, never formatted in.
pub async fn run_query(ctx: &SessionContext, name: &str, sql: &str, params: Vec<ScalarValue>) -> Result<Vec<RecordBatch>> {
    run_query_with(ctx, name, sql, ParamValues::from(params)).await
}

/// Runs read-only `sql` with positional or named (`$month`) parameters bound.
pub async fn run_query_with(ctx: &SessionContext, name: &str, sql: &str, params: ParamValues) -> Result<Vec<RecordBatch>> {
    let df = prepared_frame(ctx, name, sql, params).await?;
    tracing::debug!("query {name}: running");
    collect_within_limit(ctx, name, df).await
}

/// The read-only plan of `sql` with its parameters bound (and explained when asked): the one
/// way every query of ours is planned.
async fn prepared_frame(ctx: &SessionContext, name: &str, sql: &str, params: ParamValues) -> Result<datafusion::dataframe::DataFrame> {
    let q_err = |source| EngineError::Query { query: name.into(), source };
    let options = SQLOptions::new().with_allow_ddl(false).with_allow_dml(false).with_allow_statements(false);
    let df = ctx.sql_with_options(sql, options).await.map_err(q_err)?;
    let empty = match &params {
        ParamValues::List(l) => l.is_empty(),
        ParamValues::Map(m) => m.is_empty(),
    };
    let df = if empty { df } else { df.with_param_values(params).map_err(q_err)? };
    explain_if_asked(name, &df).await.map_err(q_err)?;
    Ok(df)
}

/// The query's batches as they are computed (nothing collected), and the time by which the
/// session's query time limit ends it.
pub async fn stream_query(
    ctx: &SessionContext,
    name: &str,
    sql: &str,
    params: ParamValues,
) -> Result<(datafusion::physical_plan::SendableRecordBatchStream, Option<tokio::time::Instant>)> {
    let df = prepared_frame(ctx, name, sql, params).await?;
    let deadline = ctx.state().config().get_extension::<QueryLimit>().map(|l| tokio::time::Instant::now() + l.timeout);
    let stream = df.execute_stream().await.map_err(|e| query_error(ctx, name, e))?;
    Ok((stream, deadline))
}

/// A query's error, naming the lake file behind a Parquet error (DataFusion's message does not).
pub fn query_error(ctx: &SessionContext, name: &str, source: DataFusionError) -> EngineError {
    let text = source.to_string();
    if text.contains("spilling process has exceeded the allowable limit") {
        let limit = ctx.runtime_env().disk_manager.max_temp_directory_size();
        return EngineError::SpillLimit { query: name.into(), limit: format!("{} MiB", limit >> 20) };
    }
    // An execution error may come from a damaged or foreign lake file: name it if one is.
    if text.contains("Parquet error") || text.contains("Arrow error") || text.contains("Schema error") {
        if let Some(file) = session_lake(ctx).and_then(|lake| lake.unreadable_file()) {
            return EngineError::LakeFile { query: name.into(), file, source };
        }
    }
    EngineError::Query { query: name.into(), source }
}

/// The error for a query past the session's time limit.
pub fn timeout_error(ctx: &SessionContext, name: &str) -> EngineError {
    let limit = ctx.state().config().get_extension::<QueryLimit>();
    EngineError::Timeout {
        query: name.into(),
        secs: limit.as_ref().map_or(0, |l| l.timeout.as_secs()),
        engine: match limit.as_ref().map(|l| &l.engine) {
            Some(Engine::Remote(addr)) => format!("the Ballista scheduler at {addr}"),
            Some(Engine::Standalone) => "the in-process Ballista cluster".into(),
            _ => "the local engine".into(),
        },
        hint: if matches!(limit.as_ref().map(|l| &l.engine), Some(Engine::Remote(_))) { "; is an executor registered with the scheduler? (a job with none waits for one)" } else { "" },
    }
}

/// `df.collect()`, failing with `EngineError::Timeout` past the session's query time limit.
async fn collect_within_limit(ctx: &SessionContext, name: &str, df: datafusion::dataframe::DataFrame) -> Result<Vec<RecordBatch>> {
    let q_err = |source: DataFusionError| query_error(ctx, name, source);
    let Some(limit) = ctx.state().config().get_extension::<QueryLimit>() else {
        return df.collect().await.map_err(q_err);
    };
    match tokio::time::timeout(limit.timeout, df.collect()).await {
        Ok(result) => result.map_err(q_err),
        Err(_) => Err(timeout_error(ctx, name)),
    }
}

/// As `run_query`, also returning the result's schema (known even when no row comes back).
pub async fn run_query_schema(ctx: &SessionContext, name: &str, sql: &str, params: Vec<ScalarValue>) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let df = prepared_frame(ctx, name, sql, ParamValues::from(params)).await?;
    let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
    tracing::debug!("query {name}: running");
    let batches = collect_within_limit(ctx, name, df).await?;
    Ok((schema, batches))
}

/// With `GPULEDGER_EXPLAIN=<query name>`, prints that query's plan with its run-time metrics
/// (`EXPLAIN ANALYZE`, which runs it once more) to stderr: for finding where a report's time goes.
async fn explain_if_asked(name: &str, df: &datafusion::dataframe::DataFrame) -> std::result::Result<(), DataFusionError> {
    if std::env::var("GPULEDGER_EXPLAIN").is_ok_and(|v| v == name) {
        let plan = df.clone().explain(false, true)?.collect().await?;
        eprintln!("{}", arrow::util::pretty::pretty_format_batches(&plan)?);
    }
    Ok(())
}

/// A timestamp parameter (milliseconds, UTC) for the report window.
pub fn ts_param(ms: i64) -> ScalarValue {
    ScalarValue::TimestampMillisecond(Some(ms), Some("UTC".into()))
}

pub fn str_param(s: impl Into<String>) -> ScalarValue {
    ScalarValue::Utf8(Some(s.into()))
}
