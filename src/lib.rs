//! gpuledger: GPU cost accounting and chargeback for shared Kubernetes GPU clusters.
//!
//! The pipeline: Prometheus history (or the simulator) -> a date-partitioned Parquet lake
//! (`lake`) -> rollup SQL in `queries/` run by DataFusion (`engine`; in process or on a Ballista
//! cluster, `distributed`) -> reports (`report`).

pub mod adhoc;
pub mod atomic;
pub mod check;
pub mod cli;
pub mod collect;
pub mod commands;
pub mod config;
pub mod cronjob;
pub mod distributed;
pub mod domain;
pub mod engine;
pub mod error_chain;
pub mod exit;
pub mod failpoint;
pub mod lake;
pub mod limits;
pub mod plan;
pub mod pricing;
pub mod progress;
pub mod queries;
pub mod redact;
pub mod render;
pub mod report;
pub mod serve;
pub mod simulate;
