//! The forms a person reads: a psql-style table for the terminal and a Markdown table, both with
//! the frame's title, total row and notes; numbers right-aligned.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use super::{cells, Frame, Result};

/// Every row (and the total) as text.
fn body(batches: &[RecordBatch], frame: &Frame) -> Result<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    for b in batches.iter().chain(frame.total.iter()) {
        rows.extend(cells::text_rows(b)?);
    }
    Ok(rows)
}

fn numeric_columns(schema: &SchemaRef) -> Vec<bool> {
    schema.fields().iter().map(|f| f.data_type().is_numeric()).collect()
}

pub fn table(schema: &SchemaRef, batches: &[RecordBatch], frame: &Frame) -> Result<String> {
    use tabled::settings::{object::Columns, Alignment, Style};
    let mut b = tabled::builder::Builder::default();
    b.push_record(schema.fields().iter().map(|f| f.name().clone()));
    for row in body(batches, frame)? {
        b.push_record(row);
    }
    let mut t = b.build();
    t.with(Style::psql());
    for (i, numeric) in numeric_columns(schema).into_iter().enumerate() {
        if numeric {
            t.modify(Columns::single(i), Alignment::right());
        }
    }
    let mut out = match &frame.title {
        Some(title) => format!("{title}\n\n{t}\n"),
        None => format!("{t}\n"),
    };
    for n in &frame.notes {
        out.push_str(n);
        out.push('\n');
    }
    Ok(out)
}

pub fn markdown(schema: &SchemaRef, batches: &[RecordBatch], frame: &Frame) -> Result<String> {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', "<br>");
    let mut out = frame.title.as_ref().map(|t| format!("# {t}\n\n")).unwrap_or_default();
    let names: Vec<String> = schema.fields().iter().map(|f| cell(f.name())).collect();
    out.push_str(&format!("| {} |\n|", names.join(" | ")));
    for numeric in numeric_columns(schema) {
        out.push_str(if numeric { "---:|" } else { "---|" });
    }
    out.push('\n');
    for row in body(batches, frame)? {
        out.push_str(&format!("| {} |\n", row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")));
    }
    if frame.title.is_some() || !frame.notes.is_empty() {
        out.push('\n');
    }
    for n in &frame.notes {
        out.push_str(&format!("{n}\n\n"));
    }
    Ok(out)
}
