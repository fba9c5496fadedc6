//! The command line as users meet it: read-only SQL, `tables`, config errors that name the
//! key, bad windows, and every shipped config file parsing.

use crate::common;

use std::process::Stdio;

use gpuledger::config::Config;

#[test]
fn every_shipped_config_parses() {
    let dir = common::repo_root().join("config");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            Config::load(&path, true).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            n += 1;
        }
    }
    assert!(n >= 2, "config/ ships example configs");
    Config::load(&common::repo_root().join("fixtures/golden/gpuledger.toml"), true).unwrap();
}

#[test]
fn config_errors_name_the_key() {
    let e = Config::parse("[pricing.power]\npue = 0.5\n", "t.toml").unwrap_err().to_string();
    assert!(e.contains("pricing.power.pue") && e.contains("t.toml"), "{e}");
    let e = Config::parse("[prometheus]\nstep_sec = 30\n", "t.toml").unwrap_err().to_string();
    assert!(e.contains("step_sec"), "unknown keys are refused by name: {e}");
    let e = Config::parse("[[pricing.gpu]]\nmodel = \"X\"\nprice_per_hour = -1\n", "t.toml").unwrap_err().to_string();
    assert!(e.contains("pricing.gpu[0].price_per_hour"), "{e}");
    let e = Config::parse("[pricing]\nbasis = \"magic\"\n", "t.toml").unwrap_err().to_string();
    assert!(e.contains("basis") || e.contains("magic"), "{e}");
    // The costing keys.
    for (toml, key) in [
        ("[pricing.power]\ntimezone = \"Mars/Olympus\"\n", "pricing.power.timezone"),
        ("[[pricing.power.tariff]]\nname = \"n\"\nprice_per_kwh = 0.1\nhours = \"22:10-06:00\"\n", "pricing.power.tariff[0].hours"),
        ("[[pricing.power.tariff]]\nname = \"n\"\nprice_per_kwh = 0.1\ndays = [\"someday\"]\n", "pricing.power.tariff[0].days"),
        ("[[pricing.power.tariff]]\nname = \"n\"\nprice_per_kwh = -2\n", "pricing.power.tariff[0].price_per_kwh"),
        ("[pricing.power]\ncarbon_g_per_kwh = -1\n", "pricing.power.carbon_g_per_kwh"),
        ("[pricing]\nidle_policy = \"spread\"\n", "pricing.idle_policy"),
        ("[pricing]\nshared_policy = \"owner:\"\n", "pricing.shared_policy"),
        ("[pricing]\nidle_policy = \"owner:kube-system\"\nshared_namespaces = [\"kube-system\"]\n", "pricing.idle_policy"),
        ("[[pricing.gpu]]\nmodel = \"X\"\nmig_profile = \"big\"\nprice_per_hour = 1\n", "pricing.gpu[0].mig_profile"),
        ("[[pricing.cpu]]\nprice_per_hour = -0.1\n", "pricing.cpu[0].price_per_hour"),
        ("[[pricing.memory]]\nprice_per_hour = 1\n[[pricing.memory]]\nprice_per_hour = 2\n", "pricing.memory[1]"),
        ("[teams]\nns = { team = \"\" }\n", "teams.ns"),
        ("[pricing]\ncurrency = \"XYZ\"\n", "pricing.currency"),
        (
            "[[pricing.power.tariff]]\nname = \"night\"\nprice_per_kwh = 0.1\nhours = \"22:00-06:00\"\n[[pricing.power.tariff]]\nname = \"early\"\nprice_per_kwh = 0.2\nhours = \"05:00-09:00\"\ndays = [\"sat\"]\n",
            "pricing.power.tariff[1]",
        ),
    ] {
        let e = Config::parse(toml, "t.toml").unwrap_err().to_string();
        assert!(e.contains(key), "{toml:?} names {key}: {e}");
    }
    let e = Config::parse("[[pricing.power.tariff]]\nname = \"night\"\nprice_per_kwh = 0.1\nhours = \"22:00-06:00\"\n[[pricing.power.tariff]]\nname = \"early\"\nprice_per_kwh = 0.2\nhours = \"05:00-09:00\"\ndays = [\"sat\"]\n", "t.toml").unwrap_err().to_string();
    assert!(e.contains("overlaps tariff[0] \"night\" (0.1/kWh) at sat 05:00"), "{e}");
    // Bands that meet but do not overlap, and the same hours on other days, are fine.
    Config::parse("[[pricing.power.tariff]]\nname = \"night\"\nprice_per_kwh = 0.1\nhours = \"22:00-06:00\"\ndays = [\"mon\"]\n[[pricing.power.tariff]]\nname = \"day\"\nprice_per_kwh = 0.2\nhours = \"06:00-22:00\"\ndays = [\"mon\"]\n[[pricing.power.tariff]]\nname = \"weekend\"\nprice_per_kwh = 0.05\nhours = \"00:00-24:00\"\ndays = [\"sat\", \"sun\"]\n[pricing]\ncurrency = \"EUR\"\n", "t.toml").unwrap();
    let ok = Config::parse("[teams]\na = \"x\"\nb = { team = \"y\", cost_centre = \"cc\" }\n[pricing]\nidle_policy = \"owner:platform\"\n", "t.toml").unwrap();
    assert_eq!((ok.team_of("a"), ok.team_of("b"), ok.teams["b"].cost_centre()), (Some("x"), Some("y"), Some("cc")));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), "[engine]\nmemory_limit = \"lots\"\n").unwrap();
    let err = common::run_fail(dir.path(), &["--config", "bad.toml", "tables"]);
    assert!(err.contains("engine.memory_limit") && err.lines().count() == 1, "one-line cause: {err}");
    let err = common::run_fail(dir.path(), &["--config", "missing.toml", "tables"]);
    assert!(err.contains("missing.toml"), "{err}");
}

#[test]
fn query_is_read_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("lake")).unwrap();
    for sql in [
        "CREATE TABLE x AS SELECT 1",
        "INSERT INTO gpu_samples SELECT * FROM gpu_samples",
        "DROP TABLE gpu_samples",
        "COPY (SELECT 1) TO 'out.csv'",
        "SET datafusion.execution.batch_size = 1",
    ] {
        let err = common::run_fail(dir.path(), &["query", sql]);
        assert!(err.starts_with("error:"), "{sql}: {err}");
    }
    assert!(!dir.path().join("out.csv").exists(), "COPY wrote nothing");
    let out = common::run_ok(dir.path(), &["query", "SELECT 6 * 7 AS answer", "--format", "csv"]);
    assert_eq!(common::stdout(&out), "answer\n42\n");
    std::fs::write(dir.path().join("q.sql"), "SELECT count(*) AS n FROM pods").unwrap();
    let out = common::run_ok(dir.path(), &["query", "-f", "q.sql", "--format", "json"]);
    assert_eq!(common::stdout(&out).trim(), "[{\"n\":0}]");
}

#[test]
fn tables_lists_contract_columns() {
    let dir = tempfile::tempdir().unwrap();
    let text = common::stdout(&common::run_ok(dir.path(), &["tables"]));
    for (table, cols) in [
        (
            "gpu_samples",
            &["ts", "node", "gpu_uuid", "gpu_model", "mig_profile", "namespace", "pod", "share", "util_pct", "mem_used_mib", "power_w", "energy_j", "temp_c"][..],
        ),
        (
            "pods",
            &[
                "namespace",
                "pod",
                "uid",
                "node",
                "priority_class",
                "created",
                "scheduled",
                "started",
                "finished",
                "gpu_request",
                "cpu_request",
                "mem_request_bytes",
                "termination_reason",
            ][..],
        ),
        ("pending_samples", &["ts", "namespace", "pod", "priority_class", "gpu_request"][..]),
        ("quotas", &["ts", "namespace", "resource", "hard", "used"][..]),
    ] {
        let section = text.split("\n\n").find(|s| s.starts_with(table)).unwrap_or_else(|| panic!("no {table} in {text}"));
        for c in cols {
            assert!(section.lines().any(|l| l.split_whitespace().next() == Some(c)), "{table}.{c} missing");
        }
    }
}

#[test]
fn bad_windows_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let err = common::run_fail(dir.path(), &["report", "chargeback", "--month", "2026-13"]);
    assert!(err.contains("2026-13"), "{err}");
    let err = common::run_fail(dir.path(), &["report", "chargeback", "--from", "2026-10-02", "--to", "2026-10-01"]);
    assert!(err.contains("empty window"), "{err}");
    let err = common::run_fail(dir.path(), &["report", "chargeback", "--from", "yesterday", "--to", "2026-10-01"]);
    assert!(err.contains("--from"), "{err}");
    let err = common::run_fail(dir.path(), &["simulate", "--out", "x", "--step", "7"]);
    assert!(err.contains("--step"), "{err}");
    // Input that can never work is a usage error (2) naming the flag, before anything runs.
    let code = |args: &[&str]| common::bin().current_dir(dir.path()).args(args).output().unwrap();
    for (args, names) in [
        (&["report", "chargeback", "--month", "2026-1"][..], "2026-1"),
        (&["collect", "--from", "2026-10-06", "--to", "2026-10-05"][..], "--from"),
        (&["collect", "--from", "2026-10-05", "--to", "2026-10-06", "--url", "http://exa mple:9090"][..], "--url"),
        (&["collect", "--from", "2026-10-05", "--to", "2026-10-06", "--url", "ftp://x"][..], "--url"),
        (&["run", "--month", "2026-10", "--url", "http://user:hunter2@:9090"][..], "--url"),
    ] {
        let out = code(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(names) && !err.contains("hunter2"), "{args:?} names {names}, no secret: {err}");
    }
    let e = Config::parse("[prometheus]\nurl = \"http://exa mple:9090\"\n", "t.toml").unwrap_err().to_string();
    assert!(e.contains("prometheus.url"), "{e}");
    // Credentials in the URL beside a token or a basic-auth user: one would be dropped silently.
    for other in ["bearer_token_env = \"TOKEN\"", "bearer_token_file = \"token\"", "basic_auth_user = \"bob\""] {
        std::fs::write(dir.path().join("creds.toml"), format!("[prometheus]\nurl = \"http://alice:hunter2@prom:9090\"\n{other}\n")).unwrap();
        let out = code(&["--config", "creds.toml", "collect", "--from", "2026-10-05", "--to", "2026-10-06"]);
        let err = String::from_utf8_lossy(&out.stderr);
        let key = other.split(' ').next().unwrap();
        assert_eq!(out.status.code(), Some(2), "{other}: {err}");
        assert!(err.contains("prometheus.url") && err.contains(key) && !err.contains("hunter2"), "{other}: {err}");
    }
}

#[test]
fn queries_folder_overrides_builtin_sql() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("lake")).unwrap();
    std::fs::create_dir(dir.path().join("q")).unwrap();
    std::fs::write(dir.path().join("q/chargeback.sql"), "SELECT nonsense_column FROM gpu_samples").unwrap();
    let err = common::run_fail(dir.path(), &["--queries", "q", "report", "chargeback", "--month", "2026-10"]);
    assert!(err.contains("query chargeback") && err.contains("nonsense_column"), "the override ran: {err}");
}

/// Runs the binary in `dir` and follows its peak resident memory (VmHWM) until it exits.
fn peak_kib(dir: &std::path::Path, args: &[&str]) -> (std::process::Output, u64) {
    let child = common::bin().current_dir(dir).args(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (p, done) = (std::sync::Arc::clone(&peak), std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let d = std::sync::Arc::clone(&done);
    let watcher = std::thread::spawn(move || {
        while !d.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(kib) = std::fs::read_to_string(&status)
                .ok()
                .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
            {
                p.fetch_max(kib, std::sync::atomic::Ordering::Relaxed);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.join().unwrap();
    (out, peak.load(std::sync::atomic::Ordering::Relaxed))
}

/// One finance query cannot take the pod down or fill its disk: a result too long or too large
/// for the caps, a value `repeat` would make of a gigabyte, a sort spilling past
/// engine.spill_limit: each ends in a clear error naming the key, under twice the memory
/// limit, and `-o` leaves no half-written file.
#[test]
fn queries_are_bounded_in_rows_bytes_memory_and_spill() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("lake")).unwrap();
    std::fs::write(dir.path().join("small.toml"), "[lake]\npath = \"lake\"\n[engine]\nmemory_limit = \"64M\"\nspill_limit = \"32M\"\n").unwrap();
    let mib = 256u64;
    for (args, names, limit_mib) in [
        (
            &["--memory-limit", "256M", "query", "SELECT * FROM generate_series(1, 100000000)", "--format", "csv", "-o", "out.csv"][..],
            "engine.max_result_rows = 10000000",
            mib,
        ),
        (
            &["--memory-limit", "256M", "query", "SELECT repeat('x', 1000) AS s FROM generate_series(1, 1000000)", "--format", "json", "-o", "out.json"],
            "engine.max_result_bytes = 256 MiB",
            mib,
        ),
        (&["--memory-limit", "256M", "query", "SELECT length(repeat('x', 1000000000)) AS n"], "over the limit of 64 MiB", mib),
        (
            &[
                "--config",
                "small.toml",
                "query",
                "SELECT a.value * 100000 + b.value AS v, b.value AS w FROM generate_series(1, 5000) a, generate_series(1, 5000) b ORDER BY v DESC",
                "--format",
                "csv",
                "-o",
                "out.csv",
            ],
            "engine.spill_limit (32 MiB)",
            64,
        ),
    ] {
        let (out, kib) = peak_kib(dir.path(), args);
        let err = String::from_utf8_lossy(&out.stderr);
        eprintln!("{args:?}: exit {:?}, peak {} MiB", out.status.code(), kib >> 10);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(names), "{args:?} names {names}: {err}");
        assert!(kib < 2 * limit_mib * 1024, "{args:?}: peak {kib} KiB, over twice {limit_mib} MiB");
        assert!(!dir.path().join("out.csv").exists() && !dir.path().join("out.json").exists(), "no half-written result");
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp")), "no temp file left");
    }
    // Within the caps the same streaming path writes the whole result.
    let out = common::run_ok(dir.path(), &["query", "SELECT value FROM generate_series(1, 200000)", "--format", "csv", "-o", "ok.csv"]);
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(dir.path().join("ok.csv")).unwrap();
    assert_eq!(text.lines().count(), 200_001);
    assert_eq!(text.lines().last(), Some("200000"));
    let empty = common::run_ok(dir.path(), &["query", "SELECT value AS v FROM generate_series(1, 10) WHERE value > 10", "--format", "csv"]);
    assert_eq!(common::stdout(&empty), "v\n", "an empty result keeps its header");
}

/// stderr a pipe nobody reads (a cron wrapper that went away): the exit code still says what
/// happened, never 101 (a panic writing the error or a log line).
#[test]
fn a_closed_stderr_keeps_the_exit_code() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), "[engine]\nmemory_limit = \"lots\"\n").unwrap();
    let closed_stderr = || {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills both descriptors; each is owned once below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(read);
        Stdio::from(write)
    };
    for (args, code) in [
        (&["--config", "bad.toml", "tables"][..], 2),
        (&["report", "chargeback", "--month", "2026-13"][..], 2),
        (&["collect", "--from", "2026-10-05", "--to", "2026-10-06", "--url", "http://127.0.0.1:9", "--lake", "lake"][..], 1),
        (&["simulate", "--out", "sim", "--gpus", "2", "--days", "1"][..], 0),
    ] {
        let out = common::bin().current_dir(dir.path()).args(args).stderr(closed_stderr()).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
    }
}
