//! The `pending_pod_buckets` rollup: `pending_samples` summed as `pending_buckets` sums them, one
//! level finer: per pod too. The queue's pending demand by a key of each pod (`--by workload`,
//! `queue`, `label:KEY`, ...) is a join of these sums with each pod's value, not a re-read of the
//! samples; summed over pods it is `pending_buckets`. The same in SQL is
//! `benches/sql/queue_pending_pods.sql` (the tests' oracle).

use std::path::Path;
use std::sync::Mutex;

use arrow::array::RecordBatch;

use super::kind::{DayRollup, Kind, RollupKind};
use super::pending_buckets::{pending_pod_schema, PendingSums, COLUMNS};
use super::sums::{columns_of, whole_day, BucketError, DaySums};
use crate::lake::intern::Interner;
use crate::lake::schema::Table;

/// The `pending_samples` columns the sums read: `pending_buckets`' and the pod.
const POD_COLUMNS: [&str; 9] = [COLUMNS[0], COLUMNS[1], COLUMNS[2], COLUMNS[3], "pod", COLUMNS[4], COLUMNS[5], COLUMNS[6], COLUMNS[7]];

pub const KIND: Kind = &RollupKind {
    name: "pending_pod_buckets",
    source: Table::PendingSamples,
    // Bump on a change of meaning.
    version: 1,
    schema: pending_pod_schema,
};

/// Its day: the sums over the whole day.
pub const ROLLUP: DayRollup = DayRollup { kinds: &[KIND], columns: columns_of::<PendingSums<true>>, fold: whole_day::<PendingSums<true>> };

impl DaySums for PendingSums<true> {
    const KIND: Kind = KIND;
    const COLUMNS: &'static [&'static str] = &POD_COLUMNS;
    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        PendingSums::add(self, strings, path, b, start_ms, end_ms)
    }
    fn rows(&self) -> u64 {
        self.rows
    }
    fn finish(parts: &[Self], strings: &Interner) -> RecordBatch {
        PendingSums::finish(parts, strings)
    }
}
