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

use super::format::{cell_text, heading, human_number};
use super::pool_days::PoolDay;
use super::render::{Cell, Report};

/// (chart, colour): the chargeback bars, the allocated area, the queue line, the hottest
/// heatmap cell, the quota gauges' p95 bar, the plan's baseline replay line.
pub const CHART_COLOURS: [(&str, &str); 6] =
    [("chargeback", "#1f77b4"), ("pool", "#2ca02c"), ("queue", "#d62728"), ("heatmap", "#08306b"), ("quota", "#9467bd"), ("plan", "#e377c2")];

fn colour(chart: &str) -> &'static str {
    CHART_COLOURS.iter().find(|(c, _)| *c == chart).map(|(_, c)| *c).unwrap_or("#777777")
}

pub(crate) fn esc(s: &str) -> String {
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

/// Horizontal bars in HTML, one per label: the label in full, the bar, the value. On a phone
/// the three stack.
fn bars(id: &str, items: &[(String, f64, String)], color: &str) -> String {
    let max = items.iter().map(|i| i.1).fold(0.0, f64::max).max(1e-9);
    let mut s = format!(r#"<div id="{id}" class="bars chart" role="img">"#);
    for (label, v, text) in items {
        let pct = (100.0 * v / max).clamp(0.0, 100.0);
        let _ = write!(
            s,
            r#"<div class="bar"><span class="bl">{}</span><span class="bt"><span class="bf" style="width:{pct:.1}%;background:{color}"></span></span><span class="bv">{}</span></div>"#,
            esc(label),
            esc(text)
        );
    }
    s.push_str("</div>");
    s
}

/// A legend in HTML: a swatch and a name per entry.
fn legend(entries: &[(&str, &str)]) -> String {
    let mut s = String::from(r#"<ul class="legend">"#);
    for (name, color) in entries {
        let _ = write!(s, r#"<li><span class="sw" style="background:{color}"></span>{}</li>"#, esc(name));
    }
    s.push_str("</ul>");
    s
}

/// The drawing of a chart at one size: the wide one for screens and paper, the narrow one for
/// phones (the page shows one of the two).
#[derive(Clone, Copy)]
struct Size {
    class: &'static str,
    w: f64,
    h: f64,
    x_ticks: usize,
}

const WIDE: Size = Size { class: "wide", w: 900.0, h: 260.0, x_ticks: 5 };
const NARROW: Size = Size { class: "narrow", w: 360.0, h: 220.0, x_ticks: 3 };

/// Lines (or filled areas) over an index axis, drawn wide and narrow, with a legend.
fn series(id: &str, x_labels: &[String], lines: &[(&str, &str, Vec<f64>, bool)], y_unit: &str) -> String {
    let mut s = format!(r#"<div id="{id}" class="chart series" role="img">"#);
    for size in [WIDE, NARROW] {
        s.push_str(&series_svg(x_labels, lines, y_unit, size));
    }
    let entries: Vec<(&str, &str)> = lines.iter().map(|l| (l.0, l.1)).collect();
    s.push_str(&legend(&entries));
    s.push_str("</div>");
    s
}

fn series_svg(x_labels: &[String], lines: &[(&str, &str, Vec<f64>, bool)], y_unit: &str, size: Size) -> String {
    let Size { w, h, .. } = size;
    let (left, right, bottom, top) = (56.0, 12.0, 28.0, 18.0);
    let n = x_labels.len().max(2);
    let max = lines.iter().flat_map(|l| l.2.iter().copied()).fold(0.0, f64::max).max(1e-9) * 1.05;
    let x = |i: usize| left + (w - left - right) * i as f64 / (n - 1) as f64;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / max);
    let mut s = format!(r#"<svg class="{}" viewBox="0 0 {w} {h}" width="{w}" height="{h}">"#, size.class);
    for k in 0..=4 {
        let v = max * k as f64 / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end" class="ax">{}</text>"##,
            w - right,
            left - 4.0,
            y(v) + 4.0,
            human_number(v, 0),
            yy = y(v)
        );
    }
    let _ = write!(s, r#"<text x="{left}" y="11" class="ax">{}</text>"#, esc(y_unit));
    for (name, color, values, fill) in lines {
        let pts: Vec<String> = values.iter().enumerate().map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v))).collect();
        if pts.is_empty() {
            continue;
        }
        if *fill {
            let _ = write!(
                s,
                r#"<polygon points="{:.1},{:.1} {} {:.1},{:.1}" fill="{color}"><title>{}</title></polygon>"#,
                x(0),
                h - bottom,
                pts.join(" "),
                x(values.len() - 1),
                h - bottom,
                esc(name)
            );
        } else {
            let _ =
                write!(s, r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2.5"><title>{}</title></polyline>"#, pts.join(" "), esc(name));
        }
    }
    let _ = write!(s, r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999"/>"##, h - bottom, w - right, h - bottom);
    // Evenly spaced x labels, the first and the last included.
    let ticks = size.x_ticks.min(x_labels.len());
    for k in 0..ticks {
        let i = if ticks == 1 { 0 } else { k * (x_labels.len() - 1) / (ticks - 1) };
        let anchor = if k == 0 {
            "start"
        } else if k + 1 == ticks {
            "end"
        } else {
            "middle"
        };
        let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}" class="ax">{}</text>"#, x(i), h - 8.0, esc(&x_labels[i]));
    }
    s.push_str("</svg>");
    s
}

/// Light (#deebf7) to dark blue for a share `t` of the hottest cell; the hottest cell itself
/// gets the signature colour.
fn heat(t: f64) -> String {
    if t >= 0.999 {
        return colour("heatmap").to_string();
    }
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * t).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(0xde, 0x08), mix(0xeb, 0x30), mix(0xf7, 0x6b))
}

/// Weekday x hour grid, shaded by allocation %, drawn wide and narrow, with its colour scale.
fn heatmap(rows: &Report) -> String {
    let alloc = col(rows, "allocation_pct");
    let max = alloc.iter().map(|c| num(c)).fold(0.0, f64::max);
    let mut s = String::from(r#"<div id="heatmap" class="chart" role="img">"#);
    for (class, cell_w, cell_h, every) in [("wide", 34.0, 26.0, 1), ("narrow", 13.0, 22.0, 3)] {
        let (left, top) = (40.0, 18.0);
        let (w, h) = (left + 24.0 * cell_w + 4.0, top + 7.0 * cell_h + 4.0);
        let _ = write!(s, r#"<svg class="{class}" viewBox="0 0 {w} {h}" width="{w}" height="{h}">"#);
        for hour in (0..24).step_by(every) {
            let _ = write!(s, r#"<text x="{:.1}" y="12" text-anchor="middle" class="ax">{hour:02}</text>"#, left + cell_w * (hour as f64 + 0.5));
        }
        for (i, day) in super::heatmap::WEEKDAYS.iter().enumerate() {
            let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="end" class="ax">{day}</text>"#, left - 5.0, top + cell_h * (i as f64 + 0.65));
        }
        for ((d, hr), a) in col(rows, "weekday").iter().zip(col(rows, "hour")).zip(&alloc) {
            let Some(di) = super::heatmap::WEEKDAYS.iter().position(|x| *x == d.text()) else { continue };
            let v = num(a);
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {:02}:00 UTC: {}% allocated</title></rect>"#,
                left + cell_w * num(hr),
                top + cell_h * di as f64,
                cell_w - 1.0,
                cell_h - 1.0,
                heat(if max > 0.0 { v / max } else { 0.0 }),
                d.text(),
                num(hr) as i64,
                human_number(v, 1)
            );
        }
        s.push_str("</svg>");
    }
    let _ = write!(
        s,
        r#"<div class="scale"><span>0%</span><span class="grad" style="background:linear-gradient(to right,{},{})"></span><span>{}% of the pool's GPUs allocated (the darkest hour)</span></div></div>"#,
        heat(0.0),
        colour("heatmap"),
        human_number(max, 1)
    );
    s
}

/// One gauge per namespace in HTML: the quota as a track, p95 use as a bar, average use as a
/// thin bar, the peak as a tick.
fn gauges(q: &Report) -> String {
    let ns = col(q, "namespace");
    let quota = col(q, "quota_gpus");
    let (avg, p95, peak, rec) = (col(q, "avg_gpus"), col(q, "p95_gpus"), col(q, "peak_gpus"), col(q, "recommendation"));
    let max = quota.iter().chain(&peak).map(|c| num(c)).fold(1.0, f64::max);
    let pct = |v: f64| (100.0 * v / max).clamp(0.0, 100.0);
    let mut s = String::from(r#"<div id="quota" class="bars chart" role="img">"#);
    for i in 0..ns.len() {
        let _ = write!(
            s,
            r#"<div class="bar"><span class="bl">{}</span><span class="gt"><span class="gq" style="width:{:.1}%"></span><span class="gp" style="width:{:.1}%;background:{}"></span><span class="ga" style="width:{:.1}%"></span><span class="gk" style="left:{:.1}%"></span></span><span class="bv">quota {} · avg {} · p95 {} · peak {} · {}</span></div>"#,
            esc(&ns[i].text()),
            pct(num(quota[i])),
            pct(num(p95[i])),
            colour("quota"),
            pct(num(avg[i])),
            pct(num(peak[i])),
            esc(&quota[i].text()),
            esc(&avg[i].text()),
            esc(&p95[i].text()),
            esc(&peak[i].text()),
            esc(&rec[i].text())
        );
    }
    s.push_str("</div>");
    s.push_str(&legend(&[("quota (the track)", "#eeeeee"), ("p95 use", colour("quota")), ("average use", "#c5b0d5"), ("peak (the tick)", "#000000")]));
    s
}

/// How a table is shown.
#[derive(Clone, Copy)]
struct Shape {
    /// At most this many rows (the files have them all).
    max_rows: usize,
}

const ALL_ROWS: Shape = Shape { max_rows: usize::MAX };

/// A report section as an HTML table: only the columns that say something, formatted cells, a
/// label on each cell for the phone layout, the total row and the notes. A section with many
/// columns and few rows (a plan's summary) is turned on its side.
fn table(r: &Report, currency: &str, shape: Shape) -> String {
    let rows: Vec<&Vec<Cell>> = r.rows.iter().take(shape.max_rows).collect();
    let shown = r.said_columns(&rows);
    let hidden: Vec<&str> = (0..r.columns.len()).filter(|i| !shown.contains(i)).map(|i| r.columns[i].as_str()).collect();
    let heads: Vec<String> = shown.iter().map(|&i| heading(&r.columns[i], currency)).collect();
    let sideways = shown.len() > 12 && rows.len() <= 6 && r.total.is_none();
    let mut s =
        format!("<div class=\"tw\"><table class=\"t{}\" id=\"t-{}\"><caption>{}</caption>", if sideways { " side" } else { "" }, esc(&r.name), esc(&r.title));
    if sideways {
        // On its side: a row per column, a column per row.
        s.push_str("<tbody>");
        for (k, &i) in shown.iter().enumerate() {
            let _ = write!(s, "<tr><th scope=\"row\">{}</th>", esc(&heads[k]));
            for row in &rows {
                let label = esc(&row[0].text());
                let c = row.get(i).unwrap_or(&Cell::Null);
                let _ = write!(s, "<td{} data-label=\"{label}\">{}</td>", class_of(&r.columns[i], c), esc(&cell_text(&r.columns[i], c)));
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table></div>");
    } else {
        s.push_str("<thead><tr>");
        for h in &heads {
            let _ = write!(s, "<th scope=\"col\">{}</th>", esc(h));
        }
        s.push_str("</tr></thead><tbody>");
        let total = r.total.as_ref();
        for (row, is_total) in rows.iter().map(|r| (*r, false)).chain(total.map(|t| (t, true))) {
            s.push_str(if is_total { "<tr class=\"total\">" } else { "<tr>" });
            for (k, &i) in shown.iter().enumerate() {
                let c = row.get(i).unwrap_or(&Cell::Null);
                let _ = write!(s, "<td{} data-label=\"{}\">{}</td>", class_of(&r.columns[i], c), esc(&heads[k]), esc(&cell_text(&r.columns[i], c)));
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table></div>");
    }
    let mut notes = Vec::new();
    if r.rows.len() > rows.len() {
        notes.push(format!(
            "The first {} of {} rows{}; {}.csv and the workbook have them all.",
            rows.len(),
            r.rows.len(),
            if r.total.is_some() { " (the total is of all of them)" } else { "" },
            r.name
        ));
    }
    if !hidden.is_empty() {
        notes.push(format!("Not shown, empty or zero in every row here: {}.", hidden.join(", ")));
    }
    for n in notes.iter().chain(&r.notes) {
        let _ = write!(s, "<p class=\"note\">{}</p>", esc(n));
    }
    s
}

/// The cell's class: numbers right-aligned, identifiers unbroken, long text wrapping.
fn class_of(column: &str, c: &Cell) -> &'static str {
    match c {
        Cell::Int(_) | Cell::Dec { .. } => " class=\"n\"",
        Cell::Time(_) => " class=\"nw\"",
        Cell::Str(s) if s.len() == 20 && s.ends_with('Z') && s.as_bytes().get(10) == Some(&b'T') => " class=\"nw\"",
        Cell::Str(s) if column.ends_with("uuid") || s.starts_with("GPU-") || s.starts_with("MIG-") => " class=\"id\"",
        Cell::Str(s) if s.len() > 40 => " class=\"long\"",
        _ => "",
    }
}

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
        let Some(sum) = self.section(super::summary::R) else { return };
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
            if !n.starts_with(super::render::DATA_INCOMPLETE) {
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
        let against = self.section(super::summary::R).and_then(|s| s.meta.get("previous_window")).and_then(|v| v.as_str());
        let _ = write!(
            body,
            "<p class=\"sub\">Costs in {}; times in UTC{}.</p>",
            esc(cur),
            against.map_or(String::new(), |p| format!("; changes are against {}", esc(p)))
        );
        if let Some(reason) = self.incomplete {
            let _ = write!(body, "<p class=\"incomplete\" role=\"alert\">{}: {}</p>", super::render::DATA_INCOMPLETE, esc(reason));
        }
        self.headline(&mut body);
        if let Some(teams) = self.section(super::summary::TEAMS) {
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
        for name in ["events", "inventory"] {
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

/// `2026-11-02T09:00:00Z` as `2026-11-02 09:00`.
fn hour_label(t: &str) -> String {
    match (t.get(..10), t.get(11..16)) {
        (Some(d), Some(h)) => format!("{d} {h}"),
        _ => t.to_string(),
    }
}
