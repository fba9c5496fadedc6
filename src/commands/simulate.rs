//! `simulate` and `demo`: a simulated cluster month into a lake (and OpenMetrics), and the
//! demo's every report on it.

#[allow(unused_imports)]
use super::context::*;

pub(super) fn last_month_start() -> NaiveDate {
    let now = Utc::now().date_naive();
    let this = NaiveDate::from_ymd_opt(now.year(), now.month(), 1).expect("valid");
    let prev = this.pred_opt().expect("valid");
    NaiveDate::from_ymd_opt(prev.year(), prev.month(), 1).expect("valid")
}

pub(super) fn dir_bytes(dir: &Path) -> u64 {
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
pub(super) fn simulate(ctx: &Context_, args: &SimulateArgs) -> Result<Window> {
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
    if args.trace.is_some() && (args.autoscale || args.replace_gpu || args.hami_node || args.dra_nodes) {
        anyhow::bail!("--autoscale, --replace-gpu, --hami-node and --dra-nodes shape the simulated pool, not a trace's");
    }
    let t0 = Instant::now();
    let mut sim = match &args.trace {
        Some(path) => {
            params.validate()?;
            trace::simulate_trace(path, params.clone())?
        }
        None => Simulation::run_shaped(
            params.clone(),
            PoolShape { autoscale: args.autoscale, replace_gpu: args.replace_gpu, hami: args.hami_node, dra: args.dra_nodes },
        )?,
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
    let mut outages = if args.openmetrics.is_some() { openmetrics::plan_outages(&sim, args.exporter_outages, args.outage_minutes) } else { Vec::new() };
    if args.openmetrics.is_some() {
        outages.extend(openmetrics::restart_outages(&sim, 1, args.exporter_restart_hours));
    }
    let mut ledger_json = serde_json::to_value(&ledger).context("serialising the ledger")?;
    // What `report completeness` should expect of DCGM: the unit-steps the pool was there.
    ledger_json["pool_unit_steps"] =
        serde_json::Value::from(crate::simulate::ledger::pool_unit_steps(&sim.cluster, params.window_ms(), params.step_s as i64 * 1000));
    if !outages.is_empty() {
        ledger_json["exporter_outages"] = serde_json::Value::Array(outages.iter().map(|o| sim.outage_ledger(o)).collect());
    }
    let text = serde_json::to_string_pretty(&ledger_json).context("serialising the ledger")? + "\n";
    report::write_atomic(&ledger_path, text.as_bytes())?;
    tracing::info!("ground-truth ledger: {}", ledger_path.display());

    if let Some(path) = &args.openmetrics {
        let t2 = Instant::now();
        if args.scrape_interval.is_some_and(|s| !(1.0..=3600.0).contains(&s))
            || !(0.0..=100.0).contains(&args.missed_scrapes)
            || args.scrape_jitter.is_nan()
            || args.scrape_jitter < 0.0
        {
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
            rollout: args.exporter_rollout.then(|| params.window_ms().0 + 9 * 3_600_000),
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

pub(super) async fn demo(ctx: &Context_, args: DemoArgs) -> Result<()> {
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
        autoscale: false,
        replace_gpu: false,
        hami_node: false,
        dra_nodes: false,
        exporter_rollout: false,
        exporter_restart_hours: 0,
        cluster: None,
    };
    simulate(ctx, &sim_args)?;
    // Teams and cost centres come from the simulated namespaces' labels in the lake (the
    // `teams` view); the config's own [teams], if any, still win. Saved as
    // DIR/gpuledger.toml so later `report` and `query` runs see the same lake and teams.
    let config = ctx.config.clone();
    let mut toml_text =
        String::from("# Written by `gpuledger demo`: gpuledger --config <this file> report chargeback --month <month>\n[lake]\npath = \"lake\"\n");
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
    let shared = report::Shared::default();
    let plan = crate::cronjob::plan_sections(&session, &ctx.queries, &config, &window, &shared).await?;
    let month = report::write_month(&session, &ctx.queries, &config, &window, &dir, plan, &shared).await?;
    if let Some(reason) = &month.incomplete {
        tracing::warn!("the demo month's data is incomplete: {reason}");
    }
    let chargeback_table = match month.sections.iter().find(|r| r.name == "chargeback") {
        Some(r) => String::from_utf8(r.for_terminal().render(Format::Table)?).expect("utf-8"),
        None => String::new(),
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(chargeback_table.as_bytes())?;
    stdout.flush()?;
    tracing::info!("reports in {}; demo took {:.1}s", dir.display(), t0.elapsed().as_secs_f64());
    Ok(())
}
