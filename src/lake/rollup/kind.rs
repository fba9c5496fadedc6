//! What a rollup kind is (its name, the table it sums, its version and columns) and what a
//! day's fold into rollups does. Every kind's file under `lake/rollup/` declares its kinds and
//! its fold with these; `lake/rollup/mod.rs` lists them once.

use std::path::Path;
use std::sync::Mutex;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::file::metadata::KeyValue;

use crate::lake::intern::Interner;
use crate::lake::schema::Table;

/// One kind of rollup file: `<lake>/_rollups/<name>/date=YYYY-MM-DD/<name>-YYYY-MM-DD.parquet`.
pub struct RollupKind {
    pub name: &'static str,
    /// The table whose day files it sums.
    pub source: Table,
    /// Bumped when the content changes meaning; a rollup of another version is not current.
    pub version: u32,
    pub schema: fn() -> SchemaRef,
}

/// A kind, as its files' code names it (`gpu_buckets::KIND`, `idle::HOLDINGS`).
pub type Kind = &'static RollupKind;

impl RollupKind {
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn source(&self) -> Table {
        self.source
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn schema(&self) -> SchemaRef {
        (self.schema)()
    }
}

/// Kinds are told apart by name (their folder).
impl PartialEq for RollupKind {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for RollupKind {}

impl std::fmt::Debug for RollupKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A day's rollups as folded: per kind its batch and extra key/value metadata.
pub type Summed = Vec<(Kind, RecordBatch, Vec<KeyValue>)>;

/// One day of a source table folded batch by batch (its rows in file order) into the rollups
/// of one or more kinds.
pub trait DayFold: Send {
    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch) -> Result<(), FoldError>;
    fn finish(self: Box<Self>, strings: &Interner) -> Summed;
}

/// A rollup: the kinds its day fold writes, the source columns it reads, and its fold.
pub struct DayRollup {
    pub kinds: &'static [Kind],
    pub columns: fn() -> Vec<&'static str>,
    pub fold: fn() -> Box<dyn DayFold>,
}

impl DayRollup {
    pub fn source(&self) -> Table {
        self.kinds[0].source
    }
}

/// The key/value metadata key of the day's completeness counts (in `gpu_buckets`).
pub const KEY_DAY_COUNTS: &str = "gpuledger.rollup.day_counts";

/// Why a day could not be folded into its rollups: the fold's own error (a sum's
/// `BucketError`, the idle fold's `IdleScanError`), which it reads as and gives as its source.
#[derive(Debug)]
pub struct FoldError(Box<dyn std::error::Error + Send + Sync>);

impl FoldError {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> FoldError {
        FoldError(Box::new(e))
    }
}

impl std::fmt::Display for FoldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Transparent: its message is the fold's, its source the fold's source.
impl std::error::Error for FoldError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl From<crate::lake::scan::ScanError> for FoldError {
    fn from(e: crate::lake::scan::ScanError) -> FoldError {
        FoldError::new(e)
    }
}
