//! Excel workbooks: `report KIND --format xlsx` and the month's `gpuledger-<month>.xlsx` that
//! `run` writes, read back with openpyxl (PyPI) and compared cell by cell with the CSV files
//! `run` writes beside them: every value equal, numbers stored as numbers (money formatted to
//! the cent), a bold, frozen header row. Needs a Python with openpyxl (`GPULEDGER_XLSX_PYTHON`,
//! else `python3`); says SKIPPED where there is none, unless `GPULEDGER_REQUIRE_OPENPYXL` is set.

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn python() -> Option<String> {
    let py = std::env::var("GPULEDGER_XLSX_PYTHON").unwrap_or_else(|_| "python3".into());
    if Command::new(&py).args(["-c", "import openpyxl"]).output().is_ok_and(|o| o.status.success()) {
        return Some(py);
    }
    assert!(std::env::var_os("GPULEDGER_REQUIRE_OPENPYXL").is_none(), "{py} cannot import openpyxl and GPULEDGER_REQUIRE_OPENPYXL is set");
    eprintln!("SKIPPED: {py} cannot import openpyxl (pip install openpyxl, or set GPULEDGER_XLSX_PYTHON; .ci/run installs it)");
    None
}

fn read(py: &str, file: &Path) -> Value {
    let script = common::repo_root().join("tests/xlsx/read_workbook.py");
    let out = Command::new(py).arg(script).arg(file).output().unwrap();
    assert!(out.status.success(), "openpyxl on {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The sheet's cells against the CSV's: header, then every row; a number cell must be the
/// CSV's text read as a number, a text cell the CSV's text, an empty cell an empty field.
fn assert_sheet_is_the_csv(sheet: &Value, csv: &str) {
    let name = sheet["name"].as_str().unwrap();
    // The CSV's last line marks an incomplete month; the sheet says so in its notes.
    let lines: String = csv.lines().filter(|l| !l.trim_start_matches('"').starts_with("DATA INCOMPLETE")).map(|l| format!("{l}\n")).collect();
    let (header, rows) = common::parse_csv(&lines);
    let cells = sheet["rows"].as_array().unwrap();
    let header_cells: Vec<&str> = cells[0].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(header_cells, header, "{name}: header");
    assert_eq!(sheet["freeze"], "A2", "{name}: frozen header row");
    assert_eq!(sheet["bold_header"], true, "{name}");
    assert!(cells.len() > rows.len(), "{name}: {} sheet rows for {} CSV rows", cells.len(), rows.len());
    let mut numbers = 0;
    for (r, row) in rows.iter().enumerate() {
        let got = cells[r + 1].as_array().unwrap();
        for (c, text) in row.iter().enumerate() {
            let cell = got.get(c).unwrap_or(&Value::Null);
            match cell {
                Value::Null => assert!(text.is_empty(), "{name} row {r} {}: empty cell for {text:?}", header[c]),
                Value::Number(n) => {
                    numbers += 1;
                    assert_eq!(
                        n.as_f64().unwrap(),
                        text.parse::<f64>().unwrap_or_else(|_| panic!("{name} row {r} {}: a number for {text:?}", header[c])),
                        "{name} row {r} {}",
                        header[c]
                    );
                }
                Value::String(s) => assert_eq!(s, text, "{name} row {r} {}", header[c]),
                other => panic!("{name} row {r} {}: {other}", header[c]),
            }
        }
    }
    assert!(rows.is_empty() || numbers > 0 || !header.iter().any(|h| h.contains("hours") || h.contains("cost")), "{name}: no cell is a number");
}

#[test]
fn every_report_as_a_workbook_equals_its_csv() {
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "s", "--gpus", "16", "--days", "3", "--seed", "5", "--start", "2026-10-01"]);
    // Three days of October: the month is incomplete (exit 3), written and marked.
    common::run_incomplete(dir, &["--lake", "s/lake", "run", "--no-collect", "--month", "2026-10", "--reports-dir", "r"]);
    let month = dir.join("r/2026-10");
    let book = read(&py, &month.join("gpuledger-2026-10.xlsx"));
    let sheets = book["sheets"].as_array().unwrap();
    let csvs: Vec<String> =
        std::fs::read_dir(&month).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".csv")).collect();
    assert!(sheets.len() >= 8 && sheets.len() == csvs.len(), "a worksheet per section: {} sheets, {} CSV files {csvs:?}", sheets.len(), csvs.len());
    // Finance opens the book on the month at a glance.
    assert_eq!((sheets[0]["name"].as_str(), sheets[1]["name"].as_str()), (Some("summary"), Some("summary_teams")));
    for sheet in sheets {
        let name = sheet["name"].as_str().unwrap();
        let csv = std::fs::read_to_string(month.join(format!("{name}.csv"))).unwrap_or_else(|e| panic!("{name}.csv: {e}"));
        assert_sheet_is_the_csv(sheet, &csv);
    }
    // Money to the cent on screen, the full value in the cell.
    let chargeback = sheets.iter().find(|s| s["name"] == "chargeback").expect("a chargeback sheet");
    let header: Vec<&str> = chargeback["rows"][0].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let cost = header.iter().position(|h| *h == "cloud_cost").unwrap();
    let hours = header.iter().position(|h| *h == "gpu_hours").unwrap();
    assert!(chargeback["rows"][1][cost].is_number() && chargeback["formats"][1][cost] == "#,##0.00", "{}", chargeback["formats"][1]);
    assert_eq!(chargeback["formats"][1][hours], "#,##0.0");

    // `report --format xlsx`: the same cells as the run's CSV of that report.
    for kind in ["chargeback", "inventory", "heatmap"] {
        let file = format!("{kind}.xlsx");
        common::run_incomplete(dir, &["--lake", "s/lake", "report", kind, "--month", "2026-10", "--format", "xlsx", "-o", &file]);
        let one = read(&py, &dir.join(&file));
        for sheet in one["sheets"].as_array().unwrap() {
            let name = sheet["name"].as_str().unwrap();
            assert_sheet_is_the_csv(sheet, &std::fs::read_to_string(month.join(format!("{name}.csv"))).unwrap());
        }
    }
}
