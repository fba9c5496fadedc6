//! `gpuledger collect` against a real Prometheus: the simulator's OpenMetrics history is
//! backfilled with promtool into a temp TSDB, `prometheus` serves it on a loopback port, and
//! the collected lake is checked against the simulator's ground-truth ledger. Then: an
//! overlapping re-collect, a collector killed with SIGKILL, the evidence against
//! `query_range`, and Prometheus stopped mid-run.

use crate::common;
use crate::common::JsonNumber;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const FROM: &str = "2026-10-05T00:00:00Z";
const TO: &str = "2026-10-06T00:00:00Z";

fn tools_present() -> bool {
    let ok = |t: &str| Command::new(t).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if ok("prometheus") && ok("promtool") {
        return true;
    }
    assert!(std::env::var_os("GPULEDGER_REQUIRE_PROMTOOL").is_none(), "prometheus and promtool are required here (GPULEDGER_REQUIRE_PROMTOOL is set)");
    eprintln!("SKIPPED: prometheus/promtool not installed (apt-get install prometheus)");
    false
}

struct Prom {
    child: Child,
    port: u16,
}

impl Prom {
    fn start(tsdb: &Path, dir: &Path) -> Prom {
        Prom::start_keeping(tsdb, dir, "100y")
    }

    /// A Prometheus whose `--storage.tsdb.retention.time` is `retention`.
    fn start_keeping(tsdb: &Path, dir: &Path, retention: &str) -> Prom {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let cfg = dir.join("prometheus.yml");
        std::fs::write(&cfg, "global:\n  scrape_interval: 1m\nscrape_configs: []\n").unwrap();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--storage.tsdb.retention.time={retention}"))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prom { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read, Write};
                let _ = s.write_all(b"GET /-/ready HTTP/1.0\r\n\r\n");
                let mut buf = String::new();
                let _ = s.read_to_string(&mut buf);
                if buf.starts_with("HTTP/1.0 200") || buf.starts_with("HTTP/1.1 200") {
                    return p;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("prometheus not ready: {}", std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default());
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Prom {
    fn drop(&mut self) {
        self.stop();
    }
}

fn write_config(dir: &Path, name: &str, url: &str, lake: &str, extra: &str) -> PathBuf {
    write_config_step(dir, name, url, lake, 30, extra)
}

fn write_config_step(dir: &Path, name: &str, url: &str, lake: &str, step: u32, extra: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("[lake]\npath = \"{lake}\"\n\n[prometheus]\nurl = \"{url}\"\nstep_secs = {step}\nretries = 2\nbackoff_ms = 100\ntimeout_secs = 20\n{extra}\n"),
    )
    .unwrap();
    path
}

/// promtool's backfill into blocks of a day (what a live Prometheus compacts its 2 h blocks
/// into anyway): a third of the time of its default 2 h blocks for a simulated day.
const BACKFILL: [&str; 4] = ["tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h"];

/// `history.om` in `dir` backfilled with promtool into `dir/tsdb`, served by a Prometheus.
fn serve_history(dir: &Path) -> Prom {
    let tsdb = dir.join("tsdb");
    let out = Command::new("promtool").args(BACKFILL).arg(dir.join("history.om")).arg(&tsdb).output().unwrap();
    assert!(out.status.success(), "promtool: {}", String::from_utf8_lossy(&out.stderr));
    Prom::start(&tsdb, dir)
}

/// The simulator's day of 32 GPUs with `seed` and the exporter shape `shape` (simulate flags),
/// served by a real Prometheus; its ledger.
fn simulated_day(dir: &Path, seed: &str, shape: &[&str]) -> (Prom, Value) {
    let (_, prom, ledger) = simulate_and_serve(dir, &[&["--gpus", "32", "--step", "30", "--seed", seed][..], shape].concat());
    (prom, ledger)
}

/// `gpuledger simulate` of one day from 2026-10-05 into `dir/sim` with `flags`, its OpenMetrics
/// history served by a real Prometheus; the simulator's output and its ledger.
fn simulate_and_serve(dir: &Path, flags: &[&str]) -> (std::process::Output, Prom, Value) {
    let base = ["simulate", "--out", "sim", "--days", "1", "--start", "2026-10-05", "--openmetrics", "history.om"];
    let out = common::run_ok(dir, &[&base[..], flags].concat());
    let prom = serve_history(dir);
    (out, prom, ledger_of(dir))
}

/// The simulator's ledger in `dir/sim`.
fn ledger_of(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("sim/ledger.json")).unwrap()).unwrap()
}

/// The chargeback of the test day with config `cfg`, as JSON.
fn chargeback_json(dir: &Path, cfg: &str) -> Value {
    serde_json::from_str(&common::stdout(&common::run_ok(dir, &["--config", cfg, "report", "chargeback", "--from", FROM, "--to", TO, "--format", "json"])))
        .unwrap()
}

/// Each namespace's allocated-but-idle GPU-hours in the test day's idle report with config `cfg`.
fn idle_gpu_hours(dir: &Path, cfg: &str) -> BTreeMap<String, f64> {
    let idle: Value =
        serde_json::from_str(&common::stdout(&common::run_ok(dir, &["--config", cfg, "report", "idle", "--from", FROM, "--to", TO, "--format", "json"])))
            .unwrap();
    let by_ns = idle.as_array().unwrap().iter().find(|t| t["report"] == "idle_namespaces").expect("the idle report's namespace table");
    by_ns["rows"].as_array().unwrap().iter().map(|r| (r["namespace"].as_str().unwrap().to_string(), r["idle_gpu_hours"].number().unwrap())).collect()
}

/// The idle report's band per namespace: (idle_gpu_hours_low, idle_gpu_hours_high).
fn idle_band(dir: &Path, cfg: &str) -> BTreeMap<String, (f64, f64)> {
    let idle: Value =
        serde_json::from_str(&common::stdout(&common::run_ok(dir, &["--config", cfg, "report", "idle", "--from", FROM, "--to", TO, "--format", "json"])))
            .unwrap();
    let by_ns = idle.as_array().unwrap().iter().find(|t| t["report"] == "idle_namespaces").expect("the idle report's namespace table");
    by_ns["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["namespace"].as_str().unwrap().to_string(), (r["idle_gpu_hours_low"].number().unwrap(), r["idle_gpu_hours_high"].number().unwrap())))
        .collect()
}

/// The lake's files and their bytes, without the lock.
fn lake_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    if !dir.exists() {
        return Vec::new();
    }
    common::tree(dir).into_iter().filter(|(p, _)| !p.ends_with("collect.lock")).collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((p * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)]
}

/// The pods' owners and labels as collected (`pod_owners`, `pod_labels`) against the
/// simulator's truth (`simulate::owners`, a separate model from `domain::workload`'s
/// resolution): every GPU-second of `gpu_samples` belongs to a pod with an owner row; each
/// top-level workload's GPU time, and each `project` label value's (with `__unattributed__`
/// for pods without one), within 0.5% of the ledger's; a Deployment's pods over two
/// ReplicaSets, a CronJob's over several Jobs and a JobSet's over two Jobs are one workload.
fn workloads_and_labels_agree_with_ledger(dir: &Path, cfg: &str, ledger: &Value) {
    let rows =
        |sql: &str| -> Vec<Vec<String>> { common::parse_csv(&common::stdout(&common::run_ok(dir, &["--config", cfg, "query", sql, "--format", "csv"]))).1 };
    const HELD: &str = "held AS (SELECT namespace, pod, sum(share * step_s) AS gpu_s FROM gpu_samples WHERE pod IS NOT NULL GROUP BY namespace, pod)";
    let orphans = rows(&format!(
        "WITH {HELD}, o AS (SELECT DISTINCT namespace, pod FROM pod_owners) \
         SELECT count(*) FROM held LEFT JOIN o ON held.namespace = o.namespace AND held.pod = o.pod WHERE o.pod IS NULL"
    ));
    assert_eq!(orphans[0][0], "0", "every pod holding GPUs has its owner row");
    let by_workload = rows(&format!(
        "WITH {HELD}, o AS (SELECT DISTINCT namespace, pod, workload_kind, workload_name FROM pod_owners) \
         SELECT o.namespace || '/' || o.workload_kind || '/' || o.workload_name, sum(held.gpu_s) FROM held JOIN o ON held.namespace = o.namespace AND held.pod = o.pod \
         GROUP BY 1 ORDER BY 1"
    ));
    let got: BTreeMap<String, f64> = by_workload.iter().map(|r| (r[0].clone(), r[1].parse().unwrap())).collect();
    let truth = ledger["workloads"].as_object().expect("the ledger's workloads");
    let want: BTreeMap<String, f64> = truth.iter().map(|(k, v)| (k.clone(), v["gpu_seconds"].number().unwrap())).filter(|(_, s)| *s > 0.0).collect();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "the workloads holding GPUs");
    // Samples stand for whole 30 s steps, the ledger for exact holding: each pod's start and end
    // may each be off by up to a step on each GPU it held. Over all workloads, 0.5%.
    let (mut off, mut total) = (0.0, 0.0);
    for (k, w) in &want {
        let (g, gpus) = (got[k], truth[k]["gpus"].number().unwrap());
        assert!((g - w).abs() <= w * 0.005 + 2.0 * 30.0 * gpus, "{k}: {g} GPU-s collected vs the ledger's {w} ({gpus} GPUs requested by its pods)");
        off += (g - w).abs();
        total += w;
    }
    eprintln!("{} workloads: {:.4}% of their GPU time off the ledger in all", want.len(), off / total * 100.0);
    assert!(off <= total * 0.005, "the workloads' GPU time {off} GPU-s off the ledger's {total}");
    let kinds: std::collections::BTreeSet<&str> = want.keys().map(|k| k.split('/').nth(1).unwrap()).collect();
    for kind in ["CronJob", "Deployment", "JobSet", "Notebook", "PyTorchJob", "RayJob", "VolcanoJob"] {
        assert!(kinds.contains(kind), "a {kind} among the workloads: {kinds:?}");
    }
    // One workload over several of its controllers' objects.
    let over = |kind: &str| -> i64 {
        let r = rows(&format!(
            "SELECT max(n) FROM (SELECT count(DISTINCT owner_name) AS n FROM pod_owners WHERE workload_kind = '{kind}' GROUP BY namespace, workload_name)"
        ));
        r[0][0].parse().unwrap_or(0)
    };
    assert_eq!(over("Deployment"), 2, "a Deployment's pods over the ReplicaSets of its rollout");
    assert!(over("CronJob") >= 2, "a CronJob's pods over several Jobs");
    assert_eq!(over("JobSet"), 2, "a JobSet's pods over its two Jobs");
    // The inferred hops are named: Notebooks by label, RayJobs by name and submitter, Volcano
    // Jobs by label; nothing else is inferred.
    let inferred = rows("SELECT workload_kind, count(*) FROM pod_owners WHERE inferred IS NOT NULL GROUP BY 1 ORDER BY 1");
    let inferred: Vec<&str> = inferred.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(inferred, ["Notebook", "RayJob", "VolcanoJob"]);
    // By the `project` label: a value's GPU time across its namespaces, and the pods without it.
    let by_project = rows(&format!(
        "WITH {HELD}, l AS (SELECT DISTINCT namespace, pod, value FROM pod_labels WHERE source = 'label' AND key = 'project') \
         SELECT coalesce(l.value, '__unattributed__'), sum(held.gpu_s) FROM held LEFT JOIN l ON held.namespace = l.namespace AND held.pod = l.pod GROUP BY 1 ORDER BY 1"
    ));
    let mut want: BTreeMap<String, f64> = ledger["labels"]["project"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.number().unwrap())).collect();
    let held: f64 =
        ledger["namespaces"].as_object().unwrap().iter().filter(|(ns, _)| !ns.starts_with("__")).map(|(_, n)| n["gpu_seconds"].number().unwrap()).sum();
    want.insert("__unattributed__".into(), held - want.values().sum::<f64>());
    let got: BTreeMap<String, f64> = by_project.iter().map(|r| (r[0].clone(), r[1].parse().unwrap())).collect();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (k, w) in &want {
        eprintln!("project {k:>16}: {:.4} GPU-h vs ledger {:.4} ({:+.3}%)", got[k] / 3600.0, w / 3600.0, (got[k] - w) / w * 100.0);
        assert!((got[k] - w).abs() <= w * 0.005 + 1e-6, "project {k}: {} GPU-s vs the ledger's {w}", got[k]);
    }
}

/// The chargeback by keys each pod has of its own (`--by workload`, `label:project`,
/// `cluster-queue`, `queue`): every workload's GPU-hours against the simulator's ledger (a
/// workload's pods may start and end a step off on each GPU), the project label's values across
/// namespaces with the unlabelled pods as `__unattributed__`, and in every grouping the total
/// line equal, to the unit, to the namespace chargeback's (nothing dropped, nothing made up).
fn chargeback_by_pod_keys_agrees_with_ledger(dir: &Path, cfg: &str, ledger: &Value) {
    let by = |key: &str| -> Value {
        serde_json::from_str(&common::stdout(&common::run_ok(
            dir,
            &["--config", cfg, "report", "chargeback", "--from", FROM, "--to", TO, "--by", key, "--format", "json"],
        )))
        .unwrap()
    };
    let hours = |v: &Value| -> f64 { v.as_str().unwrap().parse().unwrap() };
    let by_ns = chargeback_json(dir, cfg);
    for key in ["workload", "label:project", "cluster-queue", "queue", "cohort"] {
        let report = by(key);
        for column in ["gpu_hours", "energy_kwh", "gpu_cost", "power_cost", "total_cost"] {
            assert_eq!(report["total"][column], by_ns["total"][column], "--by {key}: total {column} as by namespace");
        }
        let note = report["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).find(|n| n.starts_with(&format!("by {key}:"))).unwrap();
        assert!(note.contains("to the unit OK"), "--by {key}: {note}");
        let unallocated =
            |r: &Value| r["rows"].as_array().unwrap().iter().find(|row| row["namespaces"] == "__unallocated__").map(|row| row["gpu_hours"].clone());
        assert_eq!(
            unallocated(&report),
            by_ns["rows"].as_array().unwrap().iter().find(|r| r["namespace"] == "__unallocated__").map(|r| r["gpu_hours"].clone())
        );
    }
    // Workloads: the ledger's keys are namespace/Kind/name; the report's Kind/name (a name in
    // two namespaces is one row).
    let report = by("workload");
    let rows = report["rows"].as_array().unwrap();
    let got: BTreeMap<String, f64> = rows.iter().map(|r| (r["workload"].as_str().unwrap().to_string(), hours(&r["gpu_hours"]))).collect();
    let mut want: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (k, v) in ledger["workloads"].as_object().unwrap() {
        let (s, gpus) = (v["gpu_seconds"].number().unwrap(), v["gpus"].number().unwrap());
        if s > 0.0 {
            let e = want.entry(k.split_once('/').unwrap().1.to_string()).or_default();
            *e = (e.0 + s / 3600.0, e.1 + gpus);
        }
    }
    for (k, (w, gpus)) in &want {
        let g = got.get(k).copied().unwrap_or_else(|| panic!("workload {k} has no row: {:?}", got.keys()));
        assert!((g - w).abs() <= w * 0.005 + 2.0 * 30.0 / 3600.0 * gpus + 1e-4, "{k}: {g} GPU-h charged vs the ledger's {w}");
    }
    let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k) && !k.starts_with("__")).collect();
    assert!(extra.is_empty(), "rows of workloads the ledger does not have: {extra:?}");
    assert!(!got.contains_key("__unattributed__"), "every GPU pod has a workload (a bare pod is Pod/<name>)");
    // The project label: `llm` across its two namespaces is one row naming both.
    let report = by("label:project");
    let rows = report["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["label_project"].is_string()), "the key column is named after the label");
    let mut want: BTreeMap<String, f64> =
        ledger["labels"]["project"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.number().unwrap() / 3600.0)).collect();
    let held: f64 =
        ledger["namespaces"].as_object().unwrap().iter().filter(|(ns, _)| !ns.starts_with("__")).map(|(_, n)| n["gpu_seconds"].number().unwrap()).sum();
    want.insert("__unattributed__".into(), held / 3600.0 - want.values().sum::<f64>());
    for (k, w) in &want {
        let row = rows.iter().find(|r| r["label_project"] == k.as_str()).unwrap_or_else(|| panic!("project {k} has no row"));
        let g = hours(&row["gpu_hours"]);
        eprintln!("chargeback by project {k:>16}: {g:.4} GPU-h vs ledger {w:.4} ({:+.3}%), namespaces {}", (g - w) / w * 100.0, row["namespaces"]);
        assert!((g - w).abs() <= w * 0.005 + 1e-4, "project {k}: {g} GPU-h vs the ledger's {w}");
    }
    let llm = rows.iter().find(|r| r["label_project"] == "llm").unwrap()["namespaces"].as_str().unwrap().to_string();
    assert!(llm.split(' ').count() >= 2, "project llm spans namespaces: {llm}");
    // The Kueue ClusterQueues and the Volcano queue are rows of their own.
    let names =
        |key: &str, column: &str| -> Vec<String> { by(key)["rows"].as_array().unwrap().iter().map(|r| r[column].as_str().unwrap().to_string()).collect() };
    let cqs = names("cluster-queue", "cluster_queue");
    for q in ["research-cq", "training-cq", "__unattributed__"] {
        assert!(cqs.iter().any(|c| c == q), "{q} among {cqs:?}");
    }
    assert!(names("queue", "queue").iter().any(|q| q == "batch-q"), "the Volcano queue is a queue");
    assert!(names("cohort", "cohort").iter().any(|q| q == "gpu-pool"), "the ClusterQueues' cohort");
}

/// The schedulers' queues as collected (`queue_quotas`) against the simulator's: each Kueue
/// ClusterQueue's cohort, nominal quota and borrowing limit, the Volcano queue's deserved share
/// and capability (exported in thousandths) at every step of the day, in GPUs; and the GPU time
/// each queue's pods were admitted for, from the schedulers' usage gauges, within 0.5% of the
/// ledger's (each pod's two ends within a step).
fn queues_agree_with_ledger(dir: &Path, cfg: &str, ledger: &Value) {
    let csv = common::stdout(&common::run_ok(
        dir,
        &[
            "--config",
            cfg,
            "query",
            "SELECT queue, scheduler, coalesce(min(cohort), ''), min(nominal), max(nominal), coalesce(min(coalesce(borrowing_limit, capacity)), -1), \
             coalesce(max(coalesce(borrowing_limit, capacity)), -1), sum(allocated) * 30, count(*) FROM queue_quotas GROUP BY queue, scheduler ORDER BY queue",
            "--format",
            "csv",
        ],
    ));
    let rows = common::parse_csv(&csv).1;
    let truth = ledger["queues"].as_object().expect("the ledger's queues");
    assert_eq!(rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), truth.keys().map(String::as_str).collect::<Vec<_>>());
    for r in &rows {
        let t = &truth[&r[0]];
        let num = |i: usize| r[i].parse::<f64>().unwrap();
        assert_eq!(r[1], t["scheduler"].as_str().unwrap(), "{}", r[0]);
        assert_eq!(r[2], if r[1] == "kueue" { "gpu-pool" } else { "" }, "{}: cohort", r[0]);
        let (nominal, limit) = (t["nominal_gpus"].number().unwrap(), t["limit_gpus"].number().unwrap());
        assert_eq!((num(3), num(4)), (nominal, nominal), "{}: nominal quota at every step", r[0]);
        assert_eq!((num(5), num(6)), (limit, limit), "{}: borrowing limit / capability at every step", r[0]);
        assert_eq!(r[8], "2880", "{}: a row per 30 s step of the day", r[0]);
        let (got, want, gpus) = (num(7), t["admitted_gpu_seconds"].number().unwrap(), t["gpus"].number().unwrap());
        eprintln!("queue {:>12}: {:.4} admitted GPU-h vs ledger {:.4}, nominal {nominal}, limit {limit}", r[0], got / 3600.0, want / 3600.0);
        assert!(want > 0.0 && (got - want).abs() <= want * 0.005 + 2.0 * 30.0 * gpus, "{}: {got} GPU-s admitted vs the ledger's {want}", r[0]);
    }
    // The quota review's section against the schedulers' split: each queue's quota, its use,
    // what it borrowed above its nominal quota and lent to its cohort, against the ledger's
    // exact sweep over the pods' admissions (each pod's ends a step off at most).
    let sections: Value =
        serde_json::from_str(&common::stdout(&common::run_ok(dir, &["--config", cfg, "report", "quota", "--from", FROM, "--to", TO, "--format", "json"])))
            .unwrap();
    let review = sections.as_array().unwrap().iter().find(|s| s["report"] == "queue_quotas").expect("a queue_quotas section");
    let rows = review["rows"].as_array().unwrap();
    let hours = |v: &Value| -> f64 { v.as_str().map_or(0.0, |s| s.parse().unwrap()) };
    for (name, t) in truth {
        let r = rows.iter().find(|r| r["queue"] == name.as_str() && r["scheduler"] == t["scheduler"]).unwrap_or_else(|| panic!("{name} has no row"));
        let (nominal, limit, gpus) = (t["nominal_gpus"].number().unwrap(), t["limit_gpus"].number().unwrap(), t["gpus"].number().unwrap());
        assert_eq!(hours(&r["nominal_gpus"]), nominal, "{name}: nominal");
        let limit_col = if t["scheduler"] == "kueue" { "borrowing_limit_gpus" } else { "capacity_gpus" };
        assert_eq!(hours(&r[limit_col]), limit, "{name}: {limit_col}");
        let edge = 2.0 * 30.0 * gpus / 3600.0;
        for (col, key) in [("gpu_hours", "admitted_gpu_seconds"), ("borrowed_gpu_hours", "borrowed_gpu_seconds"), ("lent_gpu_hours", "lent_gpu_seconds")] {
            let (got, want) = (hours(&r[col]), t[key].number().unwrap() / 3600.0);
            eprintln!("quota review {name:>12} {col:>18}: {got:.4} vs ledger {want:.4}");
            assert!((got - want).abs() <= want * 0.005 + edge + 1e-4, "{name}: {col} {got} vs the ledger's {want}");
        }
        // Its pods' waits for a node, as the ledger's (pods created in the window).
        assert_eq!(r["pods"].number().unwrap(), t["pods_waited"].number().unwrap(), "{name}: pods bound");
        assert!(t["pods_waited"].number().unwrap() > 0.0, "{name} has pods that waited");
        for (col, key) in [("wait_p50_s", "wait_p50_s"), ("wait_p95_s", "wait_p95_s"), ("wait_max_s", "wait_max_s")] {
            let (got, want) = (hours(&r[col]), t[key].number().unwrap());
            assert!((got - want).abs() <= want * 0.005 + 0.05, "{name}: {col} {got} s vs the ledger's {want}");
        }
        let (avg, p95, peak) = (hours(&r["avg_gpus"]), hours(&r["p95_gpus"]), hours(&r["peak_gpus"]));
        // Use against the ledger's continuous time: the steps see the GPUs in use at their
        // instants (never more than the peak), the p95 within a GPU.
        let (lp95, lpeak) = (t["p95_gpus"].number().unwrap(), t["peak_gpus"].number().unwrap());
        assert!(peak <= lpeak && (p95 - lp95).abs() <= 1.0, "{name}: p95 {p95} peak {peak} vs the ledger's {lp95} and {lpeak}");
        // The recommendation by the namespaces' rules: a queue using at most half its quota
        // (with a margin for the steps) is told to lower it, one over half is not.
        let rec = r["recommendation"].as_str().unwrap();
        assert!(["raise", "lower", "keep"].contains(&rec), "{name}: {rec}");
        if lp95 * 2.0 + 2.0 <= nominal && lpeak + 1.0 < nominal {
            assert_eq!(rec, "lower", "{name}: p95 {lp95}, peak {lpeak} of {nominal}: {}", r["reason"]);
        }
        if lp95 * 2.0 > nominal + 2.0 || lpeak >= nominal + 1.0 {
            assert_ne!(rec, "lower", "{name}: p95 {lp95}, peak {lpeak} of {nominal}: {}", r["reason"]);
        }
        eprintln!("quota review {name:>12}: {rec} ({})", r["reason"]);
        assert!(avg <= peak && p95 <= peak && peak > 0.0, "{name}: avg {avg}, p95 {p95}, peak {peak}");
        // The mean of the step values is the GPU-hours over the day.
        assert!((avg * 24.0 - hours(&r["gpu_hours"])).abs() <= 0.01 * 24.0, "{name}: avg {avg} GPUs vs {} GPU-h in a day", r["gpu_hours"]);
    }
    let borrowed: f64 = truth.values().filter(|t| t["scheduler"] == "kueue").map(|t| t["borrowed_gpu_seconds"].number().unwrap()).sum();
    assert!(borrowed > 0.0, "a ClusterQueue borrowed from the cohort on the test day");
    let cohort = rows.iter().find(|r| r["scheduler"] == "kueue cohort" && r["queue"] == "gpu-pool").expect("the cohort's row");
    let members: f64 = truth.values().filter(|t| t["scheduler"] == "kueue").map(|t| t["nominal_gpus"].number().unwrap()).sum();
    assert_eq!(hours(&cohort["nominal_gpus"]), members, "the cohort's nominal quota is its members'");
}

/// The chargeback's pool is the ledger's pool, GPU-step for GPU-step, and every namespace's
/// GPU-hours and energy (the `__unallocated__` row's too) are within 0.5% of the ledger's.
fn agrees_with_ledger(report: &Value, ledger: &Value) {
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(
        report["conservation"]["cluster_gpu_us"].number().unwrap(),
        ledger["cluster_gpu_seconds"].number().unwrap() * 1e6,
        "every GPU-step collected once"
    );
    let energy: f64 = rows.iter().map(|r| r["energy_kwh"].number().unwrap()).sum();
    let want = ledger["cluster_energy_j"].number().unwrap() / 3.6e6;
    eprintln!("pool energy: {energy:.4} kWh vs ledger {want:.4}");
    assert!((energy - want).abs() <= want * 0.005, "pool energy {energy} kWh vs ledger {want}");
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        if truth["gpu_seconds"].number().unwrap() == 0.0 {
            assert!(rows.iter().all(|r| r["namespace"] != ns.as_str()), "{ns} held no GPU but has a row");
            continue;
        }
        let row = rows.iter().find(|r| r["namespace"] == ns.as_str()).unwrap_or_else(|| panic!("no row for {ns}"));
        for (got_k, want_k) in [("gpu_hours", "gpu_hours"), ("energy_kwh", "energy_kwh")] {
            let (got, want) = (row[got_k].number().unwrap(), truth[want_k].number().unwrap());
            eprintln!("{ns:>16} {got_k}: {got:.4} vs ledger {want:.4}");
            assert!((got - want).abs() <= want.abs() * 0.005 + 1e-3, "{ns} {got_k}: collected {got} vs ledger {want}");
        }
    }
}

/// Scrapes as real clusters make them: every ~57 s with jitter and runs of missed scrapes,
/// collected onto a 30 s and a 60 s lake step. Each sample stands until the next (at most the
/// lookback), so no GPU-second is lost: the pool, every namespace's GPU-hours and energy agree
/// with the ledger as on ideal data.
#[test]
fn scrape_intervals_that_are_not_the_step() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (prom, ledger) = simulated_day(dir, "11", &["--scrape-interval", "57", "--scrape-jitter", "3", "--missed-scrapes", "2"]);
    for step in [30, 60] {
        let cfg = format!("s{step}.toml");
        write_config_step(dir, &cfg, &prom.url(), &format!("lake-{step}"), step, "");
        let out = common::run_ok(dir, &["--config", &cfg, "collect", "--from", FROM, "--to", TO]);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(log.contains("DCGM scrape interval 57 s"), "the inferred interval is logged: {log}");
        let report = chargeback_json(dir, &cfg);
        eprintln!("lake step {step} s:");
        agrees_with_ledger(&report, &ledger);
    }
}

/// Real utilisation (the Alibaba GenAI duty-cycle trace: ~57 s samples, real gaps, two thirds
/// at 0%) replayed as the pods' own on a 60 s signal grid, scraped every 15 s with jitter and
/// missed scrapes, collected onto a 60 s lake step: several scrapes fall in each step, so a pod
/// that starts or ends inside one has the part of it from half-way to its first scrape. Every
/// namespace's GPU-hours, energy and average utilisation are within 0.5% of the ledger, its
/// allocated-but-idle GPU-hours (the idle report's rule, on the simulator's step) within 1%.
#[test]
fn real_utilisation_scraped_every_15_s() {
    if !tools_present() {
        return;
    }
    let Some(trace) = common::traces_dir("alibaba-genai-v2026-gpu-util") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (out, prom, ledger) = simulate_and_serve(
        dir,
        &[
            "--gpus",
            "32",
            "--step",
            "60",
            "--seed",
            "11",
            "--util-trace",
            trace.to_str().unwrap(),
            "--scrape-interval",
            "15",
            "--scrape-jitter",
            "2",
            "--missed-scrapes",
            "2",
        ],
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("143 series"), "the trace's 143 containers drive the utilisation: {log}");
    write_config_step(dir, "u.toml", &prom.url(), "lake", 60, "");
    common::run_ok(dir, &["--config", "u.toml", "collect", "--from", FROM, "--to", TO]);
    let window = ["--from", FROM, "--to", TO, "--format", "json"];
    let report: Value =
        serde_json::from_str(&common::stdout(&common::run_ok(dir, &[&["--config", "u.toml", "report", "chargeback"][..], &window].concat()))).unwrap();
    agrees_with_ledger(&report, &ledger);
    // Four scrapes a step: steps a pod leaves or arrives in are split into parts, one row each,
    // and still count once: every GPU measured at every step, no more.
    let c: Value =
        serde_json::from_str(&common::stdout(&common::run_ok(dir, &[&["--config", "u.toml", "report", "completeness"][..], &window].concat()))).unwrap();
    let (expected, present) = (c["dcgm"]["expected"].as_i64().unwrap(), c["dcgm"]["present"].as_i64().unwrap());
    let q = common::stdout(&common::run_ok(
        dir,
        &["--config", "u.toml", "query", "SELECT count(*) AS n FROM gpu_samples WHERE namespace IS NULL OR namespace <> '__unmeasured__'", "--format", "csv"],
    ));
    let rows: i64 = common::parse_csv(&q).1[0][0].parse().unwrap();
    assert!(rows > expected, "the day has split steps (more rows, {rows}, than unit-steps, {expected})");
    assert_eq!(expected % 1440, 0, "every unit x 1,440 steps: {expected}");
    assert_eq!(present, expected, "every unit measured at every step, split steps counted once ({rows} rows)");
    let idle = idle_gpu_hours(dir, "u.toml");
    let rows = report["rows"].as_array().unwrap();
    let mut idle_total = 0.0;
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        if ns == "__unallocated__" || truth["gpu_seconds"].number().unwrap() == 0.0 {
            continue;
        }
        let row = rows.iter().find(|r| r["namespace"] == ns.as_str()).unwrap();
        let (got, want) = (row["avg_util_pct"].number().unwrap(), truth["avg_util_pct"].number().unwrap());
        eprintln!("{ns:>16} avg_util_pct: {got:.2} vs ledger {want:.4}");
        // The report rounds to hundredths of a percent.
        assert!((got - want).abs() <= want * 0.005 + 0.005, "{ns} utilisation {got}% vs ledger {want}%");
        let got = idle.get(ns).copied().unwrap_or(0.0);
        let want = truth["idle_gpu_hours"].number().unwrap();
        idle_total += want;
        eprintln!("{ns:>16} idle_gpu_hours: {got:.4} vs ledger {want:.4}");
        assert!((got - want).abs() <= want * 0.01 + 1e-3, "{ns} idle {got} GPU-h vs ledger {want}");
    }
    assert!(idle_total > 50.0, "the trace's idle stretches make real idle GPU time: {idle_total} GPU-h");
}

/// Real duty cycles (the Alibaba GenAI trace) on back-to-back pods, scraped every ~57 s with
/// jitter onto a 60 s lake step: most steps hold one scrape, and a holder change falls between
/// two scrapes a step apart. Each such interval is split at half-way between the scrapes either
/// side, its counter delta by time x each holder's power: every namespace's energy is within
/// 0.5% of the ledger (the energy the trace's pods drew), its GPU-hours too, and the pool's
/// allocated-but-idle GPU-hours within 1%. Per namespace the ledger's idle time is inside the
/// report's band (within 1%): a 60 s grid measures a run's length to a step, so a run of 29.5
/// minutes is in or out by where the pod started in its first step (team-recsys reads 17.67
/// against the ledger's 18.18, exactly so on the simulator's own lake; measured in exact held
/// time instead of steps it reads 17.19, no nearer). The band names those runs: low leaves out
/// the counted runs within a step of the minimum, high adds those a step short; it is narrow
/// (every namespace's under 15% of its idle time: a few 30-minute runs) or it would say nothing.
#[test]
fn real_utilisation_scraped_every_57_s_on_a_60_s_step() {
    if !tools_present() {
        return;
    }
    let Some(trace) = common::traces_dir("alibaba-genai-v2026-gpu-util") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, prom, ledger) = simulate_and_serve(
        dir,
        &["--gpus", "32", "--step", "60", "--seed", "13", "--util-trace", trace.to_str().unwrap(), "--scrape-interval", "57", "--scrape-jitter", "3"],
    );
    write_config_step(dir, "u.toml", &prom.url(), "lake", 60, "");
    common::run_ok(dir, &["--config", "u.toml", "collect", "--from", FROM, "--to", TO]);
    agrees_with_ledger(&chargeback_json(dir, "u.toml"), &ledger);
    let idle = idle_gpu_hours(dir, "u.toml");
    let band = idle_band(dir, "u.toml");
    let (mut idle_total, mut idle_got, mut outside) = (0.0, 0.0, 0);
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        if ns == "__unallocated__" || truth["gpu_seconds"].number().unwrap() == 0.0 {
            continue;
        }
        let got = idle.get(ns).copied().unwrap_or(0.0);
        let (low, high) = band.get(ns).copied().unwrap_or((0.0, 0.0));
        let want = truth["idle_gpu_hours"].number().unwrap();
        idle_total += want;
        idle_got += got;
        eprintln!("{ns:>16} idle_gpu_hours: {got:.4} ({low:.4} to {high:.4}) vs ledger {want:.4} ({:+.2}%)", (got - want) / want * 100.0);
        assert!(low <= got && got <= high, "{ns}: the band {low}..{high} holds the figure {got}");
        assert!(high - low <= got * 0.15, "{ns}: the band {low}..{high} is narrow beside {got} GPU-h");
        assert!(want >= low * 0.99 - 1e-3 && want <= high * 1.01 + 1e-3, "{ns} idle: the ledger's {want} GPU-h outside the band {low}..{high}");
        outside += usize::from((got - want).abs() > want * 0.01);
    }
    // The band is the edge, not the rule: most namespaces are within 1% on the figure itself.
    assert!(outside <= 1, "{outside} namespaces over 1% off the ledger's idle time");
    eprintln!("idle_gpu_hours, every namespace: {idle_got:.4} vs ledger {idle_total:.4}");
    assert!(idle_total > 50.0, "the trace's idle stretches make real idle GPU time: {idle_total} GPU-h");
    assert!((idle_got - idle_total).abs() <= idle_total * 0.01, "allocated-but-idle {idle_got} GPU-h vs the ledger's {idle_total}");
}

/// The shapes of a real month at once: ~57 s scrapes with jitter, an HA pair of Prometheis
/// returning every series twice (differing only in `prometheus_replica`), two nodes whose
/// ServiceMonitor stops honouring labels half-way (`exported_*` from then on, the exporter's own
/// pod on idle GPUs), and three 20-minute exporter outages. The chargeback's rows add up to the
/// ledger's pool exactly: what no sample covers (an outage beyond the lookback) is
/// `__unmeasured__` (the outages less the lookback, on GPUs no pod held), the rest goes to the
/// pods kube-state-metrics shows bound there (request-based); every namespace is within 0.5% of
/// the ledger; completeness counts the unmeasured steps as missing and names the nodes.
#[test]
fn replicas_relabelling_and_exporter_outages() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let shape = [
        "--scrape-interval",
        "57",
        "--scrape-jitter",
        "3",
        "--prometheus-replicas",
        "2",
        "--honor-labels-flip",
        "2",
        "--exporter-outages",
        "3",
        "--outage-minutes",
        "20",
    ];
    let (prom, ledger) = simulated_day(dir, "23", &shape);
    let om = std::fs::read_to_string(dir.join("history.om")).unwrap();
    assert!(om.contains("prometheus_replica=\"prometheus-k8s-1\"") && om.contains("exported_pod=\""), "the shapes are in the history");
    let outages = ledger["exporter_outages"].as_array().expect("the ledger lists the outages");
    assert_eq!(outages.len(), 3);
    write_config(dir, "r.toml", &prom.url(), "lake", "");
    let out = common::run_ok(dir, &["--config", "r.toml", "collect", "--from", FROM, "--to", TO]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("differing only in a replica label"), "the replicas are collapsed and said so: {log}");
    assert!(log.contains("changed label convention"), "the relabelled nodes are named: {log}");
    assert!(log.contains("__unmeasured__"), "the unmeasured GPU time is logged: {log}");
    // The outages leave 1.1% of the pool's GPU-steps unmeasured: under run.min_completeness_pct
    // (99%), so the chargeback is written, marked DATA INCOMPLETE, and exits 3.
    let report: Value = serde_json::from_str(&common::stdout(&common::run_incomplete(
        dir,
        &["--config", "r.toml", "report", "chargeback", "--from", FROM, "--to", TO, "--format", "json"],
    )))
    .unwrap();
    let mark = report["data_incomplete"].as_str().expect("marked incomplete");
    assert!(mark.starts_with("dcgm 98.") && !mark.contains("kube"), "{mark}");
    let rows = report["rows"].as_array().unwrap();
    // The pool, exactly: measured rows plus __unmeasured__.
    assert_eq!(
        report["conservation"]["cluster_gpu_us"].number().unwrap(),
        ledger["cluster_gpu_seconds"].number().unwrap() * 1e6,
        "every GPU-step of the pool once"
    );
    let energy: f64 = rows.iter().map(|r| r["energy_kwh"].number().unwrap()).sum();
    let want = ledger["cluster_energy_j"].number().unwrap() / 3.6e6;
    assert!((energy - want).abs() <= want * 0.005, "pool energy {energy} kWh vs ledger {want}: the counters span the outages");
    // __unmeasured__: what no pod held inside each outage, less the lookback (300 s), give or
    // take two scrapes; the GPUs pods held there are theirs again, request-based.
    let row = |ns: &str| rows.iter().find(|r| r["namespace"] == ns);
    let unmeasured = row("__unmeasured__").expect("an __unmeasured__ row")["gpu_hours"].number().unwrap();
    let (mut lo, mut hi) = (0.0, 0.0);
    for o in outages {
        let held: f64 =
            o["namespaces_gpu_seconds"].as_object().unwrap().iter().filter(|(ns, _)| *ns != "__unallocated__").map(|(_, v)| v.number().unwrap()).sum();
        let free_gpus = (o["pool_gpu_seconds"].number().unwrap() - held) / 1200.0;
        lo += free_gpus * (1200.0 - 300.0 - 60.0) / 3600.0;
        hi += free_gpus * (1200.0 - 300.0 + 2.0 * 60.0) / 3600.0;
    }
    eprintln!("__unmeasured__ {unmeasured:.4} GPU-h, expected {lo:.4} to {hi:.4}");
    assert!(unmeasured >= lo && unmeasured <= hi, "__unmeasured__ {unmeasured} GPU-h not within {lo}..{hi}");
    let mut request_based = 0.0;
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        let want = truth["gpu_hours"].number().unwrap();
        let got = row(ns).map_or(0.0, |r| r["gpu_hours"].number().unwrap());
        let hidden: f64 = outages.iter().map(|o| o["namespaces_gpu_seconds"][ns].number().unwrap_or(0.0) / 3600.0).sum();
        let filled = row(ns).map_or(0.0, |r| r["request_based_gpu_hours"].number().unwrap());
        eprintln!("{ns:>16} gpu_hours: {got:.4} vs ledger {want:.4} (held {hidden:.4} inside outages, {filled:.4} request-based)");
        if ns == "__unallocated__" {
            // Idle GPUs inside an outage are unmeasured, not unallocated: nothing says no pod held them.
            assert!(
                got <= want * 1.005 + 1e-3 && got + hidden >= want * 0.995 - 1e-3,
                "{ns}: {got} GPU-h collected + {hidden} inside outages vs the ledger's {want}"
            );
        } else {
            assert!((got - want).abs() <= want * 0.005 + 1e-3, "{ns}: {got} GPU-h collected vs the ledger's {want}");
        }
        // What it held inside outages, and at most a few scrapes' worth at their edges.
        assert!(filled <= hidden + 0.1, "{ns}: {filled} GPU-h request-based, more than the {hidden} it held inside outages");
        if ns != "__unallocated__" && hidden > 0.1 {
            // The lookback measures the first 300 s of each 20-minute outage.
            assert!(filled >= hidden * 0.6, "{ns} held {hidden} GPU-h inside outages, only {filled} of them request-based");
            assert_eq!(row(ns).unwrap()["request_based"], "yes", "{ns} is marked");
        }
        request_based += filled;
    }
    assert!(request_based > 0.5, "the outages hid held GPUs: {request_based} GPU-h request-based");
    // Completeness: the unmeasured GPU-steps are the missing ones, and the nodes are named.
    let c: Value = serde_json::from_str(&common::stdout(&common::run_incomplete(
        dir,
        &["--config", "r.toml", "report", "completeness", "--from", FROM, "--to", TO, "--format", "json"],
    )))
    .unwrap();
    let (expected, present) = (c["dcgm"]["expected"].as_i64().unwrap(), c["dcgm"]["present"].as_i64().unwrap());
    let q = common::stdout(&common::run_ok(
        dir,
        &[
            "--config",
            "r.toml",
            "query",
            "SELECT count(*) AS n, sum(share * step_s) / 3600 AS h FROM gpu_samples WHERE namespace = '__unmeasured__'",
            "--format",
            "csv",
        ],
    ));
    let (_, q) = common::parse_csv(&q);
    let (rows_unmeasured, hours): (i64, f64) = (q[0][0].parse().unwrap(), q[0][1].parse().unwrap());
    assert_eq!(expected - present, rows_unmeasured, "the missing GPU rows are the unmeasured ones");
    assert!(
        (hours - unmeasured - request_based).abs() < 1e-3,
        "the lake's __unmeasured__ rows {hours} GPU-h are the chargeback's {unmeasured} and the {request_based} held by pods"
    );
    let by_node = c["unmeasured_gpu_us"].as_object().expect("unmeasured GPU time by node");
    for o in outages {
        assert!(by_node.contains_key(o["node"].as_str().unwrap()), "outage node {} named: {by_node:?}", o["node"]);
    }
}

/// A HAMi node beside plain ones, as a new user's cluster has it (issue 44): 4 H100s split into
/// vGPU slots of 50/25/15/10% of the cores, pods requesting `nvidia.com/gpu: 1` with their
/// slot's `nvidia.com/gpucores` (a percentage) and `gpumem` (MiB), the node advertising 10 vGPUs
/// per GPU (`nvidia.com/gpu: 40`), DCGM naming no pod there, HAMi's scheduler naming each
/// container's allocation per GPU and its vGPU monitor each container's utilisation. Neither the
/// MiB nor the percentage is read as GPUs, the 40 vGPUs are not 36 GPUs of unknown model; each
/// HAMi GPU-step is split among its holders by their share, the rest `__unallocated__`, so each
/// physical GPU's time is conserved and every namespace's GPU-hours and energy agree with the
/// ledger within 0.5%. Without HAMi's series (its scheduler not scraped) the request-based
/// fallback still bills each vGPU its share of the cores, and a bill that would go negative is
/// refused.
#[test]
fn a_hami_node_never_makes_a_nonsense_bill() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (prom, ledger) = simulated_day(dir, "34", &["--hami-node"]);
    let om = std::fs::read_to_string(dir.join("history.om")).unwrap();
    assert!(om.contains("resource=\"nvidia_com_gpucores\"") && om.contains("resource=\"nvidia_com_gpumem\""), "HAMi's requests are in the history");
    assert!(om.contains("kube_node_status_capacity{node=\"gpu-node-hami-01\",resource=\"nvidia_com_gpu\",unit=\"integer\",instance=\"10.0.0.5:8080\",job=\"kube-state-metrics\"} 40 "), "40 vGPUs advertised");
    assert!(
        om.contains("hami_vgpu_core_allocated_ratio{container_index=\"0\",device_uuid=\"GPU-") && om.contains("hami_container_device_utilization_ratio{"),
        "HAMi's own series"
    );
    let pool_h = ledger["cluster_gpu_seconds"].number().unwrap() / 3600.0;
    let pool_kwh = ledger["cluster_energy_j"].number().unwrap() / 3.6e6;

    // 1. With HAMi's series: its holders split each GPU-step.
    write_config(dir, "h.toml", &prom.url(), "lake", "");
    let out = common::run_ok(dir, &["--config", "h.toml", "collect", "--from", FROM, "--to", TO]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("node gpu-node-hami-01:") && log.contains("counts vGPUs, not GPUs"), "the HAMi node is named: {log}");
    assert!(log.contains("nvidia.com/gpucores") && log.contains("never read as GPUs"), "{log}");
    assert!(log.contains("HAMi: holders of 4 GPUs"), "{log}");
    let query = |cfg: &str, sql: &str| common::parse_csv(&common::stdout(&common::run_ok(dir, &["--config", cfg, "query", sql, "--format", "csv"]))).1;
    let unknown = query("h.toml", "SELECT count(*) FROM gpu_samples WHERE CAST(gpu_uuid AS VARCHAR) LIKE 'unmeasured/%'");
    assert_eq!(unknown[0][0], "0", "no GPU of unknown model from the vGPU count");
    // Each physical GPU-step of the HAMi node is its holders plus the rest: one GPU-step.
    let steps = query(
        "h.toml",
        "SELECT count(*), sum(CASE WHEN abs(s - 1.0) > 1e-9 THEN 1 ELSE 0 END), sum(held) FROM (SELECT gpu_uuid, ts, sum(share) AS s, \
         max(CASE WHEN pod IS NOT NULL THEN 1 ELSE 0 END) AS held FROM gpu_samples WHERE node = 'gpu-node-hami-01' GROUP BY 1, 2)",
    );
    assert_eq!(steps[0][0], (4 * 2880).to_string(), "{steps:?}");
    assert_eq!(steps[0][1], "0", "every GPU-step conserved: {steps:?}");
    assert!(steps[0][2].parse::<i64>().unwrap() > 2 * 2880, "held most of the day: {steps:?}");
    let report = chargeback_json(dir, "h.toml");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(
        report["conservation"]["cluster_gpu_us"].number().unwrap(),
        ledger["cluster_gpu_seconds"].number().unwrap() * 1e6,
        "the pool: the physical GPUs x the day"
    );
    let row = |rows: &[Value], ns: &str| rows.iter().find(|r| r["namespace"] == ns).cloned();
    for r in rows {
        assert_eq!(r["request_based"], "no", "measured, not request-based: {r}");
    }
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        for k in ["gpu_hours", "energy_kwh"] {
            let want = truth[k].number().unwrap();
            let got = row(rows, ns).map_or(0.0, |r| r[k].number().unwrap());
            eprintln!("{ns:>16} {k}: {got:.4} vs ledger {want:.4}");
            assert!((got - want).abs() <= want * 0.005 + 1e-3, "{ns} {k}: {got} vs the ledger's {want}");
        }
    }
    let energy: f64 = rows.iter().map(|r| r["energy_kwh"].number().unwrap()).sum();
    assert!((energy - pool_kwh).abs() <= pool_kwh * 0.005, "pool energy {energy} kWh vs the ledger's {pool_kwh}");
    let shares = query("h.toml", "SELECT DISTINCT gpu_share_pct FROM pods WHERE node = 'gpu-node-hami-01' ORDER BY 1");
    assert_eq!(shares, [["10.0"], ["15.0"], ["25.0"], ["50.0"]], "each HAMi pod's share of the cores is in the lake");

    // A pending HAMi pod asks for its share of a GPU, not a GPU: its pending rows carry the
    // share (its gpucores, from its spec), as the simulator's lake has them, and the queue's
    // pending demand counts each vGPU as that share, as computed here from the simulator's
    // pending rows (its schedule), not as the whole GPUs the vGPUs would be.
    write_config(dir, "truth.toml", &prom.url(), "sim/lake", "");
    let per_pod = "SELECT CAST(pod AS VARCHAR), count(*), max(gpu_share_pct) FROM pending_samples WHERE gpu_share_pct IS NOT NULL GROUP BY 1 ORDER BY 1";
    let (got, want) = (query("h.toml", per_pod), query("truth.toml", per_pod));
    eprintln!("pending HAMi pods: collected {got:?}, simulated {want:?}");
    assert!(want.len() >= 3, "some HAMi pods waited: {want:?}");
    for w in &want {
        let g = got.iter().find(|g| g[0] == w[0]).unwrap_or_else(|| panic!("{} waited but is not pending in the lake", w[0]));
        let (steps, sim_steps) = (g[1].parse::<i64>().unwrap(), w[1].parse::<i64>().unwrap());
        assert!(g[2] == w[2] && steps == sim_steps, "{}: collected {g:?} vs simulated {w:?}", w[0]);
    }
    assert_eq!(got.len(), want.len(), "no pod pending in the lake that the simulator placed at once (a pod pulling its image waits for no GPU): {got:?}");
    let demand = "SELECT CAST(namespace AS VARCHAR), sum(step_s * gpu_request * COALESCE(gpu_share_pct, 100) / 100.0), sum(step_s * gpu_request) FROM pending_samples GROUP BY 1 ORDER BY 1";
    let oracle = query("truth.toml", demand);
    let sections: Value =
        serde_json::from_str(&common::stdout(&common::run_ok(dir, &["--config", "h.toml", "report", "queue", "--from", FROM, "--to", TO, "--format", "json"])))
            .unwrap();
    let hourly = sections.as_array().unwrap().iter().find(|s| s["report"] == "queue_hourly").expect("queue_hourly");
    let mut weighted_apart = 0;
    for o in &oracle {
        let (want, whole) = (o[1].parse::<f64>().unwrap(), o[2].parse::<f64>().unwrap());
        let got: f64 = hourly["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["namespace"] == o[0].as_str())
            .map(|r| r["avg_pending_gpus"].number().unwrap() * 3600.0)
            .sum();
        eprintln!("{:>16} pending GPU-s: {got:.0} vs {want:.0} (as whole GPUs {whole:.0})", o[0]);
        // Each hour's average is rounded to 0.01 GPU (36 GPU-s).
        assert!((got - want).abs() <= want * 0.05 + 36.0 * 24.0, "{} pending demand {got} GPU-s vs {want}", o[0]);
        if whole - want > 0.2 * whole {
            weighted_apart += 1;
            assert!((got - want).abs() < (whole - want) / 4.0, "{}: {got} GPU-s is the vGPUs' shares ({want}), not whole GPUs ({whole})", o[0]);
        }
    }
    assert!(weighted_apart >= 1, "a namespace whose pending demand is mostly HAMi vGPUs: {oracle:?}");

    // Idle but held: without the vGPU monitor's utilisation a holder takes its GPU's, busy
    // with the other tenants' work; with its last-kernel series (seconds since it last
    // launched a kernel) a holder that launched none for a step is idle in it. With the
    // utilisation the HAMi tenants' allocated-but-idle GPU-hours are the ledger's; by the
    // last kernel they are more than with neither and never more than the ledger's (a step
    // where an idle pod launched a kernel at 1-3% has no utilisation of its own and reads as
    // the GPU's: the idle runs it breaks are not counted).
    let no_util = "\n[prometheus.metrics]\nhami_container_util = \"hami_not_scraped\"";
    write_config(dir, "k.toml", &prom.url(), "lake-k", no_util);
    let out = common::run_ok(dir, &["--config", "k.toml", "collect", "--from", FROM, "--to", TO]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("launched no kernel in the step"), "{log}");
    write_config(dir, "n.toml", &prom.url(), "lake-n", &format!("{no_util}\nhami_last_kernel = \"hami_not_scraped\""));
    common::run_ok(dir, &["--config", "n.toml", "collect", "--from", FROM, "--to", TO]);
    let (with_util, by_kernel, neither) = (idle_gpu_hours(dir, "h.toml"), idle_gpu_hours(dir, "k.toml"), idle_gpu_hours(dir, "n.toml"));
    for ns in ["team-inference", "team-research", "team-batch"] {
        let want = ledger["namespaces"][ns]["idle_gpu_hours"].number().unwrap();
        let got = |m: &BTreeMap<String, f64>| m.get(ns).copied().unwrap_or(0.0);
        eprintln!(
            "{ns:>16} idle GPU-h: ledger {want:.3}, with utilisation {:.3}, by last kernel {:.3}, neither {:.3}",
            got(&with_util),
            got(&by_kernel),
            got(&neither)
        );
        assert!(
            (got(&with_util) - want).abs() <= want * 0.01 + 0.01,
            "{ns}: idle with the vGPU monitor's utilisation {} vs the ledger's {want}",
            got(&with_util)
        );
        assert!(got(&by_kernel) <= want * 1.005 + 0.01, "{ns}: idle by the last kernel {} is more than the ledger's {want}", got(&by_kernel));
    }
    // On the HAMi node's pods alone: the last kernel finds held-but-idle vGPU time that
    // neither finds, and no more than the vGPU monitor's utilisation says. (A lower bound:
    // on this day 1.22 of the 3.80 GPU-h, 1.14 without it; a notebook that launches a small
    // kernel every few minutes breaks its runs.)
    let hami_pods: Vec<String> =
        query("h.toml", "SELECT DISTINCT CAST(pod AS VARCHAR) FROM pods WHERE node = 'gpu-node-hami-01'").into_iter().map(|r| r[0].clone()).collect();
    let on_hami = |cfg: &str| -> f64 {
        let idle: Value =
            serde_json::from_str(&common::stdout(&common::run_ok(dir, &["--config", cfg, "report", "idle", "--from", FROM, "--to", TO, "--format", "json"])))
                .unwrap();
        let pods = idle.as_array().unwrap().iter().find(|t| t["report"] == "idle").expect("the idle report's pod table");
        pods["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| hami_pods.iter().any(|p| r["pod"] == p.as_str()))
            .map(|r| r["idle_gpu_hours"].number().unwrap())
            .sum()
    };
    let (with_util, by_kernel, neither) = (on_hami("h.toml"), on_hami("k.toml"), on_hami("n.toml"));
    eprintln!("HAMi node's pods idle GPU-h: with utilisation {with_util:.3}, by last kernel {by_kernel:.3}, neither {neither:.3}");
    assert!(with_util > 1.0, "the HAMi tenants idle: {with_util} GPU-h");
    assert!(
        by_kernel >= neither + 0.05 && by_kernel <= with_util * 1.005 + 0.01,
        "idle by the last kernel {by_kernel} vs {neither} without it, {with_util} by utilisation"
    );
    // Completeness counts the HAMi node's 4 GPUs, not its 40 vGPUs.
    let c: Value = serde_json::from_str(&common::stdout(&common::run_ok(
        dir,
        &["--config", "h.toml", "report", "completeness", "--from", FROM, "--to", TO, "--format", "json"],
    )))
    .unwrap();
    assert_eq!(c["dcgm"]["expected"].as_i64().unwrap(), ledger["pool_unit_steps"].as_i64().unwrap(), "expected: the unit-steps the pool held");
    assert_eq!(c["dcgm"]["present"].as_i64().unwrap(), c["dcgm"]["expected"].as_i64().unwrap(), "{c}");
    let inv = common::stdout(&common::run_ok(dir, &["--config", "h.toml", "report", "inventory", "--from", FROM, "--to", TO, "--format", "json"]));
    let inv: Value = serde_json::from_str(&inv).unwrap();
    let node = inv["rows"].as_array().unwrap().iter().find(|r| r["node"] == "gpu-node-hami-01").expect("the HAMi node in the inventory");
    assert_eq!(node["gpus"].number().unwrap(), 4.0, "{node}");

    // 2. HAMi's scheduler not scraped: DCGM names no pod on the node, so its GPU time goes by
    // the requests (the fallback): each vGPU its share of the cores (`gpu_share_pct`) x its
    // time, GPU-hours as the ledger's; the tenants' energy is the node-day's shared by GPU
    // time (nothing says which GPU a vGPU was on), so it is only conserved there.
    let unscraped = "\n[prometheus.metrics]\nhami_core_allocated = \"hami_not_scraped\"\nhami_memory_allocated = \"hami_not_scraped\"\nhami_memory_limit = \"hami_not_scraped\"\nhami_container_util = \"hami_not_scraped\"";
    write_config(dir, "f.toml", &prom.url(), "lake-f", unscraped);
    common::run_ok(dir, &["--config", "f.toml", "collect", "--from", FROM, "--to", TO]);
    let report = chargeback_json(dir, "f.toml");
    let rows = report["rows"].as_array().unwrap();
    for r in rows {
        for k in ["gpu_hours", "energy_kwh", "gpu_cost", "total_cost"] {
            assert!(r[k].number().unwrap() >= 0.0, "no negative {k}: {r}");
        }
    }
    let tenants = ["team-inference", "team-research", "team-batch", "__unallocated__"];
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        for k in ["gpu_hours", "energy_kwh"] {
            let want = truth[k].number().unwrap();
            let got = row(rows, ns).map_or(0.0, |r| r[k].number().unwrap());
            assert!(got <= pool_h, "{ns}: {got} {k}");
            if k == "gpu_hours" || !tenants.contains(&ns.as_str()) {
                assert!((got - want).abs() <= want * 0.005 + 1e-3, "without HAMi's series, {ns} {k}: {got} vs the ledger's {want}");
            }
        }
    }
    assert!(rows.iter().any(|r| r["request_based"] == "yes"), "the HAMi node's tenants are request-based");
    let energy: f64 = rows.iter().map(|r| r["energy_kwh"].number().unwrap()).sum();
    assert!((energy - pool_kwh).abs() <= pool_kwh * 0.005, "pool energy {energy} kWh vs the ledger's {pool_kwh}");

    // The guard behind it: a fallback that reads each vGPU as a GPU and does not scale them to
    // the node (an override, as the shipped one was) would publish a negative __unallocated__
    // row; the chargeback and the month's run refuse it with exit 1, naming the row, and write
    // nothing.
    let shipped = std::fs::read_to_string(common::repo_root().join("queries/chargeback_fallback.sql")).unwrap();
    let unscaled = shipped.replace("WHEN t.gpu_us > u.gpu_us", "WHEN FALSE").replace("CASE WHEN r.gpu_share_pct IS NULL", "CASE WHEN TRUE");
    assert_ne!(unscaled, shipped);
    std::fs::create_dir_all(dir.join("unscaled")).unwrap();
    std::fs::write(dir.join("unscaled/chargeback_fallback.sql"), unscaled).unwrap();
    for args in [
        &["report", "chargeback", "--from", FROM, "--to", TO, "-o", "cb.json", "--format", "json"][..],
        &["run", "--no-collect", "--month", "2026-10", "--reports-dir", "reports"][..],
    ] {
        let out = common::bin().current_dir(dir).args([&["--config", "f.toml", "--queries", "unscaled"][..], args].concat()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("impossible bill") && err.contains("__unallocated__ ") && err.contains("GPU-hours"), "the rows are named: {err}");
    }
    assert!(!dir.join("cb.json").exists() && !dir.join("reports").exists(), "nothing written");
}

/// DRA (issue 44): the first whole-GPU node and the MIG node allocate their GPUs and MIG devices
/// through ResourceClaims. Their pods request no `nvidia.com/*` resource (kube-state-metrics#2979);
/// kube-state-metrics links each to its claim (`kube_pod_resourceclaim_info`), dcgm-exporter
/// labels the device with the claim beside the pod. The holders are the pods, each namespace's
/// GPU-hours and energy agree with the ledger within 0.5%, and the pods are in the lake with the
/// devices their claims gave them as their request (whole GPUs, or MIG devices of a profile),
/// pending ones included: the same pods, resources and requests, and the same pending demand, as
/// the simulator's own lake has.
#[test]
fn gpus_allocated_through_dra_claims() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (prom, ledger) = simulated_day(dir, "33", &["--dra-nodes"]);
    let om = std::fs::read_to_string(dir.join("history.om")).unwrap();
    let mut dra_nodes: Vec<&str> = om.match_indices("dra_pool_name=\"").map(|(i, m)| om[i + m.len()..].split('"').next().unwrap()).collect();
    dra_nodes.sort_unstable();
    dra_nodes.dedup();
    assert_eq!(dra_nodes.len(), 2, "a whole-GPU and a MIG node: {dra_nodes:?}");
    assert!(om.contains("dra_device_name=\"gpu-0-mig-") && om.contains("kube_pod_resourceclaim_info{"), "DRA's series are in the history");
    write_config(dir, "d.toml", &prom.url(), "lake", "");
    let out = common::run_ok(dir, &["--config", "d.toml", "collect", "--from", FROM, "--to", TO]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("DRA: ") && log.contains("pods hold GPUs through ResourceClaims"), "{log}");
    agrees_with_ledger(&chargeback_json(dir, "d.toml"), &ledger);

    // The pods of the DRA nodes, and the pending demand, as the simulator's lake has them.
    write_config(dir, "truth.toml", &prom.url(), "sim/lake", "");
    let nodes = dra_nodes.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
    let query = |cfg: &str, sql: &str| common::parse_csv(&common::stdout(&common::run_ok(dir, &["--config", cfg, "query", sql, "--format", "csv"]))).1;
    let pods_sql = format!("SELECT CAST(pod AS VARCHAR), CAST(gpu_resource AS VARCHAR), gpu_request FROM pods WHERE node IN ({nodes}) ORDER BY 1");
    let (got, want) = (query("d.toml", &pods_sql), query("truth.toml", &pods_sql));
    assert!(want.len() > 10 && want.iter().any(|r| r[1].starts_with("nvidia.com/mig-")), "{want:?}");
    assert_eq!(got, want, "the DRA pods' devices as their requests");
    // Each DRA pod the simulator has waiting waits in the lake too, asking for its claim's
    // devices (a pending pod's by its template, its claim not yet allocated), for as many
    // steps: kube-state-metrics says Pending until the containers run, but a pod past its
    // scheduled time waits for no GPU.
    let per_pod = format!(
        "SELECT CAST(pod AS VARCHAR), count(*), max(gpu_request) FROM pending_samples WHERE CAST(pod AS VARCHAR) IN (SELECT CAST(pod AS VARCHAR) FROM pods WHERE node IN ({nodes})) GROUP BY 1 ORDER BY 1"
    );
    let (got, want) = (query("d.toml", &per_pod), query("truth.toml", &per_pod));
    eprintln!("pending DRA pods: collected {got:?}, simulated {want:?}");
    assert!(want.len() >= 5, "some DRA pods waited: {want:?}");
    for w in &want {
        let g = got.iter().find(|g| g[0] == w[0]).unwrap_or_else(|| panic!("{} waited but is not pending in the lake", w[0]));
        let (steps, sim_steps) = (g[1].parse::<i64>().unwrap(), w[1].parse::<i64>().unwrap());
        assert!(g[2] == w[2] && steps == sim_steps, "{}: collected {g:?} vs simulated {w:?}", w[0]);
    }
    assert_eq!(got.len(), want.len(), "no pod pending in the lake that the simulator placed at once (a pod pulling its image waits for no GPU): {got:?}");
}

/// A 2026 cluster, every way of holding a GPU at once (issue 44): a HAMi node (vGPUs of 50/25/15/10%),
/// a whole-GPU node and a MIG node allocating through DRA claims, time-sliced and plain nodes, and
/// the pool changing under them (an L4 node autoscaled in 06:00-18:00, a board replaced on the
/// DRA node, the exporters rolled out). Each sharing layer is read by its own series and none
/// takes another's GPUs: the pool is the ledger's inventory x existence, every GPU-step of the
/// HAMi node is one GPU-step, the DRA nodes' pods are the simulator's (whole GPUs and MIG
/// devices by claim), every namespace's GPU-hours and energy are within 0.5% of the ledger, the energy is the
/// counters', and completeness counts the units that existed (4 HAMi GPUs, not 40 vGPUs).
#[test]
fn hami_and_dra_beside_a_pool_that_changes() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (prom, ledger) = simulated_day(dir, "35", &["--hami-node", "--dra-nodes", "--autoscale", "--replace-gpu", "--exporter-rollout"]);
    write_config(dir, "c.toml", &prom.url(), "lake", "");
    let out = common::run_ok(dir, &["--config", "c.toml", "collect", "--from", FROM, "--to", TO]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("HAMi: holders of 4 GPUs") && log.contains("pods hold GPUs through ResourceClaims"), "both layers are read: {log}");
    let query = |cfg: &str, sql: &str| common::parse_csv(&common::stdout(&common::run_ok(dir, &["--config", cfg, "query", sql, "--format", "csv"]))).1;

    let report = chargeback_json(dir, "c.toml");
    let rows = report["rows"].as_array().unwrap();
    let pool_us = report["conservation"]["cluster_gpu_us"].number().unwrap();
    let want_us = ledger["cluster_gpu_seconds"].number().unwrap() * 1e6;
    eprintln!("pool: {:.4} GPU-h vs ledger {:.4}", pool_us / 3.6e9, want_us / 3.6e9);
    assert!((pool_us - want_us).abs() <= want_us * 0.0005, "the pool {pool_us} GPU-us vs the ledger's inventory x existence {want_us}");
    let k = &report["conservation"]["energy_counters"];
    assert_eq!(k["conserved"].as_bool(), Some(true), "energy against the counters: {k}");
    for r in rows {
        for key in ["gpu_hours", "energy_kwh", "total_cost"] {
            assert!(r[key].number().unwrap() >= 0.0, "no negative {key}: {r}");
        }
    }
    let energy: f64 = rows.iter().map(|r| r["energy_kwh"].number().unwrap()).sum();
    let want = ledger["cluster_energy_j"].number().unwrap() / 3.6e6;
    eprintln!("pool energy: {energy:.4} kWh vs ledger {want:.4}");
    assert!((energy - want).abs() <= want * 0.001, "pool energy {energy} kWh vs the ledger's {want}");
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        for k in ["gpu_hours", "energy_kwh"] {
            let want = truth[k].number().unwrap();
            let got = rows.iter().find(|r| r["namespace"] == ns.as_str()).map_or(0.0, |r| r[k].number().unwrap());
            eprintln!("{ns:>16} {k}: {got:.4} vs ledger {want:.4}");
            assert!((got - want).abs() <= want * 0.005 + 1e-3, "{ns} {k}: {got} collected vs the ledger's {want}");
        }
    }

    // HAMi: every GPU-step of its node is its holders and the rest, one GPU-step.
    let steps = query(
        "c.toml",
        "SELECT count(*), sum(CASE WHEN abs(s - 1.0) > 1e-9 THEN 1 ELSE 0 END), sum(held) FROM (SELECT gpu_uuid, ts, sum(share) AS s, \
         max(CASE WHEN pod IS NOT NULL THEN 1 ELSE 0 END) AS held FROM gpu_samples WHERE node = 'gpu-node-hami-01' GROUP BY 1, 2)",
    );
    assert_eq!((steps[0][0].as_str(), steps[0][1].as_str()), ((4 * 2880).to_string().as_str(), "0"), "every HAMi GPU-step conserved: {steps:?}");
    assert!(steps[0][2].parse::<i64>().unwrap() > 2 * 2880, "the HAMi GPUs held most of the day: {steps:?}");

    // DRA: the pods of both DRA nodes, whole GPUs and MIG devices, as the simulator's lake has them.
    write_config(dir, "truth.toml", &prom.url(), "sim/lake", "");
    let om = std::fs::read_to_string(dir.join("history.om")).unwrap();
    let mut dra_nodes: Vec<&str> = om.match_indices("dra_pool_name=\"").map(|(i, m)| om[i + m.len()..].split('"').next().unwrap()).collect();
    dra_nodes.sort_unstable();
    dra_nodes.dedup();
    assert!(dra_nodes.contains(&"gpu-node-01") && dra_nodes.len() == 2, "both DRA nodes' devices are claimed, the MIG node's too: {dra_nodes:?}");
    let nodes = dra_nodes.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
    let pods_sql = format!(
        "SELECT CAST(node AS VARCHAR), CAST(pod AS VARCHAR), CAST(gpu_resource AS VARCHAR), gpu_request FROM pods WHERE node IN ({nodes}) ORDER BY 1, 2"
    );
    let (got, want) = (query("c.toml", &pods_sql), query("truth.toml", &pods_sql));
    assert!(want.len() >= 5, "pods on the DRA nodes: {want:?}");
    assert_eq!(got, want, "the DRA pods' devices as their requests");
    assert!(
        want.iter().any(|r| r[2].starts_with("nvidia.com/mig-")) && want.iter().any(|r| r[2] == "nvidia.com/gpu"),
        "MIG devices and whole GPUs by claim: {want:?}"
    );

    // Completeness: the units that existed, each measured at every step.
    let c: Value = serde_json::from_str(&common::stdout(&common::run_ok(
        dir,
        &["--config", "c.toml", "report", "completeness", "--from", FROM, "--to", TO, "--format", "json"],
    )))
    .unwrap();
    let (expected, present) = (c["dcgm"]["expected"].as_i64().unwrap(), c["dcgm"]["present"].as_i64().unwrap());
    eprintln!("completeness: {present} of {expected}");
    assert_eq!(expected, ledger["pool_unit_steps"].as_i64().unwrap(), "expected: the unit-steps the pool held");
    assert!(present as f64 >= expected as f64 * 0.995, "no real outage: {present} of {expected}");
}

/// A day shaped like a cloud cluster's, backfilled into a real Prometheus and collected: an L4
/// node the autoscaler adds at 06:00 and removes at 18:00, a GPU board replaced (out 12:00-12:30,
/// then a new UUID), the dcgm-exporter DaemonSet rolled out on every node (70 s without a
/// scrape each, a new `instance`), one exporter restarting every 3 h and one down 2 h. Checked
/// against the simulator's ledger, which knows the pool each instant (not the lake): the pool's
/// GPU-hours are the inventory x existence (no tail after the node left, no GPU-hours for the
/// board that was out), the energy is the GPUs' (the outage's counter delta kept), every
/// namespace agrees, and completeness measures the GPUs that existed (about 98%, the outage).
#[test]
fn a_pool_that_changes_under_the_collector() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let shape = ["--autoscale", "--replace-gpu", "--exporter-rollout", "--exporter-restart-hours", "3", "--exporter-outages", "1", "--outage-minutes", "120"];
    let (prom, ledger) = simulated_day(dir, "29", &shape);
    let om = std::fs::read_to_string(dir.join("history.om")).unwrap();
    assert!(om.contains("Hostname=\"gpu-node-as-01\"") && om.contains("instance=\"10.42.0.11:9400\""), "the shapes are in the history");
    write_config(dir, "c.toml", &prom.url(), "lake", "");
    common::run_ok(dir, &["--config", "c.toml", "collect", "--from", FROM, "--to", TO]);
    let query = |sql: &str| common::parse_csv(&common::stdout(&common::run_ok(dir, &["--config", "c.toml", "query", sql, "--format", "csv"]))).1;

    // The autoscaled node is in the pool from 06:00 to 18:00 and not a step more.
    let as_rows = query("SELECT count(*), min(ts), max(ts) FROM gpu_samples WHERE node = 'gpu-node-as-01'");
    assert_eq!(as_rows[0][0], (8 * 12 * 120).to_string(), "8 GPUs x 12 h of 30 s steps: {as_rows:?}");
    assert!(as_rows[0][1].contains("06:00:00") && as_rows[0][2].contains("17:59:30"), "{as_rows:?}");
    // The replaced board: two UUIDs at one index, each for its own time, nothing while it was out.
    let boards = query(
        "SELECT CAST(gpu_uuid AS VARCHAR) AS u, min(ts), max(ts), count(*) FROM gpu_samples WHERE node = 'gpu-node-01' AND gpu_index = 0 GROUP BY 1 ORDER BY 2",
    );
    assert_eq!(boards.len(), 2, "{boards:?}");
    assert!(boards[0][2].contains("11:59:30") && boards[1][1].contains("12:30:00"), "{boards:?}");
    assert_eq!(boards[0][3].parse::<i64>().unwrap() + boards[1][3].parse::<i64>().unwrap(), 2880 - 60, "the day less the 30 minutes out");
    let inv: Value = serde_json::from_str(&common::stdout(&common::run_incomplete(
        dir,
        &["--config", "c.toml", "report", "inventory", "--from", FROM, "--to", TO, "--format", "json"],
    )))
    .unwrap();
    let node1 = inv["rows"].as_array().unwrap().iter().find(|r| r["node"] == "gpu-node-01").unwrap();
    assert_eq!(node1["gpus"].number().unwrap(), 8.0, "a replaced board is one GPU of the node: {node1}");
    let notes = inv["notes"].to_string();
    assert!(notes.contains("gpu-node-01 GPU 0 replaced") && notes.contains(boards[0][0].as_str()) && notes.contains(boards[1][0].as_str()), "{notes}");

    // The chargeback: the pool is the ledger's inventory x existence, the energy the GPUs'.
    let out = common::run_incomplete(dir, &["--config", "c.toml", "report", "chargeback", "--from", FROM, "--to", TO, "--format", "json"]);
    let report: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let pool_us = report["conservation"]["cluster_gpu_us"].number().unwrap();
    let want_us = ledger["cluster_gpu_seconds"].number().unwrap() * 1e6;
    eprintln!("pool: {:.4} GPU-h vs ledger {:.4}", pool_us / 3.6e9, want_us / 3.6e9);
    assert!((pool_us - want_us).abs() <= want_us * 0.0005, "the pool's GPU-hours {pool_us} vs the ledger's inventory x existence {want_us}");
    let energy: f64 = rows.iter().map(|r| r["energy_kwh"].number().unwrap()).sum();
    let want = ledger["cluster_energy_j"].number().unwrap() / 3.6e6;
    eprintln!("pool energy: {energy:.4} kWh vs ledger {want:.4}");
    assert!((energy - want).abs() <= want * 0.001, "pool energy {energy} kWh vs the ledger's {want}: the outage's counter delta is kept");
    // Energy against the GPUs' own counters, read from the raw samples: the rows on the steps
    // the counters cover are the counters' delta there, and with the rest (power x step) the
    // ledger's energy; the note says so.
    let k = &report["conservation"]["energy_counters"];
    let (all, counted, delta) = (k["rows_energy_mj"].number().unwrap(), k["counted_rows_energy_mj"].number().unwrap(), k["counter_delta_mj"].number().unwrap());
    eprintln!(
        "counters: rows {all} mJ, on counted steps {counted} vs counters {delta} ({:+.4}%), uncounted {:.4}%",
        (counted - delta) * 100.0 / delta,
        (all - counted) * 100.0 / all
    );
    assert_eq!((k["conserved"].as_bool(), k["days"].as_i64(), k["days_recorded"].as_i64()), (Some(true), Some(1), Some(1)), "{k}");
    assert!((counted - delta).abs() <= delta * 0.001, "{k}");
    assert!(all - counted <= all * 0.01, "the counters cover all but the window's edges and the board's swap: {k}");
    let want_mj = ledger["cluster_energy_j"].number().unwrap() * 1000.0;
    assert!((delta + (all - counted) - want_mj).abs() <= want_mj * 0.001, "counters {delta} + uncounted {} vs the ledger's {want_mj} mJ", all - counted);
    let note = report["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).find(|n| n.starts_with("energy against the counters")).unwrap_or_default();
    assert!(note.starts_with(&format!("energy against the counters, {}: rows", &FROM[..10])) && note.contains(") OK;"), "{note}");
    let row = |ns: &str| rows.iter().find(|r| r["namespace"] == ns);
    let unmeasured = row("__unmeasured__").map_or((0.0, 0.0), |r| (r["gpu_hours"].number().unwrap(), r["energy_kwh"].number().unwrap()));
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        for (i, k) in ["gpu_hours", "energy_kwh"].into_iter().enumerate() {
            let want = truth[k].number().unwrap();
            let mut got = row(ns).map_or(0.0, |r| r[k].number().unwrap());
            if ns == "__unallocated__" {
                // Idle GPUs inside the outage are unmeasured: nothing says no pod held them.
                got += if i == 0 { unmeasured.0 } else { unmeasured.1 };
            }
            eprintln!("{ns:>16} {k}: {got:.4} vs ledger {want:.4}");
            assert!((got - want).abs() <= want.abs() * 0.005 + 1e-3, "{ns} {k}: {got} collected vs the ledger's {want}");
        }
    }

    // Completeness over the GPUs that existed: the outage is the gap, not the node that left.
    let c: Value = serde_json::from_str(&common::stdout(&common::run_incomplete(
        dir,
        &["--config", "c.toml", "report", "completeness", "--from", FROM, "--to", TO, "--format", "json"],
    )))
    .unwrap();
    let (expected, present) = (c["dcgm"]["expected"].as_i64().unwrap(), c["dcgm"]["present"].as_i64().unwrap());
    assert_eq!(expected, ledger["pool_unit_steps"].as_i64().unwrap(), "expected: the unit-steps the pool held");
    let pct = present as f64 * 100.0 / expected as f64;
    eprintln!("completeness: {present} of {expected} ({pct:.2}%)");
    assert!((97.0..99.0).contains(&pct), "the 2 h outage on one node is the gap: {pct}%");
    let outage_node = ledger["exporter_outages"].as_array().unwrap().iter().find(|o| o["pool_gpu_seconds"].number().unwrap() > 3600.0).unwrap()["node"]
        .as_str()
        .unwrap()
        .to_string();
    let mark = report["data_incomplete"].as_str().expect("marked incomplete");
    assert!(
        mark.starts_with("dcgm 9") && mark.contains("without samples: ") && mark.contains(&outage_node) && mark.contains("GPU-steps that existed"),
        "{mark}"
    );
}

/// A MIG GPU whose exporter puts power, energy and temperature on the parent GPU's own series
/// (no `GPU_I_*`, no pod) is no GPU of its own: the pool, every namespace and the idle row agree
/// with the ledger as with the repeated shape, and the inventory holds only the instances.
/// A broken exporter, utilisation fine: power NaN and the energy counter `+Inf` for half an
/// hour (the counters either side span it: its energy is known), then an impossible -40 W and
/// a `+Inf` counter for the day's last two hours (nothing after them: their energy is unknown).
/// No impossible or infinite value is stored; the last two hours' GPU-steps have no energy, and
/// the reports say so (completeness' energy share, exit 3 naming energy, on the power basis
/// too) instead of billing them 0 kWh with "conservation OK".
#[test]
fn energy_that_reads_inf_is_never_billed_as_zero() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(
        dir,
        &["simulate", "--out", "sim", "--days", "1", "--start", "2026-10-05", "--openmetrics", "history.om", "--gpus", "16", "--step", "30", "--seed", "9"],
    );
    let day = chrono::DateTime::parse_from_rfc3339(FROM).unwrap().timestamp();
    let (spanned, unknown) = ((day + 10 * 3600, day + 10 * 3600 + 1800), (day + 22 * 3600, day + 24 * 3600));
    let om = std::fs::read_to_string(dir.join("history.om")).unwrap();
    let mut broken = String::with_capacity(om.len());
    let mut changed = 0;
    for line in om.lines() {
        let power = line.starts_with("DCGM_FI_DEV_POWER_USAGE{");
        let energy = line.starts_with("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{");
        let t = line.rsplit(' ').next().and_then(|t| t.parse::<f64>().ok()).unwrap_or(0.0) as i64;
        let value = match (power, energy) {
            (true, _) if (spanned.0..spanned.1).contains(&t) => Some("NaN"),
            (true, _) if (unknown.0..unknown.1).contains(&t) => Some("-40"),
            (_, true) if (spanned.0..spanned.1).contains(&t) || (unknown.0..unknown.1).contains(&t) => Some("+Inf"),
            _ => None,
        };
        match value {
            Some(v) => {
                let (series, rest) = line.rsplit_once("} ").unwrap();
                let ts = rest.rsplit(' ').next().unwrap();
                broken.push_str(&format!("{series}}} {v} {ts}\n"));
                changed += 1;
            }
            None => {
                broken.push_str(line);
                broken.push('\n');
            }
        }
    }
    assert!(changed > 1000, "{changed} samples broken");
    std::fs::write(dir.join("history.om"), broken).unwrap();
    let prom = serve_history(dir);
    for (name, basis) in [("cloud.toml", "cloud"), ("power.toml", "power")] {
        write_config(dir, name, &prom.url(), "lake", &format!("\n[pricing]\nbasis = \"{basis}\""));
    }
    common::run_ok(dir, &["--config", "cloud.toml", "collect", "--from", FROM, "--to", TO]);

    // The oracle: the measured GPU-steps of the last two hours, counted from the samples.
    let ts = |s: i64| chrono::DateTime::from_timestamp(s, 0).unwrap().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let count = |sql: String| -> i64 {
        common::parse_csv(&common::stdout(&common::run_ok(dir, &["--config", "cloud.toml", "query", &sql, "--format", "csv"]))).1[0][0].parse().unwrap()
    };
    let within = |w: (i64, i64)| format!("ts >= TIMESTAMP '{}' AND ts < TIMESTAMP '{}'", ts(w.0), ts(w.1));
    let broken_steps = count(format!("SELECT count(*) FROM (SELECT DISTINCT gpu_uuid, gpu_instance_id, ts FROM gpu_samples WHERE (namespace IS NULL OR namespace <> '__unmeasured__') AND {})", within(unknown)));
    assert!(broken_steps > 0);
    assert_eq!(
        count(format!("SELECT count(power_w) FROM gpu_samples WHERE ({}) OR ({})", within(spanned), within(unknown))),
        0,
        "no NaN or -40 W stored as a power"
    );
    assert_eq!(count("SELECT count(*) FROM gpu_samples WHERE energy_j < 0 OR isnan(energy_j) OR energy_j > 1e12".to_string()), 0, "no impossible energy");
    assert_eq!(
        count(format!("SELECT count(*) FROM gpu_samples WHERE energy_j IS NULL AND {}", within(spanned))),
        0,
        "the counters either side span the half hour"
    );
    let csv =
        common::stdout(&common::run_incomplete(dir, &["--config", "cloud.toml", "report", "completeness", "--from", FROM, "--to", TO, "--format", "csv"]));
    let (header, rows) = common::parse_csv(&csv);
    let col = |k: &str| header.iter().position(|h| h == k).unwrap();
    let of = |source: &str| rows.iter().find(|r| r[col("source")] == source).unwrap_or_else(|| panic!("no {source} row:\n{csv}"));
    let (dcgm, energy) = (of("dcgm"), of("energy"));
    let n = |r: &Vec<String>, k: &str| r[col(k)].parse::<i64>().unwrap();
    assert_eq!(n(dcgm, "present"), n(dcgm, "expected"), "every GPU row is there:\n{csv}");
    assert_eq!(n(energy, "expected"), n(dcgm, "expected"));
    assert_eq!(
        n(energy, "present"),
        n(dcgm, "present") - broken_steps,
        "the GPU-steps whose power read -40 W and whose counter read +Inf, with nothing after, have no energy:\n{csv}"
    );
    assert_eq!(n(of("util"), "present"), n(dcgm, "present"), "utilisation was fine");

    // Every report, on either basis, says the energy is short; none exits 0.
    for cfg in ["cloud.toml", "power.toml"] {
        let out =
            common::bin().current_dir(dir).args(["--config", cfg, "report", "chargeback", "--from", FROM, "--to", TO, "--format", "json"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{cfg}: {err}");
        assert!(err.contains("energy ") && err.contains("bill no energy"), "{cfg}: {err}");
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mark = report["data_incomplete"].as_str().unwrap_or_default();
        assert!(mark.contains("energy "), "{cfg}: {mark}");
    }
}

#[test]
fn mig_device_fields_on_the_parent_series() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, prom, ledger) = simulate_and_serve(dir, &["--gpus", "24", "--step", "30", "--seed", "5", "--mig-device-fields", "parent"]);
    let om = std::fs::read_to_string(dir.join("history.om")).unwrap();
    let parent_power = om.lines().filter(|l| l.starts_with("DCGM_FI_DEV_POWER_USAGE{") && l.contains("A100") && !l.contains("GPU_I_ID")).count();
    assert!(parent_power > 0 && !om.lines().any(|l| l.starts_with("DCGM_FI_DEV_POWER_USAGE{") && l.contains("GPU_I_ID")), "the parent shape");
    write_config(dir, "p.toml", &prom.url(), "lake", "");
    common::run_ok(dir, &["--config", "p.toml", "collect", "--from", FROM, "--to", TO]);
    let report = chargeback_json(dir, "p.toml");
    agrees_with_ledger(&report, &ledger);
    let csv = common::stdout(&common::run_ok(dir, &["--config", "p.toml", "report", "inventory", "--from", FROM, "--to", TO, "--format", "csv"]));
    let (header, rows) = common::parse_csv(&csv);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mig: Vec<&Vec<String>> = rows.iter().filter(|r| r[col("mig_gpus")] != "0").collect();
    assert_eq!(mig.len(), 1, "one MIG node:\n{csv}");
    let cells = |r: &Vec<String>| ["gpus", "mig_gpus", "mig_layout"].map(|c| r[col(c)].clone());
    assert_eq!(cells(mig[0]), ["8", "8", "8 x 3g.40gb + 8 x 4g.40gb"].map(String::from), "{csv}");
    let whole_units = common::stdout(&common::run_ok(
        dir,
        &[
            "--config",
            "p.toml",
            "query",
            &format!("SELECT count(*) FROM nodes WHERE node = '{}' AND gpu_instance_id IS NULL", mig[0][col("node")]),
            "--format",
            "csv",
        ],
    ));
    assert_eq!(common::parse_csv(&whole_units).1[0][0], "0", "no parent GPU of its own on the MIG node");
}

#[test]
fn collect_from_a_real_prometheus() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, mut prom, ledger) = simulate_and_serve(dir, &["--gpus", "32", "--step", "30", "--seed", "11", "--time-sliced", "4"]);
    let cfg_a = write_config(dir, "a.toml", &prom.url(), "lake-a", "");

    // 1. Collect the day and compare with the ledger.
    let t0 = Instant::now();
    let out = common::run_ok(dir, &["--config", "a.toml", "collect", "--from", FROM, "--to", TO]);
    let first_run = t0.elapsed();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{log}");
    let report = chargeback_json(dir, "a.toml");
    let rows = report["rows"].as_array().unwrap();
    agrees_with_ledger(&report, &ledger);
    // Pod wait times per namespace, from the collected pods table.
    let csv = common::stdout(&common::run_ok(
        dir,
        &[
            "--config",
            "a.toml",
            "query",
            "SELECT CAST(namespace AS VARCHAR) AS ns, (CAST(scheduled AS BIGINT) - CAST(created AS BIGINT)) / 1000.0 AS wait_s FROM pods WHERE created >= TIMESTAMP '2026-10-05T00:00:00Z' AND created < TIMESTAMP '2026-10-06T00:00:00Z' AND scheduled IS NOT NULL",
            "--format",
            "csv",
        ],
    ));
    let mut waits: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for row in common::parse_csv(&csv).1 {
        waits.entry(row[0].clone()).or_default().push(row[1].parse().unwrap());
    }
    for (ns, truth) in ledger["namespaces"].as_object().unwrap() {
        if ns == "__unallocated__" {
            continue;
        }
        let mut w = waits.remove(ns).unwrap_or_default();
        w.sort_by(f64::total_cmp);
        assert_eq!(w.len() as u64, truth["pods_started"].as_u64().unwrap(), "{ns}: pods started in the window");
        for (p, key) in [(0.5, "wait_p50_s"), (0.95, "wait_p95_s"), (1.0, "wait_max_s")] {
            let (got, want) = (percentile(&w, p), truth[key].number().unwrap());
            assert!((got - want).abs() <= want * 0.005 + 1e-9, "{ns} {key}: {got} vs ledger {want}");
        }
    }
    // Node capacity and pod teams (kube_pod_labels) made it too; no gaps in a complete day.
    let one = |sql: &str| -> i64 {
        let csv = common::stdout(&common::run_ok(dir, &["--config", "a.toml", "query", sql, "--format", "csv"]));
        common::parse_csv(&csv).1[0][0].parse().unwrap()
    };
    assert_eq!(one("SELECT CAST(max(capacity) AS BIGINT) FROM node_capacity WHERE resource = 'nvidia_com_gpu'"), 8);
    assert_eq!(one("SELECT count(*) FROM pods WHERE team IS NULL"), 0, "every GPU pod has its team label");
    assert_eq!(one("SELECT count(*) FROM gaps"), 0);
    // The time-sliced GPU (4 replicas of nvidia.com/gpu.shared) and the pods that used it;
    // their GPU-hours are in the ledger comparison above. (Several pods at once, 1/n each, is
    // covered on a month in tests/it/costing.rs.)
    assert_eq!(one("SELECT CAST(max(capacity) AS BIGINT) FROM node_capacity WHERE resource = 'nvidia_com_gpu_shared'"), 4);
    assert!(one("SELECT count(*) FROM pods WHERE gpu_resource = 'nvidia.com/gpu.shared'") > 0, "pods requested a shared GPU");
    // Teams and cost centres from kube_namespace_labels, with no [teams] in the config.
    assert_eq!(one("SELECT count(*) FROM teams WHERE source = 'label' AND team IS NOT NULL AND cost_centre IS NOT NULL"), 6);
    for row in rows.iter().filter(|r| r["namespace"] != "__unallocated__") {
        assert!(row["team"].is_string() && row["cost_centre"].is_string(), "{} has its team and cost centre from labels", row["namespace"]);
    }
    assert!(one("SELECT count(*) FROM pods WHERE termination_reason = 'OOMKilled'") > 0, "OOM kills from last_terminated_reason");
    workloads_and_labels_agree_with_ledger(dir, "a.toml", &ledger);
    queues_agree_with_ledger(dir, "a.toml", &ledger);
    chargeback_by_pod_keys_agrees_with_ledger(dir, "a.toml", &ledger);
    let tree_a = lake_tree(&dir.join("lake-a"));

    // 2. An overlapping second collect changes nothing.
    common::run_ok(dir, &["--config", "a.toml", "collect", "--from", "2026-10-05T12:00:00Z", "--to", TO]);
    assert!(lake_tree(&dir.join("lake-a")) == tree_a, "overlapping re-collect changed the lake");

    // 2a. A re-collect that would replace history with less fails (1), names what would be lost
    // and keeps the lake: a mistyped utilisation metric, a Prometheus that has nothing (its
    // retention passed). With --replace it goes through; a plain re-collect then restores it.
    write_config(dir, "typo.toml", &prom.url(), "lake-a", "\n[prometheus.metrics]\ngpu_util = \"DCGM_FI_DEV_GPU_UTILX\"");
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let empty = Prom::start(&dir.join("empty/tsdb"), &dir.join("empty"));
    write_config(dir, "empty.toml", &empty.url(), "lake-a", "");
    // Only kube-state-metrics' series gone (a renamed scrape job): DCGM's rows are all there,
    // but the pending pods, quotas, capacity and namespace labels would be replaced by nothing.
    let gone: Vec<String> = [
        "pod_info",
        "pod_created",
        "pod_scheduled_time",
        "pod_start_time",
        "pod_completion_time",
        "pod_phase",
        "pod_requests",
        "pod_status_reason",
        "pod_last_terminated_reason",
        "pod_labels",
        "resourcequota",
        "node_capacity",
        "kueue_pending",
        "namespace_labels",
    ]
    .iter()
    .map(|k| format!("{k} = \"gone_{k}\""))
    .collect();
    write_config(dir, "kube-gone.toml", &prom.url(), "lake-a", &format!("\n[prometheus.metrics]\n{}", gone.join("\n")));
    for (cfg, lost) in [("typo.toml", "utilisation values"), ("empty.toml", "GPU rows"), ("kube-gone.toml", "pending_samples rows ")] {
        let out = common::bin().current_dir(dir).args(["--config", cfg, "collect", "--from", FROM, "--to", TO]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cfg}: {err}");
        assert!(err.contains(lost) && err.contains("2026-10-05: ") && err.contains("--replace"), "{cfg}: {err}");
        if cfg == "kube-gone.toml" {
            for table in ["quotas rows ", "node_capacity rows ", "namespace_labels rows "] {
                assert!(err.contains(table) && err.contains(" -> 0"), "{cfg}: names {table}: {err}");
            }
            assert!(!err.contains("GPU rows"), "DCGM's rows are all there: {err}");
        }
        assert!(lake_tree(&dir.join("lake-a")) == tree_a, "{cfg}: a refused re-collect changed the lake");
    }
    drop(empty);
    common::run_ok(dir, &["--config", "typo.toml", "collect", "--from", "2026-10-05T12:00:00Z", "--to", TO, "--replace"]);
    assert_eq!(
        one("SELECT count(*) FROM gpu_samples WHERE util_pct IS NOT NULL AND mig_profile IS NULL AND ts >= TIMESTAMP '2026-10-05T12:00:00Z'"),
        0,
        "replaced as asked"
    );
    common::run_ok(dir, &["--config", "a.toml", "collect", "--from", "2026-10-05T12:00:00Z", "--to", TO]);
    assert!(lake_tree(&dir.join("lake-a")) == tree_a, "collected again, the lake is as it was");

    // 2b. The same two collects into an S3 bucket (the moto server on loopback) put the same
    // bytes under the same keys, and the chargeback read back from the bucket is the same.
    #[cfg(feature = "s3")]
    if let Some(moto) = common::moto::start() {
        moto.create_bucket("collected");
        let lake_toml = moto.lake_toml("collected", "lake", &common::moto::Moto::credentials_file(dir));
        std::fs::write(
            dir.join("s3.toml"),
            format!("{lake_toml}\n[prometheus]\nurl = \"{}\"\nstep_secs = 30\nretries = 2\nbackoff_ms = 100\ntimeout_secs = 20\n", prom.url()),
        )
        .unwrap();
        common::run_ok(dir, &["--config", "s3.toml", "collect", "--from", FROM, "--to", TO]);
        common::run_ok(dir, &["--config", "s3.toml", "collect", "--from", "2026-10-05T12:00:00Z", "--to", TO]);
        let bucket = moto.tree("collected", "lake");
        let keys = |t: &[(String, Vec<u8>)]| t.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&bucket), keys(&tree_a), "the bucket's keys are the local lake's paths (and no lock is left)");
        assert!(bucket == tree_a, "the bucket's files differ from the local lake's");
        let chargeback = |cfg: &str| common::run_ok(dir, &["--config", cfg, "report", "chargeback", "--from", FROM, "--to", TO, "--format", "json"]).stdout;
        assert!(chargeback("s3.toml") == chargeback("a.toml"), "chargeback from the bucket");
    }

    // 3. query_range double-counts after pod switches; raw range vectors do not.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cfg = gpuledger::config::Config::load(&cfg_a, true).unwrap();
    let client = gpuledger::collect::prometheus::PromClient::new(&cfg.prometheus).unwrap();
    let (s, e) = (1_790_812_800_000 + 4 * 86_400_000, 1_790_812_800_000 + 5 * 86_400_000);
    let doubled = |series: &[gpuledger::collect::prometheus::Series]| {
        let mut seen: BTreeMap<(String, i64), usize> = BTreeMap::new();
        for x in series {
            for (t, _) in &x.samples {
                *seen.entry((x.labels["UUID"].clone(), *t)).or_default() += 1;
            }
        }
        seen.values().filter(|n| **n > 1).count()
    };
    let ranged = rt.block_on(client.query_range("DCGM_FI_DEV_GPU_UTIL", s, e - 30_000, 30)).unwrap();
    let raw = rt.block_on(client.range_vector("DCGM_FI_DEV_GPU_UTIL", s, e)).unwrap();
    let (d_ranged, d_raw) = (doubled(&ranged), doubled(&raw));
    eprintln!("GPU-steps with two holders: query_range {d_ranged}, raw range vectors {d_raw}");
    assert!(d_ranged > 0, "query_range shows lingering series after pod switches");
    assert_eq!(d_raw, 0);

    // 3b. `check` reaches this Prometheus and finds every metric the collector needs.
    let out = common::bin().current_dir(dir).args(["--config", "a.toml", "check"]).output().unwrap();
    let text = common::stdout(&out);
    eprintln!("{text}");
    assert!(out.status.success(), "check: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("prometheus") && l.contains("answers (version 2.")), "{text}");
    assert!(text.lines().all(|l| !l.starts_with("FAIL")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("prometheus retention") && l.contains("100y: samples from about ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("kube kube_pod_container_resource_requests")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("gpu nodes") && l.contains("every one named by DCGM")), "{text}");

    // 3c. `run`, the cron job: a checkpoint half-way through the day and a lag that puts "now
    // minus lag" at the day's end; run collects the rest and writes October's reports, which
    // equal the reports on the lake collected in one go. A second run collects nothing and
    // rewrites the same bytes.
    // The lag is set just before each run: "now minus lag" stays on the day's end for a step
    // (30 s), which a run's start-up on a loaded machine must not outlast.
    let with_lag = || {
        let lag = (chrono::Utc::now() - chrono::DateTime::parse_from_rfc3339(TO).unwrap().with_timezone(&chrono::Utc)).num_seconds();
        write_config(dir, "r.toml", &prom.url(), "lake-r", &format!("lag_secs = {lag}\n\n[run]\nreports_dir = \"rep\"\nmin_completeness_pct = 3.0"));
    };
    with_lag();
    common::run_ok(dir, &["--config", "r.toml", "collect", "--from", FROM, "--to", "2026-10-05T12:00:00Z"]);
    with_lag();
    let out = common::run_ok(dir, &["--config", "r.toml", "run", "--month", "2026-10"]);
    let summary = common::stdout(&out);
    eprintln!("{summary}");
    assert!(summary.contains("collect       2026-10-05T12:00:00Z to 2026-10-06T00:00:00Z"), "{summary}");
    assert!(summary.contains("status        OK"), "{summary}");
    let without_state = |t: Vec<(String, Vec<u8>)>| t.into_iter().filter(|(p, _)| !p.starts_with("_state")).collect::<Vec<_>>();
    let (r, a) = (without_state(lake_tree(&dir.join("lake-r"))), without_state(lake_tree(&dir.join("lake-a"))));
    let differing: Vec<&String> = r.iter().filter(|x| !a.contains(x)).map(|(p, _)| p).chain(a.iter().filter(|x| !r.contains(x)).map(|(p, _)| p)).collect();
    assert!(differing.is_empty(), "run's collect built a different lake: {differing:?}");
    // (A day of October is 3.2% of it: the same threshold as run's, so neither is marked.)
    write_config(dir, "a3.toml", &prom.url(), "lake-a", "\n[run]\nmin_completeness_pct = 3.0");
    let csv = common::stdout(&common::run_ok(dir, &["--config", "a3.toml", "report", "chargeback", "--month", "2026-10", "--format", "csv"]));
    assert_eq!(std::fs::read_to_string(dir.join("rep/2026-10/chargeback.csv")).unwrap(), csv);
    let reports = common::tree(&dir.join("rep"));
    with_lag();
    let again = common::stdout(&common::run_ok(dir, &["--config", "r.toml", "run", "--month", "2026-10"]));
    assert!(again.contains("nothing new"), "{again}");
    let second = common::tree(&dir.join("rep"));
    let changed: Vec<&String> =
        second.iter().filter(|x| !reports.contains(x)).map(|(p, _)| p).chain(reports.iter().filter(|x| !second.contains(x)).map(|(p, _)| p)).collect();
    assert!(changed.is_empty(), "a second run changed the reports: {changed:?}\n{again}");

    // 3d. A day Prometheus has nothing for is recorded as gaps, and the completeness report
    // shows it: 0% present and 1440 gap minutes for both sources, the next day whole.
    common::run_ok(dir, &["--config", "r.toml", "collect", "--from", "2026-10-04", "--to", "2026-10-05"]);
    let csv = common::stdout(&common::run_ok(
        dir,
        &["--config", "r.toml", "report", "completeness", "--from", "2026-10-04", "--to", "2026-10-06", "--format", "csv"],
    ));
    let (header, rows) = common::parse_csv(&csv);
    assert_eq!(header, ["date", "source", "unit", "expected", "present", "present_pct", "gap_minutes"]);
    let gpu_units = one("SELECT count(DISTINCT concat(CAST(gpu_uuid AS VARCHAR), CAST(gpu_instance_id AS VARCHAR))) FROM gpu_samples");
    let expect = [
        ["2026-10-04", "dcgm", "GPU rows", &(gpu_units * 2880).to_string(), "0", "0.00", "1440.00"],
        ["2026-10-04", "util", "GPU rows with utilisation", &(gpu_units * 2880).to_string(), "0", "0.00", "1440.00"],
        ["2026-10-04", "energy", "GPU rows with energy", &(gpu_units * 2880).to_string(), "0", "0.00", "1440.00"],
        ["2026-10-04", "kube", "steps", "2880", "0", "0.00", "1440.00"],
        ["2026-10-05", "dcgm", "GPU rows", &(gpu_units * 2880).to_string(), &(gpu_units * 2880).to_string(), "100.00", "0.00"],
        ["2026-10-05", "util", "GPU rows with utilisation", &(gpu_units * 2880).to_string(), &(gpu_units * 2880).to_string(), "100.00", "0.00"],
        ["2026-10-05", "energy", "GPU rows with energy", &(gpu_units * 2880).to_string(), &(gpu_units * 2880).to_string(), "100.00", "0.00"],
        ["2026-10-05", "kube", "steps", "2880", "2880", "100.00", "0.00"],
    ];
    assert_eq!(rows, expect.map(|r| r.map(String::from).to_vec()).to_vec(), "{csv}");

    // 4. A collector killed with SIGKILL mid-run, then rerun, gives the same lake.
    write_config(dir, "b.toml", &prom.url(), "lake-b", "");
    for fraction in [0.3, 0.7] {
        let mut child = common::bin().current_dir(dir).args(["--config", "b.toml", "collect", "--from", FROM, "--to", TO]).spawn().unwrap();
        std::thread::sleep(first_run.mul_f64(fraction));
        let _ = child.kill();
        let _ = child.wait();
    }
    common::run_ok(dir, &["--config", "b.toml", "collect", "--from", FROM, "--to", TO]);
    assert!(lake_tree(&dir.join("lake-b")) == tree_a, "killed-then-rerun lake differs");

    // 5. Prometheus stopped mid-run (once the collect's first query is answered, however long
    // a loaded machine takes to get there): clear error, non-zero exit, lake unchanged.
    write_config(dir, "c.toml", &prom.url(), "lake-a", "chunk_secs = 3600\nconcurrency = 1");
    let mut child = common::bin()
        .current_dir(dir)
        .args(["--config", "c.toml", "collect", "--from", "2026-10-05T06:00:00Z", "--to", TO])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    let mut err = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        err.push_str(&line);
        err.push('\n');
        if line.contains("queries: 1/") {
            break;
        }
    }
    prom.stop();
    for line in lines {
        err.push_str(&line.unwrap());
        err.push('\n');
    }
    let status = child.wait().unwrap();
    assert!(!status.success(), "collect must fail when Prometheus goes away: {err}");
    let last = err.lines().last().unwrap_or("");
    assert!(last.starts_with("error: query ") && last.contains(" to 2026-10-"), "cause names the query and window: {last}");
    assert!(lake_tree(&dir.join("lake-a")) == tree_a, "a failed collect changed the lake");

    // 6. Retention passes: the same TSDB, with a sample of an hour ago added (Prometheus' time
    // retention counts back from its newest block, as on a live server), served again with a
    // retention that ends after the collected day, so Prometheus drops the day's blocks on
    // start. A re-collect of the day is refused before anything is fetched (exit 1, naming the
    // retention and where it now starts), the lake keeps its copy; a window inside the
    // retention is collected as usual.
    let age_days = (chrono::Utc::now() - chrono::DateTime::parse_from_rfc3339(TO).unwrap().with_timezone(&chrono::Utc)).num_days();
    assert!(age_days >= 2, "the test's day is in the past");
    let keep = format!("{}d", age_days / 2);
    let an_hour_ago = chrono::Utc::now().timestamp() - 3600;
    std::fs::write(dir.join("recent.om"), format!("# TYPE up gauge\nup{{job=\"recent\"}} 1 {an_hour_ago}\n# EOF\n")).unwrap();
    let out = Command::new("promtool").args(["tsdb", "create-blocks-from", "openmetrics"]).arg(dir.join("recent.om")).arg(dir.join("tsdb")).output().unwrap();
    assert!(out.status.success(), "promtool: {}", String::from_utf8_lossy(&out.stderr));
    let prom = Prom::start_keeping(&dir.join("tsdb"), dir, &keep);
    let client = gpuledger::collect::prometheus::PromClient::new(
        &gpuledger::config::Config::load(&write_config(dir, "d.toml", &prom.url(), "lake-a", ""), true).unwrap().prometheus,
    )
    .unwrap();
    let left = rt.block_on(client.range_vector("DCGM_FI_DEV_GPU_UTIL", s - 86_400_000, e)).unwrap();
    assert!(left.is_empty(), "Prometheus dropped the day past its retention ({} series left)", left.len());
    let out = common::bin().current_dir(dir).args(["--config", "d.toml", "collect", "--from", FROM, "--to", TO]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(" keeps ")
            && err.contains(" (storageRetention), samples from about ")
            && err.contains("collect --from ")
            && err.contains("nothing was fetched"),
        "{err}"
    );
    assert!(lake_tree(&dir.join("lake-a")) == tree_a, "a refused collect changed the lake");
    write_config(dir, "h.toml", &prom.url(), "lake-h", "");
    let recent = (chrono::Utc::now() - chrono::Duration::hours(2)).format("%Y-%m-%dT%H:00:00Z").to_string();
    let recent_end = (chrono::Utc::now() - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:00:00Z").to_string();
    common::run_ok(dir, &["--config", "h.toml", "collect", "--from", &recent, "--to", &recent_end]);
}

/// Two clusters of real duty cycles (the GenAI trace: short idle gaps between pods) in one
/// Prometheus, each scraped every 15 s with jitter by an HA pair whose copies Thanos returns
/// undeduplicated: per cluster, the GPU time nobody held (`__unallocated__`) has the energy the
/// idle GPUs drew, within 1% of the ledger, not the busy pods' watts around it; every
/// namespace's GPU-hours and energy within 0.5%.
#[test]
fn clusters_scraped_every_15_s_by_an_ha_pair() {
    if !tools_present() {
        return;
    }
    let Some(trace) = common::traces_dir("alibaba-genai-v2026-gpu-util") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let tsdb = dir.join("tsdb");
    let mut ledgers = BTreeMap::new();
    for (cluster, seed) in [("east", "41"), ("west", "42")] {
        let (om, out) = (format!("{cluster}.om"), format!("sim-{cluster}"));
        let flags = ["--gpus", "16", "--days", "1", "--step", "30", "--seed", seed, "--start", "2026-10-05", "--util-trace", trace.to_str().unwrap()];
        let shape = ["--scrape-interval", "15", "--scrape-jitter", "2", "--prometheus-replicas", "2", "--cluster", cluster];
        common::run_ok(dir, &[&["simulate", "--out", &out, "--openmetrics", &om][..], &flags, &shape].concat());
        let done = Command::new("promtool").args(BACKFILL).arg(dir.join(&om)).arg(&tsdb).output().unwrap();
        assert!(done.status.success(), "promtool: {}", String::from_utf8_lossy(&done.stderr));
        ledgers.insert(cluster, serde_json::from_str::<Value>(&std::fs::read_to_string(dir.join(format!("{out}/ledger.json"))).unwrap()).unwrap());
    }
    let prom = Prom::start(&tsdb, dir);
    write_config_step(dir, "h.toml", &prom.url(), "lake", 30, "cluster_label = \"cluster\"");
    common::run_ok(dir, &["--config", "h.toml", "collect", "--from", FROM, "--to", TO]);
    for (cluster, ledger) in &ledgers {
        let report: Value = serde_json::from_str(&common::stdout(&common::run_ok(
            dir,
            &["--config", "h.toml", "report", "chargeback", "--cluster", cluster, "--from", FROM, "--to", TO, "--format", "json"],
        )))
        .unwrap();
        eprintln!("cluster {cluster}:");
        agrees_with_ledger(&report, ledger);
        let row = report["rows"].as_array().unwrap().iter().find(|r| r["namespace"] == "__unallocated__").expect("an __unallocated__ row");
        let (got, want) = (row["energy_kwh"].number().unwrap(), ledger["namespaces"]["__unallocated__"]["energy_kwh"].number().unwrap());
        eprintln!("cluster {cluster} __unallocated__ energy: {got:.4} kWh vs ledger {want:.4} ({:+.2}%)", (got - want) / want * 100.0);
        assert!((got - want).abs() <= want * 0.01, "cluster {cluster}: __unallocated__ {got} kWh vs the ledger's {want}");
    }
}

/// Two clusters in one Prometheus (a Thanos or Mimir holding both, `cluster` as their external
/// label), simulated with different seeds and sizes but the same node and namespace names:
/// with `prometheus.cluster_label = "cluster"` each cluster's chargeback (`--cluster`) agrees
/// with its own ledger, the rows of both add up to both pools exactly, a namespace name in both
/// is two rows with its own figures, `--by cluster` has one row per cluster with its pool, the
/// idle report of one cluster names only its pods, and FOCUS's `x_Cluster` comes from the data.
/// (Named to sort first: libtest starts tests in name order, and this, the longest, last
/// would leave one core idle.)
#[test]
fn clusters_sharing_one_prometheus() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let tsdb = dir.join("tsdb");
    let mut ledgers = BTreeMap::new();
    for (cluster, gpus, seed) in [("east", "16", "31"), ("west", "24", "32")] {
        let om = format!("{cluster}.om");
        let out = format!("sim-{cluster}");
        common::run_ok(
            dir,
            &[
                "simulate",
                "--out",
                &out,
                "--gpus",
                gpus,
                "--days",
                "1",
                "--step",
                "30",
                "--seed",
                seed,
                "--start",
                "2026-10-05",
                "--openmetrics",
                &om,
                "--cluster",
                cluster,
            ],
        );
        let out = Command::new("promtool").args(BACKFILL).arg(dir.join(&om)).arg(&tsdb).output().unwrap();
        assert!(out.status.success(), "promtool: {}", String::from_utf8_lossy(&out.stderr));
        let ledger: Value = serde_json::from_str(&std::fs::read_to_string(dir.join(format!("sim-{cluster}/ledger.json"))).unwrap()).unwrap();
        ledgers.insert(cluster, ledger);
    }
    let prom = Prom::start(&tsdb, dir);
    // Without prometheus.cluster_label the two would be read as one pool: collect warns and
    // check says which label to set.
    write_config_step(dir, "m.toml", &prom.url(), "lake-mixed", 30, "");
    let out = common::run_ok(dir, &["--config", "m.toml", "collect", "--from", FROM, "--to", TO]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("a cluster label with several values (east, west)") && log.contains("prometheus.cluster_label = \"cluster\""),
        "mixing is warned: {log}"
    );
    let check = common::bin().current_dir(dir).args(["--config", "m.toml", "check"]).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    let line = text.lines().find(|l| l.contains("clusters")).unwrap_or_else(|| panic!("check names the clusters: {text}"));
    assert!(
        line.starts_with("warn") && line.contains("cluster with 2 values (east, west)") && line.contains("prometheus.cluster_label = \"cluster\""),
        "{line}"
    );
    // The lake collected so names the nodes both clusters have (gpu-node-01 and -02), two
    // GPUs at each index of theirs at once; west's third node is one node.
    let out =
        common::bin().current_dir(dir).args(["--config", "m.toml", "report", "completeness", "--from", FROM, "--to", TO, "--format", "json"]).output().unwrap();
    let c: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(c["mixed_nodes"], serde_json::json!(["gpu-node-01", "gpu-node-02"]), "{c}");
    assert!(c["notes"].to_string().contains("2 nodes hold two GPUs at one index at the same time: gpu-node-01 (8 GPU indexes)"), "{}", c["notes"]);
    write_config_step(dir, "c.toml", &prom.url(), "lake", 30, "cluster_label = \"cluster\"");
    let out = common::run_ok(dir, &["--config", "c.toml", "collect", "--from", FROM, "--to", TO]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("2 clusters by label cluster: east, west"), "the clusters are logged: {log}");
    let window = ["--from", FROM, "--to", TO, "--format", "json"];
    let report = |extra: &[&str]| -> Value {
        serde_json::from_str(&common::stdout(&common::run_ok(dir, &[&["--config", "c.toml", "report", "chargeback"][..], extra, &window].concat()))).unwrap()
    };
    // Each cluster on its own agrees with its ledger.
    for (cluster, ledger) in &ledgers {
        eprintln!("cluster {cluster}:");
        let one = report(&["--cluster", cluster]);
        agrees_with_ledger(&one, ledger);
        assert!(one["rows"].as_array().unwrap().iter().all(|r| r["cluster"] == *cluster), "--cluster {cluster} shows only its rows");
    }
    // Both at once: the pools add up, and a namespace of both clusters is two rows.
    let both = report(&[]);
    let pool: f64 = ledgers.values().map(|l| l["cluster_gpu_seconds"].number().unwrap()).sum();
    assert_eq!(both["conservation"]["cluster_gpu_us"].number().unwrap(), pool * 1e6, "both pools, every GPU-step once");
    let rows = both["rows"].as_array().unwrap();
    let hours: f64 = rows.iter().map(|r| r["gpu_hours"].number().unwrap()).sum();
    assert!((hours - pool / 3600.0).abs() < 0.01, "the rows add up to both pools: {hours} vs {}", pool / 3600.0);
    let mut shared = 0;
    for (ns, truth) in ledgers["east"]["namespaces"].as_object().unwrap() {
        let west = ledgers["west"]["namespaces"][ns]["gpu_hours"].number().unwrap_or(0.0);
        let east = truth["gpu_hours"].number().unwrap();
        if east == 0.0 || west == 0.0 {
            continue;
        }
        shared += 1;
        for (cluster, want) in [("east", east), ("west", west)] {
            let row = rows.iter().find(|r| r["namespace"] == ns.as_str() && r["cluster"] == cluster).unwrap_or_else(|| panic!("no row for {ns} in {cluster}"));
            let got = row["gpu_hours"].number().unwrap();
            assert!((got - want).abs() <= want * 0.005 + 1e-3, "{ns} in {cluster}: {got} GPU-h vs ledger {want}");
        }
    }
    assert!(shared >= 3, "namespaces running in both clusters: {shared}");
    // One row per cluster, its pool.
    let by = report(&["--by", "cluster"]);
    let rows = by["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (cluster, ledger) in &ledgers {
        let row = rows.iter().find(|r| r["cluster"] == *cluster).unwrap_or_else(|| panic!("no row for cluster {cluster}"));
        let want = ledger["cluster_gpu_seconds"].number().unwrap() / 3600.0;
        assert!((row["gpu_hours"].number().unwrap() - want).abs() < 0.001, "cluster {cluster}: {row} vs pool {want} GPU-h");
    }
    // The idle report of one cluster: only pods of its ledger.
    let idle: Value =
        serde_json::from_str(&common::stdout(&common::run_ok(dir, &[&["--config", "c.toml", "report", "idle", "--cluster", "east"][..], &window].concat())))
            .unwrap();
    let idle_hours = |v: &Value| -> f64 {
        let t = v.as_array().unwrap().iter().find(|t| t["report"] == "idle_namespaces").expect("the idle report's namespace table");
        t["rows"].as_array().unwrap().iter().map(|r| r["idle_gpu_hours"].number().unwrap()).sum()
    };
    let all: Value = serde_json::from_str(&common::stdout(&common::run_ok(dir, &[&["--config", "c.toml", "report", "idle"][..], &window].concat()))).unwrap();
    let want = |c: &str| ledgers[c]["namespaces"].as_object().unwrap().values().map(|n| n["idle_gpu_hours"].number().unwrap_or(0.0)).sum::<f64>();
    let (east, both) = (idle_hours(&idle), idle_hours(&all));
    eprintln!("idle GPU-h: east {east:.3} (ledger {:.3}), both {both:.3} (ledger {:.3})", want("east"), want("east") + want("west"));
    assert!((east - want("east")).abs() <= want("east") * 0.01 + 1e-3, "east's idle GPU-h {east} vs its ledger {}", want("east"));
    assert!((both - want("east") - want("west")).abs() <= (want("east") + want("west")) * 0.01 + 1e-3, "both clusters' idle GPU-h {both}");
    // The inventory keeps the clusters' same-named nodes apart.
    let inv = common::stdout(&common::run_ok(dir, &["--config", "c.toml", "report", "inventory", "--from", FROM, "--to", TO, "--format", "csv"]));
    let (header, lines) = common::parse_csv(&inv);
    let at = header.iter().position(|h| h == "node").expect("node column");
    let nodes: std::collections::BTreeSet<&str> = lines.iter().map(|l| l[at].as_str()).collect();
    for c in ["east", "west"] {
        let own: Vec<&&str> = nodes.iter().filter(|n| n.starts_with(&format!("{c}/"))).collect();
        assert!(!own.is_empty(), "cluster {c}'s nodes in the inventory: {nodes:?}");
    }
    assert!(nodes.iter().all(|n| n.starts_with("east/") || n.starts_with("west/")), "{nodes:?}");
    let short = |c: &str| -> std::collections::BTreeSet<String> { nodes.iter().filter_map(|n| n.strip_prefix(&format!("{c}/"))).map(str::to_string).collect() };
    assert!(!short("east").is_disjoint(&short("west")), "the clusters share node names, kept apart: {nodes:?}");
    // FOCUS names each line's cluster.
    let focus = common::stdout(&common::run_ok(dir, &["--config", "c.toml", "report", "focus", "--from", FROM, "--to", TO, "--format", "csv"]));
    let (header, lines) = common::parse_csv(&focus);
    let at = header.iter().position(|h| h == "x_Cluster").expect("x_Cluster column");
    let clusters: std::collections::BTreeSet<&str> = lines.iter().map(|l| l[at].as_str()).collect();
    assert_eq!(clusters.into_iter().collect::<Vec<_>>(), ["east", "west"]);
}

/// A collect killed (SIGKILL, through the `publish` failpoint) after each day file it publishes,
/// on a lake that already holds the morning: every report before the next collect exits
/// non-zero naming the unfinished day, never 0 with fewer pods; the next collect of the window
/// repairs the lake, whose reports are then the bytes of a run that was never killed.
#[test]
fn a_collect_killed_while_publishing_never_bills_a_half_day() {
    if !tools_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (prom, _) = simulated_day(dir, "41", &[]);
    let noon = "2026-10-05T12:00:00Z";
    write_config(dir, "morning.toml", &prom.url(), "morning", "");
    common::run_ok(dir, &["--config", "morning.toml", "collect", "--from", FROM, "--to", noon]);
    let copy = |to: &str| {
        let out = Command::new("cp").args(["-a", "morning", to]).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        write_config(dir, &format!("{to}.toml"), &prom.url(), to, "")
    };
    let reports = |cfg: &Path| -> Vec<std::process::Output> {
        ["chargeback", "queue", "quota"]
            .iter()
            .map(|kind| {
                common::bin()
                    .current_dir(dir)
                    .args(["--config", cfg.to_str().unwrap(), "report", kind, "--from", FROM, "--to", TO, "--format", "csv"])
                    .output()
                    .unwrap()
            })
            .collect()
    };
    // The afternoon collected without a kill: what every repaired lake must report.
    let whole = copy("whole");
    common::run_ok(dir, &["--config", whole.to_str().unwrap(), "collect", "--from", noon, "--to", TO]);
    let want: Vec<Vec<u8>> = reports(&whole)
        .into_iter()
        .map(|o| {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            o.stdout
        })
        .collect();

    let mut kills = 0;
    for k in 1.. {
        let cfg = copy(&format!("kill{k}"));
        let out = common::bin()
            .current_dir(dir)
            .env(gpuledger::failpoint::VAR, format!("publish:{k}"))
            .args(["--config", cfg.to_str().unwrap(), "collect", "--from", noon, "--to", TO])
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "killed after publish {k}: {}", String::from_utf8_lossy(&out.stderr));
        kills += 1;
        for (kind, o) in ["chargeback", "queue", "quota"].iter().zip(reports(&cfg)) {
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "killed after publish {k}: report {kind} must refuse the half-published day: {err}");
            assert!(
                err.contains("the lake is not as it was published") && err.contains("a collect began writing the day and stopped"),
                "{kind} after publish {k}: {err}"
            );
            assert!(err.contains(&"gpuledger collect --from 2026-10-0".to_string()), "{kind}: names the repair: {err}");
        }
        // The next collect of the window repairs it.
        common::run_ok(dir, &["--config", cfg.to_str().unwrap(), "collect", "--from", noon, "--to", TO]);
        for (i, o) in reports(&cfg).into_iter().enumerate() {
            assert!(o.status.success(), "repaired after publish {k}: {}", String::from_utf8_lossy(&o.stderr));
            assert!(o.stdout == want[i], "repaired after publish {k}: report {i} differs from the run never killed");
        }
        std::fs::remove_dir_all(dir.join(format!("kill{k}"))).unwrap();
    }
    // One kill per file of the afternoon's day and of the earlier days whose pods it rewrote.
    eprintln!("{kills} kills, each named and repaired");
    assert!(kills >= 9, "a kill after each of the day's nine tables at least: {kills}");

    // A full disk: the day's first file cannot be written. The collect fails (1) naming the
    // cause, and the lake is as it was, rollups included: the reports read it as before. Where
    // the disk fills at a later file of the day, the day is named as unfinished until the next
    // collect, which repairs it.
    let full = copy("full");
    let collect_full = |n: u32| {
        common::bin()
            .current_dir(dir)
            .env(gpuledger::failpoint::VAR, format!("write-enospc:{n}"))
            .args(["--config", full.to_str().unwrap(), "collect", "--from", noon, "--to", TO])
            .output()
            .unwrap()
    };
    common::run_ok(dir, &["--config", full.to_str().unwrap(), "collect", "--from", noon, "--to", TO]);
    let before = lake_tree(&dir.join("full"));
    let out = collect_full(1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("No space left on device") && err.contains("gpu_samples"), "{err}");
    assert!(lake_tree(&dir.join("full")) == before, "a collect that could not write its first file changed the lake (its rollups?)");
    for (i, o) in reports(&full).into_iter().enumerate() {
        assert!(o.status.success() && o.stdout == want[i], "after a full disk, report {i}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let out = collect_full(3);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    for o in reports(&full) {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.code() == Some(1) && err.contains("a collect began writing the day and stopped"), "{err}");
    }
    common::run_ok(dir, &["--config", full.to_str().unwrap(), "collect", "--from", noon, "--to", TO]);
    assert!(lake_tree(&dir.join("full")) == before, "repaired after a full disk");
}
