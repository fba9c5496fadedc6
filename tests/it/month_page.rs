//! The month at a glance against the month before (`summary`, `summary_teams`) on a lake that
//! holds the end of September and the start of October, and the page finance reads: checked
//! against the pool's inventory x time, the simulator's ledger and each month's own
//! chargeback, idle and queue reports; then the page in headless Chromium at 1280 and 390 px,
//! and its PDF, which a re-run prints to the same bytes.

use crate::common;

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

const GPUS: i64 = 16;

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

/// 16 GPUs from 29 September to 2 October: two days of each month (so both months are
/// incomplete, and say so), October run into r/2026-10.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        common::run_ok(&dir, &["simulate", "--out", "s", "--gpus", "16", "--days", "4", "--seed", "9", "--start", "2026-09-29"]);
        std::fs::write(dir.join("g.toml"), "[lake]\npath = \"s/lake\"\n[run]\nreports_dir = \"r\"\n[teams]\nteam-llm = \"foundation-models\"\n").unwrap();
        common::run_incomplete(&dir, &["--config", "g.toml", "run", "--month", "2026-10", "--no-collect"]);
        Fixture { _tmp: tmp, dir }
    })
}

fn read(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture().dir.join("r/2026-10").join(name)).unwrap()).unwrap()
}

/// `gpuledger report KIND --month M --format json [extra]` (both months are short of data:
/// exit 3, the reports written all the same).
fn report(kind: &str, month: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--config", "g.toml", "report", kind, "--month", month, "--format", "json"];
    args.extend_from_slice(extra);
    serde_json::from_slice(&common::run_incomplete(&fixture().dir, &args).stdout).unwrap()
}

/// A section of a report's JSON (one object, or an array of sections).
fn section<'a>(v: &'a Value, name: &str) -> &'a Value {
    if v.is_array() {
        v.as_array().unwrap().iter().find(|s| s["report"] == name).unwrap_or_else(|| panic!("no section {name}"))
    } else {
        v
    }
}

/// An exact decimal of the JSON (a string, or null) in hundredths.
fn cents(v: &Value) -> Option<i64> {
    fixed(v, 2)
}

/// An exact decimal of the JSON (a string, or null) in units of 10^-decimals.
fn fixed(v: &Value, decimals: usize) -> Option<i64> {
    let s = v.as_str()?;
    let (whole, frac) = s.split_once('.').unwrap_or((s, "0"));
    let frac = format!("{frac:0<decimals$}");
    assert!(frac.len() == decimals || frac[decimals..].chars().all(|c| c == '0'), "{s}: more than {decimals} decimals");
    let sign = if whole.starts_with('-') { -1 } else { 1 };
    Some(sign * (whole.trim_start_matches('-').parse::<i64>().unwrap() * 10i64.pow(decimals as u32) + frac[..decimals].parse::<i64>().unwrap()))
}

/// A summary row by metric: (this window, previous window, change, change_pct).
fn metric(summary: &Value, name: &str) -> (Option<i64>, Option<i64>, Option<i64>, Option<i64>) {
    let row = summary["rows"].as_array().unwrap().iter().find(|r| r["metric"] == name).unwrap_or_else(|| panic!("no {name} row: {summary}"));
    (cents(&row["this_window"]), cents(&row["previous_window"]), cents(&row["change"]), cents(&row["change_pct"]))
}

fn change_pct(now: i64, before: i64) -> i64 {
    // Hundredths of a percent, half away from zero, as the summary rounds.
    let num = (now - before) as i128 * 10_000;
    let d = before.abs() as i128;
    let q = num / d;
    let r = num % d;
    (if 2 * r.abs() >= d { q + num.signum() } else { q }) as i64
}

fn sum(rows: &Value, column: &str) -> i64 {
    rows["rows"].as_array().unwrap().iter().filter_map(|r| cents(&r[column])).sum()
}

#[test]
fn the_month_at_a_glance_matches_each_months_reports_and_the_ledger() {
    let summary = read("summary.json");
    assert_eq!((summary["window"].as_str(), summary["previous_window"].as_str()), (Some("2026-10"), Some("2026-09")), "{summary}");
    let (oct_cb, sep_cb) = (report("chargeback", "2026-10", &[]), report("chargeback", "2026-09", &[]));

    // The pool's GPU-hours: the inventory x time (two days of each month), and the ledger's.
    let (now, before, change, _) = metric(&summary, "gpu_hours");
    assert_eq!((now, before, change), (Some(GPUS * 48 * 100), Some(GPUS * 48 * 100), Some(0)));
    let ledger: Value = serde_json::from_str(&std::fs::read_to_string(fixture().dir.join("s/ledger.json")).unwrap()).unwrap();
    assert_eq!(ledger["cluster_gpu_seconds"].as_f64().unwrap() as i64, (now.unwrap() + before.unwrap()) * 36, "the ledger's GPU-seconds over the four days");

    // Money: each month's chargeback total, and the change exact to the cent.
    let (now, before, change, pct) = metric(&summary, "total_cost");
    assert_eq!(now, cents(&oct_cb["total"]["total_cost"]));
    assert_eq!(before, cents(&sep_cb["total"]["total_cost"]));
    let (n, b) = (now.unwrap(), before.unwrap());
    assert!(n > 0 && b > 0);
    assert_eq!(change, Some(n - b));
    assert_eq!(pct, Some(change_pct(n, b)));

    // Waste and waits, from each month's idle and queue reports.
    let (oct_idle, sep_idle) = (report("idle", "2026-10", &[]), report("idle", "2026-09", &[]));
    let (now, before, change, _) = metric(&summary, "idle_cost");
    assert_eq!((now, before), (Some(sum(section(&oct_idle, "idle_namespaces"), "idle_cost")), Some(sum(section(&sep_idle, "idle_namespaces"), "idle_cost"))));
    assert_eq!(change, Some(now.unwrap() - before.unwrap()));
    let (now, before, _, _) = metric(&summary, "unallocated_cost");
    assert_eq!((now, before), (Some(sum(section(&oct_idle, "idle_unallocated"), "list_cost")), Some(sum(section(&sep_idle, "idle_unallocated"), "list_cost"))));
    // The unallocated cost is the chargeback's __unallocated__ row under the default policy.
    let unallocated = oct_cb["rows"].as_array().unwrap().iter().find(|r| r["namespace"] == "__unallocated__").unwrap();
    assert_eq!(now, cents(&unallocated["total_cost"]));
    let (oct_q, sep_q) = (report("queue", "2026-10", &[]), report("queue", "2026-09", &[]));
    let worst = |q: &Value| section(q, "queue")["rows"].as_array().unwrap().iter().filter_map(|r| cents(&r["p95_wait_min"])).max();
    let (now, before, _, _) = metric(&summary, "worst_p95_wait_min");
    assert_eq!((now, before), (worst(&oct_q), worst(&sep_q)));

    // Utilisation: the chargeback's pool-wide average; its change in points, no share.
    let (now, before, change, pct) = metric(&summary, "avg_util_pct");
    assert_eq!((now, before), (cents(&oct_cb["total"]["avg_util_pct"]), cents(&sep_cb["total"]["avg_util_pct"])));
    assert_eq!((change, pct), (Some(now.unwrap() - before.unwrap()), None));

    // September is two days of thirty: the comparison says so.
    let notes: Vec<&str> = summary["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(notes.iter().any(|n| n.contains("previous window's data is incomplete") && n.contains("2026-09")), "{notes:?}");
}

#[test]
fn each_teams_cost_matches_the_chargeback_by_team_of_both_months() {
    let teams = read("summary_teams.json");
    let (oct, sep) = (report("chargeback", "2026-10", &["--by", "team"]), report("chargeback", "2026-09", &["--by", "team"]));
    let by_team = |v: &Value| -> std::collections::BTreeMap<String, (i64, i64)> {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["team"].as_str().unwrap().to_string(), (cents(&r["total_cost"]).unwrap(), fixed(&r["gpu_hours"], 4).unwrap())))
            .collect()
    };
    let (oct, sep) = (by_team(&oct), by_team(&sep));
    let rows = teams["rows"].as_array().unwrap();
    assert!(rows.len() >= oct.len().max(sep.len()) && rows.iter().any(|r| r["team"] == "foundation-models"), "{teams}");
    let mut last_cost = i64::MAX;
    for r in rows {
        let team = r["team"].as_str().unwrap();
        let (cost, before) = (cents(&r["total_cost"]).unwrap(), cents(&r["previous_total_cost"]).unwrap());
        assert_eq!(cost, oct.get(team).map_or(0, |t| t.0), "{team}: October");
        assert_eq!(before, sep.get(team).map_or(0, |t| t.0), "{team}: September");
        assert_eq!(cents(&r["cost_change"]), Some(cost - before), "{team}");
        assert_eq!(cents(&r["cost_change_pct"]), (before != 0).then(|| change_pct(cost, before)), "{team}");
        let (hours, hours_before) = (fixed(&r["gpu_hours"], 4).unwrap(), fixed(&r["previous_gpu_hours"], 4).unwrap());
        assert_eq!((hours, hours_before), (oct.get(team).map_or(0, |t| t.1), sep.get(team).map_or(0, |t| t.1)), "{team}: GPU-hours");
        assert_eq!(fixed(&r["gpu_hours_change"], 4), Some(hours - hours_before), "{team}");
        assert!(cost <= last_cost, "largest cost first");
        last_cost = cost;
    }
    // The rows add up to the total, which is each month's chargeback total.
    let total = &teams["total"];
    assert_eq!(cents(&total["total_cost"]), Some(oct.values().map(|t| t.0).sum()));
    assert_eq!(cents(&total["previous_total_cost"]), Some(sep.values().map(|t| t.0).sum()));
    assert_eq!(cents(&total["total_cost"]), Some(sum(&teams, "total_cost")));
    assert_eq!(fixed(&total["gpu_hours"], 4), Some(GPUS * 48 * 10_000), "the pool's GPU-hours: inventory x time");
    assert_eq!(fixed(&total["previous_gpu_hours"], 4), Some(GPUS * 48 * 10_000));
}

#[test]
fn the_page_compares_fits_and_prints_the_same_pdf_twice() {
    let dir = &fixture().dir;
    let page = dir.join("r/2026-10/index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("role=\"alert\">DATA INCOMPLETE"), "October is two days of 31");
    assert_eq!(html.matches("<div class=\"card\">").count(), 6);
    assert!(html.matches(" vs 2026-09</div>").count() >= 5, "the headline compares with September");
    assert!(html.contains("Cost per team, against the month before") && html.contains("Previous total cost (USD)"));
    let Some(browser) = common::browser::chromium() else { return };
    let (w, h) = common::browser::check_page(browser, &page, 1280, "compared-page-1280.png");
    let (nw, nh) = common::browser::check_page(browser, &page, 390, "compared-page-390.png");
    eprintln!("compared month page screenshots: {w} x {h} and {nw} x {nh}");
    let pdf = std::fs::read(dir.join("r/2026-10/report.pdf")).expect("report.pdf written where chromium is installed");
    assert!(pdf.starts_with(b"%PDF-"));
    // A re-run prints the same bytes (the PDF's dates are the window's end, not now).
    common::run_incomplete(dir, &["--config", "g.toml", "run", "--month", "2026-10", "--no-collect"]);
    assert!(std::fs::read(dir.join("r/2026-10/report.pdf")).unwrap() == pdf, "a re-run changed report.pdf");
    assert_eq!(std::fs::read_to_string(&page).unwrap(), html, "a re-run changed the page");
    let text = String::from_utf8_lossy(&pdf);
    assert!(text.contains("/CreationDate (D:20261101000000"), "the PDF is dated at the window's end");
    std::fs::copy(dir.join("r/2026-10/report.pdf"), common::browser::keep("compared-page.pdf")).unwrap();
}
