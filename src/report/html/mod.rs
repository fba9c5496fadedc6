//! The month's page: one self-contained HTML file (inline CSS and SVG, no script, no network)
//! for the people who pay for the pool. It opens with the month at a glance against the month
//! before and each team's cost beside its previous month, then the chargeback, the pool per
//! day, the waste, the queue, the allocation heatmap, the quotas and the plan.
//!
//! Numbers are shown as finance reads them (thousands separators, money to the cent, hours to
//! one decimal; the files keep every digit), tables show only the columns that say something
//! (the CSV and the workbook have them all), and the page fits: no sideways scrolling at
//! 1280 px, one column of cards on a phone (up to 700 px), and A4 landscape in print
//! (`pdf::print` writes `report.pdf` from it). Output depends only on the reports, so it is
//! byte-identical on a re-run.
//!
//! Each chart has its own signature colour (`CHART_COLOURS`) so a test can tell from a
//! screenshot that every chart was drawn.

use std::fmt::Write as _;

mod charts;
mod tables;
mod text;

pub use charts::CHART_COLOURS;
use charts::{bars, colour, gauges, heatmap, hour_label, series};
use tables::{table, Shape, ALL_ROWS};
use text::{col, esc, num};

use crate::report::format::cell_text;
use crate::report::pool_days::PoolDay;
use crate::report::render::{Cell, Report};

const STYLE: &str = "\
*{box-sizing:border-box}\
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;padding:20px 24px;max-width:1240px;color:#1d1d1f;font-size:14px;line-height:1.35}\
h1{font-size:24px;margin:0 0 4px}.sub{color:#555;margin:0 0 16px}\
h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px;break-after:avoid}\
.headline{display:grid;grid-template-columns:repeat(auto-fit,minmax(180px,1fr));gap:10px;margin:8px 0 12px}\
.card{border:1px solid #ddd;border-radius:8px;padding:10px 12px;background:#fbfbfb;break-inside:avoid}\
.card .k{font-size:12px;color:#555;text-transform:uppercase;letter-spacing:.03em}\
.card .v{font-size:20px;font-weight:650;font-variant-numeric:tabular-nums;margin:2px 0;white-space:nowrap}.card .u{font-size:13px;font-weight:500;color:#444;margin-left:3px}\
.card .d{font-size:12px;color:#555}.card .x{font-size:12px;color:#555}\
.d.worse{color:#b3261e}.d.better{color:#1b7a3a}\
.chart{margin:8px 0;max-width:100%}.chart svg{display:block;max-width:100%;height:auto}\
.chart svg.narrow{display:none}.ax{font-size:11px;fill:#555}\
.bars{display:block}.bar{display:grid;grid-template-columns:minmax(110px,190px) minmax(80px,1fr) minmax(150px,max-content);gap:8px;align-items:center;margin:4px 0}\
.bl{text-align:right;overflow-wrap:anywhere;font-size:13px}.bv{font-size:12px;color:#333;font-variant-numeric:tabular-nums}\
.bt{display:block;height:16px;background:#f3f3f3}.bf{display:block;height:100%}\
.gt{position:relative;display:block;height:20px}.gq{position:absolute;left:0;top:0;height:20px;background:#eee;border:1px solid #555}\
.gp{position:absolute;left:0;top:1px;height:18px}.ga{position:absolute;left:0;top:7px;height:6px;background:#c5b0d5}\
.gk{position:absolute;top:-3px;width:2px;height:26px;margin-left:-1px;background:#000}\
.legend{list-style:none;margin:4px 0;padding:0;display:flex;flex-wrap:wrap;gap:4px 16px;font-size:12px}\
.sw{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:-1px;border:1px solid #999}\
.scale{display:flex;align-items:center;gap:8px;font-size:12px;margin:4px 0;flex-wrap:wrap}.grad{display:inline-block;width:160px;height:12px;border:1px solid #999}\
.tw{max-width:100%}\
table.t{border-collapse:collapse;font-size:12px;margin:8px 0;width:100%}caption{text-align:left;font-weight:600;padding:4px 0}\
.t th,.t td{border:1px solid #ddd;padding:3px 5px;vertical-align:top}.t th{background:#f4f4f4;text-align:left;font-weight:600}\
.t td{overflow-wrap:break-word}table.t.side{width:auto;min-width:50%}.t td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
.t td.nw{white-space:nowrap}.t td.id{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11px;white-space:nowrap}.t td.long{min-width:220px}\
.t tr.total td{font-weight:650;background:#fafafa}\
.note{font-size:11px;color:#555;margin:2px 0;overflow-wrap:anywhere}\
.incomplete{font-weight:600;color:#8a1c00;background:#fff1ec;border:1px solid #e8a48f;padding:8px 12px}\
footer{margin-top:28px;font-size:11px;color:#666}\
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}\
@media (max-width:700px){\
body{padding:12px}h1{font-size:20px}\
.chart svg.wide{display:none}.chart svg.narrow{display:block}\
.headline{grid-template-columns:1fr 1fr}.card .v{font-size:17px;white-space:normal}\
.bar{grid-template-columns:1fr;gap:2px;margin:8px 0}.bl{text-align:left;font-weight:600}\
table.t,.t caption,.t tbody,.t tr,.t td,.t th{display:block;width:auto}.t thead{display:none}\
.t tr{border:1px solid #ddd;border-radius:6px;margin:0 0 8px;padding:4px 8px}\
.t td,.t th{border:none;padding:2px 0}.t th[scope=row]{background:none;border-bottom:1px solid #eee}\
.t td{display:flex;justify-content:space-between;gap:12px;text-align:right;overflow-wrap:anywhere}table.t.side{width:auto}.t td.n,.t td.nw,.t td.id{white-space:normal;overflow-wrap:anywhere}\
.t td::before{content:attr(data-label);font-weight:600;text-align:left;color:#555;flex:0 0 auto;max-width:55%}\
.t td.long{min-width:0}\
}\
@media print{\
@page{size:A4 landscape;margin:12mm}\
body{max-width:none;padding:0;font-size:11px}\
.headline{grid-template-columns:repeat(6,1fr);gap:6px}.card{padding:6px 8px}.card .v{font-size:16px}\
.chart svg.wide{display:block}.chart svg.narrow{display:none}\
h2{break-after:avoid;margin-top:18px}.chart,.card,.t tr{break-inside:avoid}\
table.t{font-size:10px}caption{break-after:avoid}\
}";

/// Everything the page draws.
pub struct MonthPage<'a> {
    pub label: &'a str,
    /// The currency of every cost (`pricing.currency`).
    pub currency: &'a str,
    pub sections: &'a [Report],
    pub pool: &'a [PoolDay],
    /// Why the month's data is incomplete, shown at the top of the page.
    pub incomplete: Option<&'a str>,
}

/// A headline figure: how a change reads (`worse` where it grew, `better`, or neither).
fn direction(metric: &str) -> Option<&'static str> {
    match metric {
        "total_cost" | "idle_cost" | "unallocated_cost" | "worst_p95_wait_min" => Some("worse"),
        "avg_util_pct" => Some("better"),
        _ => None,
    }
}

fn metric_name(metric: &str) -> &str {
    match metric {
        "total_cost" => "Total cost",
        "gpu_hours" => "GPU-hours",
        "avg_util_pct" => "Utilisation",
        "idle_cost" => "Idle cost",
        "unallocated_cost" => "Unallocated cost",
        "worst_p95_wait_min" => "Worst p95 wait",
        other => other,
    }
}

impl MonthPage<'_> {
    fn section(&self, name: &str) -> Option<&Report> {
        self.sections.iter().find(|r| r.name == name)
    }

    fn table(&self, r: &Report, shape: Shape) -> String {
        table(r, self.currency, shape)
    }

    /// The month at a glance: a card per figure of `summary`, with its change.
    fn headline(&self, body: &mut String) {
        let Some(sum) = self.section(crate::report::summary::R) else { return };
        let previous = sum.meta.get("previous_window").and_then(|v| v.as_str()).map(str::to_string);
        let at = |row: &Vec<Cell>, name: &str| sum.columns.iter().position(|c| c == name).and_then(|i| row.get(i)).cloned().unwrap_or(Cell::Null);
        body.push_str(r#"<section class="headline" id="headline" aria-label="the month at a glance">"#);
        for row in &sum.rows {
            let metric = at(row, "metric").text();
            let unit = at(row, "unit").text();
            let value_col = if metric == "worst_p95_wait_min" { "wait_min" } else { metric.as_str() };
            let this = at(row, "this_window");
            let value = match this {
                Cell::Null => "none".to_string(),
                ref c if unit == "%" => format!("{}%", cell_text(value_col, c)),
                ref c => format!("{}<span class=\"u\">{}</span>", cell_text(value_col, c), esc(&unit)),
            };
            let change = at(row, "change");
            let pct = at(row, "change_pct");
            let (class, text) = match (&previous, &change) {
                (None, _) => ("", "no previous month in the lake".to_string()),
                (Some(p), Cell::Null) => ("", format!("nothing to compare in {p}")),
                (Some(p), Cell::Dec { units, .. }) => {
                    let arrow = if *units > 0 {
                        "▲"
                    } else if *units < 0 {
                        "▼"
                    } else {
                        "="
                    };
                    let class = match (direction(&metric), units.signum()) {
                        (_, 0) | (None, _) => "",
                        (Some("worse"), 1) | (Some("better"), -1) => "worse",
                        _ => "better",
                    };
                    let amount = if unit == "%" {
                        format!("{} points", cell_text("change_pct", &change))
                    } else {
                        format!("{} {unit}", cell_text(&format!("{value_col}_change"), &change))
                    };
                    let share = if pct == Cell::Null { String::new() } else { format!(" ({}%)", cell_text("change_pct", &pct)) };
                    (class, format!("{arrow} {amount}{share} vs {p}"))
                }
                (Some(_), other) => ("", other.text()),
            };
            let detail = at(row, "detail").text();
            let _ = write!(
                body,
                r#"<div class="card"><div class="k">{}</div><div class="v">{}</div><div class="d {class}">{}</div>{}</div>"#,
                esc(metric_name(&metric)),
                value,
                esc(&text),
                if detail.is_empty() { String::new() } else { format!(r#"<div class="x">{}</div>"#, esc(&detail)) }
            );
        }
        body.push_str("</section>");
        for n in &sum.notes {
            if !n.starts_with(crate::report::render::DATA_INCOMPLETE) {
                let _ = write!(body, "<p class=\"note\">{}</p>", esc(n));
            }
        }
    }

    /// The plan's sections, where `run` made them: the pool's allocation by hour as recorded,
    /// as the baseline replay has it and under each scenario; p95 waits per namespace and
    /// scenario; the summary and the calibration.
    fn planning(&self, body: &mut String) {
        let (Some(hourly), Some(summary)) = (self.section("plan_hourly"), self.section("plan_summary")) else { return };
        body.push_str("<h2>Planning: the month replayed, baseline and scenarios</h2>");
        let (scen, hours, pct) = (col(hourly, "scenario"), col(hourly, "hour"), col(hourly, "allocated_pct"));
        let mut names: Vec<String> = Vec::new();
        let mut lines: std::collections::BTreeMap<String, Vec<f64>> = std::collections::BTreeMap::new();
        let mut labels: Vec<String> = Vec::new();
        for i in 0..scen.len() {
            let name = scen[i].text();
            if !names.contains(&name) {
                names.push(name.clone());
            }
            if names.len() == 1 {
                labels.push(hour_label(&hours[i].text()));
            }
            lines.entry(name).or_default().push(num(pct[i]));
        }
        const OTHERS: [&str; 6] = ["#17becf", "#bcbd22", "#ff7f0e", "#8c564b", "#7f7f7f", "#1f77b4"];
        let series_lines: Vec<(&str, &str, Vec<f64>, bool)> = names
            .iter()
            .enumerate()
            .map(|(k, n)| {
                let colour = match n.as_str() {
                    "recorded" => "#bbbbbb",
                    "baseline" => colour("plan"),
                    _ => OTHERS[k % OTHERS.len()],
                };
                (n.as_str(), colour, lines[n].clone(), false)
            })
            .collect();
        body.push_str(&series("plan", &labels, &series_lines, "% of the pool allocated"));
        if let Some(plan) = self.section("plan") {
            let (sc, ns, p95) = (col(plan, "scenario"), col(plan, "namespace"), col(plan, "wait_p95_min"));
            let items: Vec<(String, f64, String)> = (0..sc.len())
                .filter(|&i| !matches!(p95[i], Cell::Null))
                .map(|i| (format!("{} / {}", sc[i].text(), ns[i].text()), num(p95[i]), format!("{} min p95 wait", cell_text("wait_min", p95[i]))))
                .collect();
            body.push_str("<h3>p95 wait per scenario and namespace</h3>");
            body.push_str(&bars("plan_waits", &items, "#e377c2"));
        }
        body.push_str(&self.table(summary, ALL_ROWS));
        if let Some(c) = self.section("plan_calibration") {
            body.push_str(&self.table(c, ALL_ROWS));
        }
    }

    pub fn render(&self) -> String {
        let cur = self.currency;
        let mut body = String::new();
        let _ = write!(body, "<h1>GPU pool {}: cost, waste and waits</h1>", esc(self.label));
        let against = self.section(crate::report::summary::R).and_then(|s| s.meta.get("previous_window")).and_then(|v| v.as_str());
        let _ = write!(
            body,
            "<p class=\"sub\">Costs in {}; times in UTC{}.</p>",
            esc(cur),
            against.map_or(String::new(), |p| format!("; changes are against {}", esc(p)))
        );
        if let Some(reason) = self.incomplete {
            let _ = write!(body, "<p class=\"incomplete\" role=\"alert\">{}: {}</p>", crate::report::render::DATA_INCOMPLETE, esc(reason));
        }
        self.headline(&mut body);
        if let Some(teams) = self.section(crate::report::summary::TEAMS) {
            body.push_str("<h2>Cost per team, against the month before</h2>");
            body.push_str(&self.table(teams, ALL_ROWS));
        }
        if let Some(cb) = self.section("chargeback") {
            let ns = col(cb, "namespace");
            let (cost, hours) = (col(cb, "total_cost"), col(cb, "gpu_hours"));
            let items: Vec<(String, f64, String)> = (0..ns.len())
                .map(|i| (ns[i].text(), num(cost[i]), format!("{} {cur} · {} GPU-h", cell_text("total_cost", cost[i]), cell_text("gpu_hours", hours[i]))))
                .collect();
            body.push_str("<h2>Chargeback: total cost per namespace</h2>");
            body.push_str(&bars("chargeback", &items, colour("chargeback")));
            body.push_str(&self.table(cb, ALL_ROWS));
        }
        if !self.pool.is_empty() {
            let labels: Vec<String> = self.pool.iter().map(|d| d.date.clone()).collect();
            body.push_str("<h2>The pool per day: allocated vs unallocated GPU-hours</h2>");
            body.push_str(&series(
                "pool",
                &labels,
                &[
                    ("GPU-hours in the pool", "#bbbbbb", self.pool.iter().map(|d| d.gpu_hours).collect(), true),
                    ("allocated to pods", colour("pool"), self.pool.iter().map(|d| d.allocated_hours).collect(), true),
                    (
                        "utilised (GPU-hours x utilisation)",
                        "#ff7f0e",
                        self.pool.iter().map(|d| d.allocated_hours.min(d.gpu_hours * d.util_pct / 100.0)).collect(),
                        false,
                    ),
                ],
                "GPU-hours per day",
            ));
        }
        if let Some(idle) = self.section("idle_namespaces") {
            let ns = col(idle, "namespace");
            let hrs = col(idle, "idle_gpu_hours");
            let cost = col(idle, "idle_cost");
            let (low, high) = (col(idle, "idle_gpu_hours_low"), col(idle, "idle_gpu_hours_high"));
            let items: Vec<(String, f64, String)> = (0..ns.len())
                .map(|i| {
                    // The band at the step's resolution, where it is one.
                    let band = match (low.get(i), high.get(i)) {
                        (Some(l), Some(h)) if num(l) != num(h) => format!(" ({} to {})", cell_text("idle_gpu_hours", l), cell_text("idle_gpu_hours", h)),
                        _ => String::new(),
                    };
                    (ns[i].text(), num(hrs[i]), format!("{} GPU-h idle{band} · {} {cur}", cell_text("idle_gpu_hours", hrs[i]), cell_text("idle_cost", cost[i])))
                })
                .collect();
            body.push_str("<h2>Waste: allocated but idle GPU-hours per namespace</h2>");
            body.push_str(&bars("idle", &items, "#8c564b"));
        }
        for name in ["idle", "idle_unallocated", "idle_zombie"] {
            if let Some(r) = self.section(name) {
                body.push_str(&self.table(r, Shape { max_rows: 15 }));
            }
        }
        if let Some(hourly) = self.section("queue_hourly") {
            // Sum over namespaces per hour.
            let hours = col(hourly, "hour");
            let gpus = col(hourly, "avg_pending_gpus");
            let mut per: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
            for (h, g) in hours.iter().zip(&gpus) {
                *per.entry(h.text()).or_default() += num(g);
            }
            let labels: Vec<String> = per.keys().map(|h| hour_label(h)).collect();
            body.push_str("<h2>Queue: pending GPU demand per hour</h2>");
            body.push_str(&series(
                "queue",
                &labels,
                &[("GPUs asked for by pending pods", colour("queue"), per.values().copied().collect(), false)],
                "GPUs pending",
            ));
        }
        for name in ["queue", "queue_longest"] {
            if let Some(r) = self.section(name) {
                body.push_str(&self.table(r, Shape { max_rows: 10 }));
            }
        }
        if let Some(h) = self.section("heatmap") {
            body.push_str("<h2>Allocation by weekday and hour (UTC)</h2>");
            body.push_str(&heatmap(h));
        }
        if let Some(q) = self.section("quota") {
            body.push_str("<h2>Quotas: average and p95 use against the quota</h2>");
            body.push_str(&gauges(q));
            body.push_str(&self.table(q, ALL_ROWS));
        }
        self.planning(&mut body);
        for name in ["node_use", "events", "inventory"] {
            if let Some(r) = self.section(name) {
                let _ = write!(body, "<h2>{}</h2>", esc(&r.title));
                body.push_str(&self.table(r, ALL_ROWS));
            }
        }
        if let Some(c) = self.section("completeness") {
            body.push_str("<h2>Data completeness</h2>");
            for n in &c.notes {
                let _ = write!(body, "<p>{}</p>", esc(n));
            }
        }
        let _ = write!(
            body,
            "<footer>Made by gpuledger from the lake. Every table here is in full in its CSV, JSON, Markdown and Parquet file beside this page, and in the workbook gpuledger-{}.xlsx.</footer>",
            esc(self.label)
        );
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>gpuledger {}</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
            esc(self.label)
        )
    }
}
