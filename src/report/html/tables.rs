//! A report section as an HTML table: only the columns that say something, formatted cells,
//! cards on a phone.

use std::fmt::Write as _;

use super::text::esc;
use crate::report::format::{cell_text, heading};
use crate::report::render::{Cell, Report};

/// How a table is shown.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    /// At most this many rows (the files have them all).
    pub(super) max_rows: usize,
}

pub(super) const ALL_ROWS: Shape = Shape { max_rows: usize::MAX };

/// A report section as an HTML table: only the columns that say something, formatted cells, a
/// label on each cell for the phone layout, the total row and the notes. A section with many
/// columns and few rows (a plan's summary) is turned on its side.
pub(super) fn table(r: &Report, currency: &str, shape: Shape) -> String {
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
pub(super) fn class_of(column: &str, c: &Cell) -> &'static str {
    match c {
        Cell::Int(_) | Cell::Dec { .. } => " class=\"n\"",
        Cell::Time(_) => " class=\"nw\"",
        Cell::Str(s) if s.len() == 20 && s.ends_with('Z') && s.as_bytes().get(10) == Some(&b'T') => " class=\"nw\"",
        Cell::Str(s) if column.ends_with("uuid") || s.starts_with("GPU-") || s.starts_with("MIG-") => " class=\"id\"",
        Cell::Str(s) if s.len() > 40 => " class=\"long\"",
        _ => "",
    }
}
