//! Reports: each one runs its SQL from `queries/` and shapes the result into a `Report`,
//! which `render` writes as a table, CSV, JSON, Markdown or Parquet.

pub mod chargeback;
pub mod money;
pub mod render;

use std::path::{Path, PathBuf};

pub use render::{Cell, Format, Report};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    #[error(transparent)]
    Query(#[from] crate::queries::QueryError),
    #[error("report {report}: unexpected result shape: {detail}")]
    Shape { report: &'static str, detail: String },
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("rendering {report} as {format}: {detail}")]
    Render { report: String, format: &'static str, detail: String },
}

pub type Result<T, E = ReportError> = std::result::Result<T, E>;

/// The reports that exist, in the order `run` and `demo` write them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportKind {
    Chargeback,
}

impl ReportKind {
    pub const ALL: [ReportKind; 1] = [ReportKind::Chargeback];

    pub fn name(self) -> &'static str {
        match self {
            ReportKind::Chargeback => "chargeback",
        }
    }
}

/// Writes `bytes` to `path` atomically (temp file, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let err = |source| ReportError::Write { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)?;
    Ok(())
}
