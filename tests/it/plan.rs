//! `gpuledger plan` on a simulated month, through the real binary and the lake: the baseline
//! replay against the simulator's own schedule (its ground-truth ledger), scenario identities,
//! conservation of each scenario's pool, the optimiser against the baseline, and scenario errors.

use crate::common;

use std::collections::BTreeMap;

use crate::common::JsonNumber;
use serde_json::Value;

fn section<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc.as_array().unwrap().iter().find(|s| s["report"] == name).unwrap_or_else(|| panic!("no section {name}"))
}

fn num(v: &Value) -> f64 {
    v.number().unwrap_or_else(|| panic!("not a number: {v}"))
}

const SCENARIOS: &str = r#"
[[scenario]]
name = "same as recorded"

[[scenario]]
name = "25% to team-llm"
[scenario.quotas]
team-llm = "25%"

[[scenario]]
name = "two more H100 nodes"
[[scenario.add_nodes]]
model = "NVIDIA H100 80GB HBM3"
count = 2

[[scenario]]
name = "batch only at night"
[[scenario.windows]]
namespace = "team-batch"
hours = "20:00-07:00"

[goals]
max_p95_wait_minutes = 10
fast_classes = ["high"]
guaranteed = { team-llm = "25%" }
"#;

#[test]
fn plan_replays_a_simulated_month() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::run_ok(d, &["simulate", "--out", "sim", "--gpus", "64", "--days", "31", "--seed", "7", "--start", "2026-10-01"]);
    std::fs::write(d.join("s.toml"), SCENARIOS).unwrap();
    let out = common::run_ok(
        d,
        &["--lake", "sim/lake", "plan", "--month", "2026-10", "--scenario", "s.toml", "--optimize", "--max-replays", "60", "--format", "json"],
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ledger: Value = serde_json::from_str(&std::fs::read_to_string(d.join("sim/ledger.json")).unwrap()).unwrap();

    // Calibration: the baseline replay against the simulator's schedule, per namespace.
    let cal = section(&doc, "plan_calibration");
    let mut checked = 0;
    for row in cal["rows"].as_array().unwrap() {
        let ns = row["namespace"].as_str().unwrap();
        let truth = &ledger["namespaces"][ns];
        if ns == "__unallocated__" {
            // The GPU-time no pod held, replayed against the simulator's.
            let (want, got) = (num(&truth["gpu_hours"]), num(&row["gpu_hours_replayed"]));
            assert!((got - want).abs() <= want * 0.01, "unallocated: baseline {got} GPU-h vs {want} in the simulator's schedule");
            continue;
        }
        let (want_h, got_h) = (num(&truth["gpu_hours"]), num(&row["gpu_hours_replayed"]));
        assert!((got_h - want_h).abs() <= want_h * 0.01, "{ns}: baseline {got_h} GPU-h vs {want_h} in the simulator's schedule");
        let (want_p95, got_p95) = (num(&truth["wait_p95_s"]) / 60.0, num(&row["wait_p95_min_replayed"]));
        assert!((got_p95 - want_p95).abs() <= want_p95 * 0.10 + 0.1, "{ns}: baseline p95 wait {got_p95} min vs {want_p95} in the schedule");
        // The recorded side is the lake's own record of that schedule.
        assert!((num(&row["gpu_hours_recorded"]) - want_h).abs() <= 0.1, "{ns}: recorded {} vs {want_h}", row["gpu_hours_recorded"]);
        checked += 1;
    }
    assert_eq!(checked, ledger["namespaces"].as_object().unwrap().keys().filter(|k| !k.starts_with("__")).count());
    assert!(num(&cal["gpu_hours_diff_pct"]).abs() < 1.0);
    assert!(cal["notes"][0].as_str().unwrap().starts_with("calibration: the baseline replay delivers"));

    let plan = section(&doc, "plan");
    let mut by: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for row in plan["rows"].as_array().unwrap() {
        by.entry(row["scenario"].as_str().unwrap().to_string()).or_default().push(row);
    }
    // A scenario that changes nothing is the baseline, row for row.
    assert_eq!(
        by["same as recorded"]
            .iter()
            .map(|r| {
                let mut r = (*r).clone();
                r["scenario"] = Value::Null;
                r
            })
            .collect::<Vec<_>>(),
        by["baseline"]
            .iter()
            .map(|r| {
                let mut r = (*r).clone();
                r["scenario"] = Value::Null;
                r
            })
            .collect::<Vec<_>>()
    );
    // Each scenario's rows (namespaces and __unallocated__) add up to its pool x the month.
    let hours = 31.0 * 24.0;
    for (name, pool) in [("baseline", 64.0), ("25% to team-llm", 64.0), ("two more H100 nodes", 80.0), ("batch only at night", 64.0)] {
        let sum: f64 = by[name].iter().map(|r| num(&r["gpu_hours"])).sum();
        assert!((sum - pool * hours).abs() < 0.1 * by[name].len() as f64, "{name}: {sum} GPU-h vs a pool of {}", pool * hours);
    }
    let ns_row = |scenario: &str, ns: &str| *by[scenario].iter().find(|r| r["namespace"] == ns).unwrap();
    assert_eq!(num(&ns_row("25% to team-llm", "team-llm")["quota_gpus"]), 16.0);
    assert!(
        num(&ns_row("25% to team-llm", "team-llm")["wait_p95_min"]) > num(&ns_row("baseline", "team-llm")["wait_p95_min"]),
        "a smaller quota makes team-llm wait longer"
    );
    let summary = section(&doc, "plan_summary");
    let srow = |name: &str| summary["rows"].as_array().unwrap().iter().find(|r| r["scenario"] == name).unwrap().clone();
    assert!(num(&srow("two more H100 nodes")["pending_gpu_hours"]) < num(&srow("baseline")["pending_gpu_hours"]) / 2.0);
    assert!(num(&srow("batch only at night")["pending_gpu_hours"]) > num(&srow("baseline")["pending_gpu_hours"]));

    // The optimiser's split beats the recorded one on the goals, keeps team-llm's guarantee
    // and does not raise the quotas' total.
    assert_eq!(summary["optimized_beats_baseline"], true);
    let (opt, base) = (srow("optimized"), srow("baseline"));
    let key = |r: &Value| (num(&r["fast_over_goal_min"]), num(&r["unallocated_pct"]));
    assert!(key(&opt) < key(&base), "optimized {:?} vs baseline {:?}", key(&opt), key(&base));
    assert!(num(&ns_row("optimized", "team-llm")["quota_gpus"]) >= 16.0);
    assert!(num(&opt["quota_total"]) <= num(&base["quota_total"]));

    // Cloud cost: every GPU of the pool is paid for, held or not, so the rows of scenarios on
    // the same pool add up to the same price; more nodes cost more.
    let cloud = |name: &str| by[name].iter().map(|r| num(&r["cloud_cost"])).sum::<f64>();
    assert!(cloud("baseline") > 0.0);
    assert!((cloud("25% to team-llm") - cloud("baseline")).abs() < 0.01 * by["baseline"].len() as f64, "{} vs {}", cloud("25% to team-llm"), cloud("baseline"));
    assert!(cloud("two more H100 nodes") > cloud("baseline"));

    // Power: the energy each namespace (and the idle pool) draws in the baseline replay against
    // the simulator's own energy ledger; priced at PUE x a night tariff (config/power-basis.toml).
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/power-basis.toml")).unwrap();
    std::fs::write(d.join("power.toml"), example.replace("/var/lib/gpuledger/lake", "sim/lake")).unwrap();
    let out = common::run_ok(d, &["--config", "power.toml", "plan", "--month", "2026-10", "--scenario", "s.toml", "--format", "json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut by: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for row in section(&doc, "plan")["rows"].as_array().unwrap() {
        by.entry(row["scenario"].as_str().unwrap().to_string()).or_default().push(row.clone());
    }
    let row = |scenario: &str, ns: &str| by[scenario].iter().find(|r| r["namespace"] == ns).unwrap().clone();
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        let (want, got) = (num(&truth["energy_kwh"]), num(&row("baseline", ns)["energy_kwh"]));
        assert!((got - want).abs() <= want * 0.02 + 0.1, "{ns}: baseline {got} kWh vs {want} in the simulator's ledger");
        let r = row("baseline", ns);
        assert_eq!(num(&r["total_cost"]), num(&r["power_cost"]), "{ns}: total_cost is the power cost on a power basis");
        // Every kWh is priced between the tariff's night and day rates, x PUE 1.45.
        let per_kwh = num(&r["power_cost"]) / num(&r["energy_kwh"]) / 1.45;
        assert!((0.14 - 1e-3..=0.21 + 1e-3).contains(&per_kwh), "{ns}: {per_kwh} per kWh");
    }
    // team-batch only at night draws its energy at the cheaper night rate.
    let per_kwh = |scenario: &str| {
        let r = row(scenario, "team-batch");
        num(&r["power_cost"]) / num(&r["energy_kwh"])
    };
    assert!(per_kwh("batch only at night") < per_kwh("baseline") * 0.95, "night {} vs baseline {}", per_kwh("batch only at night"), per_kwh("baseline"));
    // Calibration: the baseline's power cost against the chargeback's, from DCGM's counters.
    let cal = section(&doc, "plan_calibration");
    assert!(num(&cal["cost_diff_pct"]).abs() < 1.0, "{}", cal["notes"][0]);
    assert!(num(&cal["worst_namespace_cost_diff_pct"]) < 2.0, "{}", cal["notes"][0]);
    assert!(cal["notes"][0].as_str().unwrap().contains("power cost"), "{}", cal["notes"][0]);
}

#[test]
fn scenario_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::run_ok(d, &["simulate", "--out", "sim", "--gpus", "16", "--days", "2", "--seed", "3", "--start", "2026-10-01"]);
    std::fs::write(d.join("typo.toml"), "[[scenario]]\nname = \"x\"\n[scenario.quota]\nteam-llm = 4\n").unwrap();
    let out = common::bin()
        .current_dir(d)
        .args(["--lake", "sim/lake", "plan", "--from", "2026-10-01", "--to", "2026-10-03", "--scenario", "typo.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("typo.toml") && err.contains("quota"), "{err}");
    std::fs::write(d.join("ns.toml"), "[[scenario]]\nname = \"x\"\n[scenario.quotas]\nteam-nope = \"10%\"\n").unwrap();
    let out = common::bin()
        .current_dir(d)
        .args(["--lake", "sim/lake", "plan", "--from", "2026-10-01", "--to", "2026-10-03", "--scenario", "ns.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("scenario[0] (x).quotas.team-nope") && err.contains("team-llm"), "{err}");
    // A window without a pool says so.
    let err = common::run_fail(d, &["--lake", "sim/lake", "plan", "--month", "2025-01"]);
    assert!(err.contains("no pool"), "{err}");
}
