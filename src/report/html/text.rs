//! Text and numbers out of report cells, escaped for HTML.

use crate::report::render::{Cell, Report};

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub(super) fn num(c: &Cell) -> f64 {
    c.text().parse().unwrap_or(0.0)
}

pub(super) fn col<'a>(r: &'a Report, name: &str) -> Vec<&'a Cell> {
    match r.columns.iter().position(|c| c == name) {
        Some(i) => r.rows.iter().map(|row| &row[i]).collect(),
        None => Vec::new(),
    }
}
