//! gpuledger's side of the benchmark, in process: the monthly chargeback, idle and queue
//! reports built from the lake exactly as `gpuledger report` builds them (the same SQL from
//! `queries/`, the same session builder), timed over several runs. Not part of the test suite;
//! `benches/run.sh` runs it. Configured by environment:
//!   GPULEDGER_BENCH_LAKE   the lake folder
//!   GPULEDGER_BENCH_MONTH  YYYY-MM, or GPULEDGER_BENCH_FROM and GPULEDGER_BENCH_TO (RFC 3339)
//!   GPULEDGER_BENCH_REPEAT runs per report (default 3)
//!   GPULEDGER_BENCH_ONLY   comma-separated subset of chargeback,idle,queue
//! Prints one JSON object: {"<report>": {"secs": [...], "rows": N}, "peak_rss_kib": N}.

use std::time::Instant;

use gpuledger::config::Config;
use gpuledger::domain::window::Window;
use gpuledger::engine::SessionBuilder;
use gpuledger::lake::Lake;
use gpuledger::queries::Queries;
use gpuledger::report::{self, ReportKind};

fn peak_rss_kib() -> i64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let lake = std::env::var("GPULEDGER_BENCH_LAKE")?;
    let window = match std::env::var("GPULEDGER_BENCH_MONTH") {
        Ok(month) => Window::month(&month, chrono::Utc::now())?,
        Err(_) => Window::new(
            gpuledger::domain::window::parse_time("GPULEDGER_BENCH_FROM", &std::env::var("GPULEDGER_BENCH_FROM")?)?,
            gpuledger::domain::window::parse_time("GPULEDGER_BENCH_TO", &std::env::var("GPULEDGER_BENCH_TO")?)?,
        )?,
    };
    let repeat: usize = std::env::var("GPULEDGER_BENCH_REPEAT").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    let only = std::env::var("GPULEDGER_BENCH_ONLY").unwrap_or_default();
    let config = Config::default();
    let lake = Lake::new(lake);
    let session = SessionBuilder::from_config(&config).build(&lake, &config).await?;
    let queries = Queries::new(None);
    let mut out = serde_json::Map::new();
    for kind in [ReportKind::Chargeback, ReportKind::Idle, ReportKind::Queue] {
        if !only.is_empty() && !only.split(',').any(|o| o == kind.name()) {
            continue;
        }
        let mut secs = Vec::new();
        let mut rows = 0;
        for _ in 0..repeat {
            let t = Instant::now();
            let sections = report::build(kind, &session, &queries, &config, &window).await?;
            secs.push(t.elapsed().as_secs_f64());
            rows = sections.iter().map(|s| s.rows.len()).sum::<usize>();
        }
        out.insert(kind.name().into(), serde_json::json!({ "secs": secs, "rows": rows }));
    }
    out.insert("peak_rss_kib".into(), serde_json::json!(peak_rss_kib()));
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
