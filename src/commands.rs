//! Command handlers: the edge where library errors become `anyhow` errors with context.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use chrono::{Datelike, NaiveDate, Utc};
use tracing_subscriber::EnvFilter;

use crate::adhoc;
use crate::check;
use crate::cli::{Cli, CollectArgs, Command, DemoArgs, QueryArgs, ReportArgs, RollupArgs, RunArgs, SimulateArgs, WindowArgs};
use crate::cronjob;
use crate::exit::{IncompleteData, UsageError};
use crate::config::Config;
use crate::domain::size::MemorySize;
use crate::engine::SessionBuilder;
use crate::lake::Lake;
use crate::progress::{Progress, ProgressMode};
use crate::queries::Queries;
use crate::report::{self, Format};
use crate::simulate::lake_out::LakeOutput;
use crate::simulate::{openmetrics, trace, SimParams, Simulation};
use crate::domain::window::{parse_time, Window};

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
    let config_origin = if path.is_file() { format!("{} parses and validates", path.display()) } else { "built-in defaults (no gpuledger.toml here)".to_string() };
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
    let lake = Lake::open(&config.lake.path, &config.lake.s3).map_err(|e| UsageError(e.to_string()))?;
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
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    match cli.command {
        Command::Demo(args) => runtime.block_on(demo(&ctx, args)),
        Command::Simulate(args) => simulate(&ctx, &args).map(|_| ()),
        Command::Collect(args) => runtime.block_on(collect_cmd(&ctx, args)),
        Command::Report(args) => runtime.block_on(report_cmd(&ctx, args)),
        Command::Run(args) => runtime.block_on(run_cmd(&ctx, args)),
        Command::Query(args) => runtime.block_on(query(&ctx, args)),
        Command::Tables => runtime.block_on(tables(&ctx)),
        Command::Check => runtime.block_on(check_cmd(&ctx)),
        Command::Rollup(args) => rollup_cmd(&ctx, &args),
        Command::Completions { .. } | Command::Manpage => unreachable!("answered before the config is loaded"),
    }
}

fn last_month_start() -> NaiveDate {
    let now = Utc::now().date_naive();
    let this = NaiveDate::from_ymd_opt(now.year(), now.month(), 1).expect("valid");
    let prev = this.pred_opt().expect("valid");
    NaiveDate::from_ymd_opt(prev.year(), prev.month(), 1).expect("valid")
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            total += if p.is_dir() { dir_bytes(&p) } else { e.metadata().map(|m| m.len()).unwrap_or(0) };
        }
    }
    total
}

/// Simulates into `args.out`; returns the simulation's window.
fn simulate(ctx: &Context_, args: &SimulateArgs) -> Result<Window> {
    let start = match &args.start {
        Some(s) => NaiveDate::parse_from_str(s, "%Y-%m-%d").with_context(|| format!("--start: expected YYYY-MM-DD, got {s:?}"))?,
        None => last_month_start(),
    };
    let params = SimParams {
        gpus: args.gpus,
        days: args.days,
        seed: args.seed,
        step_s: args.step,
        start,
        warmup_days: args.warmup_days,
        target_util: 0.75,
        time_sliced: args.time_sliced,
    };
    let t0 = Instant::now();
    let mut sim = match &args.trace {
        Some(path) => {
            params.validate()?;
            trace::simulate_trace(path, params.clone())?
        }
        None => Simulation::run(params.clone())?,
    };
    if let Some(path) = &args.util_trace {
        let t = crate::simulate::util_trace::UtilTrace::read(path)?;
        tracing::info!(
            "utilisation from {}: {} series, {} samples ({:.0}% at 0%)",
            path.display(),
            t.series_count(),
            t.samples,
            100.0 * t.zero_samples as f64 / t.samples.max(1) as f64
        );
        sim.util_trace = Some(std::sync::Arc::new(t));
    }
    tracing::info!(
        "simulated {} pods on {} GPUs ({} nodes) over {} days in {:.1}s",
        sim.schedule.pods.len(),
        sim.cluster.gpu_count(),
        sim.cluster.nodes.len(),
        args.days,
        t0.elapsed().as_secs_f64()
    );

    let lake = Lake::new(args.out.join("lake"));
    let removed = lake.clean_orphans().context("cleaning temp files left in the lake")?;
    if removed > 0 {
        tracing::warn!("removed {removed} temp files left by an interrupted writer");
    }
    let model = sim.signals();
    let writer = LakeOutput {
        lake: &lake,
        cluster: &sim.cluster,
        namespaces: &sim.namespaces,
        schedule: &sim.schedule,
        model: &model,
        window: params.window_ms(),
        cluster_name: args.cluster.as_deref().unwrap_or(crate::domain::units::DEFAULT_CLUSTER),
    };
    let t1 = Instant::now();
    let progress = Progress::new(ctx.progress, "lake days", args.days as u64);
    let stats = writer.write_all(2, &progress).context("writing the simulated lake")?;
    progress.finish();
    tracing::info!(
        "wrote {} GPU rows, {} pod rows, {} pending rows in {} files ({:.1} MiB) under {} in {:.1}s",
        stats.gpu_rows,
        stats.pod_rows,
        stats.pending_rows,
        stats.files,
        dir_bytes(lake.root()) as f64 / 1048576.0,
        lake.root().display(),
        t1.elapsed().as_secs_f64()
    );

    let ledger = sim.ledger();
    let ledger_path = args.out.join("ledger.json");
    let outages = if args.openmetrics.is_some() { openmetrics::plan_outages(&sim, args.exporter_outages, args.outage_minutes) } else { Vec::new() };
    let mut ledger_json = serde_json::to_value(&ledger).context("serialising the ledger")?;
    if !outages.is_empty() {
        ledger_json["exporter_outages"] = serde_json::Value::Array(outages.iter().map(|o| sim.outage_ledger(o)).collect());
    }
    let text = serde_json::to_string_pretty(&ledger_json).context("serialising the ledger")? + "\n";
    report::write_atomic(&ledger_path, text.as_bytes())?;
    tracing::info!("ground-truth ledger: {}", ledger_path.display());

    if let Some(path) = &args.openmetrics {
        let t2 = Instant::now();
        if args.scrape_interval.is_some_and(|s| !(s >= 1.0 && s <= 3600.0)) || !(0.0..=100.0).contains(&args.missed_scrapes) || !(args.scrape_jitter >= 0.0) {
            anyhow::bail!("--scrape-interval must be 1-3600 s, --missed-scrapes 0-100 %, --scrape-jitter at least 0 s");
        }
        if !(1..=3).contains(&args.prometheus_replicas) || args.outage_minutes == 0 {
            anyhow::bail!("--prometheus-replicas must be 1-3, --outage-minutes at least 1");
        }
        let options = openmetrics::OmOptions {
            mig_device_fields: args.mig_device_fields,
            scrape_interval_ms: args.scrape_interval.map(|s| (s * 1000.0).round() as i64),
            scrape_jitter_ms: (args.scrape_jitter * 1000.0).round() as i64,
            missed_scrapes: args.missed_scrapes / 100.0,
            outages,
            replicas: args.prometheus_replicas,
            honor_labels_flip: args.honor_labels_flip,
            cluster: args.cluster.clone(),
        };
        let mut pending = crate::atomic::Pending::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, pending.file());
        let samples = openmetrics::write_with(&sim, options, &mut out).with_context(|| format!("writing {}", path.display()))?;
        out.into_inner().map_err(|e| e.into_error()).with_context(|| format!("flushing {}", path.display()))?;
        pending.commit().with_context(|| format!("publishing {}", path.display()))?;
        tracing::info!("wrote {samples} OpenMetrics samples to {} in {:.1}s", path.display(), t2.elapsed().as_secs_f64());
    }
    let (s, e) = params.window();
    Ok(Window::new(s, e)?)
}

async fn demo(ctx: &Context_, args: DemoArgs) -> Result<()> {
    let t0 = Instant::now();
    let window = match &args.month {
        Some(m) => Window::month(m, Utc::now())?,
        None => Window::month("last", Utc::now())?,
    };
    let sim_args = SimulateArgs {
        out: args.out.clone(),
        gpus: args.gpus,
        days: (window.seconds() / 86_400) as u32,
        seed: args.seed,
        start: Some(window.start.format("%Y-%m-%d").to_string()),
        step: 30,
        warmup_days: 3,
        openmetrics: None,
        time_sliced: 0,
        trace: None,
        util_trace: None,
        mig_device_fields: Default::default(),
        scrape_interval: None,
        scrape_jitter: 0.0,
        missed_scrapes: 0.0,
        exporter_outages: 0,
        outage_minutes: 20,
        prometheus_replicas: 1,
        honor_labels_flip: 0,
        cluster: None,
    };
    simulate(ctx, &sim_args)?;
    // Teams and cost centres come from the simulated namespaces' labels in the lake (the
    // `teams` view); the config's own [teams], if any, still win. Saved as
    // DIR/gpuledger.toml so later `report` and `query` runs see the same lake and teams.
    let config = ctx.config.clone();
    let mut toml_text = String::from("# Written by `gpuledger demo`: gpuledger --config <this file> report chargeback --month <month>\n[lake]\npath = \"lake\"\n");
    if !config.teams.is_empty() {
        toml_text.push_str("\n[teams]\n");
        for (ns, entry) in &config.teams {
            match entry.cost_centre() {
                Some(cc) => toml_text.push_str(&format!("{ns:?} = {{ team = {:?}, cost_centre = {cc:?} }}\n", entry.team())),
                None => toml_text.push_str(&format!("{ns:?} = {:?}\n", entry.team())),
            }
        }
    }
    Config::parse(&toml_text, "demo config").context("the demo's own config")?;
    report::write_atomic(&args.out.join("gpuledger.toml"), toml_text.as_bytes())?;
    let lake = Lake::new(args.out.join("lake"));
    let dir = args.out.join("reports").join(window.label());
    let session = ctx.session.build(&lake, &config).await?;
    let month = report::write_month(&session, &ctx.queries, &config, &window, &dir).await?;
    if let Some(reason) = &month.incomplete {
        tracing::warn!("the demo month's data is incomplete: {reason}");
    }
    let chargeback_table = match month.sections.iter().find(|r| r.name == "chargeback") {
        Some(r) => String::from_utf8(r.render(Format::Table)?).expect("utf-8"),
        None => String::new(),
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(chargeback_table.as_bytes())?;
    stdout.flush()?;
    tracing::info!("reports in {}; demo took {:.1}s", dir.display(), t0.elapsed().as_secs_f64());
    Ok(())
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
        return Err(UsageError(format!("-o {}: that is inside the lake ({}); write reports and query results elsewhere", output.display(), root.display())).into());
    }
    Ok(())
}

fn emit(bytes: &[u8], format: Format, output: Option<&Path>) -> Result<()> {
    match output {
        Some(path) => report::write_atomic(path, bytes)?,
        None => {
            if format == Format::Parquet && std::io::stdout().is_terminal() {
                bail!("refusing to write Parquet to a terminal: use -o FILE");
            }
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()?;
        }
    }
    Ok(())
}

async fn collect_cmd(ctx: &Context_, args: CollectArgs) -> Result<()> {
    let mut cfg = ctx.config.prometheus.clone();
    if let Some(url) = args.url {
        crate::config::check_prometheus_url(&url).map_err(|m| UsageError(format!("--url: {m}")))?;
        cfg.url = url;
    }
    let from = args.from.as_deref().map(|f| parse_time("--from", f)).transpose()?;
    let to = args.to.as_deref().map(|t| parse_time("--to", t)).transpose()?;
    if let (Some(f), Some(t)) = (from, to) {
        if f >= t {
            return Err(UsageError(format!("--from {} is not before --to {}", f.to_rfc3339(), t.to_rfc3339())).into());
        }
    }
    let (from, to) = crate::collect::resolve_window(&ctx.lake, &cfg, from, to, Utc::now())?;
    let s = crate::collect::collect(&ctx.lake, &cfg, from, to, ctx.progress, args.replace).await?;
    if s.queries > 0 {
        tracing::info!(
            "collected {} to {}: {} queries, {} samples ({:.0}/s) in {:.2}s fetching (Prometheus {:.2}s, JSON decode {:.2}s, summed over {} in flight) + {:.2}s assembling + {:.2}s writing; {} GPU rows, {} pods, {} gaps, {:.2} GPU-hours unmeasured",
            crate::collect::prometheus::fmt_ms(s.from),
            crate::collect::prometheus::fmt_ms(s.to),
            s.queries,
            s.samples,
            s.samples as f64 / (s.fetch_secs + s.assemble_secs + s.write_secs).max(1e-9),
            s.fetch_secs,
            s.prometheus_secs,
            s.decode_secs,
            cfg.concurrency,
            s.assemble_secs,
            s.write_secs,
            s.gpu_rows,
            s.pods,
            s.gaps,
            s.unmeasured_gpu_s / 3600.0
        );
    }
    Ok(())
}

async fn report_cmd(ctx: &Context_, args: ReportArgs) -> Result<()> {
    let window = window_of(&args.window)?;
    require_lake(&ctx.lake)?;
    refuse_output_in_lake(&ctx.lake, args.output.as_deref())?;
    let session = ctx.session.build(&ctx.lake, &ctx.config).await?;
    let mut config = ctx.config.clone();
    config.chargeback_by = args.by;
    let (sections, incomplete) = report::build_checked(args.kind, &session, &ctx.queries, &config, &window).await?;
    match &args.output {
        // Several sections to a path: the path is a folder of <section>.<ext> files.
        Some(dir) if sections.len() > 1 => {
            for s in &sections {
                report::write_atomic(&dir.join(format!("{}.{}", s.name, args.format.extension())), &s.render(args.format)?)?;
            }
        }
        _ => emit(&report::render_sections(&sections, args.format)?, args.format, args.output.as_deref())?,
    }
    // Written, and marked in it; the exit code says it too (3), as `run` does.
    match incomplete {
        Some(reason) => Err(IncompleteData(reason).into()),
        None => Ok(()),
    }
}

async fn query(ctx: &Context_, args: QueryArgs) -> Result<()> {
    let params = args.params.iter().map(|p| adhoc::parse_param(p)).collect::<Result<Vec<_>, _>>()?;
    require_lake(&ctx.lake)?;
    let stdin_is_terminal = std::io::stdin().is_terminal();
    let sql = match (&args.sql, &args.file) {
        (Some(s), _) => s.clone(),
        (None, Some(f)) if f.as_os_str() == "-" => read_stdin()?,
        (None, Some(f)) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        (None, None) if stdin_is_terminal && std::io::stdout().is_terminal() => {
            let session = ctx.session.build(&ctx.lake, &ctx.config).await?;
            return adhoc::repl::interactive(&session, args.format, params).await;
        }
        (None, None) if !stdin_is_terminal => read_stdin()?,
        (None, None) => return Err(UsageError("give the SQL as an argument, with -f FILE, or on standard input".into()).into()),
    };
    adhoc::check_read_only(&sql)?;
    refuse_output_in_lake(&ctx.lake, args.output.as_deref())?;
    let session = ctx.session.build(&ctx.lake, &ctx.config).await?;
    // Streamed to the output as it comes (bounded by engine.max_result_rows/_bytes); a file
    // appears, whole, only when the query finished.
    match args.output.as_deref() {
        Some(path) => {
            // Dropped on an error, the pending file takes its temp file with it.
            let mut pending = crate::atomic::Pending::create(path).with_context(|| format!("creating {}", path.display()))?;
            let mut out = std::io::BufWriter::new(pending.file());
            adhoc::run_to(&session, &sql, &params, args.format, &mut out).await?;
            out.into_inner().map_err(|e| e.into_error()).with_context(|| format!("writing {}", path.display()))?;
            pending.commit().with_context(|| format!("publishing {}", path.display()))
        }
        None => {
            if args.format == Format::Parquet && std::io::stdout().is_terminal() {
                bail!("refusing to write Parquet to a terminal: use -o FILE");
            }
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
            adhoc::run_to(&session, &sql, &params, args.format, &mut out).await?;
            Ok(())
        }
    }
}

fn read_stdin() -> Result<String> {
    let mut sql = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut sql).context("reading SQL from standard input")?;
    Ok(sql)
}

async fn tables(ctx: &Context_) -> Result<()> {
    let session = ctx.session.build(&ctx.lake, &ctx.config).await?;
    let docs = adhoc::catalog::describe(&session).await?;
    let mut out = std::io::stdout().lock();
    out.write_all(adhoc::catalog::render(&docs).as_bytes())?;
    out.flush()?;
    Ok(())
}

async fn run_cmd(ctx: &Context_, args: RunArgs) -> Result<()> {
    let window = Window::month(&args.month, Utc::now())?;
    let mut config = ctx.config.clone();
    if let Some(url) = args.url {
        crate::config::check_prometheus_url(&url).map_err(|m| UsageError(format!("--url: {m}")))?;
        config.prometheus.url = url;
    }
    let plan = cronjob::RunPlan {
        window,
        collect: config.run.collect && !args.no_collect,
        reports_dir: cronjob::reports_dir(&config, args.reports_dir.as_deref()),
    };
    if !plan.collect {
        require_lake(&ctx.lake)?;
    }
    let (outcome, incomplete) = cronjob::run(&config, &ctx.lake, &ctx.queries, &ctx.session, ctx.progress, &plan).await?;
    let mut out = std::io::stdout().lock();
    out.write_all(outcome.summary().as_bytes())?;
    out.flush()?;
    match incomplete {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

fn rollup_cmd(ctx: &Context_, args: &RollupArgs) -> Result<()> {
    use crate::lake::{rollup, Table};
    let days = ctx.lake.dates(Table::GpuSamples).with_context(|| format!("listing {}", ctx.lake.table_dir(Table::GpuSamples).display()))?;
    let (Some(first_day), Some(last_day)) = (days.first().copied(), days.last().copied()) else {
        println!("no gpu_samples days in {}: nothing to roll up", ctx.lake.root().display());
        return Ok(());
    };
    let (first, last) = (args.from.unwrap_or(first_day), args.to.unwrap_or(last_day));
    if first > last {
        return Err(UsageError(format!("--from {first} is after --to {last}")).into());
    }
    let _lock = crate::collect::state::LakeLock::acquire(&ctx.lake, "rollup")?;
    let in_range = days.iter().filter(|d| **d >= first && **d <= last).count();
    let progress = Progress::new(ctx.progress, "rollup days", in_range as u64);
    let t = Instant::now();
    let done = rollup::refresh(&ctx.lake, first, last, args.force, |d| progress.inc(&d.to_string()))?;
    progress.finish();
    println!(
        "rollups {first} to {last}: {} written, {} already current ({:.1}s)",
        done.written.len(),
        done.current,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn check_cmd(ctx: &Context_) -> Result<()> {
    let findings = check::check(&ctx.config, &ctx.config_origin, &ctx.lake, &ctx.queries, &ctx.session).await;
    let mut out = std::io::stdout().lock();
    for f in &findings {
        writeln!(out, "{f}")?;
    }
    out.flush()?;
    let failed: Vec<&str> = findings.iter().filter(|f| f.status == check::Status::Fail).map(|f| f.what.as_str()).collect();
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("check failed: {}", failed.join(", "))
    }
}

/// The exit code for a failed command: the first error in its chain that has a code of its own
/// decides it (the table in `exit`).
pub fn exit_code_for(error: &anyhow::Error) -> u8 {
    use crate::exit::ExitStatus;
    /// The code `cause` says for itself, where it is one of the error types that have one.
    fn said(cause: &(dyn std::error::Error + 'static)) -> Option<u8> {
        macro_rules! first_of {
            ($($t:ty),*) => {
                None $(.or_else(|| cause.downcast_ref::<$t>().and_then(ExitStatus::exit_code)))*
            };
        }
        first_of!(
            crate::exit::IncompleteData,
            UsageError,
            crate::config::ConfigError,
            crate::domain::window::WindowError,
            crate::adhoc::GuardError,
            crate::adhoc::AdhocError,
            crate::collect::state::StateError,
            crate::collect::CollectError
        )
    }
    error.chain().find_map(said).unwrap_or(crate::exit::FAILURE)
}
