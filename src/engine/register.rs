//! Tables into a session: the lake's folders as listing tables (limited to one cluster where
//! asked), the config's tables (prices from `pricing`, the calendar, teams), the views of
//! `queries/views/`, and tables gpuledger computes itself (`register_batches`).

use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use chrono::NaiveDate;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;

use super::error::{EngineError, Result};
use crate::config::Config;
use crate::distributed::Scratch;
use crate::domain::window::day_start_ms as day_ms;
use crate::lake::schema::{ts_array, ts_field};
use crate::lake::{Lake, Table};

/// The config as tables, so every rollup is a join a finance user can read: the price tables
/// (`pricing::tables`), `calendar` (the lake's days) and `teams_config`.
pub(super) fn register_config_tables(ctx: &SessionContext, lake: &Lake, config: &Config) -> Result<()> {
    let days = lake.dates(Table::GpuSamples).unwrap_or_default();
    for (name, batch) in crate::pricing::tables::price_tables(config, days.first().copied().zip(days.last().copied()))? {
        register_mem(ctx, name, batch.schema(), batch)?;
    }
    register_calendar(ctx, lake)?;
    register_teams(ctx, config)
}

/// Replaces `table` with a view of its rows of `cluster`; the whole table stays as
/// `<table>_all_clusters`.
pub(super) async fn limit_to_cluster(ctx: &SessionContext, table: Table, cluster: &str) -> Result<()> {
    let name = table.name();
    let rows = format!("COALESCE(CAST(cluster AS VARCHAR), '{}') = {}", crate::domain::units::DEFAULT_CLUSTER, quoted(cluster));
    let all = format!("{name}_all_clusters");
    filter_in_place(ctx, name, &all, &rows, true).await.map_err(|e| match e {
        Filtered::Missing => EngineError::NotRegistered(name.to_string()),
        Filtered::Sql(source) => EngineError::LimitCluster { table: name, cluster: cluster.to_string(), source },
    })
}

/// Why a table could not be replaced by a view of some of its rows.
enum Filtered {
    Missing,
    Sql(datafusion::error::DataFusionError),
}

/// Replaces the table `name` with a view of its rows where `rows` holds; the table itself is
/// registered as `whole` while the view is defined, and stays so where `keep_whole` (else the
/// session has no name for it: the view's plan holds it).
async fn filter_in_place(ctx: &SessionContext, name: &str, whole: &str, rows: &str, keep_whole: bool) -> std::result::Result<(), Filtered> {
    let provider = ctx.deregister_table(name).map_err(Filtered::Sql)?.ok_or(Filtered::Missing)?;
    ctx.register_table(whole, provider).map_err(Filtered::Sql)?;
    ctx.sql(&format!("CREATE VIEW {name} AS SELECT * FROM {whole} WHERE {rows}")).await.map_err(Filtered::Sql)?;
    if !keep_whole {
        ctx.deregister_table(whole).map_err(Filtered::Sql)?;
    }
    Ok(())
}

/// `text` as a SQL string literal.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Replaces the table `name` with a view of its rows of `namespaces` (none: no rows), and
/// leaves the session no name for the table itself (the view's plan holds it): a session scoped
/// to a user's namespaces cannot read the other rows by another name.
pub(super) async fn limit_to_namespaces(ctx: &SessionContext, name: &str, namespaces: &[String]) -> Result<()> {
    let rows = if namespaces.is_empty() {
        "FALSE".to_string()
    } else {
        format!("CAST(namespace AS VARCHAR) IN ({})", namespaces.iter().map(|n| quoted(n)).collect::<Vec<_>>().join(", "))
    };
    filter_in_place(ctx, name, &format!("{name}_before_scope"), &rows, false).await.map_err(|e| match e {
        Filtered::Missing => EngineError::NotRegistered(name.to_string()),
        Filtered::Sql(source) => EngineError::LimitNamespaces { table: name.to_string(), source },
    })
}

/// Registers `<lake>/<table>/` as a listing table with the explicit schema and a `date`
/// partition column; an absent folder (a first run) becomes an empty table.
pub(super) async fn register_lake_table(ctx: &SessionContext, lake: &Lake, table: Table) -> Result<()> {
    let dir = lake.table_dir(table);
    // A folder that cannot be listed (permissions, an unreachable bucket) is an error, never
    // an empty table: a report on it would be silently empty.
    let listing = |source| EngineError::Listing { dir: dir.display().to_string(), source };
    let days = lake.dates(table).map_err(listing)?;
    if days.is_empty() {
        return register_batches(ctx, table.name(), with_date_column(table.schema()), vec![vec![]]);
    }
    let stray = lake.stray_files(table).map_err(listing)?;
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
    let dir = if lake.is_local() {
        std::path::absolute(dir).map_err(|source| EngineError::Path { path: dir.display().to_string(), source })?
    } else {
        dir.to_path_buf()
    };
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
pub(super) async fn register_views(ctx: &SessionContext) -> Result<()> {
    for (name, sql) in crate::queries::VIEWS {
        register_view(ctx, name, sql).await?;
    }
    Ok(())
}

/// Defines (or redefines) the view `name` as `select`, over the tables registered now.
pub async fn register_view(ctx: &SessionContext, name: &str, select: &str) -> Result<()> {
    let reg_err = |source| EngineError::Register { table: format!("view {name}"), source };
    ctx.sql(&format!("CREATE OR REPLACE VIEW {name} AS\n{select}")).await.map_err(reg_err)?;
    Ok(())
}

fn with_date_column(schema: SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("date", DataType::Utf8, false));
    Arc::new(Schema::new(fields))
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
    .map_err(|source| EngineError::ConfigTable { table: "calendar", source })?;
    register_mem(ctx, "calendar", schema, batch)
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
    .map_err(|source| EngineError::ConfigTable { table: "teams_config", source })?;
    register_mem(ctx, "teams_config", schema, batch)
}

fn register_mem(ctx: &SessionContext, name: &str, schema: SchemaRef, batch: RecordBatch) -> Result<()> {
    register_batches(ctx, name, schema, vec![vec![batch]])
}

/// Registers `partitions`, streams computed as a query reads them (memory follows what one
/// stream holds at a time, not the table), as the table `name`, replacing any table of that
/// name. Only on the local engine: on Ballista, whose executors cannot run this process's
/// streams, nothing is registered and the answer is `false` (register batches instead).
pub fn register_streams(
    ctx: &SessionContext,
    name: &str,
    schema: SchemaRef,
    partitions: Vec<Arc<dyn datafusion::physical_plan::streaming::PartitionStream>>,
) -> Result<bool> {
    if ctx.state().config().get_extension::<Scratch>().is_some() {
        return Ok(false);
    }
    let reg_err = |source| EngineError::Register { table: name.into(), source };
    let _ = ctx.deregister_table(name);
    let table = datafusion::catalog::streaming::StreamingTable::try_new(schema, partitions).map_err(reg_err)?;
    ctx.register_table(name, Arc::new(table)).map_err(reg_err)?;
    Ok(true)
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
    let write_err = |source| EngineError::WriteTable { table: name.to_string(), path: file.display().to_string(), source };
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
