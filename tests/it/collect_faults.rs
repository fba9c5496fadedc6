//! Faults a real Prometheus will not produce on demand, from a small loopback stub: 503
//! bursts, a rate limiter's 429 with Retry-After, malformed JSON, a cut-off body, a 400 for a
//! bad query. Also: auth and extra
//! headers reach the server, and the token never reaches the logs.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What the stub answers to the n-th request (0-based): (status, body, declared length).
type Script = Box<dyn Fn(usize) -> Reply + Send>;

const EMPTY: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;

/// What the server sends back: (status, body, declared length).
type Reply = (u16, String, Option<usize>);

/// Answers each HTTP request on a loopback port with `answer(request head)`; returns the base URL.
fn serve(mut answer: impl FnMut(&str) -> Reply + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let (status, body, declared) = answer(&head);
            let reason = match status {
                200 => "OK",
                400 => "Bad Request",
                404 => "Not Found",
                429 => "Too Many Requests",
                503 => "Service Unavailable",
                _ => "Other",
            };
            let len = declared.unwrap_or(body.len());
            // A 429 comes, as from a rate-limiting proxy, with how long to wait.
            let after = if status == 429 { "Retry-After: 1\r\n" } else { "" };
            let _ =
                write!(conn, "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n{after}Connection: close\r\n\r\n{body}");
            let _ = conn.flush();
        }
    });
    url
}

/// Serves `script` to the queries; returns the base URL and the queries' header blocks. The
/// status endpoints (the collector's retention probe) answer 404, as Mimir's do, outside the
/// script and the log.
fn stub(script: Script) -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let mut n = 0;
    let url = serve(move |head| {
        if head.starts_with("GET /api/v1/status/") {
            return (404, r#"{"status":"error","errorType":"not_found","error":"not found"}"#.into(), None);
        }
        log.lock().unwrap().push(head.to_string());
        n += 1;
        script(n - 1)
    });
    (url, seen)
}

fn config(dir: &Path, url: &str) {
    config_with(dir, url, "bearer_token_env = \"GPULEDGER_TEST_TOKEN\"\n");
}

/// The test config with `auth` (a line of `[prometheus]`, or nothing) and a tenant header.
fn config_with(dir: &Path, url: &str, auth: &str) {
    std::fs::write(
        dir.join("gpuledger.toml"),
        format!(
            "[lake]\npath = \"lake\"\n[prometheus]\nurl = \"{url}\"\nstep_secs = 60\nchunk_secs = 3600\nconcurrency = 1\nretries = 4\nbackoff_ms = 10\ntimeout_secs = 5\n{auth}headers = {{ \"X-Scope-OrgID\" = \"tenant-7\" }}\n"
        ),
    )
    .unwrap();
}

fn collect(dir: &Path) -> std::process::Output {
    common::bin()
        .current_dir(dir)
        .env("GPULEDGER_TEST_TOKEN", "tok-secret-123")
        .args(["collect", "--from", "2026-10-05T00:00:00Z", "--to", "2026-10-05T01:00:00Z"])
        .output()
        .unwrap()
}

fn parquet_files(dir: &Path) -> usize {
    if !dir.exists() {
        return 0;
    }
    common::tree(dir).iter().filter(|(p, _)| p.ends_with(".parquet")).count()
}

#[test]
fn bursts_of_503_are_retried_and_empty_sources_become_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = stub(Box::new(|n| if n < 3 { (503, "overloaded".into(), None) } else { (200, EMPTY.into(), None) }));
    config(dir.path(), &url);
    let out = collect(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("retry 1/4") && err.contains("503"), "retries are logged: {err}");
    assert!(!err.contains("tok-secret-123"), "token leaked: {err}");
    let heads = seen.lock().unwrap().clone();
    assert!(heads.iter().all(|h| h.contains("authorization: Bearer tok-secret-123") || h.contains("Authorization: Bearer tok-secret-123")), "{}", heads[0]);
    assert!(heads.iter().all(|h| h.to_ascii_lowercase().contains("x-scope-orgid: tenant-7")));
    assert!(heads[3].starts_with("GET /api/v1/query?"), "{}", heads[3]);
    let gaps = common::stdout(&common::run_ok(dir.path(), &["query", "SELECT count(*) AS n FROM gaps", "--format", "csv"]));
    let n: i64 = gaps.lines().nth(1).unwrap().parse().unwrap();
    assert!(n >= 3, "an hour with no DCGM and no kube data is recorded as gaps: {n}");
}

/// A rate limiter's 429 with `Retry-After: 1`: each retry waits the second it asks for, not the
/// 10 ms backoff, and says so; the run then succeeds.
#[test]
fn retry_after_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = stub(Box::new(|n| if n < 2 { (429, r#"{"status":"error","error":"rate limited"}"#.into(), None) } else { (200, EMPTY.into(), None) }));
    config(dir.path(), &url);
    let t0 = std::time::Instant::now();
    let out = collect(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(t0.elapsed() >= std::time::Duration::from_secs(2), "two waits of Retry-After: 1 s, took {:?}", t0.elapsed());
    assert_eq!(err.matches("the server's Retry-After").count(), 2, "{err}");
    assert!(err.contains("retry 1/4 in 1000 ms") && err.contains("429"), "{err}");
    assert!(seen.lock().unwrap().len() > 2);
}

#[test]
fn malformed_json_fails_cleanly_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = stub(Box::new(|_| (200, "{\"status\":\"success\",\"data\":{\"resultType\":\"matr".into(), None)));
    config(dir.path(), &url);
    let out = collect(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let last = err.lines().last().unwrap();
    // The window is the failed query's own: a DCGM query of a run's first chunk reaches one
    // lookback (5 min) before the run's window.
    let window = last.contains("2026-10-05T00:00:00Z to 2026-10-05T01:00:00Z") || last.contains("2026-10-04T23:55:00Z to 2026-10-05T01:00:00Z");
    assert!(last.contains("malformed JSON") && last.contains("query ") && window, "{last}");
    assert_eq!(seen.lock().unwrap().len(), 5, "a broken body is retried (1 + 4)");
    assert_eq!(parquet_files(&dir.path().join("lake")), 0);
    assert!(!dir.path().join("lake/_state/checkpoints.json").exists(), "checkpoint not advanced");
    assert!(!dir.path().join("lake/_state/collect.lock").exists(), "lock released");
}

#[test]
fn cut_off_body_is_retried_then_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _) = stub(Box::new(|_| (200, EMPTY[..20].to_string(), Some(EMPTY.len()))));
    config(dir.path(), &url);
    let out = collect(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.lines().last().unwrap().contains("after 5 attempts"), "{err}");
    assert_eq!(parquet_files(&dir.path().join("lake")), 0);
}

#[test]
fn bad_query_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = stub(Box::new(|_| (400, r#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#.into(), None)));
    config(dir.path(), &url);
    let out = collect(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("parse error at char 5"), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 1, "4xx is final");
}

#[test]
fn down_prometheus_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    config(dir.path(), &format!("http://127.0.0.1:{port}"));
    let out = collect(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let last = err.lines().last().unwrap();
    assert!(last.contains("unreachable") && last.contains(&format!("127.0.0.1:{port}")), "{last}");
}

#[test]
fn second_collector_on_one_lake_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // This test process holds the lake's collect lock (the kernel's flock on the lock file).
    let lake = gpuledger::lake::Lake::new(dir.path().join("lake"));
    let held = gpuledger::collect::state::LakeLock::acquire(&lake, "collect").unwrap();
    config(dir.path(), "http://127.0.0.1:9");
    let out = collect(dir.path());
    drop(held);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("another gpuledger collect") && err.contains(&std::process::id().to_string()), "{err}");
    assert_eq!(out.status.code(), Some(4), "a held lock exits 4 (busy)");
}

/// A server that echoes what it was sent (a proxy's error page quoting the request's headers):
/// the token or the password in the URL (sent as basic auth), and the header value, reach the
/// server, and none of them any output of `collect`, `check` or `run`, at -vv or with every
/// library's trace logs. (Both at once is a config error: one would be dropped.)
#[test]
fn secrets_echoed_by_a_server_never_reach_any_output() {
    // "bob:pw-in-url-42" in base64, as the basic-auth header carries it.
    let basic = "Ym9iOnB3LWluLXVybC00Mg==";
    for (with_password, auth, planted) in
        [(false, "bearer_token_env = \"GPULEDGER_TEST_TOKEN\"\n", ["tok-secret-123", "tenant-7"]), (true, "", ["pw-in-url-42", "tenant-7"])]
    {
        let (url, seen) = stub_echo();
        let url = if with_password { url.replacen("http://", "http://bob:pw-in-url-42@", 1) } else { url };
        let heads = echoed_secrets_stay_hidden(&url, auth, &[&planted[..], &[basic]].concat(), seen);
        let sent = if with_password { basic } else { "tok-secret-123" };
        assert!(heads.iter().all(|h| h.contains(sent) && h.contains("tenant-7")), "the server got the credentials");
    }
}

/// Runs `collect`, `check` and `run` against the echoing server at `url` and returns the
/// request heads it saw; none of `planted` is in any output.
fn echoed_secrets_stay_hidden(url: &str, auth: &str, planted: &[&str], seen: Arc<Mutex<Vec<String>>>) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    config_with(dir.path(), url, auth);
    let mut runs = 0;
    for verbosity in [&["-vv"][..], &[]] {
        for args in [&["collect", "--from", "2026-10-05T00:00:00Z", "--to", "2026-10-05T01:00:00Z"][..], &["check"], &["run", "--month", "2026-10"]] {
            let mut cmd = common::bin();
            cmd.current_dir(dir.path()).env("GPULEDGER_TEST_TOKEN", "tok-secret-123").args(verbosity).args(args);
            if verbosity.is_empty() {
                cmd.env("RUST_LOG", "trace");
            }
            let out = cmd.output().unwrap();
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(!out.status.success() || args[0] == "check", "{args:?} against a server that only fails: {text}");
            assert!(text.contains("<redacted>"), "{args:?}: the echoed secrets were there to leak: {text}");
            for p in planted {
                assert!(!text.contains(p), "{args:?} {verbosity:?}: {p} leaked:\n{text}");
            }
            runs += 1;
        }
    }
    assert_eq!(runs, 6);
    let heads = seen.lock().unwrap().clone();
    heads
}

/// A stub that answers every request 400 (a query) or 503 (a status endpoint) with an error
/// quoting the request head.
fn stub_echo() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let url = serve(move |head| {
        log.lock().unwrap().push(head.to_string());
        let status = if head.starts_with("GET /api/v1/status/") { 503 } else { 400 };
        let body =
            serde_json::json!({"status": "error", "errorType": "bad_data", "error": format!("rejected request: {}", head.replace("\r\n", " | "))}).to_string();
        (status, body, None)
    });
    (url, seen)
}
