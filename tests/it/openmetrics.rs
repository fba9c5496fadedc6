//! The simulator's OpenMetrics history: real DCGM / kube-state-metrics names and labels,
//! loadable by `promtool tsdb create-blocks-from openmetrics`, and consistent with the lake.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

fn promtool() -> Option<&'static str> {
    let ok = Command::new("promtool").arg("--version").output().is_ok_and(|o| o.status.success());
    if ok {
        return Some("promtool");
    }
    assert!(std::env::var_os("GPULEDGER_REQUIRE_PROMTOOL").is_none(), "promtool is required here (GPULEDGER_REQUIRE_PROMTOOL is set)");
    eprintln!("SKIPPED the promtool part: promtool not installed (apt-get install prometheus)");
    None
}

#[test]
fn openmetrics_history_is_well_formed_and_loads_into_a_tsdb() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::run_ok(
        dir.path(),
        &["simulate", "--out", "sim", "--gpus", "24", "--days", "1", "--step", "60", "--seed", "3", "--start", "2026-10-05", "--openmetrics", "history.om"],
    );
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let text = std::fs::read_to_string(dir.path().join("history.om")).unwrap();
    assert!(text.ends_with("# EOF\n"));

    // Families are contiguous, each declared once; each series' samples are in time order.
    let mut families: Vec<String> = Vec::new();
    let mut last_ts: BTreeMap<String, f64> = BTreeMap::new();
    let mut samples = 0u64;
    let mut labels_seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split_whitespace().next().unwrap().to_string();
            assert!(!families.contains(&name), "{name} declared twice");
            families.push(name);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        samples += 1;
        let (series, rest) = line.rsplit_once('}').unwrap();
        let name = series.split('{').next().unwrap();
        assert_eq!(Some(name), families.last().map(String::as_str), "sample outside its family: {line}");
        let ts: f64 = rest.split_whitespace().nth(1).unwrap().parse().unwrap();
        if let Some(prev) = last_ts.insert(series.to_string(), ts) {
            assert!(ts > prev, "series not in time order: {line}");
        }
        let set = labels_seen.entry(name.to_string()).or_default();
        for kv in series.split('{').nth(1).unwrap().split("\",") {
            set.insert(kv.split('=').next().unwrap().to_string());
        }
    }
    for f in [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
        "kube_pod_info",
        "kube_pod_created",
        "kube_pod_status_scheduled_time",
        "kube_pod_start_time",
        "kube_pod_completion_time",
        "kube_pod_status_phase",
        "kube_pod_container_resource_requests",
        "kube_pod_status_reason",
        "kube_pod_container_status_last_terminated_reason",
        "kube_pod_labels",
        "kube_resourcequota",
        "kube_node_status_capacity",
    ] {
        assert!(families.iter().any(|x| x == f), "family {f} missing");
    }
    let util = &labels_seen["DCGM_FI_DEV_GPU_UTIL"];
    for l in ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "namespace", "pod", "container"] {
        assert!(util.contains(l), "DCGM label {l} missing: {util:?}");
    }
    let mig = &labels_seen["DCGM_FI_PROF_GR_ENGINE_ACTIVE"];
    assert!(mig.contains("GPU_I_PROFILE") && mig.contains("GPU_I_ID"));
    assert!(text.contains("e+09 "), "kube-state-metrics times in Go %g form");
    let n: u64 = log.split("wrote ").filter_map(|s| s.strip_suffix_n()).next().expect("simulate logs the samples it wrote");
    assert_eq!(n, samples, "samples logged vs in the file");

    let Some(promtool) = promtool() else { return };
    let tsdb = dir.path().join("tsdb");
    let out = Command::new(promtool)
        // Blocks of a day, as a live Prometheus compacts them: a third of the default's time.
        .args(["tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h"])
        .arg(dir.path().join("history.om"))
        .arg(&tsdb)
        .output()
        .unwrap();
    assert!(out.status.success(), "promtool refused the history: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    std::fs::create_dir_all(tsdb.join("wal")).unwrap(); // `tsdb dump` opens the WAL even when it is empty
    let dump = Command::new(promtool).args(["tsdb", "dump"]).arg(&tsdb).output().unwrap();
    assert!(dump.status.success(), "{}", String::from_utf8_lossy(&dump.stderr));
    let dumped = String::from_utf8_lossy(&dump.stdout).lines().filter(|l| !l.trim().is_empty()).count() as u64;
    assert_eq!(dumped, samples, "every sample landed in the TSDB");
}

trait StripN {
    fn strip_suffix_n(&self) -> Option<u64>;
}

impl StripN for str {
    /// "123 OpenMetrics samples ..." -> 123
    fn strip_suffix_n(&self) -> Option<u64> {
        let mut parts = self.split_whitespace();
        let n = parts.next()?.parse().ok()?;
        (parts.next()? == "OpenMetrics").then_some(n)
    }
}
