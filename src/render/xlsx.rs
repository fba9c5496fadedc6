//! The Excel form: one worksheet per document, numbers as numbers (money to the cent, hours to
//! one decimal on screen, the full value in the cell), a frozen, filterable header row, columns
//! as wide as their text, the total row in bold under the rows and the notes under it.
//!
//! A cell holds what the CSV form holds: numeric columns are the CSV text read back as a
//! number, so a workbook and the CSV of one report never disagree; other columns (names, times,
//! dates) are text.

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Schema};
use rust_xlsxwriter::{DocProperties, ExcelDateTime, Format as CellFormat, Workbook, Worksheet, XlsxError};

use super::{cells, Frame, RenderError};

/// One worksheet: a document's rows (all of one schema) and its frame.
pub struct Sheet<'a> {
    pub name: &'a str,
    pub schema: &'a Schema,
    pub batches: &'a [RecordBatch],
    pub frame: &'a Frame,
}

impl From<XlsxError> for RenderError {
    fn from(e: XlsxError) -> Self {
        RenderError::Io(std::io::Error::other(format!("writing the workbook: {e}")))
    }
}

/// A workbook of `sheets`, in order, as the bytes of an .xlsx file.
pub fn workbook(sheets: &[Sheet]) -> Result<Vec<u8>, RenderError> {
    let mut book = Book::new()?;
    for sheet in sheets {
        book.add(sheet)?;
    }
    book.finish()
}

/// A workbook built a sheet at a time, so a caller holds one sheet's rows at once.
pub struct Book(Workbook);

impl Book {
    pub fn new() -> Result<Self, RenderError> {
        let mut book = Workbook::new();
        // A fixed creation time (the library's default is now): the same month's workbook is
        // the same bytes on every run, as every other report file is.
        book.set_properties(&DocProperties::new().set_creation_datetime(&ExcelDateTime::from_ymd(2000, 1, 1)?));
        Ok(Book(book))
    }

    /// Adds `sheet` as the next worksheet.
    pub fn add(&mut self, sheet: &Sheet) -> Result<(), RenderError> {
        // "Low memory": each row goes to a temporary file (the temp dir: /tmp, an emptyDir in
        // the CronJob) as the next one starts, and only the shared strings stay in memory. A
        // month of 10,000 GPUs has sheets of 230,000 rows, which held whole took hundreds of
        // MB. Rows are written in order, as this mode needs.
        let ws = self.0.add_worksheet_with_low_memory()?;
        ws.set_name(sheet_name(sheet.name))?;
        write_sheet(ws, sheet)
    }

    /// The .xlsx file's bytes.
    pub fn finish(mut self) -> Result<Vec<u8>, RenderError> {
        Ok(self.0.save_to_buffer()?)
    }
}

/// Excel's rules: at most 31 characters, none of `[]:*?/\`.
fn sheet_name(name: &str) -> String {
    let clean: String = name.chars().map(|c| if "[]:*?/\\".contains(c) { '_' } else { c }).collect();
    clean.chars().take(31).collect()
}

/// How a numeric column shows: money, hours, shares, or as it is.
fn number_format(name: &str, data_type: &DataType) -> &'static str {
    let money =
        name.contains("cost") || name.contains("price") || name.ends_with("_eur") || name.ends_with("_usd") || matches!(data_type, DataType::Decimal128(_, 2));
    if money {
        "#,##0.00"
    } else if name.contains("hours") || name.ends_with("_kwh") {
        "#,##0.0"
    } else if name.ends_with("_pct") {
        "0.0"
    } else if data_type.is_integer() {
        "#,##0"
    } else {
        "General"
    }
}

fn is_number(data_type: &DataType) -> bool {
    data_type.is_numeric() || matches!(data_type, DataType::Decimal128(..) | DataType::Decimal256(..))
}

fn write_sheet(ws: &mut Worksheet, sheet: &Sheet) -> Result<(), RenderError> {
    let schema = sheet.schema;
    let header = CellFormat::new().set_bold();
    let formats: Vec<Option<CellFormat>> =
        schema.fields().iter().map(|f| is_number(f.data_type()).then(|| CellFormat::new().set_num_format(number_format(f.name(), f.data_type())))).collect();
    let mut widths: Vec<usize> = schema.fields().iter().map(|f| f.name().chars().count()).collect();
    for (c, f) in schema.fields().iter().enumerate() {
        ws.write_string_with_format(0, c as u16, f.name(), &header)?;
    }
    let mut row = 1u32;
    let mut cell = String::new();
    let mut write_batch = |ws: &mut Worksheet, batch: &RecordBatch, row: &mut u32, bold: bool| -> Result<(), RenderError> {
        let text = cells::TextColumns::new(batch)?;
        for r in 0..batch.num_rows() {
            for (c, format) in formats.iter().enumerate() {
                cell.clear();
                text.write(r, c, &mut cell)?;
                if cell.is_empty() {
                    continue;
                }
                widths[c] = widths[c].max(cell.chars().count() + if format.is_some() { 3 } else { 0 });
                let col = c as u16;
                match (format, cell.parse::<f64>()) {
                    (Some(f), Ok(v)) if v.is_finite() => {
                        let f = if bold { f.clone().set_bold() } else { f.clone() };
                        ws.write_number_with_format(*row, col, v, &f)?;
                    }
                    _ if bold => {
                        ws.write_string_with_format(*row, col, &cell, &CellFormat::new().set_bold())?;
                    }
                    _ => {
                        ws.write_string(*row, col, &cell)?;
                    }
                }
            }
            *row += 1;
        }
        Ok(())
    };
    for b in sheet.batches {
        write_batch(ws, b, &mut row, false)?;
    }
    let last_data_row = row.saturating_sub(1);
    if let Some(total) = &sheet.frame.total {
        row += 1;
        write_batch(ws, total, &mut row, true)?;
    }
    if !sheet.frame.notes.is_empty() {
        row += 1;
        let italic = CellFormat::new().set_italic();
        for note in &sheet.frame.notes {
            ws.write_string_with_format(row, 0, note, &italic)?;
            row += 1;
        }
    }
    ws.set_freeze_panes(1, 0)?;
    if !schema.fields().is_empty() {
        ws.autofilter(0, 0, last_data_row.max(1), (schema.fields().len() - 1) as u16)?;
    }
    for (c, w) in widths.iter().enumerate() {
        ws.set_column_width(c as u16, (*w).clamp(6, 60) as f64 + 1.0)?;
    }
    Ok(())
}
