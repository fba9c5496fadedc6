//! The lake's own commands: `collect` from Prometheus, `rollup`, `check`.

#[allow(unused_imports)]
use super::context::*;

pub(super) async fn collect_cmd(ctx: &Context_, args: CollectArgs) -> Result<()> {
    if !args.accept.is_empty() {
        let accepted = crate::collect::accept(&ctx.lake, &args.accept)?;
        for f in &accepted {
            tracing::warn!("accepted as published: {f}");
        }
        let days: Vec<String> = args.accept.iter().map(|d| d.to_string()).collect();
        println!("recorded {} as published ({} files differed from the record: listed above)", days.join(", "), accepted.len());
        return Ok(());
    }
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
    let s = crate::collect::collect(&ctx.lake, &cfg, &ctx.config.sharing, from, to, ctx.progress, args.replace).await?;
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

pub(super) fn rollup_cmd(ctx: &Context_, args: &RollupArgs) -> Result<()> {
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
    let in_range = rollup::source_days(&ctx.lake, first, last).with_context(|| format!("listing {}", ctx.lake.root().display()))?;
    let progress = Progress::new(ctx.progress, "rollup days", in_range as u64);
    let t = Instant::now();
    let done = rollup::refresh(&ctx.lake, first, last, args.force, |d| progress.inc(&d.to_string()))?;
    progress.finish();
    println!(
        "rollups {first} to {last}: gpu_samples {} written, {} already current; pending_samples {} written, {} already current ({:.1}s)",
        done.written.len(),
        done.current,
        done.pending_written.len(),
        done.pending_current,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

pub(super) async fn check_cmd(ctx: &Context_) -> Result<()> {
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
