//! The page's drawings: horizontal bars, line and area series (a wide and a narrow SVG each),
//! the weekday x hour heatmap and the quota gauges, each in its signature colour.

use std::fmt::Write as _;

use super::text::{col, esc, num};
use crate::report::format::human_number;
use crate::report::render::Report;

/// (chart, colour): the chargeback bars, the allocated area, the queue line, the hottest
/// heatmap cell, the quota gauges' p95 bar, the plan's baseline replay line.
pub const CHART_COLOURS: [(&str, &str); 6] =
    [("chargeback", "#1f77b4"), ("pool", "#2ca02c"), ("queue", "#d62728"), ("heatmap", "#08306b"), ("quota", "#9467bd"), ("plan", "#e377c2")];

pub(super) fn colour(chart: &str) -> &'static str {
    CHART_COLOURS.iter().find(|(c, _)| *c == chart).map(|(_, c)| *c).unwrap_or("#777777")
}

/// Horizontal bars in HTML, one per label: the label in full, the bar, the value. On a phone
/// the three stack.
pub(super) fn bars(id: &str, items: &[(String, f64, String)], color: &str) -> String {
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
pub(super) fn legend(entries: &[(&str, &str)]) -> String {
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
pub(super) struct Size {
    class: &'static str,
    w: f64,
    h: f64,
    x_ticks: usize,
}

pub(super) const WIDE: Size = Size { class: "wide", w: 900.0, h: 260.0, x_ticks: 5 };
pub(super) const NARROW: Size = Size { class: "narrow", w: 360.0, h: 220.0, x_ticks: 3 };

/// Lines (or filled areas) over an index axis, drawn wide and narrow, with a legend.
pub(super) fn series(id: &str, x_labels: &[String], lines: &[(&str, &str, Vec<f64>, bool)], y_unit: &str) -> String {
    let mut s = format!(r#"<div id="{id}" class="chart series" role="img">"#);
    for size in [WIDE, NARROW] {
        s.push_str(&series_svg(x_labels, lines, y_unit, size));
    }
    let entries: Vec<(&str, &str)> = lines.iter().map(|l| (l.0, l.1)).collect();
    s.push_str(&legend(&entries));
    s.push_str("</div>");
    s
}

pub(super) fn series_svg(x_labels: &[String], lines: &[(&str, &str, Vec<f64>, bool)], y_unit: &str, size: Size) -> String {
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
pub(super) fn heat(t: f64) -> String {
    if t >= 0.999 {
        return colour("heatmap").to_string();
    }
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * t).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(0xde, 0x08), mix(0xeb, 0x30), mix(0xf7, 0x6b))
}

/// Weekday x hour grid, shaded by allocation %, drawn wide and narrow, with its colour scale.
pub(super) fn heatmap(rows: &Report) -> String {
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
        for (i, day) in crate::report::heatmap::WEEKDAYS.iter().enumerate() {
            let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="end" class="ax">{day}</text>"#, left - 5.0, top + cell_h * (i as f64 + 0.65));
        }
        for ((d, hr), a) in col(rows, "weekday").iter().zip(col(rows, "hour")).zip(&alloc) {
            let Some(di) = crate::report::heatmap::WEEKDAYS.iter().position(|x| *x == d.text()) else { continue };
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
pub(super) fn gauges(q: &Report) -> String {
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

/// `2026-11-02T09:00:00Z` as `2026-11-02 09:00`.
pub(super) fn hour_label(t: &str) -> String {
    match (t.get(..10), t.get(11..16)) {
        (Some(d), Some(h)) => format!("{d} {h}"),
        _ => t.to_string(),
    }
}
