//! The command line as users meet it: read-only SQL, `tables`, config errors that name the
//! key, bad windows, and every shipped config file parsing.

mod common;

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
    ] {
        let e = Config::parse(toml, "t.toml").unwrap_err().to_string();
        assert!(e.contains(key), "{toml:?} names {key}: {e}");
    }
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
        ("gpu_samples", &["ts", "node", "gpu_uuid", "gpu_model", "mig_profile", "namespace", "pod", "share", "util_pct", "mem_used_mib", "power_w", "energy_j", "temp_c"][..]),
        ("pods", &["namespace", "pod", "uid", "node", "priority_class", "created", "scheduled", "started", "finished", "gpu_request", "cpu_request", "mem_request_bytes", "termination_reason"][..]),
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
