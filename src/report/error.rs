//! Why a report was not built or written: a broken invariant (nothing is written then), a query, a pass, a file.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("chargeback does not conserve the cluster total for {window}: rows {rows_gpu_us} GPU-us vs cluster {cluster_gpu_us}, rows {rows_energy_mj} mJ vs cluster {cluster_energy_mj} (an override of queries/chargeback.sql or cluster_totals.sql drops or duplicates rows)")]
    NotConserved { window: String, rows_gpu_us: i64, cluster_gpu_us: i64, rows_energy_mj: i64, cluster_energy_mj: i64 },
    #[error("chargeback for {window} would publish energy its GPUs' counters do not show, so nothing is written: over {days}, the rows' energy on the steps the energy counters cover is {rows_mj} mJ, the counters' delta there {counter_mj} mJ (more than 0.1% apart). The GPUs furthest apart: {gpus}")]
    EnergyNotCounted { window: String, days: String, rows_mj: i64, counter_mj: i64, gpus: String },
    #[error("chargeback for {window} would publish an impossible bill, so nothing is written: {}. A request counted as GPUs that is not a device count, or a sharing layer (HAMi, time-slicing) whose vGPUs were read as GPUs, are the usual causes: the collect log names the resources and nodes it read", rows.join("; "))]
    ImpossibleBill { window: String, rows: Vec<String> },
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    #[error(transparent)]
    Query(#[from] crate::queries::QueryError),
    #[error("chargeback")]
    Buckets(#[from] crate::lake::passes::gpu_buckets::BucketError),
    #[error("idle report")]
    IdleScan(#[from] crate::lake::passes::idle_runs::IdleScanError),
    #[error("report {report}: {pass} stopped")]
    PassStopped { report: &'static str, pass: &'static str, source: tokio::task::JoinError },
    #[error("report {report}")]
    Arrow { report: &'static str, source: arrow::error::ArrowError },
    #[error("report {report}: unexpected result shape: {detail}")]
    Shape { report: &'static str, detail: String },
    #[error("writing {path}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("rendering {report} as {format}")]
    Render { report: String, format: &'static str, source: crate::render::RenderError },
    #[error("rendering {report} as parquet: {sections} sections: give -o a folder, each is written as <section>.parquet")]
    ParquetSections { report: String, sections: usize },
}

pub type Result<T, E = ReportError> = std::result::Result<T, E>;
