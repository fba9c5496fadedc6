//! The same reports on Apache DataFusion Ballista: every report kind and an ad hoc query, run on
//! the local engine and on Ballista's cluster started inside the process
//! (`--engine ballista://standalone`: its scheduler and executor, planning and shuffles as on
//! a real cluster), give identical bytes; the tables gpuledger builds in memory travel to the
//! executors as Parquet in the lake's `_scratch/`, which is gone when the command ends.

use crate::common;

const FROM: &str = "2026-10-01T00:00:00Z";
const TO: &str = "2026-10-03T12:00:00Z";

#[test]
fn reports_on_ballista_equal_the_local_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "sim", "--gpus", "16", "--days", "3", "--seed", "4", "--start", "2026-10-01", "--time-sliced", "2"]);
    // A stalled query fails within a minute with the engine's own message, never holds CI up.
    std::fs::write(dir.join("engine.toml"), "[engine]\nquery_timeout_secs = 60\n").unwrap();
    let run = |engine: &str, args: &[&str]| {
        let mut all = vec!["--config", "engine.toml", "--lake", "sim/lake", "--engine", engine];
        all.extend_from_slice(args);
        common::run_ok(dir, &all).stdout
    };
    for kind in common::report_kinds_compared() {
        let kind = kind.as_str();
        let args = ["report", kind, "--from", FROM, "--to", TO, "--format", "json"];
        let (local, ballista) = (run("local", &args), run("ballista://standalone", &args));
        assert!(local.len() > 100, "{kind}: a real report ({} bytes)", local.len());
        assert!(local == ballista, "{kind} differs on Ballista:\n{}\nvs local\n{}", String::from_utf8_lossy(&ballista), String::from_utf8_lossy(&local));
    }
    let sql = "SELECT CAST(namespace AS VARCHAR) AS ns, count(*) AS n, sum(energy_j) AS e FROM gpu_samples GROUP BY 1 ORDER BY 1";
    let q = ["query", sql, "--format", "csv"];
    let (local, ballista) = (run("local", &q), run("ballista://standalone", &q));
    assert!(local == ballista && String::from_utf8_lossy(&local).lines().count() > 3, "{}", String::from_utf8_lossy(&ballista));
    assert!(!dir.join("sim/lake/_scratch").exists() || std::fs::read_dir(dir.join("sim/lake/_scratch")).unwrap().next().is_none(), "scratch tables removed");
}

/// The stall of Ballista's adaptive planner (a stage re-planned between the launch of its first
/// and second task; the scheduler then rejects the second task's status, "task metrics array
/// size .. does not equal with the stage metrics array size ..", and waits for it forever) hit
/// about 1 in 40 of these chargebacks. With the static planner every run finishes, equal to the
/// local engine, and its log shows that the adaptive planner never ran and the scheduler never
/// rejected a task's status (which each run checks: five runs are as good as twenty for that;
/// the 20-in-a-row loop of the fix is in the closing note of issue 24).
#[test]
fn the_in_process_cluster_finishes_every_chargeback() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "sim", "--gpus", "16", "--days", "3", "--seed", "4", "--start", "2026-10-01", "--time-sliced", "2"]);
    std::fs::write(dir.join("engine.toml"), "[engine]\nquery_timeout_secs = 60\n").unwrap();
    let args = |engine: &'static str| {
        ["--config", "engine.toml", "--lake", "sim/lake", "--engine", engine, "report", "chargeback-models", "--from", FROM, "--to", TO, "--format", "json"]
    };
    let local = common::run_ok(dir, &args("local")).stdout;
    for run in 1..=5 {
        let out = common::bin().current_dir(dir).env("RUST_LOG", "info").args(args("ballista://standalone")).output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "run {run}: {}", log.lines().rev().take(30).collect::<Vec<_>>().join("\n"));
        assert!(log.contains("Received task"), "run {run}: Ballista's own log is in ours (RUST_LOG)");
        assert!(
            !log.contains("Failed to update") && !log.contains("AdaptiveDatafusionExec"),
            "run {run}: the adaptive planner ran, or a task status was rejected"
        );
        assert!(out.stdout == local, "run {run} differs from the local engine");
    }
}

#[test]
fn an_unreachable_scheduler_fails_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "sim", "--gpus", "8", "--days", "1", "--seed", "4", "--start", "2026-10-01"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let engine = format!("ballista://127.0.0.1:{port}");
    let err = common::run_fail(dir, &["--lake", "sim/lake", "--engine", &engine, "report", "chargeback", "--from", FROM, "--to", "2026-10-02"]);
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
}

#[test]
fn scratch_tables_of_a_killed_session_are_removed_by_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "sim", "--gpus", "8", "--days", "1", "--seed", "4", "--start", "2026-10-01"]);
    // What a killed session leaves: `<pid>-<created ms>-<n>/<table>-<k>/part-0.parquet`. One made
    // 25 hours ago (stale), one a minute ago (a session that may still be running elsewhere).
    let now = chrono::Utc::now().timestamp_millis();
    let stale = dir.join(format!("sim/lake/_scratch/4242-{}-0", now - 25 * 3_600_000));
    let live = dir.join(format!("sim/lake/_scratch/4243-{}-0", now - 60_000));
    for d in [&stale, &live] {
        std::fs::create_dir_all(d.join("gpu_prices-0")).unwrap();
        std::fs::write(d.join("gpu_prices-0/part-0.parquet"), b"PAR1").unwrap();
    }
    let out = common::bin()
        .current_dir(dir)
        .args(["--lake", "sim/lake", "--engine", "ballista://standalone", "report", "inventory", "--from", FROM, "--to", "2026-10-02"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!stale.exists(), "the stale scratch folder is removed");
    assert!(live.join("gpu_prices-0/part-0.parquet").exists(), "a recent one is left alone");
    assert!(String::from_utf8_lossy(&out.stderr).contains("left by an engine session that was killed"), "and the removal is logged");
    let left: Vec<_> = std::fs::read_dir(dir.join("sim/lake/_scratch")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![live.file_name().unwrap().to_owned()], "this session's own folder is gone too");
}
