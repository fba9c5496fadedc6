//! The SQL cookbook (`queries/examples/*.sql`, documented in `docs/sql.md`) run with the real
//! binary on a simulated month, each answer checked against the simulator's ledger or the
//! chargeback report, which are computed independently of the views the cookbook uses.

use crate::common;
use crate::common::JsonNumber;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

const MONTH: &str = "2026-10";

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    ledger: Value,
    chargeback: BTreeMap<String, BTreeMap<String, String>>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        common::run_ok(&dir, &["demo", "--out", "d", "--month", MONTH, "--seed", "7"]);
        let ledger: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("d/ledger.json")).unwrap()).unwrap();
        let (header, rows) = common::parse_csv(&std::fs::read_to_string(dir.join(format!("d/reports/{MONTH}/chargeback.csv"))).unwrap());
        let chargeback = rows.into_iter().map(|r| (r[0].clone(), header.iter().cloned().zip(r).collect())).collect();
        Fixture { _tmp: tmp, dir, ledger, chargeback }
    })
}

/// Runs example `name` with `--param month=...` and extra params; returns rows as maps.
fn example(name: &str, extra: &[(&str, &str)]) -> Vec<BTreeMap<String, String>> {
    let f = fixture();
    let file = common::repo_root().join("queries/examples").join(name);
    let mut args: Vec<String> = vec!["--config".into(), "d/gpuledger.toml".into(), "query".into(), "-f".into(), file.display().to_string()];
    for (k, v) in std::iter::once(&("month", MONTH)).chain(extra) {
        args.push("--param".into());
        args.push(format!("{k}={v}"));
    }
    args.extend(["--format".into(), "csv".into()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = common::stdout(&common::run_ok(&f.dir, &refs));
    let (header, rows) = common::parse_csv(&text);
    rows.into_iter().map(|r| header.iter().cloned().zip(r).collect()).collect()
}

fn num(row: &BTreeMap<String, String>, k: &str) -> f64 {
    row.get(k).unwrap_or_else(|| panic!("no column {k} in {row:?}")).parse().unwrap_or_else(|_| panic!("{k} = {:?} is not a number", row[k]))
}

fn ledger_ns(ns: &str, k: &str) -> f64 {
    fixture().ledger["namespaces"][ns][k].number().unwrap_or_else(|| panic!("ledger {ns}.{k}"))
}

fn namespaces() -> Vec<String> {
    fixture().ledger["namespaces"].as_object().unwrap().keys().filter(|k| *k != "__unallocated__").cloned().collect()
}

fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!((got - want).abs() <= want.abs() * rel + 1e-6, "{what}: {got} vs {want} (tolerance {rel})");
}

#[test]
fn every_example_is_documented_and_runs() {
    let dir = common::repo_root().join("queries/examples");
    let doc = std::fs::read_to_string(common::repo_root().join("docs/sql.md")).unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if !name.ends_with(".sql") {
            continue;
        }
        n += 1;
        assert!(doc.contains(&name), "docs/sql.md does not mention {name}");
        let sql = std::fs::read_to_string(dir.join(&name)).unwrap();
        let first = sql.lines().next().unwrap_or("");
        assert!(first.starts_with("-- ") && first.ends_with('?'), "{name}: the first line states the question: {first}");
        let team = [("team", "foundation-models")];
        let rows = example(&name, if sql.contains("$team") { &team } else { &[] });
        assert!(!rows.is_empty(), "{name} returned no rows on a simulated month");
    }
    assert!(n >= 10, "the cookbook has at least ten questions, found {n}");
}

#[test]
fn team_cost_matches_the_chargeback_and_the_ledger() {
    let rows = example("01-team-cost.sql", &[("team", "foundation-models")]);
    let cloud: f64 = rows.iter().map(|r| num(r, "cloud_cost")).sum();
    let hours: f64 = rows.iter().map(|r| num(r, "gpu_hours")).sum();
    let cb = &fixture().chargeback["team-llm"];
    let cb_cloud: f64 = cb["cloud_cost"].parse().unwrap();
    assert!((cloud - cb_cloud).abs() <= 0.005 * (rows.len() + 1) as f64, "team cost {cloud} vs chargeback {cb_cloud}");
    close(hours, ledger_ns("team-llm", "gpu_hours"), 0.005, "foundation-models GPU-hours vs ledger");
    assert!(rows.iter().all(|r| r["gpu_model"].contains("H100")), "team-llm runs on H100 only: {rows:?}");
}

#[test]
fn gpu_hours_by_week_and_unallocated_by_node_add_up_to_the_pool() {
    let f = fixture();
    let cluster_h = f.ledger["cluster_gpu_seconds"].number().unwrap() / 3600.0;
    let rows = example("03-gpu-hours-by-model-and-week.sql", &[]);
    close(rows.iter().map(|r| num(r, "gpu_hours")).sum(), cluster_h, 1e-6, "weekly GPU-hours vs the pool");
    let unalloc: f64 = rows.iter().map(|r| num(r, "unallocated_gpu_hours")).sum();
    close(unalloc, ledger_ns("__unallocated__", "gpu_hours"), 0.005, "unallocated by week vs ledger");
    let by_node = example("09-unallocated-by-node.sql", &[]);
    close(by_node.iter().map(|r| num(r, "unallocated_gpu_hours")).sum(), ledger_ns("__unallocated__", "gpu_hours"), 0.005, "unallocated by node vs ledger");
    assert!(by_node.windows(2).all(|w| num(&w[0], "unallocated_gpu_hours") >= num(&w[1], "unallocated_gpu_hours")), "largest first");
    let daily = example("10-daily-cost-trend.sql", &[]);
    close(daily.iter().map(|r| num(r, "gpu_hours")).sum(), cluster_h, 1e-6, "daily trend vs the pool");
    assert_eq!(daily.iter().map(|r| r["date"].clone()).collect::<std::collections::BTreeSet<_>>().len(), 31, "one row set per day of October");
}

#[test]
fn working_hours_are_busier_than_nights() {
    let rows = example("04-night-vs-day.sql", &[]);
    assert_eq!(rows.len(), 2);
    let allocated: f64 = rows.iter().map(|r| num(r, "allocated_gpu_hours")).sum();
    let truth: f64 = namespaces().iter().map(|ns| ledger_ns(ns, "gpu_hours")).sum();
    close(allocated, truth, 0.005, "allocated GPU-hours vs ledger");
    let by: BTreeMap<String, f64> = rows.iter().map(|r| (r["period"].clone(), num(r, "allocation_pct"))).collect();
    assert!(by["working hours"] > by["nights and weekends"], "the simulated rhythm is busier in working hours: {by:?}");
}

#[test]
fn waits_match_the_ledger() {
    let longest = example("05-longest-waits.sql", &[]);
    assert!(longest.len() <= 10 && !longest.is_empty());
    let max_truth = namespaces().iter().map(|ns| ledger_ns(ns, "wait_max_s")).fold(0.0, f64::max);
    assert!((num(&longest[0], "wait_hours") * 3600.0 - max_truth).abs() <= 18.0, "longest wait {} h vs ledger {max_truth} s", longest[0]["wait_hours"]);
    assert!(longest.windows(2).all(|w| num(&w[0], "wait_hours") >= num(&w[1], "wait_hours")));

    let pct = example("07-wait-percentiles.sql", &[]);
    for ns in namespaces() {
        let rows: Vec<_> = pct.iter().filter(|r| r["namespace"] == ns).collect();
        let started: f64 = rows.iter().map(|r| num(r, "scheduled_pods")).sum();
        assert_eq!(started as u64, fixture().ledger["namespaces"][&ns]["pods_started"].as_u64().unwrap(), "{ns} pods scheduled");
        if rows.len() == 1 && started > 0.0 {
            close(num(rows[0], "max_wait_min") * 60.0, ledger_ns(&ns, "wait_max_s"), 0.001, &format!("{ns} max wait"));
            let (p50, want) = (num(rows[0], "p50_wait_min") * 60.0, ledger_ns(&ns, "wait_p50_s"));
            assert!((p50 - want).abs() <= (want * 0.1).max(60.0), "{ns} p50 wait {p50} s vs ledger {want} s");
        }
    }
}

#[test]
fn kills_preemptions_and_job_counts_match_the_ledger() {
    let rows = example("08-kills-and-preemptions.sql", &[]);
    for ns in namespaces() {
        let mine: Vec<_> = rows.iter().filter(|r| r["namespace"] == ns).collect();
        let sum = |k: &str| mine.iter().map(|r| num(r, k)).sum::<f64>() as u64;
        let truth = &fixture().ledger["namespaces"][&ns];
        assert_eq!(sum("pods"), truth["pods_created"].as_u64().unwrap(), "{ns} pods");
        assert_eq!(sum("oom_killed"), truth["oom_killed"].as_u64().unwrap(), "{ns} OOM kills");
        assert_eq!(sum("preempted"), truth["preempted"].as_u64().unwrap(), "{ns} preemptions");
        assert_eq!(sum("crashed"), truth["crashed"].as_u64().unwrap(), "{ns} crashes");
    }
    assert!(rows.iter().map(|r| num(r, "preempted")).sum::<f64>() > 0.0, "the simulated month has preemptions");

    for r in example("06-cost-per-successful-job.sql", &[]) {
        let ns = &r["namespace"];
        assert_eq!(num(&r, "pods") as u64, fixture().ledger["namespaces"][ns]["pods_created"].as_u64().unwrap(), "{ns} pods");
        let cb: f64 = fixture().chargeback[ns]["cloud_cost"].parse().unwrap();
        assert!((num(&r, "cloud_cost") - cb).abs() <= 0.011, "{ns} cost {} vs chargeback {cb}", r["cloud_cost"]);
        if num(&r, "succeeded") > 0.0 {
            close(num(&r, "cost_per_successful_job") * num(&r, "succeeded"), cb, 0.01, &format!("{ns} cost per job x jobs"));
        }
    }
}

#[test]
fn idle_pods_energy_and_inventory() {
    let idle = example("02-most-idle-pods.sql", &[]);
    assert!(idle.len() == 10, "ten pods: {}", idle.len());
    for r in &idle {
        assert!(num(r, "idle_gpu_hours") <= num(r, "gpu_hours") + 1e-9, "{r:?}");
    }
    assert!(idle.windows(2).all(|w| num(&w[0], "idle_gpu_hours") >= num(&w[1], "idle_gpu_hours")));
    assert!(num(&idle[0], "idle_gpu_hours") > 1.0, "the simulator plants idle notebooks: {:?}", idle[0]);

    let energy = example("11-energy-by-team.sql", &[]);
    let teams: BTreeMap<&str, &str> = gpuledger::simulate::workload::default_namespaces().iter().map(|n| (n.team, n.name)).collect();
    for r in &energy {
        let ns = teams.get(r["team"].as_str()).copied().unwrap_or(r["team"].as_str());
        close(num(r, "energy_kwh"), ledger_ns(ns, "energy_kwh"), 0.005, &format!("{} energy", r["team"]));
    }

    let pool = example("12-pool-inventory.sql", &[]);
    let gpus = fixture().ledger["gpus"].number().unwrap();
    close(pool.iter().map(|r| num(r, "gpus")).sum(), gpus, 0.0, "GPUs in the pool");
    close(pool.iter().map(|r| num(r, "gpu_equivalents")).sum(), gpus, 1e-9, "MIG instances add up to whole GPUs");
}
