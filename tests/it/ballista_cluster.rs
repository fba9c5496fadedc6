//! The reports on a real Ballista cluster on loopback: the stock `ballista-scheduler` and two
//! `ballista-executor` processes (the Ballista 55 crates' own binaries, built from this lockfile:
//! see `.ci/run`), reached over gRPC and Arrow Flight as `--engine ballista://127.0.0.1:PORT`.
//! Every report kind and an ad hoc query give the local engine's bytes, on a lake on disk (the
//! executors read the same absolute paths) and on a lake in an S3 bucket (the moto server; the
//! scheduler and executors get the bucket from their environment, as in a deployment).
//!
//! Where the binaries are absent (they are another build) the test says SKIPPED with the build
//! command, unless `GPULEDGER_REQUIRE_BALLISTA_CLUSTER` is set (CI).

use crate::common;

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const FROM: &str = "2026-10-01T00:00:00Z";
const TO: &str = "2026-10-03T12:00:00Z";
/// Task slots per executor: 16 in all is what the chargeback's plan needs (see src/distributed.rs).
const VCORES: &str = "16";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The stock binaries beside the gpuledger binary under test (`target/release/`), or None.
fn stock_binaries() -> Option<(PathBuf, PathBuf)> {
    let dir = Path::new(env!("CARGO_BIN_EXE_gpuledger")).parent().unwrap().to_path_buf();
    let (scheduler, executor) = (dir.join("ballista-scheduler"), dir.join("ballista-executor"));
    if scheduler.is_file() && executor.is_file() {
        return Some((scheduler, executor));
    }
    let build = "cargo build --release --locked --features gpuledger/ballista -p gpuledger -p ballista-scheduler -p ballista-executor --bin ballista-scheduler --bin ballista-executor";
    assert!(
        std::env::var_os("GPULEDGER_REQUIRE_BALLISTA_CLUSTER").is_none(),
        "{} or {} is missing and GPULEDGER_REQUIRE_BALLISTA_CLUSTER is set; build them with: {build}",
        scheduler.display(),
        executor.display()
    );
    eprintln!("SKIPPED: no stock Ballista binaries in {} (build them with: {build}; .ci/run does)", dir.display());
    None
}

/// A scheduler and its executors on loopback; killed on drop.
struct Cluster {
    children: Vec<Child>,
    port: u16,
    logs: Vec<PathBuf>,
    work_dirs: Vec<PathBuf>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Cluster {
    /// Starts a scheduler and `executors` executors on free loopback ports. A port found free
    /// can be taken by another process before ours binds it: a start that fails so is tried
    /// again on new ports (three times in all).
    fn start(dir: &Path, env: &[(&str, String)], executors: usize) -> Option<Cluster> {
        for attempt in 1..=3 {
            let dir = dir.join(format!("start-{attempt}"));
            std::fs::create_dir_all(&dir).unwrap();
            match Cluster::start_once(&dir, env, executors, attempt < 3)? {
                Ok(cluster) => return Some(cluster),
                Err(tails) => eprintln!("a Ballista port was taken while starting; again on new ports:\n{tails}"),
            }
        }
        unreachable!("the last attempt panics instead of asking for another")
    }

    fn start_once(dir: &Path, env: &[(&str, String)], executors: usize, may_retry: bool) -> Option<Result<Cluster, String>> {
        let (scheduler, executor) = stock_binaries()?;
        let mut cluster = Cluster { children: Vec::new(), port: free_port(), logs: Vec::new(), work_dirs: Vec::new() };
        let spawn = |cluster: &mut Cluster, program: &Path, name: &str, args: Vec<String>| {
            let log = dir.join(format!("{name}.log"));
            let mut cmd = Command::new(program);
            cmd.args(&args).stdin(Stdio::null()).stdout(File::create(&log).unwrap()).stderr(File::create(dir.join(format!("{name}.err"))).unwrap());
            cmd.env_remove("RUST_LOG");
            for (k, v) in env {
                cmd.env(k, v);
            }
            cluster.children.push(cmd.spawn().unwrap_or_else(|e| panic!("starting {}: {e}", program.display())));
            cluster.logs.push(log);
        };
        let port = cluster.port.to_string();
        spawn(
            &mut cluster,
            &scheduler,
            "scheduler",
            ["--bind-host", "127.0.0.1", "--external-host", "127.0.0.1", "--bind-port", &port].map(String::from).to_vec(),
        );
        let mut health = Vec::new();
        for i in 0..executors {
            let work = dir.join(format!("executor-{i}"));
            std::fs::create_dir_all(&work).unwrap();
            let (flight, grpc, probe) = (free_port(), free_port(), free_port());
            let args = vec![
                "--scheduler-host".into(),
                "127.0.0.1".into(),
                "--scheduler-port".into(),
                port.clone(),
                "--bind-host".into(),
                "127.0.0.1".into(),
                "--external-host".into(),
                "127.0.0.1".into(),
                "--bind-port".into(),
                flight.to_string(),
                "--bind-grpc-port".into(),
                grpc.to_string(),
                "--bind-health-port".into(),
                probe.to_string(),
                "--vcores".into(),
                VCORES.into(),
                "--scheduler-connect-timeout-seconds".into(),
                "60".into(),
                "--work-dir".into(),
                work.display().to_string(),
            ];
            spawn(&mut cluster, &executor, &format!("executor-{i}"), args);
            cluster.work_dirs.push(work);
            health.push(probe);
        }
        // Ready when the scheduler listens and every executor has registered with it (/readyz).
        let deadline = Instant::now() + Duration::from_secs(90);
        while std::net::TcpStream::connect(("127.0.0.1", cluster.port)).is_err() {
            assert!(Instant::now() < deadline, "the Ballista scheduler did not listen in 90 s:\n{}", cluster.log_tails());
            std::thread::sleep(Duration::from_millis(100));
        }
        for probe in health {
            while !http_ok(probe, "/readyz") {
                for c in &mut cluster.children {
                    if let Ok(Some(status)) = c.try_wait() {
                        let tails = cluster.log_tails();
                        if may_retry && tails.contains("Address already in use") {
                            return Some(Err(tails));
                        }
                        panic!("a Ballista process exited ({status}) while starting:\n{tails}");
                    }
                }
                assert!(Instant::now() < deadline, "the Ballista executors did not become ready in 90 s:\n{}", cluster.log_tails());
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        Some(Ok(cluster))
    }

    fn engine(&self) -> String {
        format!("ballista://127.0.0.1:{}", self.port)
    }

    fn log_tails(&self) -> String {
        let mut out = String::new();
        for log in &self.logs {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let err = std::fs::read_to_string(log.with_extension("err")).unwrap_or_default();
            let tail: Vec<&str> = text.lines().chain(err.lines()).rev().take(15).collect();
            out.push_str(&format!("--- {}\n{}\n", log.display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
        }
        out
    }

    /// The jobs the executors ran (each keeps a folder per job under its work dir).
    fn jobs_run(&self) -> usize {
        self.work_dirs.iter().map(|d| std::fs::read_dir(d).map(|e| e.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()).count()).unwrap_or(0)).sum()
    }
}

fn http_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.0 200")
}

/// Every report kind (JSON) and an ad hoc query (CSV) with `lake` args, on `engine`.
fn outputs(dir: &Path, lake: &[&str], engine: &str) -> Vec<(String, Vec<u8>)> {
    let run = |args: &[&str]| {
        let mut all = lake.to_vec();
        all.extend(["--engine", engine]);
        if !lake.contains(&"--config") {
            // A stuck job fails the test within minutes instead of holding CI for the default hour.
            all.extend(["--config", "engine.toml"]);
        }
        all.extend_from_slice(args);
        common::run_ok(dir, &all).stdout
    };
    let mut out: Vec<(String, Vec<u8>)> = common::report_kinds_compared()
        .into_iter()
        .map(|k| {
            let bytes = run(&["report", &k, "--from", FROM, "--to", TO, "--format", "json"]);
            (k, bytes)
        })
        .collect();
    let sql = "SELECT date, CAST(namespace AS VARCHAR) AS ns, count(*) AS n, sum(energy_j) AS e FROM gpu_samples GROUP BY 1, 2 ORDER BY 1, 2";
    out.push(("query".into(), run(&["query", sql, "--format", "csv"])));
    out
}

fn assert_same(what: &str, local: &[(String, Vec<u8>)], cluster: &[(String, Vec<u8>)], logs: impl Fn() -> String) {
    for ((kind, a), (_, b)) in local.iter().zip(cluster) {
        assert!(a.len() > 100, "{kind}: a real report ({} bytes)", a.len());
        assert!(
            a == b,
            "{what}: {kind} differs on the Ballista cluster:\n{}\nvs local\n{}\n{}",
            String::from_utf8_lossy(b),
            String::from_utf8_lossy(a),
            logs()
        );
    }
}

#[test]
fn reports_on_the_stock_ballista_binaries_equal_the_local_engine() {
    if stock_binaries().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "sim", "--gpus", "16", "--days", "3", "--seed", "4", "--start", "2026-10-01", "--time-sliced", "2"]);
    std::fs::write(dir.join("engine.toml"), "[engine]\nquery_timeout_secs = 60\n").unwrap();
    let local_lake = ["--lake", "sim/lake"];
    let local = outputs(dir, &local_lake, "local");

    // The same lake in a bucket, when an S3 server is at hand; the cluster reads it with the
    // credentials and endpoint of its own environment (AWS_*), as a Kubernetes Deployment would.
    #[cfg(feature = "s3")]
    let moto = common::moto::start();
    #[cfg(feature = "s3")]
    let mut env: Vec<(&str, String)> = Vec::new();
    #[cfg(not(feature = "s3"))]
    let env: Vec<(&str, String)> = Vec::new();
    #[cfg(feature = "s3")]
    if let Some(moto) = &moto {
        moto.create_bucket("fleet");
        moto.upload("fleet", "prod/lake", &dir.join("sim/lake"));
        let toml = moto.lake_toml("fleet", "prod/lake", &common::moto::Moto::credentials_file(dir));
        std::fs::write(dir.join("s3.toml"), format!("{toml}\n[engine]\nquery_timeout_secs = 60\n")).unwrap();
        env.extend([
            ("AWS_ACCESS_KEY_ID", common::moto::KEY_ID.to_string()),
            ("AWS_SECRET_ACCESS_KEY", common::moto::SECRET.to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT", moto.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]);
    }

    let work = dir.join("cluster");
    std::fs::create_dir_all(&work).unwrap();
    let Some(cluster) = Cluster::start(&work, &env, 2) else { return };
    let on_cluster = outputs(dir, &local_lake, &cluster.engine());
    assert_same("lake on disk", &local, &on_cluster, || cluster.log_tails());
    // The queries ran on the executors, not in this process: they keep a folder per job.
    let jobs = cluster.jobs_run();
    assert!(jobs >= common::report_kinds_compared().len(), "only {jobs} jobs in the executors' work dirs\n{}", cluster.log_tails());
    let scratch = dir.join("sim/lake/_scratch");
    assert!(!scratch.exists() || std::fs::read_dir(&scratch).unwrap().next().is_none(), "scratch tables removed");

    #[cfg(feature = "s3")]
    if let Some(moto) = &moto {
        let s3 = ["--config", "s3.toml"];
        let on_bucket = outputs(dir, &s3, &cluster.engine());
        assert_same("lake in a bucket", &local, &on_bucket, || cluster.log_tails());
        assert!(cluster.jobs_run() >= jobs + common::report_kinds_compared().len(), "the bucket's reports ran on the executors");
        assert!(moto.tree("fleet", "prod/lake/_scratch").is_empty(), "scratch tables removed from the bucket");
    }
}

#[test]
fn a_job_no_executor_runs_fails_after_the_query_timeout() {
    // A scheduler without executors accepts the job and waits for one forever; gpuledger, run
    // from cron, gives up after engine.query_timeout_secs with a message saying where and why.
    if stock_binaries().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "sim", "--gpus", "8", "--days", "1", "--seed", "4", "--start", "2026-10-01"]);
    std::fs::write(dir.join("engine.toml"), "[engine]\nquery_timeout_secs = 3\n").unwrap();
    let work = dir.join("cluster");
    std::fs::create_dir_all(&work).unwrap();
    let Some(cluster) = Cluster::start(&work, &[], 0) else { return };
    let t0 = Instant::now();
    let out = common::bin()
        .current_dir(dir)
        .args(["--config", "engine.toml", "--lake", "sim/lake", "--engine", &cluster.engine(), "report", "inventory", "--from", FROM, "--to", "2026-10-02"])
        .output()
        .unwrap();
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "no executor, no report: {err}");
    assert!(took < Duration::from_secs(30), "gave up after {took:?}");
    assert!(err.contains(&format!("no result after 3 s on the Ballista scheduler at 127.0.0.1:{}", cluster.port)) && err.contains("executor"), "{err}");
    assert!(
        !dir.join("sim/lake/_scratch").exists() || std::fs::read_dir(dir.join("sim/lake/_scratch")).unwrap().next().is_none(),
        "scratch removed on the way out"
    );
}
