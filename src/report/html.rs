//! The month's page: one self-contained HTML file (inline CSS and SVG, no script, no network)
//! with the chargeback bars, the pool and the queue over time, the allocation heatmap, quota
//! gauges and the key tables. Output depends only on the reports, so it is byte-identical on
//! a re-run.
//!
//! Each chart has its own signature colour (`CHART_COLOURS`) so a test can tell from a
//! screenshot that every chart was drawn.

use std::fmt::Write as _;

use super::render::{Cell, Report};

/// (chart, colour): the chargeback bars, the allocated area, the queue line, the hottest
/// heatmap cell, the quota gauges' p95 bar, the plan's baseline replay line.
pub const CHART_COLOURS: [(&str, &str); 6] =
    [("chargeback", "#1f77b4"), ("pool", "#2ca02c"), ("queue", "#d62728"), ("heatmap", "#08306b"), ("quota", "#9467bd"), ("plan", "#e377c2")];

fn colour(chart: &str) -> &'static str {
    CHART_COLOURS.iter().find(|(c, _)| *c == chart).map(|(_, c)| *c).unwrap_or("#777777")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn num(c: &Cell) -> f64 {
    c.text().parse().unwrap_or(0.0)
}

fn col<'a>(r: &'a Report, name: &str) -> Vec<&'a Cell> {
    match r.columns.iter().position(|c| c == name) {
        Some(i) => r.rows.iter().map(|row| &row[i]).collect(),
        None => Vec::new(),
    }
}

/// One day of the pool, in GPU-hours.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolDay {
    pub date: String,
    pub gpu_hours: f64,
    pub allocated_hours: f64,
    pub util_pct: f64,
}

/// Horizontal bars, one per label.
fn bars(id: &str, items: &[(String, f64, String)], color: &str) -> String {
    let max = items.iter().map(|i| i.1).fold(0.0, f64::max).max(1e-9);
    let (w, row, left) = (900.0, 26.0, 170.0);
    let h = row * items.len() as f64 + 10.0;
    let mut s = format!(r#"<svg id="{id}" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">"#);
    for (i, (label, v, text)) in items.iter().enumerate() {
        let y = 5.0 + row * i as f64;
        let bw = (w - left - 160.0) * v / max;
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" class="lbl">{}</text><rect x="{left}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"/><text x="{:.1}" y="{:.1}" class="val">{}</text>"#,
            left - 6.0,
            y + row * 0.62,
            esc(label),
            y + 3.0,
            bw.max(0.5),
            row - 8.0,
            left + bw + 6.0,
            y + row * 0.62,
            esc(text)
        );
    }
    s.push_str("</svg>");
    s
}

/// Lines (or a filled area) over an index axis, with first/last x labels.
fn series(id: &str, x_labels: &[String], lines: &[(&str, &str, Vec<f64>, bool)], y_unit: &str) -> String {
    let (w, h, left, bottom, top) = (900.0, 260.0, 60.0, 30.0, 12.0);
    let n = x_labels.len().max(2);
    let max = lines.iter().flat_map(|l| l.2.iter().copied()).fold(0.0, f64::max).max(1e-9) * 1.05;
    let x = |i: usize| left + (w - left - 20.0) * i as f64 / (n - 1) as f64;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / max);
    let mut s = format!(r#"<svg id="{id}" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">"#);
    let _ = write!(s, r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999"/><line x1="{left}" y1="{top}" x2="{left}" y2="{:.1}" stroke="#999"/>"##, h - bottom, w - 20.0, h - bottom, h - bottom);
    for k in 0..=4 {
        let v = max * k as f64 / 4.0;
        let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="end" class="ax">{:.0}</text>"#, left - 4.0, y(v) + 4.0, v);
    }
    let _ = write!(s, r#"<text x="4" y="{top}" class="ax">{}</text>"#, esc(y_unit));
    if let (Some(first), Some(last)) = (x_labels.first(), x_labels.last()) {
        let _ = write!(s, r#"<text x="{left}" y="{:.1}" class="ax">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end" class="ax">{}</text>"#, h - 10.0, esc(first), w - 20.0, h - 10.0, esc(last));
    }
    for (li, (name, color, values, fill)) in lines.iter().enumerate() {
        let pts: Vec<String> = values.iter().enumerate().map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v))).collect();
        if *fill && !pts.is_empty() {
            let _ = write!(s, r#"<polygon points="{:.1},{:.1} {} {:.1},{:.1}" fill="{color}"/>"#, x(0), h - bottom, pts.join(" "), x(values.len().saturating_sub(1)), h - bottom);
        } else {
            let _ = write!(s, r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2.5"/>"#, pts.join(" "));
        }
        let _ = write!(s, r#"<rect x="{:.1}" y="{:.1}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{:.1}" class="lbl">{}</text>"#, w - 260.0, top + 16.0 * li as f64, w - 242.0, top + 10.0 + 16.0 * li as f64, esc(name));
    }
    s.push_str("</svg>");
    s
}

/// Weekday x hour grid, shaded by allocation %.
fn heatmap(rows: &Report) -> String {
    let (cell_w, cell_h, left, top) = (32.0, 26.0, 50.0, 22.0);
    let (w, h) = (left + 24.0 * cell_w + 10.0, top + 7.0 * cell_h + 10.0);
    let mut s = format!(r#"<svg id="heatmap" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">"#);
    for hour in 0..24 {
        let _ = write!(s, r#"<text x="{:.1}" y="14" text-anchor="middle" class="ax">{hour}</text>"#, left + cell_w * (hour as f64 + 0.5));
    }
    let days = col(rows, "weekday");
    let hours = col(rows, "hour");
    let alloc = col(rows, "allocation_pct");
    let max = alloc.iter().map(|c| num(c)).fold(0.0, f64::max);
    for (i, day) in super::heatmap::WEEKDAYS.iter().enumerate() {
        let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="end" class="ax">{day}</text>"#, left - 6.0, top + cell_h * (i as f64 + 0.65));
    }
    for ((d, hr), a) in days.iter().zip(&hours).zip(&alloc) {
        let Some(di) = super::heatmap::WEEKDAYS.iter().position(|x| *x == d.text()) else { continue };
        let hour = num(hr);
        let v = num(a);
        // Light (#deebf7) to the signature dark blue at the hottest cell.
        let t = if max > 0.0 { v / max } else { 0.0 };
        let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * t).round() as u8;
        let fill = if t >= 0.999 { colour("heatmap").to_string() } else { format!("#{:02x}{:02x}{:02x}", mix(0xde, 0x08), mix(0xeb, 0x30), mix(0xf7, 0x6b)) };
        let _ = write!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}"><title>{} {:02}:00 {:.1}% allocated</title></rect>"#,
            left + cell_w * hour,
            top + cell_h * di as f64,
            cell_w - 1.0,
            cell_h - 1.0,
            d.text(),
            hour as i64,
            v
        );
    }
    s.push_str("</svg>");
    s
}

/// One gauge per namespace: the quota as a track, average and p95 use as bars, the peak as a
/// tick.
fn gauges(q: &Report) -> String {
    let ns = col(q, "namespace");
    let quota = col(q, "quota_gpus");
    let (avg, p95, peak, rec) = (col(q, "avg_gpus"), col(q, "p95_gpus"), col(q, "peak_gpus"), col(q, "recommendation"));
    let (w, row, left) = (900.0, 34.0, 170.0);
    let h = row * ns.len() as f64 + 10.0;
    let max = quota.iter().chain(&peak).map(|c| num(c)).fold(1.0, f64::max);
    let scale = |v: f64| (w - left - 200.0) * v / max;
    let mut s = format!(r#"<svg id="quota" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">"#);
    for i in 0..ns.len() {
        let y = 6.0 + row * i as f64;
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" class="lbl">{}</text><rect x="{left}" y="{:.1}" width="{:.1}" height="18" fill="#eeeeee" stroke="#555"/><rect x="{left}" y="{:.1}" width="{:.1}" height="18" fill="{}"/><rect x="{left}" y="{:.1}" width="{:.1}" height="8" fill="#c5b0d5"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#000" stroke-width="2"/><text x="{:.1}" y="{:.1}" class="val">quota {} · avg {} · p95 {} · peak {} · {}</text>"##,
            left - 6.0,
            y + 14.0,
            esc(&ns[i].text()),
            y,
            scale(num(quota[i])).max(1.0),
            y,
            scale(num(p95[i])),
            colour("quota"),
            y + 5.0,
            scale(num(avg[i])),
            left + scale(num(peak[i])),
            y - 2.0,
            left + scale(num(peak[i])),
            y + 20.0,
            left + scale(max) + 8.0,
            y + 14.0,
            esc(&quota[i].text()),
            esc(&avg[i].text()),
            esc(&p95[i].text()),
            esc(&peak[i].text()),
            esc(&rec[i].text())
        );
    }
    s.push_str("</svg>");
    s
}

/// A report section as an HTML table (with its total row and notes).
pub fn table(r: &Report) -> String {
    let mut s = format!("<table id=\"t-{}\"><caption>{}</caption><thead><tr>", esc(&r.name), esc(&r.title));
    for c in &r.columns {
        let _ = write!(s, "<th>{}</th>", esc(c));
    }
    s.push_str("</tr></thead><tbody>");
    for (i, row) in r.rows.iter().chain(r.total.iter()).enumerate() {
        let cls = if i == r.rows.len() { " class=\"total\"" } else { "" };
        let _ = write!(s, "<tr{cls}>");
        for c in row {
            let num_cls = if matches!(c, Cell::Int(_) | Cell::Dec { .. }) { " class=\"n\"" } else { "" };
            let _ = write!(s, "<td{num_cls}>{}</td>", esc(&c.text()));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    for n in &r.notes {
        let _ = write!(s, "<p class=\"note\">{}</p>", esc(n));
    }
    s
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#222}\
h1{font-size:24px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}\
.chart{display:block;max-width:100%;height:auto;margin:8px 0}.lbl{font-size:12px}.val{font-size:11px;fill:#333}.ax{font-size:10px;fill:#555}\
table{border-collapse:collapse;font-size:12px;margin:8px 0}caption{text-align:left;font-weight:600;padding:4px 0}\
th,td{border:1px solid #ddd;padding:3px 6px}th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}\
tr.total td{font-weight:600;background:#fafafa}td:last-child{min-width:260px}.note{font-size:11px;color:#555;margin:2px 0}\
.incomplete{font-weight:600;color:#8a1c00;background:#fff1ec;border:1px solid #e8a48f;padding:8px 12px}";

/// Everything the page draws.
pub struct MonthPage<'a> {
    pub label: &'a str,
    pub sections: &'a [Report],
    pub pool: &'a [PoolDay],
    /// Why the month's data is incomplete, shown at the top of the page.
    pub incomplete: Option<&'a str>,
}

impl MonthPage<'_> {
    fn section(&self, name: &str) -> Option<&Report> {
        self.sections.iter().find(|r| r.name == name)
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
                labels.push(hours[i].text().get(..13).unwrap_or_default().to_string());
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
        body.push_str(&series("plan", &labels, &series_lines, "% allocated"));
        if let Some(plan) = self.section("plan") {
            let (sc, ns, p95) = (col(plan, "scenario"), col(plan, "namespace"), col(plan, "wait_p95_min"));
            let items: Vec<(String, f64, String)> = (0..sc.len())
                .filter(|&i| !matches!(p95[i], Cell::Null))
                .map(|i| (format!("{} / {}", sc[i].text(), ns[i].text()), num(p95[i]), format!("{} min p95 wait", p95[i].text())))
                .collect();
            body.push_str(&bars("plan_waits", &items, "#e377c2"));
        }
        body.push_str(&table(summary));
        if let Some(c) = self.section("plan_calibration") {
            body.push_str(&table(c));
        }
    }

    pub fn render(&self) -> String {
        let mut body = String::new();
        let _ = write!(body, "<h1>GPU pool {}: cost, waste and waits</h1>", esc(self.label));
        if let Some(reason) = self.incomplete {
            let _ = write!(body, "<p class=\"incomplete\" role=\"alert\">{}: {}</p>", super::render::DATA_INCOMPLETE, esc(reason));
        }
        if let Some(cb) = self.section("chargeback") {
            let ns = col(cb, "namespace");
            let (cost, hours) = (col(cb, "total_cost"), col(cb, "gpu_hours"));
            let items: Vec<(String, f64, String)> = (0..ns.len()).map(|i| (ns[i].text(), num(cost[i]), format!("{} ({} GPU-h)", cost[i].text(), hours[i].text()))).collect();
            body.push_str("<h2>Chargeback: total cost per namespace</h2>");
            body.push_str(&bars("chargeback", &items, colour("chargeback")));
            body.push_str(&table(cb));
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
                    ("utilised (GPU-hours x utilisation)", "#ff7f0e", self.pool.iter().map(|d| d.allocated_hours.min(d.gpu_hours * d.util_pct / 100.0)).collect(), false),
                ],
                "GPU-h",
            ));
        }
        if let Some(idle) = self.section("idle_namespaces") {
            let ns = col(idle, "namespace");
            let hrs = col(idle, "idle_gpu_hours");
            let cost = col(idle, "idle_cost");
            let items: Vec<(String, f64, String)> = (0..ns.len()).map(|i| (ns[i].text(), num(hrs[i]), format!("{} GPU-h idle, {}", hrs[i].text(), cost[i].text()))).collect();
            body.push_str("<h2>Allocated but idle GPU-hours per namespace</h2>");
            body.push_str(&bars("idle", &items, "#8c564b"));
        }
        for name in ["idle", "idle_unallocated", "idle_zombie"] {
            if let Some(r) = self.section(name) {
                let mut short = r.clone();
                short.rows.truncate(15);
                body.push_str(&table(&short));
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
            let labels: Vec<String> = per.keys().cloned().collect();
            body.push_str("<h2>Queue: pending GPU demand per hour</h2>");
            body.push_str(&series("queue", &labels, &[("GPUs asked for by pending pods", colour("queue"), per.values().copied().collect(), false)], "GPUs"));
        }
        for name in ["queue", "queue_longest"] {
            if let Some(r) = self.section(name) {
                let mut short = r.clone();
                short.rows.truncate(10);
                body.push_str(&table(&short));
            }
        }
        if let Some(h) = self.section("heatmap") {
            body.push_str("<h2>Allocation by weekday and hour (UTC)</h2>");
            body.push_str(&heatmap(h));
        }
        if let Some(q) = self.section("quota") {
            body.push_str("<h2>Quotas: average and p95 use against the quota (tick: peak)</h2>");
            body.push_str(&gauges(q));
            body.push_str(&table(q));
        }
        self.planning(&mut body);
        for name in ["events", "inventory"] {
            if let Some(r) = self.section(name) {
                let _ = write!(body, "<h2>{}</h2>", esc(&r.title));
                body.push_str(&table(r));
            }
        }
        if let Some(c) = self.section("completeness") {
            body.push_str("<h2>Data completeness</h2>");
            for n in &c.notes {
                let _ = write!(body, "<p>{}</p>", esc(n));
            }
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpuledger {}</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
            esc(self.label)
        )
    }
}

/// The pool per day of `window` for the page's time series.
pub async fn pool_days(ctx: &datafusion::prelude::SessionContext, queries: &crate::queries::Queries, window: &crate::domain::window::Window) -> super::Result<Vec<PoolDay>> {
    use super::columns::{ints, strs};
    let r = "daily_pool";
    let mut out = Vec::new();
    // From the 15-minute sums (the lake's rollups where current), a week at a time.
    for b in &super::gpu_buckets::query(ctx, queries, r, window).await? {
        let (date, all, alloc, util) = (strs(r, b, "date")?, ints(r, b, "gpu_us")?, ints(r, b, "allocated_gpu_us")?, ints(r, b, "util_gpu_us")?);
        let known = ints(r, b, "util_known_gpu_us")?;
        for i in 0..b.num_rows() {
            let (a, al, u, k) = (all[i].unwrap_or(0), alloc[i].unwrap_or(0), util[i].unwrap_or(0), known[i].unwrap_or(0));
            out.push(PoolDay {
                date: date[i].clone().unwrap_or_default(),
                gpu_hours: a as f64 / 3.6e9,
                allocated_hours: al as f64 / 3.6e9,
                util_pct: if k > 0 { u as f64 / k as f64 } else { 0.0 },
            });
        }
    }
    Ok(out)
}
