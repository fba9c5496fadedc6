//! The operations reports of a demo month against the simulator: queue waits (exact, the
//! same nearest-rank percentiles as the ledger), events, the heatmap's GPU time, and the
//! inventory against the simulated cluster itself.

use crate::common;
use crate::common::JsonNumber;

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

struct Fixture {
    tmp: tempfile::TempDir,
    reports: PathBuf,
    ledger: Value,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        common::run_ok(tmp.path(), &["demo", "--out", "d", "--month", "2026-10", "--seed", "42"]);
        let ledger = serde_json::from_str(&std::fs::read_to_string(tmp.path().join("d/ledger.json")).unwrap()).unwrap();
        Fixture { reports: tmp.path().join("d/reports/2026-10"), tmp, ledger }
    })
}

fn report(name: &str) -> Value {
    let f = fixture();
    for ext in ["txt", "csv", "json", "md", "parquet"] {
        assert!(f.reports.join(format!("{name}.{ext}")).is_file(), "{name}.{ext} written");
    }
    serde_json::from_str(&std::fs::read_to_string(f.reports.join(format!("{name}.json"))).unwrap()).unwrap()
}

fn num(v: &Value) -> f64 {
    v.number().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn namespaces() -> Vec<String> {
    fixture().ledger["namespaces"].as_object().unwrap().keys().filter(|k| *k != "__unallocated__").cloned().collect()
}

#[test]
fn queue_waits_equal_the_ledger() {
    let q = report("queue");
    let rows = q["rows"].as_array().unwrap();
    for ns in namespaces() {
        let truth = &fixture().ledger["namespaces"][&ns];
        let row = rows.iter().find(|r| r["namespace"] == ns.as_str()).unwrap_or_else(|| panic!("no queue row for {ns}"));
        assert_eq!(row["scheduled"].as_u64(), truth["pods_started"].as_u64(), "{ns} pods scheduled");
        for (col, key) in [("p50_wait_min", "wait_p50_s"), ("p95_wait_min", "wait_p95_s"), ("max_wait_min", "wait_max_s")] {
            let (got, want) = (num(&row[col]) * 60.0, num(&truth[key]));
            assert!((got - want).abs() <= 0.3 + 1e-9, "{ns} {col}: {got} s vs ledger {want} s");
        }
    }
    let longest = report("queue_longest");
    let max_truth = namespaces().iter().map(|ns| num(&fixture().ledger["namespaces"][ns]["wait_max_s"])).fold(0.0, f64::max);
    assert!((num(&longest["rows"][0]["wait_min"]) * 60.0 - max_truth).abs() <= 0.3, "the longest waiter is the ledger's longest wait");
    // Pending demand: the hour-of-day table averages the hourly one over the month's days.
    let hourly: f64 = report("queue_hourly")["rows"].as_array().unwrap().iter().map(|r| num(&r["avg_pending_gpus"])).sum();
    let by_hour: f64 = report("queue_hour_of_day")["rows"].as_array().unwrap().iter().map(|r| num(&r["avg_pending_gpus"])).sum();
    assert!(hourly > 0.0 && (hourly / 31.0 - by_hour).abs() <= by_hour * 0.01 + 0.5, "hourly {hourly} / 31 vs by hour of day {by_hour}");
}

/// The queue by a key of each pod against the simulation itself: per workload and per queue (the
/// Kueue LocalQueue, else the Volcano queue, from the simulator's pod labels; `__unattributed__`
/// where a pod has none) and priority class, the month's pods scheduled and still pending, the
/// namespaces they ran in and their waits' nearest-rank percentiles; per key the pending
/// GPU-hours of the simulated pending runs (steps x GPUs asked for), and in total the namespaces'.
#[test]
fn queue_by_workload_and_queue_equals_the_simulated_pods() {
    use std::collections::{BTreeMap, BTreeSet};
    let f = fixture();
    let sim = simulation();
    let owners = owners();
    let (ws, we) = sim.params.window_ms();
    let step = sim.params.step_s as i64 * 1000;
    let lake = f.tmp.path().join("d/lake");
    let by_ns = report("queue_hourly");
    let by_ns = by_ns["rows"].as_array().unwrap();
    let by_ns_pending: f64 = by_ns.iter().map(|r| num(&r["avg_pending_gpus"])).sum();
    for by in ["workload", "queue"] {
        let value_of = |o: &gpuledger::simulate::owners::Ownership| -> String {
            let v = if by == "workload" { Some(o.workload_key()) } else { queue_of(o) };
            v.unwrap_or_else(|| "__unattributed__".into())
        };
        let out = f.tmp.path().join(format!("queue-by-{by}"));
        common::run_ok(
            f.tmp.path(),
            &["--lake", lake.to_str().unwrap(), "report", "queue", "--month", "2026-10", "--by", by, "--format", "json", "-o", out.to_str().unwrap()],
        );
        let section = |name: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(out.join(format!("{name}.json"))).unwrap()).unwrap() };
        // The simulated pods created in the month, by value and priority class.
        let mut truth: BTreeMap<(String, String), (Vec<i64>, i64, BTreeSet<String>)> = BTreeMap::new();
        for (p, o) in sim.schedule.pods.iter().zip(owners).filter(|(p, _)| p.created >= ws && p.created < we) {
            let e = truth.entry((value_of(o), p.priority.class_name().to_string())).or_default();
            match p.scheduled {
                Some(s) => e.0.push(s - p.created),
                None => e.1 += 1,
            }
            e.2.insert(sim.namespaces[p.ns].name.to_string());
        }
        let waits = section("queue");
        let rows = waits["rows"].as_array().unwrap();
        assert_eq!(rows.len(), truth.len(), "by {by}: a row per value and priority class");
        if by == "queue" {
            assert!(truth.keys().any(|(v, _)| v == "__unattributed__") && truth.keys().any(|(v, _)| v.ends_with("-lq")), "queued and unqueued pods");
        }
        for ((value, pc), (mut w, still, namespaces)) in truth {
            let row =
                rows.iter().find(|r| r[by] == value.as_str() && r["priority_class"] == pc.as_str()).unwrap_or_else(|| panic!("by {by}: no row {value} {pc}"));
            assert_eq!(row["scheduled"].as_u64(), Some(w.len() as u64), "{value} {pc}: scheduled");
            assert_eq!(row["still_pending"].as_i64(), Some(still), "{value} {pc}: still pending");
            assert_eq!(row["namespaces"], namespaces.into_iter().collect::<Vec<_>>().join(", ").as_str(), "{value} {pc}");
            w.sort_unstable();
            for (col, q) in [("p50_wait_min", 0.5), ("p95_wait_min", 0.95), ("max_wait_min", 1.0)] {
                let Some(&want) = w.get(((w.len().max(1) - 1) as f64 * q).round() as usize) else { continue };
                let got = num(&row[col]) * 60_000.0;
                assert!((got - want as f64).abs() <= 300.0 + 1e-6, "{value} {pc} {col}: {got} ms vs simulated {want} ms");
            }
        }
        // Pending demand: each simulated pending run's steps in the month, per value.
        let mut pending: BTreeMap<String, f64> = BTreeMap::new();
        for run in &sim.schedule.pending {
            let p = &sim.schedule.pods[run.pod];
            let steps = (run.first..=run.last).step_by(step as usize).filter(|t| *t >= ws && *t < we).count();
            let share = p.resource.hami_pct().map_or(1.0, |pct| f64::from(pct) / 100.0);
            *pending.entry(value_of(&owners[run.pod])).or_default() += steps as f64 * sim.params.step_s as f64 * p.gpu_request as f64 * share / 3600.0;
        }
        let hourly = section("queue_hourly");
        let hourly = hourly["rows"].as_array().unwrap();
        for (value, want) in &pending {
            let mine: Vec<_> = hourly.iter().filter(|r| r[by] == value.as_str()).collect();
            let got: f64 = mine.iter().map(|r| num(&r["avg_pending_gpus"])).sum();
            assert!((got - want).abs() <= 0.005 * mine.len() as f64 + 1e-6, "by {by}: {value} pending {got} GPU-h vs simulated {want}");
        }
        assert!(pending.len() >= 3, "by {by}: pending pods under several values: {pending:?}");
        let total: f64 = hourly.iter().map(|r| num(&r["avg_pending_gpus"])).sum();
        assert!((total - by_ns_pending).abs() <= 0.005 * (hourly.len() + by_ns.len()) as f64, "by {by}: pending {total} GPU-h vs by namespace {by_ns_pending}");
    }
}

#[test]
fn events_equal_the_simulated_schedule() {
    let e = report("events");
    let rows = e["rows"].as_array().unwrap();
    let sim = simulation();
    let (ws, we) = sim.params.window_ms();
    let mut preempted = 0;
    for (i, ns) in sim.namespaces.iter().enumerate() {
        // Pods of the namespace that finished in October, by how they ended.
        let ended = |reason: &str| {
            sim.schedule.pods.iter().filter(|p| p.ns == i && p.reason == Some(reason) && p.finished.is_some_and(|f| f >= ws && f < we)).count() as i64
        };
        let row = rows.iter().find(|r| r["namespace"] == ns.name).unwrap_or_else(|| panic!("no events row for {}", ns.name));
        for (col, reason) in [("oom_killed", "OOMKilled"), ("crashed", "Error"), ("preempted", "Preempted")] {
            assert_eq!(row[col].as_i64().unwrap(), ended(reason), "{} {col}", ns.name);
        }
        preempted += ended("Preempted");
        // And close to the ledger, which counts the pods created in the month.
        let truth = &fixture().ledger["namespaces"][ns.name];
        assert!((row["oom_killed"].as_i64().unwrap() - truth["oom_killed"].as_i64().unwrap()).abs() <= 15, "{}", ns.name);
    }
    assert!(preempted > 0, "the demo month has preemptions");
    assert_eq!(e["total"]["oom_killed"].as_i64().unwrap(), rows.iter().map(|r| r["oom_killed"].as_i64().unwrap()).sum::<i64>());
}

/// The events by workload against the simulation: per workload (the simulator's owners) and
/// priority class, the month's finished pods by how they ended, exactly, with the namespaces they
/// ran in; the totals are the namespaces' to the unit.
#[test]
fn events_by_workload_equal_the_simulated_pods() {
    use std::collections::{BTreeMap, BTreeSet};
    let f = fixture();
    let sim = simulation();
    let owners = owners();
    let (ws, we) = sim.params.window_ms();
    let lake = f.tmp.path().join("d/lake");
    let e: Value = serde_json::from_str(&common::stdout(&common::run_ok(
        f.tmp.path(),
        &["--lake", lake.to_str().unwrap(), "report", "events", "--month", "2026-10", "--by", "workload", "--format", "json"],
    )))
    .unwrap();
    let mut truth: BTreeMap<(String, String), ([i64; 4], BTreeSet<String>)> = BTreeMap::new();
    for (p, o) in sim.schedule.pods.iter().zip(owners).filter(|(p, _)| p.finished.is_some_and(|t| t >= ws && t < we)) {
        let g = truth.entry((o.workload_key(), p.priority.class_name().to_string())).or_default();
        g.0[0] += 1;
        for (k, reason) in ["OOMKilled", "Error", "Preempted"].iter().enumerate() {
            g.0[k + 1] += i64::from(p.reason == Some(*reason));
        }
        g.1.insert(sim.namespaces[p.ns].name.to_string());
    }
    let rows = e["rows"].as_array().unwrap();
    assert_eq!(rows.len(), truth.len(), "a row per workload and priority class");
    assert!(truth.values().filter(|(c, _)| c[1] + c[2] + c[3] > 0).count() >= 5, "workloads with bad endings");
    for ((workload, pc), (counts, namespaces)) in &truth {
        let row =
            rows.iter().find(|r| r["workload"] == workload.as_str() && r["priority_class"] == pc.as_str()).unwrap_or_else(|| panic!("no row {workload} {pc}"));
        for (k, col) in ["pods_finished", "oom_killed", "crashed", "preempted"].iter().enumerate() {
            assert_eq!(row[col].as_i64(), Some(counts[k]), "{workload} {pc} {col}");
        }
        assert_eq!(row["namespaces"], namespaces.iter().cloned().collect::<Vec<_>>().join(", ").as_str(), "{workload}");
    }
    let by_ns = report("events");
    for col in ["pods_finished", "oom_killed", "crashed", "preempted", "evicted", "lost_gpu_hours"] {
        assert_eq!(e["total"][col], by_ns["total"][col], "total {col}: by workload as by namespace");
    }
}

/// The `pod_keys` view (ad hoc SQL and `serve`: any table grouped by workload or queue with a
/// join) against the simulator's owners and labels: every pod of the month is a row, with its
/// workload, its queue (the Kueue LocalQueue, else the Volcano queue) and its ClusterQueue, or
/// NULL (an empty cell) where its labels name none.
#[test]
fn the_pod_keys_view_names_each_simulated_pods_workload_and_queues() {
    use std::collections::BTreeMap;
    let f = fixture();
    let sim = simulation();
    let owners = owners();
    let (ws, we) = sim.params.window_ms();
    let lake = f.tmp.path().join("d/lake");
    let sql = "SELECT namespace, pod, workload, queue, cluster_queue FROM pod_keys ORDER BY namespace, pod";
    let csv = common::stdout(&common::run_ok(f.tmp.path(), &["--lake", lake.to_str().unwrap(), "query", sql, "--format", "csv"]));
    let (_, rows) = common::parse_csv(&csv);
    let got: BTreeMap<(String, String), (String, String, String)> =
        rows.into_iter().map(|r| ((r[0].clone(), r[1].clone()), (r[2].clone(), r[3].clone(), r[4].clone()))).collect();
    // Each name's latest pod (pods created up to the month's end), as the reports resolve a name.
    let mut want: BTreeMap<(String, String), (i64, (String, String, String))> = BTreeMap::new();
    for (p, o) in sim.schedule.pods.iter().zip(owners).filter(|(p, _)| p.created < we) {
        let cluster_queue = o.labels.iter().find(|(k, _)| *k == "kueue.x-k8s.io/cluster-queue-name").map(|(_, v)| v.clone());
        let keys = (o.workload_key(), queue_of(o).unwrap_or_default(), cluster_queue.unwrap_or_default());
        let e = want.entry((sim.namespaces[p.ns].name.to_string(), p.name.clone())).or_insert((p.created, keys.clone()));
        if p.created >= e.0 {
            *e = (p.created, keys);
        }
    }
    let mut checked = 0;
    for (id, (created, keys)) in &want {
        match got.get(id) {
            Some(row) => {
                assert_eq!(row, keys, "{id:?}");
                checked += 1;
            }
            None => assert!(*created < ws, "{id:?} (created in the month) missing from pod_keys"),
        }
    }
    assert!(checked > 500, "the month's pods: {checked}");
    assert!(got.values().any(|k| k.1.is_empty()) && got.values().any(|k| k.1.ends_with("-lq")) && got.values().any(|k| k.1 == "batch-q"), "queued and not");
}

#[test]
fn heatmap_covers_the_pool_and_shows_the_rhythm() {
    let h = report("heatmap");
    let rows = h["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 7 * 24);
    let gpus = num(&fixture().ledger["gpus"]);
    assert_eq!(num(&h["total"]["gpu_hours"]), gpus * 31.0 * 24.0, "every GPU-hour of the month in one cell");
    let allocated: f64 = namespaces().iter().map(|ns| num(&fixture().ledger["namespaces"][ns]["gpu_hours"])).sum();
    let got = num(&h["total"]["allocated_gpu_hours"]);
    assert!((got - allocated).abs() <= allocated * 0.005, "allocated {got} vs ledger {allocated}");
    let cell = |day: &str, hour: i64| rows.iter().find(|r| r["weekday"] == day && r["hour"] == hour).map(|r| num(&r["allocation_pct"])).unwrap();
    let (work, night): (f64, f64) = (["Tue", "Wed", "Thu"].iter().map(|d| cell(d, 14)).sum(), ["Sat", "Sun"].iter().map(|d| cell(d, 3)).sum::<f64>() * 1.5);
    assert!(work > night, "weekday afternoons ({work}) busier than weekend nights ({night})");
    for r in rows {
        let u = num(&r["util_pct"]);
        assert!((0.0..=100.0).contains(&u), "utilisation is a percentage: {r}");
    }
}

/// Node use against the simulation itself: each node's GPU-hours are its GPUs x the month, its
/// held GPU-hours the units' steps a pod held (x their share of the GPU), its energy the sum of
/// its GPUs' simulated draw per step; the total is the pool's.
#[test]
fn node_use_is_each_simulated_node_held_and_drawn() {
    let nu = report("node_use");
    let sim = simulation();
    let (ws, we) = sim.params.window_ms();
    let (signals, step) = (sim.signals(), sim.params.step_s as i64 * 1000);
    let rows = nu["rows"].as_array().unwrap();
    assert_eq!(rows.len(), sim.cluster.nodes.len(), "one row per node (each has one model)");
    let hours = (we - ws) as f64 / 3_600_000.0;
    for (n, node) in sim.cluster.nodes.iter().enumerate() {
        let row = rows.iter().find(|r| r["node"] == node.name.as_str()).unwrap_or_else(|| panic!("{} missing", node.name));
        assert_eq!(row["gpu_model"], node.model.name);
        let gpus: Vec<usize> = (0..sim.cluster.gpus.len()).filter(|&g| sim.cluster.gpus[g].node == n).collect();
        assert_eq!(num(&row["gpu_hours"]), gpus.len() as f64 * hours, "{}: GPUs x the month", node.name);
        let (mut held, mut energy_j) = (0.0, 0.0);
        for &g in &gpus {
            for &u in &sim.cluster.gpus[g].units {
                let share = sim.cluster.units[u].share;
                held += (ws..we).step_by(step as usize).filter(|&ts| signals.holder_at(u, ts).is_some()).count() as f64 * share * step as f64 / 3_600_000.0;
            }
            energy_j += (ws..we).step_by(step as usize).map(|ts| signals.gpu_at(g, ts).energy_j()).sum::<f64>();
        }
        let (got_held, got_kwh) = (num(&row["allocated_gpu_hours"]), num(&row["energy_kwh"]));
        assert!((got_held - held).abs() <= 0.001 + held * 1e-6, "{}: held {got_held} vs simulated {held}", node.name);
        let kwh = energy_j / 3.6e6;
        assert!(kwh > 0.0 && (got_kwh - kwh).abs() <= 0.002 + kwh * 1e-6, "{}: {got_kwh} kWh vs simulated {kwh}", node.name);
        assert!((0.0..=100.0).contains(&num(&row["util_pct"])), "{row}");
    }
    assert_eq!(num(&nu["total"]["gpu_hours"]), sim.cluster.gpus.len() as f64 * hours, "the pool");
    let held_total: f64 = rows.iter().map(|r| num(&r["allocated_gpu_hours"])).sum();
    assert!((num(&nu["total"]["allocated_gpu_hours"]) - held_total).abs() <= 0.001 * rows.len() as f64, "the total adds the nodes");
}

#[test]
fn inventory_is_the_simulated_cluster() {
    let inv = report("inventory");
    let cluster = gpuledger::simulate::cluster::Cluster::build(64, 42);
    assert_eq!(inv["total"]["gpus"].as_u64().unwrap() as usize, cluster.gpus.len());
    let rows = inv["rows"].as_array().unwrap();
    assert_eq!(rows.len(), cluster.nodes.len(), "one row per node (each node has one model)");
    for node in &cluster.nodes {
        let row = rows.iter().find(|r| r["node"] == node.name.as_str()).unwrap_or_else(|| panic!("{} missing", node.name));
        assert_eq!(row["gpu_model"], node.model.name);
        let mig = row["mig_gpus"].as_u64().unwrap();
        assert_eq!(mig > 0, node.mig, "{}: MIG", node.name);
        if node.mig {
            let mut profiles: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
            for u in node.units.iter().map(|&u| &cluster.units[u]) {
                *profiles.entry(u.mig_profile.unwrap()).or_default() += 1;
            }
            let want = profiles.iter().map(|(p, n)| format!("{n} x {p}")).collect::<Vec<_>>().join(" + ");
            assert_eq!(row["mig_layout"], want.as_str());
        }
    }
}

#[test]
fn sections_on_stdout_and_in_a_folder() {
    let dir = fixture().tmp.path();
    let args = |fmt: &str| ["--config", "d/gpuledger.toml", "report", "queue", "--month", "2026-10", "--format", fmt].map(String::from).to_vec();
    let run = |a: Vec<String>| common::bin().current_dir(dir).args(a).output().unwrap();
    let json: Value = serde_json::from_slice(&run(args("json")).stdout).unwrap();
    let names: Vec<&str> = json.as_array().unwrap().iter().map(|s| s["report"].as_str().unwrap()).collect();
    assert_eq!(names, ["queue", "queue_longest", "queue_hourly", "queue_hour_of_day"]);
    let csv = String::from_utf8(run(args("csv")).stdout).unwrap();
    assert_eq!(csv.split("\n\n").count(), 4, "four CSV tables separated by blank lines");
    assert_eq!(csv, names.iter().map(|n| std::fs::read_to_string(fixture().reports.join(format!("{n}.csv"))).unwrap()).collect::<Vec<_>>().join("\n"));
    let out = run(args("parquet"));
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("give -o a folder"));
    let mut a = args("parquet");
    a.extend(["-o".into(), "qdir".into()]);
    assert!(run(a).status.success());
    for n in names {
        assert_eq!(std::fs::read(dir.join(format!("qdir/{n}.parquet"))).unwrap(), std::fs::read(fixture().reports.join(format!("{n}.parquet"))).unwrap());
    }
}

/// The demo's simulation, in process: its schedule is the ground truth for idle behaviours.
fn simulation() -> &'static gpuledger::simulate::Simulation {
    static S: OnceLock<gpuledger::simulate::Simulation> = OnceLock::new();
    S.get_or_init(|| {
        gpuledger::simulate::Simulation::run(gpuledger::simulate::SimParams {
            gpus: 64,
            days: 31,
            seed: 42,
            step_s: 30,
            start: chrono::NaiveDate::from_ymd_opt(2026, 10, 1).unwrap(),
            warmup_days: 3,
            target_util: 0.75,
            time_sliced: 0,
        })
        .unwrap()
    })
}

/// Who owns each simulated pod and its labels (the simulator's truth), in `schedule.pods`' order.
fn owners() -> &'static [gpuledger::simulate::owners::Ownership] {
    static O: OnceLock<Vec<gpuledger::simulate::owners::Ownership>> = OnceLock::new();
    O.get_or_init(|| {
        let sim = simulation();
        gpuledger::simulate::owners::all(&sim.namespaces, &sim.schedule.pods, sim.params.window_ms())
    })
}

/// A pod's queue as `--by queue` resolves it: its Kueue LocalQueue label, else its Volcano queue.
fn queue_of(o: &gpuledger::simulate::owners::Ownership) -> Option<String> {
    let label = |key: &str| o.labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone());
    label("kueue.x-k8s.io/local-queue-name").or_else(|| label("volcano.sh/queue-name"))
}

/// Sampled GPU-hours per (namespace, pod name) of the pods with `behavior`, on the 30 s grid
/// of October (a row stands for [ts, ts + 30 s) and belongs to the pod holding it at ts),
/// counting only unbroken holdings of a unit of at least `min_steps` steps.
fn held_hours(behavior: gpuledger::simulate::workload::Behavior, min_steps: usize) -> std::collections::BTreeMap<(String, String), f64> {
    let sim = simulation();
    let (ws, we) = sim.params.window_ms();
    let signals = sim.signals();
    let mut out = std::collections::BTreeMap::new();
    for (u, unit) in sim.cluster.units.iter().enumerate() {
        let mut run: Option<(usize, usize)> = None; // (pod, steps)
        let close = |run: Option<(usize, usize)>, out: &mut std::collections::BTreeMap<(String, String), f64>| {
            if let Some((id, n)) = run {
                let p = &sim.schedule.pods[id];
                if p.behavior == behavior && n >= min_steps {
                    *out.entry((sim.namespaces[p.ns].name.to_string(), p.name.clone())).or_insert(0.0) += unit.share * n as f64 * 30.0 / 3600.0;
                }
            }
        };
        let mut ts = ws;
        while ts < we {
            let holder = signals.holder_at(u, ts);
            match (run, holder) {
                (Some((id, n)), Some(h)) if id == h => run = Some((id, n + 1)),
                (_, h) => {
                    close(run, &mut out);
                    run = h.map(|h| (h, 1));
                }
            }
            ts += 30_000;
        }
        close(run, &mut out);
    }
    out
}

/// The idle report by workload: each planted idle pod's row names its workload (from the
/// simulator's owners, not the lake), each workload's idle GPU-hours hold at least its planted
/// idle pods' (other pods may idle too), and the rows by workload add up to the namespaces'.
#[test]
fn idle_by_workload_holds_each_planted_idle_pod_under_its_workload() {
    use gpuledger::simulate::workload::Behavior;
    let f = fixture();
    let out = f.tmp.path().join("idle-by-workload");
    let lake = f.tmp.path().join("d/lake");
    common::run_ok(
        f.tmp.path(),
        &["--lake", lake.to_str().unwrap(), "report", "idle", "--month", "2026-10", "--by", "workload", "--format", "json", "-o", out.to_str().unwrap()],
    );
    let section = |name: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(out.join(format!("{name}.json"))).unwrap()).unwrap() };
    let (pods, by_key, by_ns) = (section("idle"), section("idle_by_key"), section("idle_namespaces"));
    let sim = simulation();
    let owners = owners();
    let workload_of: std::collections::BTreeMap<(String, String), String> =
        sim.schedule.pods.iter().zip(owners).map(|(p, o)| ((sim.namespaces[p.ns].name.to_string(), p.name.clone()), o.workload_key())).collect();
    let rows = pods["rows"].as_array().unwrap();
    let keyed: std::collections::BTreeMap<String, f64> =
        by_key["rows"].as_array().unwrap().iter().map(|r| (r["workload"].as_str().unwrap().to_string(), num(&r["idle_gpu_hours"]))).collect();
    let mut want: std::collections::BTreeMap<String, (f64, usize)> = std::collections::BTreeMap::new();
    for ((ns, pod), hours) in held_hours(Behavior::Idle, 60).iter().filter(|(_, h)| **h >= 1.0) {
        let w = &workload_of[&(ns.clone(), pod.clone())];
        for r in rows.iter().filter(|r| r["namespace"] == ns.as_str() && r["pod"] == pod.as_str()) {
            assert_eq!(r["workload"], w.as_str(), "{ns}/{pod}");
        }
        let e = want.entry(w.clone()).or_default();
        *e = (e.0 + hours, e.1 + 1);
    }
    assert!(want.len() >= 3, "planted idle pods in several workloads: {want:?}");
    for (w, (hours, n)) in &want {
        let got = keyed.get(w).unwrap_or_else(|| panic!("{w} has no idle row"));
        assert!(*got >= hours - 0.5e-4 * (*n as f64 + 1.0), "{w}: {got} idle GPU-h, its planted idle pods alone {hours}");
    }
    assert!(!keyed.contains_key("__unattributed__"), "every GPU pod has a workload");
    let sum = |v: &Value| -> f64 { v["rows"].as_array().unwrap().iter().map(|r| num(&r["idle_gpu_hours"])).sum() };
    let (a, b) = (sum(&by_key), sum(&by_ns));
    assert!((a - b).abs() <= 1e-4 * (keyed.len() + by_ns["rows"].as_array().unwrap().len()) as f64, "by workload {a} vs by namespace {b}");
}

#[test]
fn idle_report_finds_the_planted_idle_pods_zombies_and_starved_jobs() {
    use gpuledger::simulate::workload::Behavior;
    let idle = report("idle");
    let rows = idle["rows"].as_array().unwrap();
    let truth = held_hours(Behavior::Idle, 60);
    // An idle pod's utilisation stays under 3%: every unbroken holding of 30 minutes or more
    // is an idle run.
    let mut checked = 0;
    for ((ns, pod), hours) in &truth {
        if *hours < 1.0 {
            continue;
        }
        // A pod name reused after a preemption may have run on another GPU model: one row each.
        let mine: Vec<_> = rows.iter().filter(|r| r["namespace"] == ns.as_str() && r["pod"] == pod.as_str()).collect();
        assert!(!mine.is_empty(), "idle pod {ns}/{pod} ({hours} h) not reported");
        let got: f64 = mine.iter().map(|r| num(&r["idle_gpu_hours"])).sum();
        assert!((got - hours).abs() <= 0.5e-4 * mine.len() as f64 + 1e-9, "{ns}/{pod}: idle {got} h vs simulated {hours} h (rows rounded to 4 places)");
        checked += 1;
    }
    assert!(checked >= 10, "the month has idle pods to check: {checked}");
    // The top offenders are the planted ones.
    for r in rows.iter().take(10) {
        assert!(
            truth.contains_key(&(r["namespace"].as_str().unwrap().to_string(), r["pod"].as_str().unwrap().to_string())),
            "top offender {r} is not an idle pod"
        );
    }

    // Zombie memory: crashed pods' framebuffer left on a GPU no pod holds.
    let sim = simulation();
    let (ws, we) = sim.params.window_ms();
    let signals = sim.signals();
    let mut zombie_truth = 0.0;
    for (u, unit) in sim.cluster.units.iter().enumerate() {
        let mut ts = ws;
        while ts < we {
            if signals.holder_at(u, ts).is_none() && signals.zombie_at(u, ts).is_some_and(|mib| mib as f64 > 1024.0) {
                zombie_truth += unit.share * 30.0 / 3600.0;
            }
            ts += 30_000;
        }
    }
    let zombie: f64 = report("idle_zombie")["rows"].as_array().unwrap().iter().map(|r| num(&r["zombie_gpu_hours"])).sum();
    eprintln!("zombie GPU-hours: report {zombie:.4}, simulated {zombie_truth:.4}");
    assert!(zombie_truth > 0.0, "the simulator plants zombies");
    assert!((zombie - zombie_truth).abs() <= zombie_truth * 0.005 + 0.01, "zombie GPU-hours {zombie} vs simulated {zombie_truth}");

    // Data-starved jobs: found, and nothing else.
    let starved_truth = held_hours(Behavior::DataStarved, 0);
    let starved = report("idle_starved");
    let found: std::collections::BTreeSet<(String, String)> =
        starved["rows"].as_array().unwrap().iter().map(|r| (r["namespace"].as_str().unwrap().to_string(), r["pod"].as_str().unwrap().to_string())).collect();
    let expected: Vec<_> = starved_truth.iter().filter(|(_, h)| **h >= 1.0).map(|(k, _)| k.clone()).collect();
    let hit = expected.iter().filter(|k| found.contains(*k)).count();
    assert!(!expected.is_empty() && hit * 100 >= expected.len() * 95, "recall: {hit} of {} starved pods found", expected.len());
    let right = found.iter().filter(|k| starved_truth.contains_key(*k)).count();
    eprintln!("idle pods checked exactly: {checked}; data-starved: {hit} of {} found, {right} of {} reported are starved", expected.len(), found.len());
    assert!(right * 100 >= found.len() * 95, "precision: {right} of {} reported pods are starved", found.len());

    // Unallocated GPU time per node adds up to the ledger's __unallocated__ row.
    let un = report("idle_unallocated");
    let want = num(&fixture().ledger["namespaces"]["__unallocated__"]["gpu_hours"]);
    let got = num(&un["total"]["unallocated_gpu_hours"]);
    assert!((got - want).abs() <= want * 0.005, "unallocated {got} vs ledger {want}");
}

#[test]
fn quota_review_against_the_simulated_schedule() {
    let sim = simulation();
    let (ws, we) = sim.params.window_ms();
    let signals = sim.signals();
    // Whole GPUs each namespace held at each step of October.
    let whole: Vec<usize> = (0..sim.cluster.units.len()).filter(|&u| sim.cluster.units[u].mig_profile.is_none()).collect();
    let n_ns = sim.namespaces.len();
    let (mut gpu_steps, mut peak, mut at_quota) = (vec![0usize; n_ns], vec![0usize; n_ns], vec![0usize; n_ns]);
    let mut ts = ws;
    while ts < we {
        let mut held = vec![0usize; n_ns];
        for &u in &whole {
            if let Some(id) = signals.holder_at(u, ts) {
                held[sim.schedule.pods[id].ns] += 1;
            }
        }
        for ns in 0..n_ns {
            gpu_steps[ns] += held[ns];
            peak[ns] = peak[ns].max(held[ns]);
            if held[ns] as u32 >= sim.schedule.quota_hard[ns] {
                at_quota[ns] += 1;
            }
        }
        ts += 30_000;
    }
    let q = report("quota");
    let rows = q["rows"].as_array().unwrap();
    let steps = ((we - ws) / 30_000) as f64;
    for (i, ns) in sim.namespaces.iter().enumerate() {
        let row = rows.iter().find(|r| r["namespace"] == ns.name).unwrap_or_else(|| panic!("no quota row for {}", ns.name));
        assert_eq!(row["quota_gpus"].as_u64(), Some(sim.schedule.quota_hard[i] as u64), "{} quota", ns.name);
        assert_eq!(row["quota_source"], "ResourceQuota");
        let avg = gpu_steps[i] as f64 / steps;
        assert!((num(&row["avg_gpus"]) - avg).abs() <= 0.005 + 1e-9, "{} avg GPUs {} vs {avg}", ns.name, row["avg_gpus"]);
        assert_eq!(row["peak_gpus"].as_u64(), Some(peak[i] as u64), "{} peak", ns.name);
        let hours = at_quota[i] as f64 * 30.0 / 3600.0;
        assert!((num(&row["hours_at_quota"]) - hours).abs() <= 0.005 + 1e-9, "{} hours at quota {} vs {hours}", ns.name, row["hours_at_quota"]);
        let rec = row["recommendation"].as_str().unwrap();
        assert!(["raise", "lower", "keep"].contains(&rec) && !row["reason"].as_str().unwrap().is_empty());
    }
}

#[test]
fn month_page_fits_both_widths_draws_every_chart_and_prints() {
    let page = fixture().reports.join("index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"), "self-contained: no script, no network");
    for (chart, _) in gpuledger::report::html::CHART_COLOURS {
        assert!(html.contains(&format!("id=\"{chart}\"")), "{chart} chart in the page");
    }
    // The headline: six figures, none compared (the lake holds no September).
    assert_eq!(html.matches("<div class=\"card\">").count(), 6);
    assert_eq!(html.matches("no previous month in the lake").count(), 6);
    // Numbers as finance reads them: every numeric cell grouped by thousands; the total
    // GPU-hours to one decimal.
    let cb = report("chargeback");
    let total_hours = cb["total"]["gpu_hours"].as_str().unwrap();
    let (whole, frac) = total_hours.split_once('.').unwrap();
    let shown = format!("{}.{}", group(whole), &frac[..1]);
    assert!(frac[1..].starts_with(['0', '1', '2', '3', '4']), "a total that rounds down: {total_hours}");
    assert!(html.contains(&format!(">{shown}<")), "the total GPU-hours {total_hours} shown as {shown}");
    let cells = numeric_cells(&html);
    assert!(cells.len() > 100, "numeric cells: {}", cells.len());
    for c in &cells {
        assert!(is_grouped(c), "a number not grouped by thousands: {c:?}");
    }
    let Some(browser) = common::browser::chromium() else { return };
    let (w, h) = common::browser::check_page(browser, &page, 1280, "month-page-1280.png");
    let (nw, nh) = common::browser::check_page(browser, &page, 390, "month-page-390.png");
    eprintln!("month page screenshots: {w} x {h} and {nw} x {nh}");
    // Printed beside the page: A4 landscape pages (842 x 595 points).
    let pdf = std::fs::read(fixture().reports.join("report.pdf")).expect("report.pdf written where chromium is installed");
    assert!(pdf.starts_with(b"%PDF-"));
    let text = String::from_utf8_lossy(&pdf);
    let boxes: Vec<&str> = text.split("/MediaBox [").skip(1).map(|r| &r[..r.find(']').unwrap()]).collect();
    assert!(boxes.len() >= 3, "{} pages", boxes.len());
    for b in &boxes {
        let v: Vec<f64> = b.split_whitespace().map(|x| x.parse().unwrap()).collect();
        assert!((v[2] - 842.0).abs() < 1.0 && (v[3] - 595.0).abs() < 1.0, "A4 landscape pages: {b}");
    }
    std::fs::copy(fixture().reports.join("report.pdf"), common::browser::keep("month-page.pdf")).unwrap();
}

/// `1234567` as `1,234,567`.
fn group(digits: &str) -> String {
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The text of every `<td class="n">` cell of the page.
fn numeric_cells(html: &str) -> Vec<String> {
    html.split("<td class=\"n\"").skip(1).map(|rest| rest[rest.find('>').unwrap() + 1..rest.find("</td>").unwrap()].to_string()).collect()
}

/// `1,234,567.8`, `-12.50`, `+3`, `0.0`: digits grouped by three with commas.
fn is_grouped(text: &str) -> bool {
    let t = text.trim_start_matches(['+', '-']);
    let mut parts = t.split('.');
    let whole = parts.next().unwrap_or_default();
    let groups: Vec<&str> = whole.split(',').collect();
    let digits = |g: &str| !g.is_empty() && g.chars().all(|c| c.is_ascii_digit());
    groups.iter().all(|g| digits(g))
        && groups[0].len() <= 3
        && groups[1..].iter().all(|g| g.len() == 3)
        && parts.all(digits)
        && !(groups.len() == 1 && groups[0].len() > 3)
}

#[test]
fn kueue_section_appears_where_kueue_runs() {
    use gpuledger::lake::{import::import_csv, Lake, Table};
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::new(dir.path().join("lake"));
    // Two ClusterQueues sampled every 30 s for two minutes on 2026-10-03.
    let mut csv = String::from("ts,cluster_queue,status,workloads\n");
    for (i, t) in ["00:00:00", "00:00:30", "00:01:00", "00:01:30"].iter().enumerate() {
        csv.push_str(&format!("2026-10-03T{t}Z,cq-train,active,{}\n", [2, 4, 6, 8][i]));
        csv.push_str(&format!("2026-10-03T{t}Z,cq-train,inadmissible,1\n"));
    }
    std::fs::write(dir.path().join("k.csv"), csv).unwrap();
    import_csv(&lake, Table::KueuePending, &dir.path().join("k.csv")).unwrap();
    // A lake of Kueue samples alone has no GPU data for the month: written, and marked so.
    let out = common::run_incomplete(dir.path(), &["--lake", "lake", "report", "queue", "--month", "2026-10", "--format", "json"]);
    let sections: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kueue = sections.as_array().unwrap().iter().find(|s| s["report"] == "queue_kueue").expect("a Kueue section");
    let rows = kueue["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0]["status"].as_str(), num(&rows[0]["avg_pending_workloads"]), rows[0]["max_pending_workloads"].as_i64()), (Some("active"), 5.0, Some(8)));
    assert_eq!(
        (rows[1]["status"].as_str(), num(&rows[1]["avg_pending_workloads"]), rows[1]["max_pending_workloads"].as_i64()),
        (Some("inadmissible"), 1.0, Some(1))
    );
    // Without Kueue data there is no such section (the demo month has none).
    let names: Vec<String> = std::fs::read_dir(&fixture().reports).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.starts_with("queue_kueue")), "{names:?}");
}

#[test]
fn chargeback_by_model_adds_up_to_the_chargeback_and_the_pool() {
    let cb = report("chargeback");
    let by = report("chargeback_models");
    let rows = by["rows"].as_array().unwrap();
    assert_eq!(by["total"]["gpu_hours"], cb["total"]["gpu_hours"], "same total GPU-hours");
    assert_eq!(by["total"]["gpu_cost"], cb["total"]["gpu_cost"], "same total GPU cost");
    for r in cb["rows"].as_array().unwrap() {
        let mine: Vec<_> = rows.iter().filter(|m| m["namespace"] == r["namespace"]).collect();
        let hours: f64 = mine.iter().map(|m| num(&m["gpu_hours"])).sum();
        assert!((hours - num(&r["gpu_hours"])).abs() <= 1e-4 * (mine.len() + 1) as f64, "{}: {hours} vs {}", r["namespace"], r["gpu_hours"]);
    }
    // Per model, the namespaces' hours add up to that model's share of the pool: GPUs x hours.
    let cluster = gpuledger::simulate::cluster::Cluster::build(64, 42);
    for node in &cluster.nodes {
        let model = node.model.name;
        let gpus = cluster.gpus.iter().filter(|g| g.model.name == model).count() as f64;
        let hours: f64 = rows.iter().filter(|m| m["gpu_model"] == model).map(|m| num(&m["gpu_hours"])).sum();
        assert!((hours - gpus * 31.0 * 24.0).abs() <= 1e-3, "{model}: {hours} vs {} GPUs x 744 h", gpus);
    }
}
