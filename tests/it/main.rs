//! gpuledger's integration tests, one binary (DataFusion and Ballista are linked once, not once per
//! file): each module is one area, run against the real binary, real Parquet files and the real
//! clients it names. Run one area with `cargo test --release --features ballista --test it -- MODULE::`
//! (for example `--test it -- costing::`).

#[cfg(feature = "ballista")]
mod ballista;
#[cfg(feature = "ballista")]
mod ballista_cluster;
mod cli;
mod collect_faults;
mod collect_prometheus;
mod common;
mod cookbook;
mod costing;
mod demo_ledger;
mod deploy;
mod golden_reports;
mod golden_sql;
mod lake_roundtrip;
mod layering;
mod month_page;
mod openmetrics;
mod ops_reports;
mod other_engines;
mod passes;
mod plan;
mod run_job;
#[cfg(feature = "s3")]
mod s3_lake;
mod serve;
mod sql_functions;
mod trace_mode;
mod xlsx;
