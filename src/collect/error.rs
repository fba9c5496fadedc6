//! Why a collect stopped: Prometheus, the lake's lock or state, a write, or a guard that
//! refused to make the lake smaller or to ask for what Prometheus no longer keeps.

use chrono::NaiveDate;

use super::prometheus::PromError;
use super::state::StateError;
use crate::lake::published::PublishedError;
use crate::lake::WriteError;

/// `#[error(transparent)]` hides the carried error from the chain: answer for it.
impl crate::exit::ExitStatus for CollectError {
    fn exit_code(&self) -> Option<u8> {
        match self {
            CollectError::State(s) => crate::exit::ExitStatus::exit_code(s),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error(transparent)]
    Prometheus(#[from] PromError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Published(#[from] PublishedError),
    #[error("merging {table} for {date}")]
    Merge { table: &'static str, date: NaiveDate, source: MergeSource },
    #[error(
        "re-collecting {window} would replace what the lake holds with less: {losses}. Prometheus returned less than the lake has (its retention passed? a metric renamed or mistyped in [prometheus.metrics]? a wrong tenant header?); the lake is unchanged. Run collect with --replace to replace it anyway"
    )]
    WouldLose { window: String, losses: String },
    #[error(
        "the window {window} starts before what Prometheus still keeps: {server} keeps {retention} (storageRetention), samples from about {horizon} on. What it has dropped cannot be collected again, and the lake keeps its copy as it is; nothing was fetched. Collect from {next} or later (collect --from {next}), or raise the server's --storage.tsdb.retention.time"
    )]
    BeyondRetention { window: String, server: String, retention: String, horizon: String, next: String },
}

pub type Result<T, E = CollectError> = std::result::Result<T, E>;

/// What stopped a day's merge with the lake's file.
#[derive(Debug, thiserror::Error)]
pub enum MergeSource {
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    #[error(transparent)]
    Scan(#[from] crate::lake::scan::ScanError),
}
