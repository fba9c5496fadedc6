//! The month at a glance against the window before it: what the pool cost, its GPU-hours and
//! utilisation, what idle and unallocated GPUs cost, the worst p95 wait (`summary`), and each
//! team's cost and GPU-hours beside its previous month (`summary_teams`).
//!
//! Every figure is read from the reports themselves (the chargeback's total row, the idle
//! report's costs, the queue's waits), so the headline always agrees with the tables under it.
//! The previous window is compared only where the lake holds data for it; where that data is
//! short of `run.min_completeness_pct` the comparison says so.

use std::collections::BTreeMap;

use serde_json::Value;

use super::render::{Cell, Report};
use crate::config::Config;
use crate::domain::money::round_ratio;

pub const R: &str = "summary";
pub const TEAMS: &str = "summary_teams";

/// Money and the other figures of `summary` are held at this many decimals.
const DECIMALS: u32 = 2;
/// The chargeback's GPU-hours decimals, kept in `summary_teams` so its rows sum to the
/// chargeback's total exactly.
const HOUR_DECIMALS: u32 = 4;

/// The worst p95 wait of a window: minutes (at `DECIMALS`) and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub p95_min: i128,
    pub namespace: String,
    pub priority_class: String,
}

/// One window's headline figures, in exact units (money and shares at `DECIMALS`).
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub label: String,
    pub total_cost: i128,
    /// GPU-hours at `HOUR_DECIMALS`.
    pub gpu_hours: i128,
    pub util_pct: Option<i128>,
    pub idle_cost: i128,
    pub unallocated_cost: i128,
    pub worst_wait: Option<Wait>,
    /// Pods still pending at the window's end: no wait time yet, so not in any p95.
    pub still_pending: i64,
    /// Per team: (cost at `DECIMALS`, GPU-hours at `HOUR_DECIMALS`).
    pub teams: BTreeMap<String, (i128, i128)>,
    /// Why the window's data is short, if it is.
    pub incomplete: Option<String>,
}

/// `cell` as a number at `decimals` (rounded half away from zero), None for NULL or text.
fn units(cell: &Cell, decimals: u32) -> Option<i128> {
    match cell {
        Cell::Int(v) => Some(*v as i128 * 10i128.pow(decimals)),
        Cell::Dec { units, decimals: d } if *d <= decimals => Some(units * 10i128.pow(decimals - d)),
        Cell::Dec { units, decimals: d } => Some(round_ratio(*units, 10i128.pow(d - decimals), 0)),
        _ => None,
    }
}

fn at<'a>(r: &'a Report, row: &'a [Cell], name: &str) -> Option<&'a Cell> {
    r.columns.iter().position(|c| c == name).and_then(|i| row.get(i))
}

fn section<'a>(sections: &'a [Report], name: &str) -> Option<&'a Report> {
    sections.iter().find(|r| r.name == name)
}

impl Figures {
    /// The figures of a window from its sections (`chargeback`, `idle_namespaces`,
    /// `idle_unallocated`, `queue`) and its chargeback by team.
    pub fn from_reports(label: &str, sections: &[Report], by_team: &Report, incomplete: Option<String>) -> Figures {
        let mut f = Figures {
            label: label.to_string(),
            total_cost: 0,
            gpu_hours: 0,
            util_pct: None,
            idle_cost: 0,
            unallocated_cost: 0,
            worst_wait: None,
            still_pending: 0,
            teams: BTreeMap::new(),
            incomplete,
        };
        if let Some(cb) = section(sections, "chargeback") {
            if let Some(total) = &cb.total {
                f.total_cost = at(cb, total, "total_cost").and_then(|c| units(c, DECIMALS)).unwrap_or(0);
                f.gpu_hours = at(cb, total, "gpu_hours").and_then(|c| units(c, HOUR_DECIMALS)).unwrap_or(0);
                f.util_pct = at(cb, total, "avg_util_pct").and_then(|c| units(c, DECIMALS));
            }
        }
        let sum = |name: &str, column: &str| -> i128 {
            section(sections, name).map(|r| r.rows.iter().filter_map(|row| at(r, row, column).and_then(|c| units(c, DECIMALS))).sum()).unwrap_or(0)
        };
        f.idle_cost = sum("idle_namespaces", "idle_cost");
        f.unallocated_cost = sum("idle_unallocated", "list_cost");
        if let Some(q) = section(sections, "queue") {
            for row in &q.rows {
                f.still_pending += at(q, row, "still_pending").and_then(|c| units(c, 0)).unwrap_or(0) as i64;
                let Some(p95) = at(q, row, "p95_wait_min").and_then(|c| units(c, DECIMALS)) else { continue };
                if f.worst_wait.as_ref().is_none_or(|w| p95 > w.p95_min) {
                    let text = |name: &str| at(q, row, name).map(Cell::text).unwrap_or_default();
                    f.worst_wait = Some(Wait { p95_min: p95, namespace: text("namespace"), priority_class: text("priority_class") });
                }
            }
        }
        for row in &by_team.rows {
            let team = at(by_team, row, "team").map(Cell::text).unwrap_or_default();
            let cost = at(by_team, row, "total_cost").and_then(|c| units(c, DECIMALS)).unwrap_or(0);
            let hours = at(by_team, row, "gpu_hours").and_then(|c| units(c, HOUR_DECIMALS)).unwrap_or(0);
            let e = f.teams.entry(team).or_default();
            e.0 += cost;
            e.1 += hours;
        }
        f
    }
}

fn dec(units: i128, decimals: u32) -> Cell {
    Cell::Dec { units, decimals }
}

/// `now - before` and its share of `before` in percent (None where `before` is zero).
fn change(now: i128, before: i128) -> (i128, Option<i128>) {
    let d = now - before;
    (d, (before != 0).then(|| round_ratio(d * 100, before.abs(), DECIMALS)))
}

/// The two sections: `summary` (a row per headline figure) and `summary_teams`.
pub fn build(now: &Figures, before: Option<&Figures>, config: &Config) -> Vec<Report> {
    let currency = config.pricing.currency.as_str();
    let hours = |h: i128| round_ratio(h, 10i128.pow(HOUR_DECIMALS - DECIMALS), 0);
    // (metric, unit, this window, previous window, percentage points rather than a share)
    type Line<'a> = (&'a str, &'a str, Option<i128>, Option<i128>, bool);
    let wait = |f: &Figures| f.worst_wait.as_ref().map(|w| w.p95_min);
    let lines: [Line; 6] = [
        ("total_cost", currency, Some(now.total_cost), before.map(|b| b.total_cost), false),
        ("gpu_hours", "GPU-h", Some(hours(now.gpu_hours)), before.map(|b| hours(b.gpu_hours)), false),
        ("avg_util_pct", "%", now.util_pct, before.and_then(|b| b.util_pct), true),
        ("idle_cost", currency, Some(now.idle_cost), before.map(|b| b.idle_cost), false),
        ("unallocated_cost", currency, Some(now.unallocated_cost), before.map(|b| b.unallocated_cost), false),
        ("worst_p95_wait_min", "min", wait(now), before.and_then(wait), false),
    ];
    let opt = |v: Option<i128>| v.map_or(Cell::Null, |u| dec(u, DECIMALS));
    let rows: Vec<Vec<Cell>> = lines
        .iter()
        .map(|(metric, unit, this, prev, points)| {
            let (d, pct) = match (this, prev) {
                (Some(t), Some(p)) => {
                    let (d, pct) = change(*t, *p);
                    (Some(d), if *points { None } else { pct })
                }
                _ => (None, None),
            };
            let detail = match *metric {
                "worst_p95_wait_min" => now.worst_wait.as_ref().map_or(String::new(), |w| format!("{} / {}", w.namespace, w.priority_class)),
                "idle_cost" => "allocated but idle".into(),
                "avg_util_pct" => "over the pool's GPU-hours".into(),
                _ => String::new(),
            };
            vec![
                Cell::Str(metric.to_string()),
                Cell::Str(unit.to_string()),
                opt(*this),
                opt(*prev),
                opt(d),
                opt(pct),
                if detail.is_empty() { Cell::Null } else { Cell::Str(detail) },
            ]
        })
        .collect();
    let mut notes = Vec::new();
    let previous_label = before.map(|b| b.label.clone());
    match before {
        None => notes.push("previous window: the lake holds no data for it, so there is nothing to compare with".to_string()),
        Some(b) => {
            notes.push(format!("previous window: {}", b.label));
            if let Some(reason) = &b.incomplete {
                notes.push(format!("the previous window's data is incomplete ({reason}): its figures, and the changes, understate it"));
            }
            if let Some(w) = &b.worst_wait {
                notes.push(format!("{}'s worst p95 wait: {} / {}", b.label, w.namespace, w.priority_class));
            }
        }
    }
    if now.still_pending > 0 {
        notes.push(format!("{} pods were still pending at the window's end: they have no wait time yet and are in no p95", now.still_pending));
    }
    let mut meta = serde_json::Map::new();
    meta.insert("window".into(), Value::String(now.label.clone()));
    meta.insert("previous_window".into(), previous_label.clone().map_or(Value::Null, Value::String));
    let summary = Report {
        name: R.into(),
        title: format!("The month at a glance {}{}", now.label, previous_label.as_ref().map_or(String::new(), |p| format!(" against {p}"))),
        columns: ["metric", "unit", "this_window", "previous_window", "change", "change_pct", "detail"].map(String::from).to_vec(),
        rows,
        total: None,
        notes,
        meta: meta.clone(),
    };

    // Teams: both windows' teams, the largest cost first.
    let empty = BTreeMap::new();
    let prev_teams = before.map_or(&empty, |b| &b.teams);
    let mut names: Vec<&String> = now.teams.keys().chain(prev_teams.keys().filter(|k| !now.teams.contains_key(*k))).collect();
    let cost_of = |m: &BTreeMap<String, (i128, i128)>, k: &str| m.get(k).map_or(0, |v| v.0);
    names.sort_by(|a, b| cost_of(&now.teams, b).cmp(&cost_of(&now.teams, a)).then(a.cmp(b)));
    let mut team_rows = Vec::new();
    let (mut t_cost, mut t_prev_cost, mut t_hours, mut t_prev_hours) = (0i128, 0i128, 0i128, 0i128);
    for name in names {
        let (cost, hrs) = now.teams.get(name).copied().unwrap_or((0, 0));
        let prev = before.map(|_| prev_teams.get(name).copied().unwrap_or((0, 0)));
        t_cost += cost;
        t_hours += hrs;
        team_rows.push(team_row(Cell::Str(name.clone()), cost, hrs, prev));
        if let Some((pc, ph)) = prev {
            t_prev_cost += pc;
            t_prev_hours += ph;
        }
    }
    let total = team_row(Cell::Str("total".into()), t_cost, t_hours, before.map(|_| (t_prev_cost, t_prev_hours)));
    let teams = Report {
        name: TEAMS.into(),
        title: format!("Cost per team {}{}", now.label, previous_label.as_ref().map_or(String::new(), |p| format!(" against {p}"))),
        columns: ["team", "total_cost", "previous_total_cost", "cost_change", "cost_change_pct", "gpu_hours", "previous_gpu_hours", "gpu_hours_change"]
            .map(String::from)
            .to_vec(),
        rows: team_rows,
        total: Some(total),
        notes: vec![format!(
            "teams as the chargeback by team has them ([teams] and namespace labels); {} and {} are the pool's own rows; total_cost in {currency}",
            crate::domain::units::UNALLOCATED,
            crate::domain::units::UNMEASURED
        )],
        meta,
    };
    vec![summary, teams]
}

fn team_row(name: Cell, cost: i128, hours: i128, prev: Option<(i128, i128)>) -> Vec<Cell> {
    let opt = |v: Option<i128>, d: u32| v.map_or(Cell::Null, |u| dec(u, d));
    let (dc, pct) = prev.map_or((None, None), |(pc, _)| {
        let (d, p) = change(cost, pc);
        (Some(d), p)
    });
    vec![
        name,
        dec(cost, DECIMALS),
        opt(prev.map(|p| p.0), DECIMALS),
        opt(dc, DECIMALS),
        opt(pct, DECIMALS),
        dec(hours, HOUR_DECIMALS),
        opt(prev.map(|p| p.1), HOUR_DECIMALS),
        opt(prev.map(|p| hours - p.1), HOUR_DECIMALS),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(label: &str, cost: i128, teams: &[(&str, i128, i128)]) -> Figures {
        Figures {
            label: label.into(),
            total_cost: cost,
            gpu_hours: 7_440_000,
            util_pct: Some(5_000),
            idle_cost: 100,
            unallocated_cost: 0,
            worst_wait: None,
            still_pending: 0,
            teams: teams.iter().map(|(n, c, h)| (n.to_string(), (*c, *h))).collect(),
            incomplete: None,
        }
    }

    #[test]
    fn changes_are_exact_and_teams_of_either_window_are_listed() {
        let config = Config::default();
        let now = figures("2026-10", 300_00, &[("a", 200_00, 10_0000), ("b", 100_00, 5_0000)]);
        let before = figures("2026-09", 200_00, &[("a", 150_00, 8_0000), ("c", 50_00, 1_0000)]);
        let out = build(&now, Some(&before), &config);
        let s = &out[0];
        assert_eq!(s.rows[0][4], dec(100_00, 2), "cost change");
        assert_eq!(s.rows[0][5], dec(50_00, 2), "+50.00%");
        assert_eq!(s.rows[2][5], Cell::Null, "utilisation changes in points, not a share");
        let t = &out[1];
        let names: Vec<String> = t.rows.iter().map(|r| r[0].text()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(t.rows[2][1], dec(0, 2), "c spent nothing this month");
        assert_eq!(t.rows[2][4], dec(-100_00, 2), "-100%");
        assert_eq!(t.rows[1][4], Cell::Null, "b is new: no share of zero");
        let total = t.total.as_ref().unwrap();
        assert_eq!((total[1].clone(), total[2].clone()), (dec(300_00, 2), dec(200_00, 2)));
        // Without a previous window: no comparison anywhere.
        let alone = build(&now, None, &config);
        assert!(alone[0].rows.iter().all(|r| r[3] == Cell::Null && r[4] == Cell::Null));
        assert!(alone[1].rows.iter().all(|r| r[2] == Cell::Null));
    }

    #[test]
    fn units_rescale_exactly() {
        assert_eq!(units(&dec(123_4567, 4), 2), Some(123_46));
        assert_eq!(units(&dec(-123_4550, 4), 2), Some(-123_46));
        assert_eq!(units(&Cell::Int(7), 2), Some(700));
        assert_eq!(units(&Cell::Null, 2), None);
    }
}
