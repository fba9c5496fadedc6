//! The lake on S3-compatible object storage, against a real S3 server on loopback (the `moto`
//! server, `tests/it/common/moto.rs`): every report on a bucket equals the same report on the same
//! files on disk; the writer puts byte-identical files under the same keys and rewrites a day in
//! place; rollups are kept current there; the lock is a lease that excludes a live holder, is
//! renewed, is taken over once it runs out, and lets exactly one of many racing takers in; an
//! unreachable endpoint or wrong credentials fail with a message naming the lake and no secret;
//! a failing store is retried exactly `lake.s3.retries` times.
//! (The collector writing to a bucket from a real Prometheus is in tests/it/collect_prometheus.rs.)

use crate::common;

use std::path::Path;
use std::time::Duration;

use crate::common::moto::{self, Moto};
use chrono::NaiveDate;
use gpuledger::collect::state::{Checkpoints, LakeLock, StateError};
use gpuledger::config::S3Config;
use gpuledger::lake::{reader::read_partition, write_partition, Lake, Table};

const FROM: &str = "2026-10-01T00:00:00Z";
const TO: &str = "2026-10-03T12:00:00Z";

fn s3_config(moto: &Moto, dir: &Path) -> S3Config {
    S3Config {
        endpoint: Some(moto.endpoint()),
        region: Some("us-east-1".into()),
        path_style: true,
        allow_http: true,
        credentials_file: Some(Moto::credentials_file(dir)),
        lock_ttl_secs: 6,
        ..S3Config::default()
    }
}

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 10, d).unwrap()
}

#[test]
fn reports_on_a_bucket_equal_reports_on_disk() {
    let Some(moto) = moto::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "sim", "--gpus", "32", "--days", "3", "--seed", "8", "--start", "2026-10-01", "--time-sliced", "2"]);
    moto.create_bucket("fleet");
    moto.upload("fleet", "prod/lake", &dir.join("sim/lake"));
    std::fs::write(dir.join("s3.toml"), moto.lake_toml("fleet", "prod/lake", &Moto::credentials_file(dir))).unwrap();
    let local = ["--lake", "sim/lake"];
    let s3 = ["--config", "s3.toml"];

    // Every report kind, local and on the bucket, byte for byte (JSON, and CSV for the chargeback).
    let report = |lake: &[&str], kind: &str, format: &str| {
        let mut args = lake.to_vec();
        args.extend(["report", kind, "--from", FROM, "--to", TO, "--format", format]);
        common::run_ok(dir, &args).stdout
    };
    for kind in common::report_kinds_compared() {
        let kind = kind.as_str();
        let (a, b) = (report(&local, kind, "json"), report(&s3, kind, "json"));
        assert!(a.len() > 100, "{kind}: a real report ({} bytes)", a.len());
        assert!(a == b, "{kind} differs between the bucket and the disk");
    }
    let cb_csv = report(&s3, "chargeback", "csv");
    assert_eq!(cb_csv, report(&local, "chargeback", "csv"));

    // Ad hoc SQL reads the bucket's tables (and their `date` partitions).
    let sql = "SELECT date, count(*) AS n, sum(energy_j) AS e FROM gpu_samples GROUP BY date ORDER BY date";
    let q = |lake: &[&str]| {
        let mut args = lake.to_vec();
        args.extend(["query", sql, "--format", "csv"]);
        common::stdout(&common::run_ok(dir, &args))
    };
    let on_bucket = q(&s3);
    assert_eq!(on_bucket, q(&local));
    assert_eq!(common::parse_csv(&on_bucket).1.len(), 3, "three days: {on_bucket}");

    // A day without its rollup on the bucket: check warns, the chargeback is unchanged (from
    // the samples), and `gpuledger rollup` writes the same bytes as the local writer did.
    let rollup_key = "prod/lake/_rollups/gpu_buckets/date=2026-10-02/gpu_buckets-2026-10-02.parquet";
    let local_rollup = std::fs::read(dir.join("sim/lake/_rollups/gpu_buckets/date=2026-10-02/gpu_buckets-2026-10-02.parquet")).unwrap();
    moto.delete("fleet", rollup_key);
    let out = common::bin().current_dir(dir).args(["--config", "s3.toml", "check"]).output().unwrap();
    let text = common::stdout(&out);
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("lake") && l.contains("s3://fleet/prod/lake: gpu_samples 3 days")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("warn") && l.contains("1 of 3 gpu_samples days (from 2026-10-02)")), "{text}");
    assert_eq!(report(&s3, "chargeback", "csv"), cb_csv, "priced from the samples, the same");
    let out = common::stdout(&common::run_ok(dir, &["--config", "s3.toml", "rollup"]));
    assert!(out.contains("1 written, 2 already current"), "{out}");
    assert_eq!(moto.get("fleet", rollup_key).expect("rollup written back"), local_rollup);
    assert!(moto.get("fleet", "prod/lake/_state/rollup.lock").is_none(), "the rollup job's lock is released");

    // The bucket holds exactly the local lake's files, under the same relative keys.
    let local_tree = common::tree(&dir.join("sim/lake"));
    let bucket_tree = moto.tree("fleet", "prod/lake");
    assert_eq!(bucket_tree.iter().map(|(k, _)| k).collect::<Vec<_>>(), local_tree.iter().map(|(k, _)| k).collect::<Vec<_>>());
    assert!(bucket_tree == local_tree);
}

#[test]
fn the_writer_puts_the_same_files_on_a_bucket_and_rewrites_in_place() {
    let Some(moto) = moto::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::run_ok(dir, &["simulate", "--out", "sim", "--gpus", "16", "--days", "2", "--seed", "5", "--start", "2026-10-01"]);
    let source = Lake::new(dir.join("sim/lake"));
    moto.create_bucket("written");
    let bucket = Lake::open(Path::new("s3://written/a/b"), &s3_config(&moto, dir)).unwrap();
    let copy = Lake::new(dir.join("copy"));

    // Every table's days, written through the one writer to the bucket and to a local folder.
    for table in Table::ALL {
        for date in source.dates(table).unwrap() {
            let batch = read_partition(&source, table, date).unwrap().unwrap();
            let at = write_partition(&bucket, table, date, &batch).unwrap();
            assert_eq!(at.display().to_string(), format!("s3://written/a/b/{}/date={date}/{}-{date}.parquet", table.name(), table.name()));
            write_partition(&copy, table, date, &batch).unwrap();
        }
    }
    let on_disk = common::tree(&dir.join("copy"));
    assert!(on_disk.len() > 10, "{} files", on_disk.len());
    assert!(moto.tree("written", "a/b") == on_disk, "the bucket holds other bytes or keys than the local writer wrote");
    assert_eq!(bucket.dates(Table::GpuSamples).unwrap(), vec![day(1), day(2)]);
    assert_eq!(bucket.files(Table::GpuSamples).unwrap().len(), 2);
    assert_eq!(bucket.clean_orphans().unwrap(), 0);

    // Rewriting a day replaces it: same key, the new rows only, and its rollup follows.
    let first = read_partition(&bucket, Table::GpuSamples, day(1)).unwrap().unwrap();
    let half = first.slice(0, first.num_rows() / 2);
    write_partition(&bucket, Table::GpuSamples, day(1), &half).unwrap();
    write_partition(&copy, Table::GpuSamples, day(1), &half).unwrap();
    assert_eq!(read_partition(&bucket, Table::GpuSamples, day(1)).unwrap().unwrap().num_rows(), half.num_rows());
    assert!(moto.tree("written", "a/b") == common::tree(&dir.join("copy")), "after a rewrite");
    let samples = bucket.partition_file(Table::GpuSamples, day(1));
    assert!(gpuledger::lake::rollup::is_current(&bucket, day(1), &samples), "the rewritten day has a current rollup");

    // A rollup that names other samples (copied from day 2) is not current on the bucket either.
    let other = moto.get("written", "a/b/_rollups/gpu_buckets/date=2026-10-02/gpu_buckets-2026-10-02.parquet").unwrap();
    moto.put("written", "a/b/_rollups/gpu_buckets/date=2026-10-01/gpu_buckets-2026-10-01.parquet", other);
    assert!(!gpuledger::lake::rollup::is_current(&bucket, day(1), &samples));
    let refreshed = gpuledger::lake::rollup::refresh(&bucket, day(1), day(2), false, |_| {}).unwrap();
    assert_eq!((refreshed.written, refreshed.current), (vec![day(1)], 1));
    assert!(moto.tree("written", "a/b") == common::tree(&dir.join("copy")), "refresh rewrote the local writer's bytes");

    // Checkpoints round-trip through the bucket.
    let mut cps = Checkpoints::load(&bucket).unwrap();
    assert!(cps.sources.is_empty());
    let t = chrono::DateTime::parse_from_rfc3339("2026-10-02T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
    cps.set("dcgm", t);
    cps.save(&bucket).unwrap();
    assert_eq!(Checkpoints::load(&bucket).unwrap().get("dcgm"), Some(t));
    assert!(String::from_utf8(moto.get("written", "a/b/_state/checkpoints.json").unwrap()).unwrap().contains("2026-10-02T00:00:00Z"));
}

#[derive(serde::Deserialize)]
struct Lease {
    host: String,
    pid: u32,
    expires: String,
}

#[test]
fn the_lock_on_a_bucket_is_a_lease() {
    let Some(moto) = moto::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    moto.create_bucket("locks");
    common::run_ok(dir, &["simulate", "--out", "sim", "--gpus", "8", "--days", "1", "--seed", "2", "--start", "2026-10-01"]);
    moto.upload("locks", "lake", &dir.join("sim/lake"));
    let lake = Lake::open(Path::new("s3://locks/lake"), &s3_config(&moto, dir)).unwrap();
    let key = "lake/_state/collect.lock";
    let lease = || -> Lease { serde_json::from_slice(&moto.get("locks", key).expect("lock object")).unwrap() };

    // Held: a second taker is refused, naming the holder; the holder renews its lease.
    let held = LakeLock::acquire(&lake, "collect").unwrap();
    let first = lease();
    assert_eq!(first.pid, std::process::id());
    match LakeLock::acquire(&lake, "collect") {
        Err(StateError::Locked { holder, .. }) => assert!(holder.contains(&format!("pid {}", first.pid)) && holder.contains("lease until"), "{holder}"),
        other => panic!("a held lock was taken again: {other:?}"),
    }
    common::wait_until("the holder to renew its lease", Duration::from_secs(20), || lease().expires > first.expires);
    drop(held);
    assert!(moto.get("locks", key).is_none(), "released on drop");

    // Another host's live lease: the CLI refuses with the busy exit code and says who holds it.
    std::fs::write(dir.join("s3.toml"), moto.lake_toml("locks", "lake", &Moto::credentials_file(dir))).unwrap();
    let in_an_hour = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let live = format!("{{\"job\":\"rollup\",\"host\":\"node-7\",\"pid\":42,\"acquired\":\"{in_an_hour}\",\"expires\":\"{in_an_hour}\"}}");
    moto.put("locks", "lake/_state/rollup.lock", live.into_bytes());
    let out = common::bin().current_dir(dir).args(["--config", "s3.toml", "rollup"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "busy exit code: {err}");
    assert!(err.contains("another gpuledger rollup (pid 42 on node-7, lease until") && err.contains("s3://locks/lake/_state/rollup.lock"), "{err}");

    // A lease that ran out is taken over (the crashed holder's lock does not block forever).
    let an_hour_ago = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    let stale = format!("{{\"job\":\"rollup\",\"host\":\"node-7\",\"pid\":42,\"acquired\":\"{an_hour_ago}\",\"expires\":\"{an_hour_ago}\"}}");
    moto.put("locks", "lake/_state/rollup.lock", stale.into_bytes());
    let out = common::bin().current_dir(dir).args(["--config", "s3.toml", "rollup"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("taking over the lake lock"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(moto.get("locks", "lake/_state/rollup.lock").is_none());

    // Many takers at once, on a stale lease and on none: exactly one wins each time.
    for preset in [None, Some(an_hour_ago.clone())] {
        if let Some(t) = &preset {
            moto.put("locks", key, format!("{{\"job\":\"collect\",\"host\":\"gone\",\"pid\":1,\"acquired\":\"{t}\",\"expires\":\"{t}\"}}").into_bytes());
        }
        let barrier = std::sync::Barrier::new(8);
        let winners: Vec<LakeLock> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        LakeLock::acquire(&lake, "collect")
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().unwrap().ok()).collect()
        });
        assert_eq!(winners.len(), 1, "exactly one of eight racing takers holds the lock (preset lease: {preset:?})");
        assert_eq!(lease().host, winners_host());
        drop(winners);
        assert!(moto.get("locks", key).is_none());
    }
}

fn winners_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

#[test]
fn an_unreachable_bucket_or_bad_credentials_fail_clearly() {
    let Some(moto) = moto::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    moto.create_bucket("guarded");

    // Nothing listens on the endpoint: a non-zero exit naming the lake, quickly (bounded retries).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let toml = moto.lake_toml("guarded", "lake", &Moto::credentials_file(dir)).replace(&moto.endpoint(), &format!("http://127.0.0.1:{closed}"));
    std::fs::write(dir.join("down.toml"), toml).unwrap();
    let t0 = std::time::Instant::now();
    let err = common::run_fail(dir, &["--config", "down.toml", "report", "chargeback", "--from", FROM, "--to", TO]);
    assert!(err.contains("s3://guarded/lake") || err.contains(&format!("127.0.0.1:{closed}")), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(120), "gave up in {:?}", t0.elapsed());

    // No credentials file where the config says: a configuration error naming the key.
    std::fs::write(dir.join("nocreds.toml"), moto.lake_toml("guarded", "lake", &dir.join("missing-credentials"))).unwrap();
    let out = common::bin().current_dir(dir).args(["--config", "nocreds.toml", "tables"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lake.s3.credentials_file"), "{}", String::from_utf8_lossy(&out.stderr));

    // A scheme gpuledger does not speak.
    let err = common::run_fail(dir, &["--lake", "gs://bucket/lake", "tables"]);
    assert!(err.contains("gs") && err.contains("not supported"), "{err}");

    // Debug logging of an S3 lake never shows the secret.
    std::fs::write(dir.join("s3.toml"), moto.lake_toml("guarded", "lake", &Moto::credentials_file(dir))).unwrap();
    let out = common::bin().current_dir(dir).env("RUST_LOG", "debug").args(["--config", "s3.toml", "check"]).output().unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(all.contains("s3://guarded/lake"), "{all}");
    assert!(!all.contains(moto::SECRET), "the secret key was printed");
}

/// A store answering every request with 503 (a fault moto will not produce on demand, so a canned
/// reply): each request is tried exactly `1 + lake.s3.retries` times, then the command fails
/// naming the lake and the retries.
#[test]
fn a_failing_store_is_retried_as_configured() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 8192];
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            if s.read(&mut buf).is_ok_and(|n| n > 0) {
                seen.fetch_add(1, Ordering::SeqCst);
                let _ = s.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            }
        }
    });
    let creds = Moto::credentials_file(dir);
    let mut counts = Vec::new();
    for retries in [0usize, 2] {
        let toml = format!(
            "[lake]\npath = \"s3://flaky/lake\"\n\n[lake.s3]\nendpoint = \"http://127.0.0.1:{port}\"\nregion = \"us-east-1\"\npath_style = true\nallow_http = true\ncredentials_file = \"{}\"\nretries = {retries}\nretry_timeout_secs = 30\n",
            creds.display()
        );
        std::fs::write(dir.join("flaky.toml"), toml).unwrap();
        let before = requests.load(Ordering::SeqCst);
        let err = common::run_fail(dir, &["--config", "flaky.toml", "tables"]);
        assert!(err.contains("s3://flaky/lake") && err.contains("503"), "{err}");
        if retries > 0 {
            assert!(err.contains(&format!("after {retries} retries, max_retries: {retries}")), "{err}");
        }
        counts.push(requests.load(Ordering::SeqCst) - before);
    }
    assert!(counts[0] >= 1, "the store was asked: {counts:?}");
    assert_eq!(counts[1], 3 * counts[0], "each request tried 1 + 2 times (with retries = 0: {} requests)", counts[0]);
}
