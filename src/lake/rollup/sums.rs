//! What the rollups have in common: sums of rows folded batch by batch inside a window
//! (`DaySums::add`), so the same code sums a day as the writer publishes it (the stored rollup)
//! and the days a report reads from their samples (no current rollup, or a window edge inside a
//! bucket): the two cannot differ. The same questions in plain SQL over the samples are in
//! `benches/sql/` (the tests' oracles).

use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, DictionaryArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::Int32Type;

use super::kind::{DayFold, FoldError, Kind, Summed};
use crate::domain::units::DEFAULT_CLUSTER;
use crate::lake::intern::{label_column, row_id, typed_column, Interner, NULL_ID};
use crate::lake::scan::ScanError;

/// The bucket width: the tariff's grid.
pub use crate::domain::units::BUCKET_MS;

#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error("{path}: not in a date=YYYY-MM-DD folder")]
    NotADay { path: String },
    #[error("{path}: column {column}")]
    Column { path: String, column: &'static str, source: crate::lake::intern::ColumnError },
}

/// Sums of rows folded batch by batch (one per thread, label ids from a shared interner) and
/// finished as one sorted batch: the same table whichever thread read which file.
pub trait DaySums: Default + Send + 'static {
    /// The rollup kind these sums are stored as.
    const KIND: Kind;
    /// The source columns `add` reads.
    const COLUMNS: &'static [&'static str];
    /// Folds the rows of `b` (from `path`, for messages) with `ts` in `[start_ms, end_ms)`.
    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError>;
    /// Source rows folded in.
    fn rows(&self) -> u64;
    /// The parts' groups (folded from disjoint days) as one batch of the rollup's schema.
    fn finish(parts: &[Self], strings: &Interner) -> RecordBatch;
    /// Source rows a finished batch stands for.
    fn rows_of(batch: &RecordBatch) -> u64 {
        batch.column_by_name("n").and_then(|c| c.as_any().downcast_ref::<Int64Array>()).map_or(0, |n| n.values().iter().sum::<i64>() as u64)
    }
}

/// Global ids of a batch's label column, and the id of the default cluster for a null cluster.
pub(super) fn ids(strings: &Mutex<Interner>, cols: &[&DictionaryArray<Int32Type>]) -> (Vec<Vec<u32>>, u32) {
    let mut s = strings.lock().expect("interner lock");
    (cols.iter().map(|c| s.map_values(c)).collect(), s.id(DEFAULT_CLUSTER))
}

pub(super) fn cluster_id(dict: &DictionaryArray<Int32Type>, ids: &[u32], row: usize, default: u32) -> u32 {
    match row_id(dict, ids, row) {
        NULL_ID => default,
        id => id,
    }
}

pub(super) fn bucket_of(ts: i64) -> i64 {
    ts.div_euclid(BUCKET_MS) * BUCKET_MS
}

/// Labels as dictionaries over the interner's names (ids are the keys).
pub(super) fn labels(names: &ArrayRef, ids: impl Iterator<Item = u32>) -> ArrayRef {
    let keys: Int32Array = ids.map(|id| (id != NULL_ID).then_some(id as i32)).collect();
    Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::clone(names)).expect("label ids index the names"))
}

pub(super) fn names(strings: &Interner) -> ArrayRef {
    Arc::new((0..strings.len() as u32).map(|id| strings.name(id)).collect::<StringArray>())
}

pub(super) fn rank(strings: &Interner) -> impl Fn(u32) -> u32 {
    let ranks = strings.ranks();
    move |id: u32| if id == NULL_ID { 0 } else { ranks[id as usize] }
}

/// Column `name` of a batch read from `path` as labels, or an error naming both.
pub(crate) fn dict(b: &RecordBatch, path: &Path, name: &'static str) -> Result<DictionaryArray<Int32Type>, BucketError> {
    label_column(b, name).map_err(|source| BucketError::Column { path: path.display().to_string(), column: name, source })
}

/// Column `name` of a batch read from `path` as the array type `T`, or an error naming both.
pub(crate) fn typed<'a, T: 'static>(b: &'a RecordBatch, path: &Path, name: &'static str) -> Result<&'a T, BucketError> {
    typed_column(b, name).map_err(|source| BucketError::Column { path: path.display().to_string(), column: name, source })
}

impl From<BucketError> for FoldError {
    fn from(e: BucketError) -> FoldError {
        FoldError::new(e)
    }
}

/// The day fold of a kind that is its sums over the whole day.
#[derive(Default)]
pub struct WholeDay<S>(S);

impl<S: DaySums> DayFold for WholeDay<S> {
    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch) -> Result<(), FoldError> {
        Ok(self.0.add(strings, path, b, i64::MIN, i64::MAX)?)
    }

    fn finish(self: Box<Self>, strings: &Interner) -> Summed {
        vec![(S::KIND, S::finish(&[self.0], strings), vec![])]
    }
}

/// `WholeDay<S>` boxed, for a kind's `DayRollup::fold`.
pub fn whole_day<S: DaySums>() -> Box<dyn DayFold> {
    Box::new(WholeDay::<S>::default())
}

/// `S::COLUMNS`, for a kind's `DayRollup::columns`.
pub fn columns_of<S: DaySums>() -> Vec<&'static str> {
    S::COLUMNS.to_vec()
}
