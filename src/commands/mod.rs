//! Command handlers: the edge where library errors become `anyhow` errors with context.

mod failure;
mod lake_cmds;
mod query;
mod reports;
mod simulate;

pub use failure::{exit_code_for, one_line};
use lake_cmds::{check_cmd, collect_cmd, rollup_cmd};
use query::{query, serve, tables};
use reports::{plan_cmd, report_cmd, run_cmd};
use simulate::{demo, simulate};

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use chrono::{Datelike, NaiveDate, Utc};
use tracing_subscriber::EnvFilter;

use crate::adhoc;
use crate::check;
use crate::cli::{Cli, CollectArgs, Command, DemoArgs, PlanArgs, QueryArgs, ReportArgs, RollupArgs, RunArgs, ServeArgs, SimulateArgs, WindowArgs};
use crate::config::Config;
use crate::cronjob;
use crate::domain::size::MemorySize;
use crate::domain::window::{parse_time, Window};
use crate::engine::SessionBuilder;
use crate::exit::{IncompleteData, UsageError};
use crate::lake::Lake;
use crate::progress::{Progress, ProgressMode};
use crate::queries::Queries;
use crate::report::{self, Format};
use crate::simulate::cluster::PoolShape;
use crate::simulate::lake_out::LakeOutput;
use crate::simulate::{openmetrics, trace, SimParams, Simulation};

pub fn init_logging(cli: &Cli) {
    let default = if cli.quiet {
        "error"
    } else {
        match cli.verbose {
            0 => "gpuledger=info",
            1 => "gpuledger=debug",
            _ => "debug",
        }
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        // A log line that cannot be written (stderr a closed pipe) is dropped; tracing's own
        // report of it would panic on the same pipe (exit 101).
        .log_internal_errors(false)
        .try_init();
}

/// Settings shared by every command, resolved once: defaults < file < environment < flags.
struct Context_ {
    config: Config,
    /// Where the config came from, for `check`.
    config_origin: String,
    lake: Lake,
    queries: Queries,
    session: SessionBuilder,
    progress: ProgressMode,
}

fn resolve(cli: &Cli) -> Result<Context_> {
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

pub fn run(cli: Cli) -> Result<()> {
    // The shell completions and the man page need neither the config nor the lake.
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "gpuledger", &mut std::io::stdout());
            return Ok(());
        }
        Command::Manpage => {
            let cmd = <Cli as clap::CommandFactory>::command();
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd).render(&mut out)?;
            out.flush()?;
            return Ok(());
        }
        _ => {}
    }
    let ctx = resolve(&cli)?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if matches!(cli.command, Command::Serve(_)) {
        // Workers beyond the cores DataFusion keeps busy: logins, cancels and statement time
        // limits are answered while queries run.
        runtime.worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()) + 2);
    }
    let runtime = runtime.enable_all().build().context("starting the async runtime")?;
    if let Command::Serve(args) = cli.command {
        let served = runtime.block_on(serve(&ctx, args));
        // A statement's work that outlived the drain (a plan between two yields) is not waited
        // for: a SIGTERMed server exits within seconds.
        runtime.shutdown_timeout(std::time::Duration::from_secs(1));
        return served;
    }
    match cli.command {
        Command::Demo(args) => runtime.block_on(demo(&ctx, args)),
        Command::Simulate(args) => simulate(&ctx, &args).map(|_| ()),
        Command::Collect(args) => runtime.block_on(collect_cmd(&ctx, args)),
        Command::Report(args) => runtime.block_on(report_cmd(&ctx, args)),
        Command::Run(args) => runtime.block_on(run_cmd(&ctx, args)),
        Command::Plan(args) => runtime.block_on(plan_cmd(&ctx, args)),
        Command::Query(args) => runtime.block_on(query(&ctx, args)),
        Command::Tables => runtime.block_on(tables(&ctx)),
        Command::Serve(_) => unreachable!("served above"),
        Command::Check => runtime.block_on(check_cmd(&ctx)),
        Command::Rollup(args) => rollup_cmd(&ctx, &args),
        Command::Completions { .. } | Command::Manpage => unreachable!("answered before the config is loaded"),
    }
}

fn window_of(args: &WindowArgs) -> Result<Window> {
    Ok(match (&args.month, &args.from, &args.to) {
        (Some(m), _, _) => Window::month(m, Utc::now())?,
        (None, Some(f), Some(t)) => Window::new(parse_time("--from", f)?, parse_time("--to", t)?)?,
        _ => Window::month("last", Utc::now())?,
    })
}

/// Reading a lake on local disk that does not exist is a usage error naming it: a typo in
/// `lake.path` or `--lake`, or a volume not mounted, would otherwise read as an empty month.
fn require_lake(lake: &crate::lake::Lake) -> Result<()> {
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
fn refuse_output_in_lake(lake: &crate::lake::Lake, output: Option<&Path>) -> Result<()> {
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

fn emit(bytes: &[u8], format: Format, output: Option<&Path>) -> Result<()> {
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
