//! `gpuledger run`, the cron job: take the lake's lock, collect from the checkpoint to now
//! (unless told not to), write every report for the month into `<reports_dir>/<month>/`,
//! print a one-screen summary, and exit 3 when the month's data is incomplete.
//!
//! Idempotent: the reports depend only on the lake, the config and the month, and are
//! written atomically, so running a month twice gives byte-identical files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use chrono::Utc;

use crate::collect::state::LakeLock;
use crate::collect::CollectSummary;
use crate::config::Config;
use crate::domain::money::format_units;
use crate::domain::window::Window;
use crate::engine::SessionBuilder;
use crate::exit::IncompleteData;
use crate::lake::Lake;
use crate::progress::ProgressMode;
use crate::queries::Queries;
use crate::report::completeness::SOURCES;
use crate::report::{self, Cell};

/// What one run is asked to do.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub window: Window,
    pub collect: bool,
    pub reports_dir: PathBuf,
}

/// What one run did: the summary printed at the end.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub window: Window,
    pub collected: Option<CollectSummary>,
    pub dir: PathBuf,
    pub files: Vec<String>,
    pub chargeback_line: String,
    /// Percent present per source, in hundredths.
    pub completeness: Vec<(&'static str, i128, i64, i64)>,
    /// The sources under the threshold, as the reports' `DATA INCOMPLETE` mark names them.
    pub incomplete: Vec<String>,
    pub threshold_pct: f64,
    pub secs: f64,
}

impl RunOutcome {
    /// One screen: what was collected, how complete the month is, the chargeback total and
    /// where the reports are.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "gpuledger run {} ({} to {})", self.window.label(), self.window.start.to_rfc3339(), self.window.end.to_rfc3339());
        match &self.collected {
            None => {
                let _ = writeln!(s, "  collect       skipped");
            }
            Some(c) if c.queries == 0 => {
                let _ = writeln!(s, "  collect       nothing new (lake is up to date)");
            }
            Some(c) => {
                let _ = writeln!(
                    s,
                    "  collect       {} to {}: {} queries, {} samples, {} GPU rows, {} pods, {} gaps",
                    crate::collect::prometheus::fmt_ms(c.from),
                    crate::collect::prometheus::fmt_ms(c.to),
                    c.queries,
                    c.samples,
                    c.gpu_rows,
                    c.pods,
                    c.gaps
                );
            }
        }
        let parts: Vec<String> =
            self.completeness.iter().map(|(src, pct, present, expected)| format!("{src} {}% ({present} of {expected})", format_units(*pct, 2))).collect();
        let _ = writeln!(s, "  completeness  {}; threshold {}%", parts.join(", "), self.threshold_pct);
        let _ = writeln!(s, "  chargeback    {}", self.chargeback_line);
        // The reports are the stems written as CSV (each also as txt json md parquet); every other
        // file (the month's workbook, the page, its PDF) is named whole.
        let mut stems: Vec<&str> = self.files.iter().filter_map(|f| f.strip_suffix(".csv")).collect();
        stems.dedup();
        let per_report = ["txt", "csv", "json", "md", "parquet"];
        let whole: Vec<&str> = self
            .files
            .iter()
            .filter(|f| !f.rsplit_once('.').is_some_and(|(stem, ext)| per_report.contains(&ext) && stems.contains(&stem)))
            .map(String::as_str)
            .collect();
        let _ = writeln!(
            s,
            "  reports       {} ({} files: {}; each as txt csv json md parquet; and {})",
            self.dir.display(),
            self.files.len(),
            stems.join(" "),
            whole.join(" ")
        );
        let _ = writeln!(
            s,
            "  status        {}",
            if self.incomplete.is_empty() { "OK".to_string() } else { format!("DATA INCOMPLETE: {}", self.incomplete.join(", ")) }
        );
        let _ = writeln!(s, "  took          {:.1}s", self.secs);
        s
    }
}

/// The chargeback's total row in a line; `incomplete`: the month's data is under
/// `run.min_completeness_pct`, so its conservation holds only of the data present, and says so.
fn chargeback_line(report: &report::Report, config: &Config, incomplete: bool) -> String {
    let Some(total) = &report.total else { return "no rows".into() };
    let at = |name: &str| report.columns.iter().position(|c| c == name).and_then(|i| total.get(i)).map(Cell::text).unwrap_or_default();
    let conserved = report
        .meta
        .get("conservation")
        .map(|c| {
            let yes = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_bool()) == Some(true);
            // The counters' check is absent for a window without a whole day.
            yes(c.get("gpu_hours_conserved")) && yes(c.get("energy_conserved")) && c.get("energy_counters").is_none_or(|k| yes(k.get("conserved")))
        })
        .unwrap_or(false);
    format!(
        "{} namespaces, {} GPU-h, {} kWh, total_cost {} {} ({}), conservation {}",
        report.rows.len(),
        at("gpu_hours"),
        at("energy_kwh"),
        at("total_cost"),
        config.pricing.currency,
        config.pricing.basis.name(),
        match (conserved, incomplete) {
            (true, false) => "OK",
            (true, true) => "OK of the data present (DATA INCOMPLETE)",
            (false, _) => "MISMATCH",
        }
    )
}

/// Runs the job. The summary is returned, also when the data is incomplete (the error then
/// carries `IncompleteData`, which exits 3 after the summary is printed by the caller).
pub async fn run(
    config: &Config,
    lake: &Lake,
    queries: &Queries,
    session: &SessionBuilder,
    progress: ProgressMode,
    plan: &RunPlan,
) -> Result<(RunOutcome, Option<IncompleteData>)> {
    let t0 = Instant::now();
    let _lock = LakeLock::acquire(lake, "run")?;
    let collected = if plan.collect {
        let cfg = &config.prometheus;
        let (from, to) = crate::collect::resolve_window(lake, cfg, None, None, Utc::now())?;
        tracing::info!(
            "collecting {} to {} from {}",
            crate::collect::prometheus::fmt_ms(from),
            crate::collect::prometheus::fmt_ms(to),
            crate::redact::url_userinfo(&cfg.url)
        );
        Some(crate::collect::collect(lake, cfg, &config.sharing, from, to, progress, false).await.context("collect")?)
    } else {
        None
    };

    let ctx = session.build(lake, config).await?;
    let dir = plan.reports_dir.join(plan.window.label());
    // One chargeback for the plan and the reports.
    let shared = report::Shared::default();
    let extra = plan_sections(&ctx, queries, config, &plan.window, &shared).await?;
    let month = report::write_month(&ctx, queries, config, &plan.window, &dir, extra, &shared).await?;
    // The completeness the reports were marked by (not measured a second time).
    let c = &month.completeness;
    let short = c.short_sources(config.run.min_completeness_pct);
    let chargeback = month.sections.iter().find(|r| r.name == "chargeback").map(|r| chargeback_line(r, config, !short.is_empty())).unwrap_or_default();
    let outcome = RunOutcome {
        window: plan.window,
        collected,
        dir,
        files: month.files,
        chargeback_line: chargeback,
        completeness: SOURCES
            .iter()
            .map(|s| {
                let (e, p) = c.totals(s);
                (*s, c.pct_centi(s), p, e)
            })
            .collect(),
        incomplete: short,
        threshold_pct: config.run.min_completeness_pct,
        secs: t0.elapsed().as_secs_f64(),
    };
    Ok((outcome, month.incomplete.map(IncompleteData)))
}

/// The month's plan: the baseline replay and its calibration, and the scenarios of
/// `plan.scenarios` in the config. A lake with no pool for the month has nothing to replay:
/// said in the log, and the month's other reports are still written.
pub async fn plan_sections(
    ctx: &datafusion::prelude::SessionContext,
    queries: &Queries,
    config: &Config,
    window: &crate::domain::window::Window,
    shared: &report::Shared,
) -> anyhow::Result<Vec<report::Report>> {
    let request = crate::plan::Request { scenario_files: config.plan.scenarios.clone(), ..Default::default() };
    match crate::plan::build(ctx, queries, config, window, &request, shared).await {
        Ok(sections) => Ok(sections),
        Err(crate::plan::PlanError::NoPool { window }) => {
            tracing::warn!("plan {window}: no pool recorded for the month, no plan written");
            Ok(Vec::new())
        }
        Err(e) => Err(anyhow::Error::new(e).context("plan")),
    }
}

/// `reports_dir` relative to the working directory unless absolute.
pub fn reports_dir(config: &Config, flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf).unwrap_or_else(|| config.run.reports_dir.clone())
}
