//! The operator's side on the real binary: `run` (idempotent, exit codes, summary), `check`,
//! read-only `query` (every refused statement kind leaves the lake as it was), named
//! parameters, `tables`, completions and the man page, and CLI snapshots with timings
//! filtered. Snapshots live in `tests/snapshots/`; review a change with `cargo insta review`
//! (or accept it with `INSTA_UPDATE=always`).

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

/// A demo month of 64 GPUs (October 2026) with its config at d/gpuledger.toml.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        common::run_ok(&dir, &["demo", "--out", "d", "--month", "2026-10", "--seed", "3"]);
        Fixture { _tmp: tmp, dir }
    })
}

/// Tests that run `run`, `check` or compare the lake take turns: they share one lake.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static M: std::sync::Mutex<()> = std::sync::Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn gl(dir: &Path, args: &[&str]) -> std::process::Output {
    common::bin().current_dir(dir).args(args).output().unwrap()
}

/// Replaces digits after "took" and durations like "1.23s" so snapshots are stable.
fn filter_timings(text: &str) -> String {
    text.lines().map(|l| if let Some(i) = l.find("took") { format!("{}took [TIME]", &l[..i]) } else { l.to_string() }).collect::<Vec<_>>().join("\n") + "\n"
}

/// `actual` against `tests/snapshots/<name>.snap` (insta: a change is written beside it as
/// `.snap.new` for `cargo insta review`, or accepted with `INSTA_UPDATE=always`).
fn snapshot(name: &str, actual: &str) {
    insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!(name, actual);
    });
}

#[test]
fn run_twice_gives_identical_bytes_and_a_summary() {
    let f = fixture();
    let _turn = serial();
    let args = ["--config", "d/gpuledger.toml", "run", "--month", "2026-10", "--no-collect", "--reports-dir", "r1"];
    let first = gl(&f.dir, &args);
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    let tree1 = common::tree(&f.dir.join("r1/2026-10"));
    let names: Vec<&str> = tree1.iter().map(|(p, _)| p.as_str()).collect();
    for report in ["chargeback", "completeness"] {
        for ext in ["txt", "csv", "json", "md", "parquet"] {
            assert!(names.contains(&format!("{report}.{ext}").as_str()), "{report}.{ext} missing: {names:?}");
        }
    }
    let second = gl(&f.dir, &args);
    assert_eq!(second.status.code(), Some(0));
    assert!(common::tree(&f.dir.join("r1/2026-10")) == tree1, "a second run changed the reports");
    // The chargeback written by run is the one `report` prints.
    let csv = common::stdout(&common::run_ok(&f.dir, &["--config", "d/gpuledger.toml", "report", "chargeback", "--month", "2026-10", "--format", "csv"]));
    assert_eq!(std::fs::read_to_string(f.dir.join("r1/2026-10/chargeback.csv")).unwrap(), csv);
    let summary = common::stdout(&first);
    assert!(summary.lines().count() <= 24, "one screen: {summary}");
    assert!(summary.contains("dcgm 100.00%") && summary.contains("status        OK"), "{summary}");
    let mut text = filter_timings(&summary).replace(&f.dir.display().to_string(), "[DIR]");
    // report.pdf is printed only where a Chromium is installed (CI has one): the snapshot is
    // the summary without it, so it holds on a machine with none. Where it was printed, a
    // re-run printed the same bytes (the tree comparison above).
    if names.contains(&"report.pdf") {
        assert!(text.contains(" report.pdf)"), "{text}");
        let n = tree1.len();
        text = text.replace(" report.pdf)", ")").replace(&format!("({n} files"), &format!("({} files", n - 1));
    }
    snapshot("run_summary", &text);
    assert!(!f.dir.join("d/lake/_state/run.lock").exists(), "the lock is released");
}

#[test]
fn run_exit_codes() {
    let f = fixture();
    let _turn = serial();
    // A month with no data: the reports are written, the exit is 3 and the summary says why.
    let out = gl(&f.dir, &["--config", "d/gpuledger.toml", "run", "--month", "2026-09", "--no-collect", "--reports-dir", "r2"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(common::stdout(&out).contains("DATA INCOMPLETE: dcgm 0.00%"), "{}", common::stdout(&out));
    // Its conservation holds of nothing: never "conservation OK" alone beside an incomplete month.
    assert!(common::stdout(&out).contains("conservation OK of the data present (DATA INCOMPLETE)"), "{}", common::stdout(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.lines().last().unwrap().contains("data incomplete") && err.contains("run.min_completeness_pct"), "{err}");
    assert!(f.dir.join("r2/2026-09/chargeback.csv").exists());
    // Usage errors exit 2 (clap's and ours).
    assert_eq!(gl(&f.dir, &["run", "--month", "2026-13", "--no-collect"]).status.code(), Some(2));
    assert_eq!(gl(&f.dir, &["run", "--bogus"]).status.code(), Some(2));
    assert_eq!(gl(&f.dir, &["query", "SELECT $x", "--param", "no-equals"]).status.code(), Some(2));
    // A live holder of the run lock: busy, 4.
    let held = gpuledger::collect::state::LakeLock::acquire(&gpuledger::lake::Lake::new(f.dir.join("d/lake")), "run").unwrap();
    let out = gl(&f.dir, &["--config", "d/gpuledger.toml", "run", "--month", "2026-10", "--no-collect", "--reports-dir", "r3"]);
    drop(held);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another gpuledger run"));
    // Collect enabled and Prometheus unreachable: failure, 1, naming the URL.
    let out = gl(&f.dir, &["--config", "d/gpuledger.toml", "run", "--month", "2026-10", "--reports-dir", "r4", "--url", "http://127.0.0.1:9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("127.0.0.1:9"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!f.dir.join("r4").exists(), "no reports from a failed run");
}

#[test]
fn refused_statements_leave_the_lake_unchanged() {
    let f = fixture();
    let _turn = serial();
    let before = common::tree(&f.dir.join("d/lake"));
    let target = f.dir.join("escape");
    for (sql, kind) in [
        ("CREATE TABLE t AS SELECT 1", "CREATE TABLE"),
        ("CREATE VIEW v AS SELECT 1", "CREATE VIEW"),
        (&format!("CREATE EXTERNAL TABLE x STORED AS PARQUET LOCATION '{}/'", f.dir.join("d/lake/pods").display()) as &str, "CREATE EXTERNAL TABLE"),
        ("INSERT INTO pods SELECT * FROM pods", "INSERT"),
        ("DELETE FROM pods", "DELETE"),
        ("UPDATE pods SET pod = 'x'", "UPDATE"),
        ("DROP TABLE gpu_samples", "DROP TABLE"),
        ("DROP VIEW usage", "DROP VIEW"),
        ("TRUNCATE TABLE pods", "TRUNCATE TABLE"),
        (&format!("COPY pods TO '{}' STORED AS PARQUET", target.display()) as &str, "COPY"),
        (&format!("COPY (SELECT * FROM pods) TO '{}/pods.parquet'", f.dir.join("d/lake/pods").display()) as &str, "COPY"),
        ("SET datafusion.execution.batch_size = 1", "SET"),
        ("RESET datafusion.execution.batch_size", "RESET"),
        ("EXPLAIN INSERT INTO pods SELECT * FROM pods", "INSERT"),
        ("WITH x AS (SELECT 1 AS a) INSERT INTO pods SELECT * FROM pods", "INSERT"),
        ("SELECT * INTO pods_copy FROM pods", "SELECT INTO"),
        ("SELECT 1; DROP TABLE pods", ""),
    ] {
        let out = gl(&f.dir, &["--config", "d/gpuledger.toml", "query", sql]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sql}: {err}");
        assert_eq!(err.lines().count(), 1, "one-line cause: {err}");
        if kind.is_empty() {
            assert!(err.contains("one statement at a time"), "{sql}: {err}");
        } else {
            assert!(err.contains(&format!("{kind} statements are refused")), "{sql}: {err}");
        }
    }
    assert!(!target.exists(), "COPY wrote nothing");
    // Output never lands in the lake: over a day file, a new file in a day folder, through a
    // symlink to the lake, for `query` and `report` alike.
    let day = std::fs::read_dir(f.dir.join("d/lake/gpu_samples")).unwrap().flatten().map(|e| e.path()).find(|p| p.is_dir()).unwrap();
    let day_file = std::fs::read_dir(&day).unwrap().flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "parquet")).unwrap();
    std::os::unix::fs::symlink(f.dir.join("d/lake"), f.dir.join("lake-link")).unwrap();
    let via_link = f.dir.join("lake-link/pods/new.csv");
    for (args, what) in [
        (vec!["query", "SELECT * FROM gpu_samples LIMIT 1", "--format", "parquet", "-o", day_file.to_str().unwrap()], "a day file"),
        (vec!["query", "SELECT 1 AS a", "--format", "csv", "-o", day.join("x.csv").to_str().unwrap()], "a day folder"),
        (vec!["query", "SELECT 1 AS a", "--format", "csv", "-o", via_link.to_str().unwrap()], "a symlink to the lake"),
        (vec!["report", "chargeback", "--month", "2026-10", "--format", "csv", "-o", "lake-link/chargeback.csv"], "a report"),
    ] {
        let out = gl(&f.dir, &[&["--config", "d/gpuledger.toml"][..], &args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains("inside the lake"), "{what}: {err}");
    }
    std::fs::remove_file(f.dir.join("lake-link")).unwrap();
    assert!(common::tree(&f.dir.join("d/lake")) == before, "a refused statement or output changed the lake");
}

#[test]
fn named_parameters_stdin_and_errors() {
    let f = fixture();
    let _turn = serial();
    let q = |args: &[&str]| common::stdout(&common::run_ok(&f.dir, &[&["--config", "d/gpuledger.toml", "query"][..], args, &["--format", "csv"]].concat()));
    let n = q(&["SELECT count(*) AS n FROM pod_runs WHERE month = $month AND namespace = $ns", "--param", "month=2026-10", "--param", "ns=team-llm"]);
    let direct = q(&["SELECT count(*) AS n FROM pods WHERE created >= TIMESTAMP '2026-10-01T00:00:00Z' AND created < TIMESTAMP '2026-11-01T00:00:00Z' AND namespace = 'team-llm'"]);
    assert_eq!(n, direct);
    assert!(n.lines().nth(1).unwrap().parse::<u64>().unwrap() > 0);
    // Parameters compare with timestamps too.
    let t = q(&[
        "SELECT count(*) AS n FROM gpu_samples WHERE ts >= $from AND ts < $to",
        "--param",
        "from=2026-10-02T00:00:00Z",
        "--param",
        "to=2026-10-02T01:00:00Z",
    ]);
    let lit = q(&["SELECT count(*) AS n FROM gpu_samples WHERE ts >= TIMESTAMP '2026-10-02T00:00:00Z' AND ts < TIMESTAMP '2026-10-02T01:00:00Z'"]);
    assert_eq!(t, lit);
    let rows: u64 = t.lines().nth(1).unwrap().parse().unwrap();
    assert!(rows >= 16 * 120 && rows % 120 == 0, "every GPU (or MIG instance) at every step of the hour: {rows}");
    // SQL on standard input (a pipe, not a terminal).
    let mut child = common::bin()
        .current_dir(&f.dir)
        .args(["--config", "d/gpuledger.toml", "query", "--format", "csv"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"SELECT 6 * 7 AS answer").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(common::stdout(&out), "answer\n42\n");
    // A parameter the SQL needs but was not given.
    let out = gl(&f.dir, &["--config", "d/gpuledger.toml", "query", "SELECT * FROM pods WHERE namespace = $ns"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("$ns"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn tables_documents_every_column() {
    let f = fixture();
    let _turn = serial();
    let text = common::stdout(&common::run_ok(&f.dir, &["--config", "d/gpuledger.toml", "tables"]));
    for name in [
        "gpu_samples  (table)",
        "pods  (table)",
        "usage  (view)",
        "pod_runs  (view)",
        "daily_usage  (view)",
        "pod_keys  (view)",
        "gpu_prices  (config table)",
        "teams_config  (config table)",
        "teams  (view)",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    for section in text.split("\n\n").filter(|s| !s.trim().is_empty()) {
        let mut lines = section.lines();
        let head = lines.next().unwrap();
        assert!(head.split(" -- ").nth(1).is_some_and(|m| !m.trim().is_empty()), "no meaning: {head}");
        for l in lines {
            let cols: Vec<&str> = l.split("  ").map(str::trim).filter(|s| !s.is_empty()).collect();
            assert!(cols.len() >= 3, "{head}: column without a meaning: {l:?}");
        }
    }
    snapshot("tables", &text);
}

#[test]
fn help_completions_and_man_page() {
    let dir = tempfile::tempdir().unwrap();
    let help = common::stdout(&common::run_ok(dir.path(), &["--help"]));
    for cmd in ["demo", "simulate", "collect", "report", "run", "query", "tables", "check", "rollup", "completions", "manpage"] {
        assert!(help.contains(&format!("  {cmd} ")), "--help lists {cmd}");
    }
    assert!(help.contains("Exit codes: 0 success"), "{help}");
    snapshot("help", &help);
    snapshot("run_help", &common::stdout(&common::run_ok(dir.path(), &["run", "--help"])));
    let bash = common::stdout(&common::run_ok(dir.path(), &["completions", "bash"]));
    assert!(bash.contains("_gpuledger()") && bash.contains("--no-collect"), "bash completion knows run's flags");
    let zsh = common::stdout(&common::run_ok(dir.path(), &["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef gpuledger"));
    let man = common::stdout(&common::run_ok(dir.path(), &["manpage"]));
    assert!(man.contains(".TH gpuledger 1") && man.contains("collect"), "{}", &man[..man.len().min(300)]);
    // Neither needs the config or the lake: a broken config and a lake path that is a file do
    // not stop them (they would stop any other command).
    std::fs::write(dir.path().join("broken.toml"), "[lake]\npath = \"not-a-folder\"\n[nope]\n").unwrap();
    std::fs::write(dir.path().join("not-a-folder"), "a file").unwrap();
    let broken = ["--config", "broken.toml"];
    assert!(common::stdout(&common::run_ok(dir.path(), &[&broken[..], &["completions", "bash"]].concat())).contains("_gpuledger()"));
    assert!(common::stdout(&common::run_ok(dir.path(), &[&broken[..], &["manpage"]].concat())).contains(".TH gpuledger 1"));
    let tables = gl(dir.path(), &[&broken[..], &["tables"]].concat());
    assert_eq!(tables.status.code(), Some(2), "the broken config stops other commands");
}

#[test]
fn check_names_what_is_wrong_and_where() {
    let f = fixture();
    let _turn = serial();
    let out = gl(&f.dir, &["--config", "d/gpuledger.toml", "check"]);
    let text = common::stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("config") && l.contains("gpuledger.toml")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("lake") && l.contains("gpu_samples 31 days")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("queries")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("FAIL") && l.contains("prometheus") && l.contains("127.0.0.1:9090")), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("check failed: prometheus"));
    // A broken query override is named.
    std::fs::create_dir_all(f.dir.join("q")).unwrap();
    std::fs::write(f.dir.join("q/chargeback.sql"), "SELECT no_such_column FROM gpu_samples").unwrap();
    let text = common::stdout(&gl(&f.dir, &["--config", "d/gpuledger.toml", "--queries", "q", "check"]));
    assert!(text.lines().any(|l| l.starts_with("FAIL") && l.contains("chargeback") && l.contains("no_such_column")), "{text}");
}

#[test]
fn interactive_prompt_on_a_terminal() {
    // `script` (util-linux) gives the binary a pseudo-terminal; each line is typed when its prompt
    // shows, as a person would (a line editor drops type-ahead when it switches the terminal mode).
    if std::process::Command::new("script").arg("--version").output().map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("SKIPPED: util-linux `script` is not installed");
        return;
    }
    let f = fixture();
    let history = f.dir.join("history");
    let cmd = format!("{} --progress never --config d/gpuledger.toml query", env!("CARGO_BIN_EXE_gpuledger"));
    let mut child = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(&f.dir)
        .env("GPULEDGER_HISTORY", &history)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let output = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let mut from_child = child.stdout.take().unwrap();
    let sink = std::sync::Arc::clone(&output);
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = from_child.read(&mut buf) {
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    // Each line is typed once the prompt for it is on the screen (after the echo of the last).
    let mut typed_at = 0;
    for line in [
        "SELECT 41 + 1",
        "  AS answer;",
        "\\d usage",
        "\\param ns=team-llm",
        "SELECT count(*) > 0 AS some FROM pod_runs WHERE namespace = $ns;",
        "DROP TABLE pods;",
        "\\q",
    ] {
        let start = std::time::Instant::now();
        loop {
            // The line editor ends its prompt with a carriage return and a move right.
            let screen = without_escapes(&output.lock().unwrap()[typed_at..]);
            let shown = screen.trim_end_matches('\r');
            if shown.ends_with("gpuledger> ") || shown.ends_with("...> ") {
                break;
            }
            assert!(start.elapsed() < std::time::Duration::from_secs(60), "no prompt for {line:?} after 60 s; the screen since the last line: {screen:?}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        typed_at = output.lock().unwrap().len();
        use std::io::Write;
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
    let status = child.wait().unwrap();
    drop(stdin);
    reader.join().unwrap();
    assert!(status.success(), "the prompt exits 0 on \\q");
    let out = std::process::Output { status, stdout: std::mem::take(&mut *output.lock().unwrap()), stderr: Vec::new() };
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let cell = |v: &str| text.lines().any(|l| l.trim() == v);
    assert!(cell("42"), "multi-line statement ran: {text}");
    assert!(text.contains("cloud_cost") && text.contains("gpu_hours x the GPU model's price"), "\\d usage describes the view: {text}");
    assert!(cell("true"), "\\param bound $ns: {text}");
    assert!(text.contains("DROP TABLE statements are refused"), "{text}");
    let saved = std::fs::read_to_string(&history).unwrap();
    assert!(saved.contains("SELECT 41 + 1") && saved.contains("DROP TABLE pods;"), "history kept: {saved}");
}

/// The text of terminal output without its ANSI escape sequences (ESC [ ... final byte, ESC x).
fn without_escapes(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
        } else if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}
