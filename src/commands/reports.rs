//! `report` (one kind, any window) and `run` (the cron job: collect, then every report of a month).

#[allow(unused_imports)]
use super::context::*;

pub(super) async fn report_cmd(ctx: &Context_, args: ReportArgs) -> Result<()> {
    let window = window_of(&args.window)?;
    if !args.kind.takes(&args.by) {
        // The reports that do group by it, from the one list of kinds.
        let takers: Vec<String> = report::ReportKind::all().iter().filter(|k| k.takes(&args.by)).map(|k| k.cli_name()).collect();
        let takers = match takers.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => takers.join(""),
        };
        return Err(UsageError(format!("report {} does not group by {}; --by {} is taken by {takers}", args.kind.cli_name(), args.by.words(), args.by)).into());
    }
    require_lake(&ctx.lake)?;
    refuse_output_in_lake(&ctx.lake, args.output.as_deref())?;
    let session = ctx.session.build(&ctx.lake, &ctx.config).await?;
    let (mut sections, incomplete) = report::build_checked(args.kind, &args.by, &session, &ctx.queries, &ctx.config, &window).await?;
    if args.format == Format::Table && !args.wide {
        sections = sections.iter().map(report::Report::for_terminal).collect();
    }
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

pub(super) async fn plan_cmd(ctx: &Context_, args: PlanArgs) -> Result<()> {
    let window = window_of(&args.window)?;
    require_lake(&ctx.lake)?;
    refuse_output_in_lake(&ctx.lake, args.output.as_deref())?;
    let session = ctx.session.build(&ctx.lake, &ctx.config).await?;
    let request = crate::plan::Request { cluster: args.cluster, scenario_files: args.scenarios, optimize: args.optimize, max_replays: args.max_replays };
    let sections = crate::plan::build(&session, &ctx.queries, &ctx.config, &window, &request, &crate::report::Shared::default()).await?;
    match &args.output {
        Some(dir) if sections.len() > 1 && args.format == report::Format::Parquet => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            for s in &sections {
                report::write_atomic(&dir.join(format!("{}.{}", s.name, args.format.extension())), &s.render(args.format)?)?;
            }
        }
        _ => emit(&report::render_sections(&sections, args.format)?, args.format, args.output.as_deref())?,
    }
    Ok(())
}

pub(super) async fn run_cmd(ctx: &Context_, args: RunArgs) -> Result<()> {
    let window = Window::month(&args.month, Utc::now())?;
    let mut config = ctx.config.clone();
    if let Some(url) = args.url {
        crate::config::check_prometheus_url(&url).map_err(|m| UsageError(format!("--url: {m}")))?;
        config.prometheus.url = url;
    }
    let plan =
        cronjob::RunPlan { window, collect: config.run.collect && !args.no_collect, reports_dir: cronjob::reports_dir(&config, args.reports_dir.as_deref()) };
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
