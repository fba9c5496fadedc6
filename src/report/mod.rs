//! Reports: each one runs its SQL from `queries/` and shapes the result into a `Report`,
//! which `render` writes as a table, CSV, JSON, Markdown or Parquet.

pub mod chargeback;
pub mod chargeback_models;
pub mod columns;
pub mod completeness;
mod error;
pub mod events;
pub mod focus;
pub mod format;
pub mod gpu_buckets;
pub mod grouping;
pub mod heatmap;
pub mod html;
pub mod idle;
pub mod inventory;
pub mod node_use;
pub mod pdf;
pub mod pool_days;
pub mod queue;
pub mod queue_quota;
pub mod quota;
pub mod render;
pub mod rolled;
pub mod summary;
pub mod terminal;

use std::path::Path;

pub use crate::domain::charge_by::ChargeBy;
pub use error::{ReportError, Result};
pub use render::{Cell, Format, Report};

/// What a report is built from: the run's session, SQL and config, the window, the `--by` key,
/// and what the run's reports share.
pub struct Inputs<'a> {
    pub session: &'a datafusion::prelude::SessionContext,
    pub queries: &'a crate::queries::Queries,
    pub config: &'a crate::config::Config,
    pub window: &'a crate::domain::window::Window,
    pub by: &'a ChargeBy,
    pub shared: &'a Shared,
}

/// The `--by` keys whose groups a report's rows follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// By namespace only (or not grouped at all).
    Namespace,
    /// By namespace or a key of each pod (workload, queue, cluster-queue, cohort, label, annotation).
    PerPod,
    /// Every key: the namespace's team and cost centre too.
    Every,
}

/// A report's sections, being built.
pub type Built<'a> = futures::future::LocalBoxFuture<'a, Result<Vec<Report>>>;

/// A report kind's entry in the registry: its files' and sections' name (`chargeback_models`; the
/// command line's is the same with dashes), the keys it takes, and how it is built.
pub struct Spec {
    pub name: &'static str,
    pub takes: Takes,
    pub build: for<'a> fn(&'a Inputs<'a>) -> Built<'a>,
}

/// Declares `ReportKind` and its `spec()` from one list, so a report is one entry: the CLI
/// (`report <kind>`), `run`, the file names and the tests all iterate `ReportKind::all()`.
macro_rules! registry {
    ($($(#[$doc:meta])* $kind:ident: $name:literal, $takes:ident, $build:expr;)+) => {
        /// The reports that exist, in the order `run` and `demo` write them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
        pub enum ReportKind {
            $($(#[$doc])* $kind,)+
        }

        impl ReportKind {
            /// Its entry in the registry.
            pub fn spec(self) -> Spec {
                match self {
                    $(ReportKind::$kind => Spec { name: $name, takes: Takes::$takes, build: $build },)+
                }
            }
        }
    };
}

// The registry. A new report is its SQL (`queries/`), its file in `report/` (a `build` from the
// session, SQL and window to a `Report`) and one entry here (docs/architecture.md, "How to add").
registry! {
    Chargeback: "chargeback", Every, |i| of_chargeback(i, |cb, a, i| cb.to_report_by(i.config, i.by, a));
    /// The chargeback per namespace and GPU model (and MIG profile).
    ChargebackModels: "chargeback_models", PerPod, |i| of_chargeback(i, |cb, a, i| chargeback_models::build(cb, i.config, i.window, i.by, a));
    Idle: "idle", PerPod, |i| Box::pin(idle::build(i.session, i.queries, i.config, i.window, i.by));
    Queue: "queue", PerPod, |i| Box::pin(queue::build(i.session, i.queries, i.window, i.by));
    Quota: "quota", Namespace, quota_sections;
    Heatmap: "heatmap", Namespace, |i| one(heatmap::build(i.session, i.queries, i.window));
    /// Per node: GPU-hours, the share a pod held, utilisation and energy.
    NodeUse: "node_use", Namespace, |i| one(node_use::build(i.session, i.queries, i.window));
    Events: "events", PerPod, |i| one(events::build(i.session, i.queries, i.window, i.by));
    Inventory: "inventory", Namespace, |i| one(inventory::build(i.session, i.queries, i.window));
    Completeness: "completeness", Namespace, |i| one(async { Ok(i.shared.completeness(i.session, i.queries, i.config, i.window).await?.to_report()) });
    /// The chargeback as a FinOps FOCUS 1.2 export (CSV or Parquet).
    Focus: "focus", Every, |i| of_chargeback(i, |cb, a, i| focus::build(cb, i.config, i.window, i.by, a));
    /// The month at a glance against the month before (cost, GPU-hours, utilisation, idle and
    /// unallocated cost, worst p95 wait) and each team's cost beside its previous month.
    /// Last: it reads the chargeback, idle and queue reports made before it.
    Summary: "summary", Namespace, summary_sections;
}

impl ReportKind {
    /// Every report, in the order the registry lists them (clap's list of its values: one list,
    /// so a new entry is a report of `run`, the CLI and the tests without another).
    pub fn all() -> &'static [ReportKind] {
        <ReportKind as clap::ValueEnum>::value_variants()
    }

    /// Its name on the command line (`chargeback-models`); `name()` is its files' and sections'.
    pub fn cli_name(self) -> String {
        clap::ValueEnum::to_possible_value(&self).expect("no report kind is hidden").get_name().to_string()
    }

    /// Whether its rows follow `--by`: the chargeback and the FOCUS export by every key;
    /// chargeback-models, idle, queue and events by namespace or a key of each pod (workload,
    /// queue, label ...);
    /// the others are by namespace (or not grouped) only.
    pub fn takes(self, by: &ChargeBy) -> bool {
        match self.spec().takes {
            Takes::Every => true,
            Takes::PerPod => *by == ChargeBy::Namespace || by.is_per_pod(),
            Takes::Namespace => *by == ChargeBy::Namespace,
        }
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// A report of one section.
fn one<'a>(report: impl std::future::Future<Output = Result<Report>> + 'a) -> Built<'a> {
    Box::pin(async move { Ok(vec![report.await?]) })
}

/// A report drawn from the window's chargeback (computed once per run and shared), its namespaces'
/// rows split between their pods' keys where `--by` is a key of each pod.
fn of_chargeback<'a>(i: &'a Inputs<'a>, view: fn(&chargeback::Chargeback, Option<&chargeback::Attribution>, &Inputs) -> Report) -> Built<'a> {
    Box::pin(async move {
        let cb = i.shared.chargeback(i.session, i.queries, i.window).await?;
        let attribution = match i.by.is_per_pod() {
            true => Some(chargeback::attribute(i.session, i.queries, i.window, &cb, i.by).await?),
            false => None,
        };
        Ok(vec![view(&cb, attribution.as_ref(), i)])
    })
}

/// The namespaces' quotas, then the scheduler queues' (a section where the lake has queues).
fn quota_sections<'a>(i: &'a Inputs<'a>) -> Built<'a> {
    Box::pin(async move {
        let mut sections = vec![quota::build(i.session, i.queries, i.config, i.window).await?];
        sections.extend(queue_quota::build(i.session, i.queries, i.window).await?);
        Ok(sections)
    })
}

/// The summary, handed the figures of the reports it summarises, this window's and the one before.
fn summary_sections<'a>(i: &'a Inputs<'a>) -> Built<'a> {
    Box::pin(async move {
        let now = summary_figures(i.session, i.queries, i.config, i.window, i.shared, None).await?;
        let before = previous_summary_figures(i.session, i.queries, i.config, i.window).await?;
        Ok(summary::build(&now, before.as_ref(), i.config))
    })
}

/// Results several reports share within one run (the chargeback feeds the by-model report
/// and the FOCUS export), so a month's reports compute each of them once.
#[derive(Default)]
pub struct Shared {
    chargeback: std::sync::Mutex<Option<(crate::domain::window::Window, std::sync::Arc<chargeback::Chargeback>)>>,
    completeness: std::sync::Mutex<Option<(crate::domain::window::Window, std::sync::Arc<completeness::Completeness>)>>,
    /// The idle and queue reports (by their `--by` key), which the summary reads again.
    sections: std::sync::Mutex<Vec<(crate::domain::window::Window, ReportKind, ChargeBy, Vec<Report>)>>,
}

impl Shared {
    /// The window's completeness, measured once per run (it decides every report's verdict).
    pub async fn completeness(
        &self,
        session: &datafusion::prelude::SessionContext,
        queries: &crate::queries::Queries,
        config: &crate::config::Config,
        window: &crate::domain::window::Window,
    ) -> Result<std::sync::Arc<completeness::Completeness>> {
        if let Some((w, c)) = self.completeness.lock().expect("lock").as_ref() {
            if w == window {
                return Ok(c.clone());
            }
        }
        let m = &config.prometheus.metrics;
        let util_metrics = [m.gpu_util.as_str(), m.engine_active.as_str()];
        let now = chrono::Utc::now().timestamp_millis();
        let c = std::sync::Arc::new(completeness::compute(session, queries, window, config.prometheus.step_secs, &util_metrics, now).await?);
        *self.completeness.lock().expect("lock") = Some((*window, c.clone()));
        Ok(c)
    }

    /// The window's chargeback, computed (and its conservation checked) once per run.
    pub async fn chargeback(
        &self,
        session: &datafusion::prelude::SessionContext,
        queries: &crate::queries::Queries,
        window: &crate::domain::window::Window,
    ) -> Result<std::sync::Arc<chargeback::Chargeback>> {
        if let Some((w, cb)) = self.chargeback.lock().expect("lock").as_ref() {
            if w == window {
                return Ok(cb.clone());
            }
        }
        let cb = std::sync::Arc::new(chargeback::compute(session, queries, window).await?);
        if !cb.gpu_us_conserved() || !cb.energy_conserved() {
            return Err(ReportError::NotConserved {
                window: window.label(),
                rows_gpu_us: cb.rows_gpu_us(),
                cluster_gpu_us: cb.cluster_gpu_us,
                rows_energy_mj: cb.rows_energy_mj(),
                cluster_energy_mj: cb.cluster_energy_mj,
            });
        }
        if let Some(c) = cb.counters.as_ref().filter(|c| c.days_recorded > 0 && !c.conserved()) {
            return Err(ReportError::EnergyNotCounted {
                window: window.label(),
                days: format!("{} to {}", c.first_day, c.last_day),
                rows_mj: c.counter_energy_mj,
                counter_mj: c.counter_delta_mj,
                gpus: c.worst.iter().map(|(g, r, k)| format!("{g}: rows {r} mJ vs counter {k} mJ")).collect::<Vec<_>>().join("; "),
            });
        }
        let impossible = cb.impossible_rows();
        if !impossible.is_empty() {
            return Err(ReportError::ImpossibleBill { window: window.label(), rows: impossible });
        }
        *self.chargeback.lock().expect("lock") = Some((*window, cb.clone()));
        Ok(cb)
    }
}

/// Runs report `kind` over `window` in `session`: one or more sections (tables), the first
/// named after the kind.
pub async fn build(
    kind: ReportKind,
    session: &datafusion::prelude::SessionContext,
    queries: &crate::queries::Queries,
    config: &crate::config::Config,
    window: &crate::domain::window::Window,
) -> Result<Vec<Report>> {
    build_shared(kind, &ChargeBy::Namespace, session, queries, config, window, &Shared::default()).await
}

/// As `build`, reusing what `shared` already computed for the same window.
pub async fn build_shared(
    kind: ReportKind,
    by: &ChargeBy,
    session: &datafusion::prelude::SessionContext,
    queries: &crate::queries::Queries,
    config: &crate::config::Config,
    window: &crate::domain::window::Window,
    shared: &Shared,
) -> Result<Vec<Report>> {
    let kept = matches!(kind, ReportKind::Idle | ReportKind::Queue);
    if kept {
        if let Some((_, _, _, s)) = shared.sections.lock().expect("lock").iter().find(|(w, k, b, _)| w == window && *k == kind && b == by) {
            return Ok(s.clone());
        }
    }
    let built = Box::pin(build_one(kind, by, session, queries, config, window, shared)).await?;
    if kept {
        shared.sections.lock().expect("lock").push((*window, kind, by.clone(), built.clone()));
    }
    Ok(built)
}

async fn build_one(
    kind: ReportKind,
    by: &ChargeBy,
    session: &datafusion::prelude::SessionContext,
    queries: &crate::queries::Queries,
    config: &crate::config::Config,
    window: &crate::domain::window::Window,
    shared: &Shared,
) -> Result<Vec<Report>> {
    let inputs = Inputs { session, queries, config, window, by, shared };
    (kind.spec().build)(&inputs).await
}

/// The summary's figures of a window, read from the reports it summarises (built here, so the
/// summary is handed them): its chargeback, the chargeback by team, and the idle and queue
/// reports.
async fn summary_figures(
    session: &datafusion::prelude::SessionContext,
    queries: &crate::queries::Queries,
    config: &crate::config::Config,
    window: &crate::domain::window::Window,
    shared: &Shared,
    incomplete: Option<String>,
) -> Result<summary::Figures> {
    let cb = shared.chargeback(session, queries, window).await?;
    let mut sections = vec![cb.to_report(config, &ChargeBy::Namespace)];
    sections.extend(build_shared(ReportKind::Idle, &ChargeBy::Namespace, session, queries, config, window, shared).await?);
    sections.extend(build_shared(ReportKind::Queue, &ChargeBy::Namespace, session, queries, config, window, shared).await?);
    Ok(summary::Figures::from_reports(&window.label(), &sections, &cb.to_report(config, &ChargeBy::Team), incomplete))
}

/// The previous window's figures, or None where the lake holds no sample of it.
async fn previous_summary_figures(
    session: &datafusion::prelude::SessionContext,
    queries: &crate::queries::Queries,
    config: &crate::config::Config,
    window: &crate::domain::window::Window,
) -> Result<Option<summary::Figures>> {
    let previous = window.previous();
    let shared = Shared::default();
    let completeness = shared.completeness(session, queries, config, &previous).await?;
    let held: i64 = completeness::SOURCES.iter().map(|s| completeness.totals(s).1).sum();
    if held == 0 {
        return Ok(None);
    }
    let incomplete = completeness.verdict(config.run.min_completeness_pct);
    Ok(Some(summary_figures(session, queries, config, &previous, &shared, incomplete).await?))
}

/// Report `kind` over `window`, each section marked `DATA INCOMPLETE` where the window's data
/// falls short of `run.min_completeness_pct`; returns the sections and that reason.
pub async fn build_checked(
    kind: ReportKind,
    by: &ChargeBy,
    session: &datafusion::prelude::SessionContext,
    queries: &crate::queries::Queries,
    config: &crate::config::Config,
    window: &crate::domain::window::Window,
) -> Result<(Vec<Report>, Option<String>)> {
    let shared = Shared::default();
    let (mut sections, verdict) = if kind == ReportKind::Completeness {
        let sections = build_shared(kind, by, session, queries, config, window, &shared).await?;
        let verdict = shared.completeness(session, queries, config, window).await?.verdict(config.run.min_completeness_pct);
        (sections, verdict)
    } else {
        // The completeness (the verdict) is measured on a task of its own beside the report.
        let measured = {
            let (session, queries, config, window) = (session.clone(), queries.clone(), config.clone(), *window);
            crate::engine::Spawned::new(async move { Shared::default().completeness(&session, &queries, &config, &window).await })
        };
        let sections = build_shared(kind, by, session, queries, config, window, &shared).await?;
        let completeness = measured.join().await.map_err(|source| ReportError::PassStopped { report: "completeness", pass: "its measure", source })??;
        (sections, completeness.verdict(config.run.min_completeness_pct))
    };
    if let Some(reason) = &verdict {
        sections.iter_mut().for_each(|s| s.mark_incomplete(reason));
    }
    Ok((sections, verdict))
}

/// Several sections in one stream: tables and Markdown one after another, CSV separated by a
/// blank line, JSON as an array. Parquet holds one table: several need a folder.
pub fn render_sections(reports: &[Report], format: Format) -> Result<Vec<u8>> {
    if format == Format::Xlsx {
        return Report::workbook(&reports.iter().collect::<Vec<_>>());
    }
    if reports.len() == 1 {
        return reports[0].render(format);
    }
    let parts: Vec<Vec<u8>> = reports.iter().map(|r| r.render(format)).collect::<Result<_>>()?;
    Ok(match format {
        Format::Json => {
            let mut out = b"[\n".to_vec();
            for (i, p) in parts.iter().enumerate() {
                out.extend_from_slice(p.trim_ascii_end());
                out.extend_from_slice(if i + 1 < parts.len() { b",\n" } else { b"\n" });
            }
            out.extend_from_slice(b"]\n");
            out
        }
        Format::Parquet => return Err(ReportError::ParquetSections { report: reports[0].name.clone(), sections: reports.len() }),
        _ => parts.join(&b"\n"[..]),
    })
}

/// The reports `write_month` builds first: the two whose queries hold the most memory (the
/// queue's and the idle pass's), while few finished sections are held beside them; the queue
/// before the idle report, whose listed pods would otherwise be held under the queue's queries
/// (the measurements: docs/benchmarks.md, "10,000 GPUs, measured").
const BUILT_FIRST: [ReportKind; 2] = [ReportKind::Queue, ReportKind::Idle];

/// The order `write_month` builds the reports in: `BUILT_FIRST`, then the rest as
/// `ReportKind::all()` lists them (the summary last).
pub fn build_order() -> impl Iterator<Item = ReportKind> {
    BUILT_FIRST.into_iter().chain(ReportKind::all().iter().copied().filter(|k| !BUILT_FIRST.contains(k)))
}

/// What `write_month` wrote.
pub struct Month {
    pub sections: Vec<Report>,
    pub files: Vec<String>,
    pub completeness: std::sync::Arc<completeness::Completeness>,
    /// Why the month's reports are marked `DATA INCOMPLETE`, if they are.
    pub incomplete: Option<String>,
}

/// Every report of `window` in every format into `dir`, plus the month's page `index.html`,
/// each marked `DATA INCOMPLETE` where the data falls short of `run.min_completeness_pct`.
/// `extra`: sections made by a layer above (the plan's calibration), written and drawn too.
pub async fn write_month(
    session: &datafusion::prelude::SessionContext,
    queries: &crate::queries::Queries,
    config: &crate::config::Config,
    window: &crate::domain::window::Window,
    dir: &Path,
    extra: Vec<Report>,
    shared: &Shared,
) -> std::result::Result<Month, anyhow::Error> {
    use anyhow::Context;
    let mut files = Vec::new();
    // Measured first: its verdict goes into every file.
    let completeness = shared.completeness(session, queries, config, window).await.context("report completeness")?;
    let incomplete = completeness.verdict(config.run.min_completeness_pct);
    // Sections and files by report, kept in `ReportKind::all()`'s order for the workbook, the page
    // and the run's summary line, whatever order they were built in.
    let mut by_kind: Vec<(usize, Vec<Report>, Vec<String>)> = Vec::new();
    for kind in build_order() {
        let t = std::time::Instant::now();
        let mut built =
            build_shared(kind, &ChargeBy::Namespace, session, queries, config, window, shared).await.with_context(|| format!("report {}", kind.name()))?;
        let mut written = Vec::new();
        for r in &mut built {
            if let Some(reason) = &incomplete {
                r.mark_incomplete(reason);
            }
            written.extend(write_all_formats(r, dir)?);
        }
        tracing::info!("report {} written in {:.2}s", kind.name(), t.elapsed().as_secs_f64());
        by_kind.push((ReportKind::all().iter().position(|k| *k == kind).unwrap_or(usize::MAX), built, written));
        // What the report's queries freed goes back to the system before the next one, so the
        // close's peak is its largest report's, not the sum of the heaps they leave behind.
        crate::limits::release_freed_memory();
    }
    by_kind.sort_by_key(|(at, _, _)| *at);
    let mut sections: Vec<Report> = Vec::new();
    for (_, built, written) in by_kind {
        sections.extend(built);
        files.extend(written);
    }
    for mut r in extra {
        if let Some(reason) = &incomplete {
            r.mark_incomplete(reason);
        }
        files.extend(write_all_formats(&r, dir)?);
        sections.push(r);
    }
    // The month as one workbook, a worksheet per section, for finance: the summary first.
    let book = format!("gpuledger-{}.xlsx", window.label());
    let is_summary = |r: &&Report| r.name == summary::R || r.name == summary::TEAMS;
    let in_book: Vec<&Report> = sections.iter().filter(is_summary).chain(sections.iter().filter(|r| !is_summary(r))).collect();
    write_atomic(&dir.join(&book), &Report::workbook(&in_book)?)?;
    files.push(book);
    let pool = pool_days::pool_days(session, queries, window).await?;
    let label = window.label();
    let page =
        html::MonthPage { label: &label, currency: &config.pricing.currency, sections: &sections, pool: &pool, incomplete: incomplete.as_deref() }.render();
    let page_path = dir.join("index.html");
    write_atomic(&page_path, page.as_bytes())?;
    files.push("index.html".into());
    // The page on paper, where a Chromium can print it. A failed print is logged, not fatal:
    // the page and every report are written. No PDF of an earlier run is left beside them.
    let _ = std::fs::remove_file(dir.join("report.pdf"));
    if config.run.pdf {
        match pdf::find_browser() {
            None => tracing::info!("report.pdf not written: no Chromium on the PATH (install chromium, or set run.pdf = false to stop looking)"),
            Some(browser) => {
                let t = std::time::Instant::now();
                let fixed_date = window.end.format("D:%Y%m%d%H%M%S").to_string();
                match pdf::print(&browser, &page_path, &dir.join("report.pdf"), &fixed_date) {
                    Ok(()) => {
                        tracing::info!("report.pdf printed by {} in {:.2}s", browser.display(), t.elapsed().as_secs_f64());
                        files.push("report.pdf".into());
                    }
                    Err(e) => tracing::warn!("report.pdf not written: {}", crate::error_chain::Chain(&e)),
                }
            }
        }
    }
    Ok(Month { sections, files, completeness, incomplete })
}

/// Writes `report` into `dir` in every format (`<name>.txt`, `.csv`, `.json`, `.md`,
/// `.parquet`); returns the file names.
pub fn write_all_formats(report: &Report, dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for format in std::iter::once(Format::Table).chain(Format::FILES) {
        let name = format!("{}.{}", report.name, format.extension());
        write_atomic(&dir.join(&name), &report.render(format)?)?;
        names.push(name);
    }
    Ok(names)
}

/// Writes `bytes` to `path` atomically (`atomic::write_atomic`).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::atomic::write_atomic(path, bytes).map_err(|source| ReportError::Write { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_order_builds_every_report_once_and_the_summary_last() {
        let mut built: Vec<&str> = build_order().map(|k| k.name()).collect();
        assert_eq!(Some(&"summary"), built.last());
        built.sort_unstable();
        let mut all: Vec<&str> = ReportKind::all().iter().map(|k| k.name()).collect();
        all.sort_unstable();
        assert_eq!(all, built);
    }

    #[test]
    fn every_kind_is_listed_once_and_named_alike_on_the_command_line_and_in_files() {
        let all = ReportKind::all();
        assert_eq!(all.last(), Some(&ReportKind::Summary), "the summary reads the reports before it");
        for k in all {
            assert_eq!(k.cli_name().replace('-', "_"), k.name(), "{k:?}");
            assert_eq!(all.iter().filter(|o| o.name() == k.name()).count(), 1, "{k:?}");
        }
    }
}
