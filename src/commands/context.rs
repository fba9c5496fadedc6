//! What every command handler shares: the settings resolved once (config, lake, queries,
//! session, progress), the window of a command line, the lake checks, and writing a result out;
//! and the imports the handlers use (each handler says `use super::context::*`).

#![allow(unused_imports)]

pub(super) use std::io::{IsTerminal, Write};
pub(super) use std::path::{Path, PathBuf};
pub(super) use std::time::Instant;

pub(super) use anyhow::{bail, Context, Result};
pub(super) use chrono::{Datelike, NaiveDate, Utc};
pub(super) use tracing_subscriber::EnvFilter;

pub(super) use crate::adhoc;
pub(super) use crate::check;
pub(super) use crate::cli::{Cli, CollectArgs, Command, DemoArgs, PlanArgs, QueryArgs, ReportArgs, RollupArgs, RunArgs, ServeArgs, SimulateArgs, WindowArgs};
pub(super) use crate::config::Config;
pub(super) use crate::cronjob;
pub(super) use crate::domain::size::MemorySize;
pub(super) use crate::domain::window::{parse_time, Window};
pub(super) use crate::engine::SessionBuilder;
pub(super) use crate::exit::{IncompleteData, UsageError};
pub(super) use crate::lake::Lake;
pub(super) use crate::progress::{Progress, ProgressMode};
pub(super) use crate::queries::Queries;
pub(super) use crate::report::{self, Format};
pub(super) use crate::simulate::cluster::PoolShape;
pub(super) use crate::simulate::lake_out::LakeOutput;
pub(super) use crate::simulate::{openmetrics, trace, SimParams, Simulation};

/// Settings shared by every command, resolved once: defaults < file < environment < flags.
pub(super) struct Context_ {
    pub(super) config: Config,
    /// Where the config came from, for `check`.
    pub(super) config_origin: String,
    pub(super) lake: Lake,
    pub(super) queries: Queries,
    pub(super) session: SessionBuilder,
    pub(super) progress: ProgressMode,
}

pub(super) fn resolve(cli: &Cli) -> Result<Context_> {
    let (path, required) = match &cli.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from("gpuledger.toml"), false),
    };
    let mut config = Config::load(&path, required)?;
    let config_origin =
        if path.is_file() { format!("{} parses and validates", path.display()) } else { "built-in defaults (no gpuledger.toml here)".to_string() };
    if let Some(lake) = &cli.lake {
        config.lake.path = lake.clone();
    }
    if let Some(m) = &cli.memory_limit {
        config.engine.memory_limit = MemorySize::parse(m).map_err(|e| UsageError(format!("--memory-limit: {e}")))?;
    }
    let queries_dir = cli.queries.clone().or_else(|| config.queries.dir.clone());
    if let Some(dir) = &queries_dir {
        if !dir.is_dir() {
            return Err(UsageError(format!("queries folder {} does not exist", dir.display())).into());
        }
    }
    if let Some(engine) = &cli.engine {
        config.engine.url = Some(engine.clone());
    }
    let engine = config.engine.url.as_deref().map(crate::distributed::Engine::parse).transpose().map_err(UsageError)?.unwrap_or_default();
    let lake = Lake::open(&config.lake.path, &config.lake.s3)?;
    Ok(Context_ {
        lake,
        queries: Queries::new(queries_dir.as_deref()),
        session: SessionBuilder::from_config(&config).engine(engine).cluster(cli.cluster.clone()),
        progress: cli.progress,
        config_origin,
        config,
    })
}

pub(super) fn window_of(args: &WindowArgs) -> Result<Window> {
    Ok(match (&args.month, &args.from, &args.to) {
        (Some(m), _, _) => Window::month(m, Utc::now())?,
        (None, Some(f), Some(t)) => Window::new(parse_time("--from", f)?, parse_time("--to", t)?)?,
        _ => Window::month("last", Utc::now())?,
    })
}

/// Reading a lake on local disk that does not exist is a usage error naming it: a typo in
/// `lake.path` or `--lake`, or a volume not mounted, would otherwise read as an empty month.
pub(super) fn require_lake(lake: &crate::lake::Lake) -> Result<()> {
    if matches!(lake.store(), crate::lake::store::Store::Local) && !lake.root().exists() {
        return Err(UsageError(format!(
            "lake {} does not exist: nothing was collected there (a typo in lake.path or --lake? a volume not mounted?)",
            lake.root().display()
        ))
        .into());
    }
    Ok(())
}

/// Refuses an output path inside a lake on local disk (symlinks followed, the file itself or
/// the folder it would be created in): a query's Parquet written over a day file would replace
/// history. Usage error, before anything runs.
pub(super) fn refuse_output_in_lake(lake: &crate::lake::Lake, output: Option<&Path>) -> Result<()> {
    let Some(output) = output else { return Ok(()) };
    if !matches!(lake.store(), crate::lake::store::Store::Local) {
        return Ok(());
    }
    let Ok(root) = std::fs::canonicalize(lake.root()) else { return Ok(()) };
    // The deepest part of the path that exists, resolved, plus the rest as given.
    let absolute = if output.is_absolute() { output.to_path_buf() } else { std::env::current_dir()?.join(output) };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    let resolved = loop {
        match std::fs::canonicalize(existing) {
            Ok(p) => break rest.iter().rev().fold(p, |acc: PathBuf, part: &&std::ffi::OsStr| acc.join(part)),
            Err(_) => match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name);
                    existing = parent;
                }
                _ => return Ok(()),
            },
        }
    };
    if resolved.starts_with(&root) {
        return Err(
            UsageError(format!("-o {}: that is inside the lake ({}); write reports and query results elsewhere", output.display(), root.display())).into()
        );
    }
    Ok(())
}

pub(super) fn emit(bytes: &[u8], format: Format, output: Option<&Path>) -> Result<()> {
    match output {
        Some(path) => report::write_atomic(path, bytes)?,
        None => {
            if format.is_binary() && std::io::stdout().is_terminal() {
                bail!("refusing to write {} to a terminal: use -o FILE", format.name());
            }
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()?;
        }
    }
    Ok(())
}
